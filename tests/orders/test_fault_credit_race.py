"""The service credit under concurrency and across a year's end: the sweep and an operator crediting the same
order at once issue one credit note; the numbers run on without gaps within each year."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from anchorgpu.billing.models import CreditNote
from anchorgpu.orders.credits import order_credit_issue
from anchorgpu.orders.models import ProvisioningStep
from tests import shop

from .test_faults import HOUR, active, expected


@pytest.mark.django_db
def test_credits_across_the_years_end_number_per_year(db):
    shop.load_shop()
    alice = shop.customer()
    first, second = active(alice, 1), active(alice, 1)
    for order in (first, second):
        ProvisioningStep.objects.filter(order=order, step="deliver_access").update(
            finished_at=order.starts_at + HOUR)
    (a,) = order_credit_issue(order=first, actor="ops", now=datetime(2031, 12, 31, 23, 59, 59, 500000, tzinfo=UTC))
    (b,) = order_credit_issue(order=second, actor="ops", now=datetime(2032, 1, 1, 0, 0, tzinfo=UTC))
    assert (a.number, b.number) == ("CN-2031-000001", "CN-2032-000001")
    assert a.amount == expected(first, HOUR - timedelta(minutes=15))


@pytest.mark.postgres_only
@pytest.mark.db_race
@pytest.mark.django_db(transaction=True)
def test_two_callers_at_once_issue_one_credit_note():
    shop.load_shop()
    order = active(shop.customer(), 1)
    ProvisioningStep.objects.filter(order=order, step="deliver_access").update(finished_at=order.starts_at + HOUR)
    callers = 6
    barrier = threading.Barrier(callers)
    results: list[object] = [None] * callers

    def worker(i: int) -> None:
        try:
            connection.ensure_connection()
            barrier.wait(timeout=60)
            results[i] = len(order_credit_issue(order=order, actor=f"caller-{i}", now=order.starts_at + 2 * HOUR))
        except BaseException as exc:  # noqa: BLE001 -- checked below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(callers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a caller hung"
    assert sorted(results) == [0] * (callers - 1) + [1], results
    (note,) = CreditNote.objects.all()
    assert note.amount == expected(order, HOUR - timedelta(minutes=15))
