"""Placement policy: which free units a booking takes.

Pure domain code. The policy, in order of importance:

1. **One host if possible.** A multi-unit order lands on a single host
   whenever one host has enough free units, so its cards share NVLink /
   NVSwitch and the host's local network.
2. **Best fit.** Among hosts that can take the whole order, the one with the
   fewest free units wins (ties: the host listed first). Partly used hosts
   fill up before untouched ones, so whole hosts stay free for large orders.
   When no host can take it all, the order spans the fewest hosts: the
   largest free hosts are used whole, and the remainder goes to the best
   fitting host again.
3. **Keep pairs whole.** Within a host, single cards are taken first from
   NVLink pairs whose partner is already gone (or from unpaired devices),
   then pair by pair, so complete pairs survive for lot orders and a
   two-card order gets a pair of its own. When that would leave an odd
   number of cards to take from whole pairs (splitting one), one lone card
   fewer is taken and that pair is taken whole instead: as many complete
   pairs survive either way, and the order gets NVLink.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

from .units import Unit


class NotEnoughUnits(Exception):
    def __init__(self, wanted: int, free: int):
        super().__init__(f"{wanted} unit(s) wanted, {free} free")
        self.wanted = wanted
        self.free = free


def _take_from_host(units: Sequence[Unit], count: int) -> list[Unit]:
    """``count`` of one host's free ``units``: lone cards first, then pair by pair."""
    free_in_pair: dict[int, int] = defaultdict(int)
    for unit in units:
        if unit.pair is not None and len(unit.devices) == 1:
            free_in_pair[unit.pair] += 1

    def in_whole_pair(unit: Unit) -> bool:
        return unit.pair is not None and len(unit.devices) == 1 and free_in_pair[unit.pair] > 1

    def rank(unit: Unit) -> tuple:
        return (1 if in_whole_pair(unit) else 0, unit.pair if unit.pair is not None else -1, unit.index)

    ordered = sorted(units, key=rank)
    lone = sum(1 for unit in ordered if not in_whole_pair(unit))
    if 0 < lone < count and (count - lone) % 2:
        # Taking every lone card would split a whole pair; take that pair whole and leave one lone card.
        return ordered[:lone - 1] + ordered[lone:count + 1]
    return ordered[:count]


def place(free: Sequence[Unit], quantity: int) -> list[Unit]:
    """Choose ``quantity`` units out of ``free`` following the policy above."""
    if quantity < 1:
        raise ValueError("quantity must be at least 1")
    if len(free) < quantity:
        raise NotEnoughUnits(quantity, len(free))
    by_host: dict[Hashable, list[Unit]] = defaultdict(list)
    host_order: list[Hashable] = []
    for unit in free:
        if unit.host not in by_host:
            host_order.append(unit.host)
        by_host[unit.host].append(unit)
    position = {host: i for i, host in enumerate(host_order)}

    def best_fit(need: int, hosts: list[Hashable]) -> Hashable | None:
        fitting = [h for h in hosts if len(by_host[h]) >= need]
        return min(fitting, key=lambda h: (len(by_host[h]), position[h]), default=None)

    chosen: list[Unit] = []
    remaining = quantity
    hosts = list(host_order)
    while remaining:
        host = best_fit(remaining, hosts)
        if host is not None:
            chosen.extend(_take_from_host(by_host[host], remaining))
            break
        # No single host takes the rest: use the largest one whole.
        host = max(hosts, key=lambda h: (len(by_host[h]), -position[h]))
        chosen.extend(_take_from_host(by_host[host], len(by_host[host])))
        remaining -= len(by_host[host])
        hosts.remove(host)
    return chosen
