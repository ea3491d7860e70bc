"""The operators' payment queue: orders that wait for a person's decision,
oldest first (DESIGN §5). A proxy of ``Order`` so the admin can list it as
its own page; it adds no table."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .models import Order
from .retry import MAX_WIPE_FAILURES
from .states import NEEDS_OPERATOR, OrderState

# Refund checks on chain that ended in a finding no later look changes (payments.refunds._FINAL).
REFUND_CHECK_FAILED = ("other_address", "wrong_asset", "failed", "bad_data", "short")


def needs_operator() -> Q:
    """A claimed, short or late payment, a refund owed, access that failed, a chain alert (money the
    watcher had counted is no longer on chain), a refund whose transaction does not hold up on chain, or a
    machine that could not be wiped after its order ended."""
    return (Q(state__in=[s.value for s in NEEDS_OPERATOR]) | Q(refund_due=True)
            | Q(state=OrderState.FAILED.value) | ~Q(chain_alert="")
            | Q(wipe_due_at__isnull=False, wipe_attempts__gte=MAX_WIPE_FAILURES)
            | Q(refunds__verified_at__isnull=True, refunds__verification__status__in=REFUND_CHECK_FAILED))


class PaymentQueueManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().filter(needs_operator()).distinct().order_by("created_at", "id")


class PaymentQueueEntry(Order):
    objects = PaymentQueueManager()

    class Meta:
        proxy = True
        app_label = "orders"
        ordering = ["created_at", "id"]
        verbose_name = _("payment queue entry")
        verbose_name_plural = _("payment queue")
