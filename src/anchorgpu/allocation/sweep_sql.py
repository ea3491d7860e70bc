"""The availability search of ``search.earliest_start`` and ``search.free_units``, done by PostgreSQL.

At fleet scale the Python search spends its time turning rows into values: thousands of devices into units
and of booking rows into periods (docs/benchmarks.md, "Issue 22: allocation at fleet scale"). Here one
statement answers, per product, what the selectors would compute from those rows, and sends back three
values: the units, those free for ``[now, now + length)``, and the earliest start. The Python path stays
the reference, and the one used on SQLite; tests/allocation/test_sweep_sql.py compares the two on random
fleets.

The same steps as the Python code, in SQL:

* **Units** (``units.units_from_devices``): the devices of the products' active hosts; one card per unit,
  every device is a unit; two cards per unit, every NVLink pair of a host that has exactly two bookable
  devices is one.
* **Busy** (``selectors._busy_of``): a unit's devices' live rows (not expired holds) and its host's live
  maintenance windows.
* **Free now**: the units none of whose busy periods overlaps ``[now, now + length)``, counted.
* **The earliest start**: ``after`` itself when ``quantity`` units are free for ``[after, after + length)``
  (the search stops probing units once it has found that many). Only otherwise the sweep:
  * **ranges of fitting starts** (``periods.free_starts``), from the busy periods that end after ``after``
    and start before ``before``, in order of start: the cursor before each is the latest end of those
    before it, or ``after``; ``[cursor, start - length]`` fits when not empty; after the last one,
    ``[cursor, ∞)``; a unit with no busy period in the window has ``[after, ∞)``;
  * **the sweep** (``search.earliest_start``): +1 where a range opens, -1 where it closes, openings before
    closings at the same instant; the answer is the first opening at which ``quantity`` ranges are open.

Where the search covers several products (the live catalog: the whole fleet), the rows of "now" are read at
once through ``slot_live_period`` (migration 0005) and looked up by hash; for one product, device by device
through ``slot_by_device``. "Free from ``after``" is always probed unit by unit, and the sweep's rows always
read through ``slot_live_period``. JIT is off for the statement (``sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

_UNITS = """
units AS MATERIALIZED (  -- one row per unit: its product, host and card, and a lot's second card
    SELECT h.product_id, d.host_id, d.id AS first, NULL::bigint AS second
      FROM fleet_device d JOIN fleet_host h ON h.id = d.host_id JOIN catalog_product p ON p.id = h.product_id
     WHERE h.product_id = ANY(%(products)s::bigint[]) AND h.status = 'active' AND h.sale_block = ''
       AND p.cards_per_unit = 1
    UNION ALL
    SELECT h.product_id, d.host_id, min(d.id), max(d.id)
      FROM fleet_device d JOIN fleet_host h ON h.id = d.host_id JOIN catalog_product p ON p.id = h.product_id
     WHERE h.product_id = ANY(%(products)s::bigint[]) AND h.status = 'active' AND h.sale_block = ''
       AND p.cards_per_unit = 2
       AND d.nvlink_pair IS NOT NULL
     GROUP BY h.product_id, d.host_id, d.nvlink_pair HAVING count(*) = 2
)"""

_LIVE = "s.live AND (s.expires_at IS NULL OR s.expires_at > %(now)s)"


def _overlapping(start: str, end: str, *, fleet: bool) -> str:
    """The condition on a booking row ``s`` that it overlaps ``[start, end)``: for a whole fleet through
    ``slot_live_period``; for one product's devices, device by device through ``slot_by_device``, which
    skips each device's history."""
    if fleet:
        return f"tstzrange(s.starts_at, s.ends_at) && tstzrange({start}, {end})"
    return f"s.ends_at > {start} AND s.starts_at < {end}"


