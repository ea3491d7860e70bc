"""The moves of an order's term on its admin page: read-only rows of ``Move`` (made by ``moves.order_move``), and the
"Move to other cards" tool."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.fleet.models import Device

from .admin_forms import OrderForm
from .models import Move
from .moves import move_offer, order_move


class MoveInline(admin.TabularInline):
    model = Move
    verbose_name = _("move to other cards")
    verbose_name_plural = _("moves to other cards")
    fields = ("at", "from_hosts", "to_hosts", "reason", "actor", "access_moved", "wipe_due_at", "wiped_at",
              "wipe_attempts", "wipe_error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MoveTermForm(OrderForm):
    """The "Move to other cards" tool: a reason, and the operator's own cards or (empty) the shop's proposal,
    which the help text names."""

    reason = forms.CharField(label=_("Reason"), max_length=1000, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                             help_text=_("Written to the audit log with your name, and on the move."))
    cards = forms.CharField(label=_("Cards"), required=False, max_length=2000)

    def __init__(self, *args, order, **kwargs):
        super().__init__(*args, order=order, **kwargs)
        offer = move_offer(order=order)
        if offer.possible:
            uids = Device.objects.filter(pk__in=offer.to_devices).order_by("host__name", "index")
            proposal = gettext("Leave empty for the shop's proposal: %(cards)s.") % {
                "cards": ", ".join(uids.values_list("uid", flat=True))}
        else:
            proposal = gettext("The shop has no proposal: %(why)s") % {"why": offer.reason}
        self.fields["cards"].help_text = proposal + " " + gettext(
            "Or give the stable ids of the cards to take, separated by commas.")

    def clean_cards(self):
        uids = [u.strip() for u in (self.cleaned_data.get("cards") or "").split(",") if u.strip()]
        if not uids:
            return None
        found = dict(Device.objects.filter(uid__in=uids).values_list("uid", "pk"))
        unknown = [u for u in uids if u not in found]
        if unknown:
            raise forms.ValidationError(gettext("No card has the id %(ids)s.") % {"ids": ", ".join(unknown)})
        return [found[u] for u in uids]


def apply_move_term(order, data, actor, item) -> str:
    move = order_move(order=order, devices=data["cards"], actor=actor, reason=data["reason"])
    return gettext("The term was moved from %(from)s to %(to)s; the customer is told.") % {
        "from": move.from_hosts, "to": move.to_hosts}
