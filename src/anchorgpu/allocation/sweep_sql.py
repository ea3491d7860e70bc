"""The availability search of ``search.earliest_start`` and ``search.free_units``, done by PostgreSQL.

At fleet scale the Python search spends its time turning rows into values: thousands of devices into units
and of booking rows into periods (docs/benchmarks.md, "Issue 22: allocation at fleet scale"). Here one
statement answers, per product, what the selectors would compute from those rows, and sends back three
numbers: the units, those free for ``[now, now + length)``, and the earliest start. The Python path stays
the reference, and the one used on SQLite; tests/allocation/test_sweep_sql.py compares the two on random
fleets.

The same steps as the Python code, in SQL:

* **Units** (``units.units_from_devices``): the devices of the products' active hosts; one card per unit,
  every device is a unit; two cards per unit, every NVLink pair of a host that has exactly two bookable
  devices is one.
* **Busy periods** (``selectors._busy_of``): a unit's devices' live rows (not expired holds) and its host's
  live maintenance windows, of those ending after ``after`` and starting before ``before``. Rows that end
  earlier (by ``now``) are read too when "free now" needs them: they cannot open or move a range below.
* **Ranges of fitting starts** (``periods.free_starts``): a unit's periods in order of start; the cursor
  before each is the latest end of those before it, or ``after``; ``[cursor, start - length]`` fits when
  not empty; after the last one, ``[cursor, ∞)``.
* **The sweep** (``search.earliest_start``): +1 where a range opens, -1 where it closes, openings before
  closings at the same instant; the answer is the first opening at which ``quantity`` ranges are open.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

_UNITS = """
unit_dev AS MATERIALIZED (
    SELECT d.id AS device_id, d.host_id, h.product_id,
           CASE WHEN p.cards_per_unit = 1 THEN d.id ELSE d.host_id END AS u1,
           CASE WHEN p.cards_per_unit = 1 THEN 0 ELSE d.nvlink_pair END AS u2
      FROM fleet_device d
      JOIN fleet_host h ON h.id = d.host_id
      JOIN catalog_product p ON p.id = h.product_id
     WHERE h.product_id = ANY(%(products)s::bigint[]) AND h.status = 'active'
       AND (p.cards_per_unit = 1
            OR (d.host_id, d.nvlink_pair) IN (SELECT host_id, nvlink_pair FROM fleet_device
                                               WHERE nvlink_pair IS NOT NULL GROUP BY 1, 2 HAVING count(*) = 2))
)"""

def _held(start: str, end: str) -> str:
    """Whether a unit device is busy at some moment of ``[start, end)``: one of its live rows, or a live
    maintenance window of its host, overlaps it."""
    return f"""(EXISTS (SELECT 1 FROM allocation_bookingdevice s
                 WHERE s.device_id = u.device_id AND s.live AND (s.expires_at IS NULL OR s.expires_at > %(now)s)
                   AND s.ends_at > {start} AND s.starts_at < {end})
            OR u.host_id IN (SELECT b.host_id FROM allocation_booking b
                              WHERE b.kind = 'maintenance' AND b.state = 'live' AND b.host_id IS NOT NULL
                                AND b.ends_at > {start} AND b.starts_at < {end}))"""


_COUNTS = """,
held AS (
    SELECT u.product_id, u.u1, u.u2, {held_now} AS held_now, {held_first} AS held_first FROM unit_dev u
), per_unit AS (
    SELECT product_id, bool_or(held_now) AS held_now, {first_column} AS held_first
      FROM held GROUP BY product_id, u1, u2
), counts AS (
    SELECT product_id, count(*) AS total, count(*) FILTER (WHERE NOT held_now) AS free_now,
           count(*) FILTER (WHERE NOT {first_free}) AS free_first
      FROM per_unit GROUP BY product_id"""

# The sweep, for a product with fewer than ``quantity`` units free from ``after`` on (else ``after`` is the
# answer): it is read only then.
_SWEEP = """
), busy AS (
    SELECT u.product_id, u.u1, u.u2, s.starts_at AS s, s.ends_at AS e
      FROM unit_dev u JOIN allocation_bookingdevice s ON s.device_id = u.device_id
     WHERE s.live AND (s.expires_at IS NULL OR s.expires_at > %(now)s)
       AND s.ends_at > %(after)s AND s.starts_at < %(before)s
    UNION ALL
    SELECT u.product_id, u.u1, u.u2, b.starts_at, b.ends_at
      FROM unit_dev u JOIN allocation_booking b ON b.host_id = u.host_id
     WHERE b.kind = 'maintenance' AND b.state = 'live' AND b.ends_at > %(after)s AND b.starts_at < %(before)s
), gaps AS (
    SELECT product_id, s, greatest(%(after)s, max(e) OVER earlier) AS cursor,
           CASE WHEN lead(s) OVER ordered IS NULL THEN greatest(%(after)s, max(e) OVER whole) END AS last_end
      FROM busy
    WINDOW ordered AS (PARTITION BY product_id, u1, u2 ORDER BY s, e),
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
       CASE WHEN coalesce(c.free_first, 0) >= %(quantity)s THEN %(after)s
            WHEN coalesce(c.total, 0) < %(quantity)s THEN NULL
            ELSE (SELECT min(moment) FROM swept
                   WHERE swept.product_id = p.id AND kind = 0 AND open >= %(quantity)s) END
  FROM unnest(%(products)s::bigint[]) AS p(id)
  LEFT JOIN counts c ON c.product_id = p.id
"""


def _statement(*, free_now: bool, from_now: bool) -> str:
    """From now, the units free now are those free from ``after``: one test serves both."""
    held_now = _held("%(now)s", "%(free_end)s") if free_now else "false"
    if free_now and from_now:
        held_first, first_column, first_free = "NULL", "NULL", "held_now"
    else:
        held_first, first_column, first_free = _held("%(after)s", "%(first_end)s"), "bool_or(held_first)", "held_first"
    return "WITH" + _UNITS + _COUNTS.format(held_now=held_now, held_first=held_first, first_column=first_column,
                                            first_free=first_free) + _SWEEP


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
    with connection.cursor() as cursor:
        cursor.execute(_statement(free_now=free_now, from_now=after == now), params)
        return {pk: Swept(units_total=total, units_free_now=free if free_now else None, found=found)
                for pk, total, free, found in cursor.fetchall()}