def _down(start: str, end: str) -> str:
    """The hosts in a live maintenance window at some moment of ``[start, end)`` (through
    ``booking_live_maintenance_period``, migration 0005). A window without a host stands for none: -1, not
    NULL, which would make ``IN`` unknown rather than false."""
    return f"""(SELECT coalesce(b.host_id, -1) FROM allocation_booking b
                 WHERE b.kind = 'maintenance' AND b.state = 'live'
                   AND tstzrange(b.starts_at, b.ends_at) && tstzrange({start}, {end}))"""


_FLEET_NOW = """,
busy_now AS MATERIALIZED (  -- the cards of the whole fleet busy at some moment of [now, now + length)
    SELECT s.device_id FROM allocation_bookingdevice s WHERE {live} AND {overlapping}
)"""


def _held_in_fleet(start: str, end: str) -> str:
    """Whether unit ``u`` is busy at some moment of ``[now, now + length)``, from the rows of the whole fleet
    that overlap it (``busy_now``), read once and looked up by hash."""
    return ("(u.first IN (SELECT device_id FROM busy_now) "
            "OR (u.second IS NOT NULL AND u.second IN (SELECT device_id FROM busy_now)) "
            f"OR u.host_id IN {_down(start, end)})")


def _held_probed(start: str, end: str) -> str:
    """Whether unit ``u`` is busy at some moment of ``[start, end)``, from its own devices' rows."""
    def probe(card: str) -> str:
        return (f"EXISTS (SELECT 1 FROM allocation_bookingdevice s WHERE s.device_id = u.{card} AND {_LIVE} "
                f"AND {_overlapping(start, end, fleet=False)})")
    return f"({probe('first')} OR (u.second IS NOT NULL AND {probe('second')}) OR u.host_id IN {_down(start, end)})"


_COUNTS = """,
counts AS (
    SELECT product_id, count(*) AS total, {free_now} AS free_now FROM units u GROUP BY product_id
)"""

# Enough units free from ``after`` on: the probe stops at ``quantity`` of them.
_FREE_FIRST = """(SELECT count(*) FROM (SELECT 1 FROM units u WHERE u.product_id = p.id AND NOT {held}
                                 LIMIT %(quantity)s) free) >= %(quantity)s"""

# The sweep, read only for a product with fewer than ``quantity`` units free from ``after`` on.
_SWEEP = """,
busy AS (
    SELECT u.product_id, u.first AS unit, s.starts_at AS s, s.ends_at AS e
      FROM units u JOIN allocation_bookingdevice s ON s.device_id = u.first
     WHERE {live} AND {overlapping}
    UNION ALL
    SELECT u.product_id, u.first, s.starts_at, s.ends_at
      FROM units u JOIN allocation_bookingdevice s ON s.device_id = u.second
     WHERE {live} AND {overlapping}
    UNION ALL
    SELECT u.product_id, u.first, b.starts_at, b.ends_at
      FROM units u JOIN allocation_booking b ON b.host_id = u.host_id
     WHERE b.kind = 'maintenance' AND b.state = 'live'
       AND tstzrange(b.starts_at, b.ends_at) && tstzrange(%(after)s, %(before)s)
), gaps AS (
    SELECT product_id, s, greatest(%(after)s, max(e) OVER earlier) AS cursor,
           CASE WHEN lead(s) OVER ordered IS NULL THEN greatest(%(after)s, max(e) OVER whole) END AS last_end
      FROM busy
    WINDOW ordered AS (PARTITION BY product_id, unit ORDER BY s, e),
           earlier AS (ordered ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           whole AS (ordered ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
), events AS (
    SELECT product_id, cursor AS moment, 0 AS kind, 1 AS delta FROM gaps WHERE s - %(length)s >= cursor
    UNION ALL
    SELECT product_id, s - %(length)s, 1, -1 FROM gaps WHERE s - %(length)s >= cursor
    UNION ALL
    SELECT product_id, last_end, 0, 1 FROM gaps WHERE last_end IS NOT NULL
    UNION ALL  -- the units with no busy period in the window, free from ``after`` on: opened first
    SELECT c.product_id, %(after)s, 0, c.total - coalesce(w.units, 0)
      FROM counts c LEFT JOIN (SELECT product_id, count(last_end) AS units FROM gaps GROUP BY product_id) w
        ON w.product_id = c.product_id
), swept AS (
    SELECT product_id, moment, kind,
           sum(delta) OVER (PARTITION BY product_id ORDER BY moment, kind ROWS UNBOUNDED PRECEDING) AS open
      FROM events
)
SELECT p.id, coalesce(c.total, 0), coalesce(c.free_now, 0),
       CASE WHEN coalesce(c.total, 0) < %(quantity)s THEN NULL
            WHEN {free_first} THEN %(after)s
            ELSE (SELECT min(moment) FROM swept
                   WHERE swept.product_id = p.id AND kind = 0 AND open >= %(quantity)s) END
  FROM unnest(%(products)s::bigint[]) AS p(id)
  LEFT JOIN counts c ON c.product_id = p.id
"""


