"""What the customer is told about a move of their term: on the order page and in the email.

The data question is answered honestly: nothing on the old machine's disks (the workspace, the local NVMe) is
copied to the new cards. Only what the customer saved to the off-machine checkpoint storage, if they bought it,
is there after the move; the local NVMe is scratch space.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from anchorgpu.fleet.models import Device

from .models import Move, Order

STORAGE_OPTION_PREFIX = "checkpoint-storage"


@dataclass(frozen=True)
class MoveFacts:
    at: datetime
    from_cards: tuple[str, ...]
    to_cards: tuple[str, ...]
    from_hosts: str
    to_hosts: str
    access_again: bool  # access is prepared again on the new cards
    storage_bought: bool  # the order has the off-machine checkpoint storage option
    wiped: bool  # the old cards are wiped (or had nothing to wipe)

    @property
    def same_hosts(self) -> bool:
        return self.from_hosts == self.to_hosts


def has_off_machine_storage(order: Order) -> bool:
    return any(str(slug).startswith(STORAGE_OPTION_PREFIX) for slug in (order.option_slugs or []))


def _uids(ids) -> tuple[str, ...]:
    names = dict(Device.objects.filter(pk__in=list(ids)).values_list("pk", "uid"))
    return tuple(names.get(i, f"#{i}") for i in ids)


def move_facts(move: Move) -> MoveFacts:
    return MoveFacts(at=move.at, from_cards=_uids(move.from_devices), to_cards=_uids(move.to_devices),
                     from_hosts=move.from_hosts, to_hosts=move.to_hosts, access_again=move.access_moved,
                     storage_bought=has_off_machine_storage(move.order), wiped=not move.wipe_pending)


def moves_for_page(order: Order) -> list[MoveFacts]:
    return [move_facts(m) for m in order.moves.select_related("order").order_by("created_at", "id")]
