"""Placing an order under the order limits (``ops.ratelimit``: 10 per account in 10 minutes, 30 per address
an hour), for the checkout page and the API alike.

Only orders created count. The account's and the address's rows are locked first, in the order's own
transaction, so concurrent orders of one account are decided one after the other: forty sent at once
create at most ten. With the lock held, a request whose idempotency key already made an order gets that
order back and is never refused (a retry is not a new attempt); a form with errors never gets here."""

from __future__ import annotations

from django.db import transaction

from anchorgpu.ops.ratelimit import rate_limits_on, rate_turn
from anchorgpu.orders.models import Order
from anchorgpu.orders.services import Checkout, order_place


def order_place_limited(*, request, user, checkout: Checkout) -> Order:
    """The order placed, or the one this idempotency key already made. Raises ``RateLimited`` when the account
    or the address has placed as many orders as allowed."""
    if not rate_limits_on():  # nothing to lock or count: the order's own transaction, as it is
        return order_place(user=user, request=checkout)
    key = checkout.idempotency_key.strip()
    with transaction.atomic():
        turn = rate_turn(request, "order", user=user)
        earlier = Order.objects.filter(user=user, idempotency_key=key).first() if key else None
        if earlier is not None:
            return earlier
        turn.check()
        order = order_place(user=user, request=checkout)
        turn.count()
    return order