def _statement(*, free_now: bool, from_now: bool, fleet: bool) -> str:
    """``fleet``: the products hold most of the fleet, whose rows of a period are read at once."""
    if free_now and from_now:  # the units free now are those free from ``after``: counted once
        free_first = "c.free_now >= %(quantity)s"
    else:
        free_first = _FREE_FIRST.format(held=_held_probed("%(after)s", "%(first_end)s"))
    ctes = _UNITS
    if free_now:
        if fleet:
            ctes += _FLEET_NOW.format(live=_LIVE, overlapping=_overlapping("%(now)s", "%(free_end)s", fleet=True))
        held_now = (_held_in_fleet if fleet else _held_probed)("%(now)s", "%(free_end)s")
        ctes += _COUNTS.format(free_now=f"count(*) FILTER (WHERE NOT {held_now})")
    else:
        ctes += _COUNTS.format(free_now="NULL::bigint")
    # The sweep's rows always through ``slot_live_period``: device by device, the planner's estimates for the
    # units led it to read the whole table instead.
    sweep = _SWEEP.format(live=_LIVE, overlapping=_overlapping("%(after)s", "%(before)s", fleet=True),
                          free_first=free_first)
    return "WITH" + ctes + sweep


@dataclass(frozen=True)
class Swept:
    units_total: int
    units_free_now: int | None  # units free for all of [now, now + length), when asked for
    found: datetime | None  # the earliest start from ``after``, from the bookings starting before ``before``


def sweep(product_ids, *, now: datetime, after: datetime, before: datetime, length: timedelta, quantity: int,
          free_now: bool = True) -> dict[int, Swept]:
    """Per product: its units, those free for ``[now, now + length)`` (with ``free_now``, then ``after`` is
    not before ``now``), and the first start from ``after`` at which ``quantity`` units are free for
    ``length``, seen from the live bookings that start before ``before`` (at least ``after + length``). As
    with ``selectors._busy_of``, a found start whose term ends past ``before`` may move once later bookings
    are read; one whose term ends by it is the answer."""
    if quantity < 1:
        raise ValueError("quantity must be at least 1")
    if before < after + length or (free_now and after < now):
        raise ValueError("the search reads at least one term, and counts the units free now from now on")
    params = {"products": list(product_ids), "now": now, "after": after, "before": before, "length": length,
              "free_end": now + length, "first_end": after + length, "quantity": quantity}
    statement = _statement(free_now=free_now, from_now=after == now, fleet=len(params["products"]) > 1)
    # The planner costs the sweep's branch, read only when the units free from ``after`` are too few, high
    # enough to compile the statement (JIT): about 100 ms, several times what the statement takes. Off for
    # this transaction only (``SET LOCAL``; inside the catalog's read-only transaction, for that one).
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(statement, params)
        return {pk: Swept(units_total=total, units_free_now=free if free_now else None, found=found)
                for pk, total, free, found in cursor.fetchall()}
