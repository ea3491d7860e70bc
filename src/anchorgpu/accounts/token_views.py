"""The customer's API tokens: make one (its secret is shown once), revoke one."""

from __future__ import annotations

import re

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache

from .api_tokens import TooManyTokens, api_token_create, api_token_revoke
from .models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=60,
                           help_text=gettext_lazy("What the token is for, e.g. “laptop CLI” or “CI job”."))

    def clean_name(self):
        name = " ".join(self.cleaned_data["name"].split())
        if not name:
            raise forms.ValidationError(_("Give the token a name."))
        return name


@never_cache
@login_required
def api_tokens(request):
    tokens = ApiToken.objects.filter(user=request.user)
    form, created, status = TokenForm(), None, 200
    if request.method == "POST":
        if "revoke" in request.POST:
            wanted = request.POST["revoke"]
            token = tokens.filter(pk=wanted).first() if re.fullmatch(r"[0-9]{1,18}", wanted) else None
            if token is not None:
                api_token_revoke(token=token, actor=request.user.get_username())
                messages.success(request, _("The token “%(name)s” is revoked; requests with it are refused from now "
                                            "on.") % {"name": token.name})
            return redirect("api_tokens")
        form = TokenForm(request.POST)
        if form.is_valid():
            try:
                token, created = api_token_create(user=request.user, name=form.cleaned_data["name"])
            except TooManyTokens as exc:  # the service's limit, said on the form
                form.add_error(None, exc.message)
                status = 400
            else:
                form = TokenForm()
        else:
            status = 400
    context = {"form": form, "tokens": tokens.order_by("-created_at")[:100], "created": created}
    return render(request, "accounts/tokens.html", context, status=status)
