"""What the reminders before a term ends say (the emails of ``lifecycle.terms_warn_due`` and the order page's
banner): when the term ends, that the container, its ``/workspace`` volume and the host's local NVMe scratch
are erased then, how to extend it (or why it cannot be), and, if the customer bought it, where the
off-machine checkpoint storage is and how long it is kept."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from . import extension_options
from .models import Order
from .states import OrderState

REMIND_BEFORE = timedelta(hours=24)  # as ``lifecycle.WARN_BEFORE``: the banner shows from the first reminder on
# The options that keep data off the machine (``demo.OPTIONS``): object storage in the host's site.
OFF_MACHINE_PREFIX = "checkpoint-storage"
STORAGE_KEPT_DAYS = 14


@dataclass(frozen=True)
class EndReminder:
    ends_at: datetime
    minutes_left: int
    extend: extension_options.ExtensionOptions
    extend_refusal: str  # the sentence saying why it cannot be extended ("" when it can)
    storage_site: str  # where the off-machine storage is ("" when none was bought)
    storage_until: datetime | None  # how long it is kept

    @property
    def last_hour(self) -> bool:
        return self.minutes_left <= 60


def _site(order: Order) -> str:
    booking = order.booking
    slot = booking.slots.select_related("device__host__site").first() if booking is not None else None
    if slot is None:
        return ""
    site = slot.device.host.site
    return f"{site.name} ({site.code})"


def has_off_machine_storage(order: Order) -> bool:
    return any(slug.startswith(OFF_MACHINE_PREFIX) for slug in order.option_slugs or [])


def end_reminder(order: Order, *, now: datetime | None = None,
                 within: timedelta | None = REMIND_BEFORE) -> EndReminder | None:
    """The reminder about ``order``'s end, while an active term ends ``within`` (a day; None: any time ahead,
    for an email queued by the reminder sweep and sent later); else None."""
    now = now or timezone.now()
    if order.order_state is not OrderState.ACTIVE or order.ends_at <= now:
        return None
    if within is not None and order.ends_at > now + within:
        return None
    found = extension_options.extension_options(order, now=now)
    storage = has_off_machine_storage(order)
    return EndReminder(
        ends_at=order.ends_at,
        minutes_left=max(1, -(-int((order.ends_at - now).total_seconds()) // 60)),
        extend=found,
        extend_refusal="" if found.possible else extension_options.refusal_text(found),
        storage_site=(_site(order) or "?") if storage else "",
        storage_until=order.ends_at + timedelta(days=STORAGE_KEPT_DAYS) if storage else None,
    )
