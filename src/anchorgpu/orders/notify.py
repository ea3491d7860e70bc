"""Emails to the customer. Sent after the transaction that caused them has
committed (``transaction.on_commit``), in the language the order was placed in.
A failing mail server is logged, never turned into a failed order."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation

from .states import OrderState

log = logging.getLogger(__name__)


def _order(order_pk: int):
    from .models import Order

    return Order.objects.select_related("product", "environment").get(pk=order_pk)


def _send(order, template: str, context: dict) -> None:
    with translation.override(order.language):
        link = settings.ANCHORGPU_SITE_URL.rstrip("/") + reverse("order", kwargs={"reference": order.reference})
        context = {"order": order, "link": link, **context}
        subject = " ".join(render_to_string(f"orders/email/{template}_subject.txt", context).split())
        body = render_to_string(f"orders/email/{template}.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [order.email])
    except Exception:  # noqa: BLE001 - the order is already saved; the operator sees the log
        log.exception("could not send %s email for order %s", template, order.reference)


def state_changed(order_pk: int, state: OrderState) -> None:
    """About the move to ``state`` (the order may have moved on by the time this runs)."""
    from .models import STATE_LABELS

    state = OrderState(state)
    _send(_order(order_pk), "state_changed", {"state": state.value, "state_label": STATE_LABELS[state]})


def order_placed(order_pk: int) -> None:
    _send(_order(order_pk), "order_placed", {})


def term_ending(order_pk: int) -> None:
    _send(_order(order_pk), "term_ending", {})
