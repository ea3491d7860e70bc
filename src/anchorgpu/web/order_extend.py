"""The order page's "Extend this term" (``orders.extensions``) and the reminder banner before a term ends
(``orders.reminders``): what the page shows, and the form that places the extension. The view calls the
service and holds no rule; the extension is an order, shown (and paid) on its own order page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from anchorgpu.formats import display
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.extension_options import extension_options
from anchorgpu.orders.extensions import extension_price, order_extend, refusal_text
from anchorgpu.orders.models import Order
from anchorgpu.orders.reminders import end_reminder
from anchorgpu.orders.selectors import order_for_customer
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


@login_required
@require_POST
def order_extend_view(request, reference: str):
    from .order_views import _detail_context  # the order page's context (the page is re-rendered on an error)

    order = order_for_customer(user=request.user, reference=reference)
    if order is None:
        raise Http404("no such order")
    found = extension_options(order)
    if not found.possible:
        messages.error(request, refusal_text(found))
        return render(request, "web/order.html", _detail_context(request, order), status=409)
    form = ExtendForm(request.POST, choices=[(d, str(d)) for d in found.days])
    if form.is_valid():
        try:
            extension = order_extend(order=order, days=form.cleaned_data["days"], asset=form.cleaned_data["asset"],
                                     actor=request.user.get_username())
        except OrderError as exc:
            messages.error(request, exc.message)
            order.refresh_from_db()
            return render(request, "web/order.html", _detail_context(request, order), status=409)
        messages.success(request, gettext("The cards are held for your extension. Pay it here to add the days to "
                                          "order %(reference)s.") % {"reference": order.reference})
        return redirect("order", reference=extension.reference)
    for error in form.errors.values():
        messages.error(request, " ".join(error))
    return render(request, "web/order.html", _detail_context(request, order), status=400)
