"""What the maintenance window's admin shows about moving the bookings it hits: the proposal in words, and the
form (a reason; for one booking, optionally the operator's own cards)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from anchorgpu.fleet.models import Device


def proposal_text(hit) -> str:
    """"→ host h2: cards a, b" for a proposal; otherwise the plain statement that the window cannot be honoured."""
    proposal = hit.proposal
    if not proposal.possible:
        return hit.text
    devices = list(Device.objects.filter(pk__in=proposal.to_devices).select_related("host")
                   .order_by("host__name", "index"))
    hosts = sorted({d.host.name for d in devices})
    return _("to %(hosts)s: %(cards)s, from %(at)s UTC") % {
        "hosts": ", ".join(hosts), "cards": ", ".join(d.uid for d in devices), "at": f"{proposal.at:%Y-%m-%d %H:%M}"}


class MoveForm(forms.Form):
    reason = forms.CharField(label=gettext_lazy("Reason"), required=False,
                             widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
                             help_text=gettext_lazy("Written to the audit log with your name; the window is named "
                                                    "if you leave it empty."))
    cards = forms.CharField(label=gettext_lazy("Cards"), required=False,
                            help_text=gettext_lazy("Leave empty for the proposed cards, or give the stable ids of "
                                                   "the cards to take, separated by commas."))

    def __init__(self, *args, one: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not one:
            del self.fields["cards"]

    def clean(self):
        cleaned = super().clean()
        uids = [u.strip() for u in (cleaned.get("cards") or "").split(",") if u.strip()]
        if not uids:
            cleaned["devices"] = None
            return cleaned
        found = dict(Device.objects.filter(uid__in=uids).values_list("uid", "pk"))
        unknown = [u for u in uids if u not in found]
        if unknown:
            self.add_error("cards", _("No card has the id %(ids)s.") % {"ids": ", ".join(unknown)})
        cleaned["devices"] = [found[u] for u in uids if u in found]
        return cleaned
