"""The customer's saved SSH public keys: list, add, remove (``saved_keys`` holds the rules)."""

from __future__ import annotations

import re

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache

from .saved_keys import (
    PRIVATE_KEY_REFUSED,
    SavedKeyError,
    looks_private,
    saved_key_add,
    saved_key_remove,
    saved_keys_of,
)


class SavedKeyForm(forms.Form):
    label = forms.CharField(label=gettext_lazy("Label (optional)"), max_length=60, required=False,
                            help_text=gettext_lazy("To tell your keys apart, e.g. “work laptop”."))
    public_key = forms.CharField(
        label=gettext_lazy("SSH public key"), max_length=16_384,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text=gettext_lazy("One key, as in a .pub file (“ssh-ed25519 AAAA… you@laptop”). Never paste a "
                               "private key."))


@never_cache
@login_required
def ssh_keys(request):
    keys = saved_keys_of(request.user)
    form, status = SavedKeyForm(), 200
    if request.method == "POST":
        if "remove" in request.POST:
            wanted = request.POST["remove"]
            removed = (saved_key_remove(user=request.user, key_id=int(wanted))
                       if re.fullmatch(r"[0-9]{1,18}", wanted) else None)
            if removed is not None:
                messages.success(request, _("The key “%(label)s” is removed. Orders placed with it keep it.")
                                 % {"label": removed.label})
            return redirect("ssh_keys")
        if looks_private(request.POST.get("public_key", "")):  # never echo a private key back into the page
            data = request.POST.copy()
            data["public_key"] = ""
            form = SavedKeyForm(data)
            form.is_valid()
            form.errors["public_key"] = form.error_class([PRIVATE_KEY_REFUSED])
            status = 400
        elif (form := SavedKeyForm(request.POST)).is_valid():
            try:
                saved = saved_key_add(user=request.user, text=form.cleaned_data["public_key"],
                                      label=form.cleaned_data["label"])
            except SavedKeyError as exc:
                form.add_error("public_key", exc.message)
                status = 400
            else:
                messages.success(request, _("The key “%(label)s” is saved; tick it at checkout.")
                                 % {"label": saved.label})
                return redirect("ssh_keys")
        else:
            status = 400
    return render(request, "accounts/ssh_keys.html", {"form": form, "keys": keys[:100]}, status=status)
