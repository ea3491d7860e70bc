"""The order page's "Extend this term" (``orders.extensions``) and the reminder banner before a term ends
(``orders.reminders``): what the page shows, and the form that places the extension (the view is
``order_views.order_extend_view``). The extension is an order, shown (and paid) on its own order page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.formats import display
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.extension_options import extension_options, refusal_text
from anchorgpu.orders.extensions import extension_price
from anchorgpu.orders.models import Order
from anchorgpu.orders.reminders import end_reminder
from anchorgpu.payments.selectors import assets_accepted


class ExtendForm(forms.Form):
    days = forms.TypedChoiceField(label=_("Extend by"), coerce=int, widget=forms.RadioSelect,
                                  error_messages={"invalid_choice": _("Choose one of the terms offered."),
                                                  "required": _("Choose how many days to add.")})
    asset = forms.ModelChoiceField(label=_("Pay with"), queryset=assets_accepted(), empty_label=None,
                                   to_field_name="code",
                                   error_messages={"invalid_choice": _("Choose one of the assets listed.")})

    def __init__(self, *args, choices=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["days"].choices = list(choices)
        self.fields["asset"].label_from_instance = lambda asset: f"{asset.symbol} · {gettext(asset.network_name)}"


def _choices(order: Order, start: datetime, days: tuple[int, ...], now: datetime) -> list[tuple[int, str]]:
    """Each term that fits, with its price now: the customer sees what they pay before confirming."""
    choices = []
    for d in days:
        try:
            price = extension_price(order=order, days=d, now=now)
        except OrderError:
            continue
        choices.append((d, gettext("%(days)d days, until %(end)s: %(price)s")
                        % {"days": d, "end": display.moment(start + timedelta(days=d)),
                           "price": display.money(price.total, price.currency)}))
    return choices


def extend_facts(order: Order, *, now: datetime, form: ExtendForm | None = None) -> dict:
    """The order page's context for extending the term, the extensions, and the reminder banner."""
    found = extension_options(order, now=now)
    choices = _choices(order, found.start, found.days, now) if found.possible else []
    if form is None and choices:
        form = ExtendForm(choices=choices, initial={"days": choices[0][0]})
    return {
        "extend": found,
        "extend_form": form if choices else None,
        "extend_refusal": "" if found.possible else (refusal_text(found) if found.start else ""),
        "extensions": list(order.extensions.select_related("invoice").order_by("created_at", "pk")),
        "extends": order.extends if order.extends_id else None,
        "reminder": end_reminder(order, now=now),
    }
