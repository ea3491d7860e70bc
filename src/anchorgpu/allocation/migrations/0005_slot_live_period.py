"""GiST indexes of live booking rows, and of live maintenance windows, by their period alone, for the reads of
a whole fleet at once.

The availability search in SQL (``allocation/sweep_sql.py``) asks which rows of any device overlap a
period: at fleet scale (20,000 devices) one probe per device of ``slot_by_device`` costs more than the rest
of the search together. The exclusion constraint's GiST index (device, period) answers the same question
without a device only by reading most of itself (12,000 pages against 680 for this one, measured on the
fleet of ``bench/allocation.py --fleet``).

The index is on ``tstzrange(starts_at, ends_at)`` (bounds ``[)``, the default), not on the constraint's
``tstzrange(starts_at, ends_at, '[)')``: the queries that name this expression can use this index only, and
the constraint's index keeps serving the constraint.

``booking_live_maintenance_period`` does the same for the hosts in maintenance at some moment of a period:
``booking_live_maintenance`` (host, end) serves a read by host, and for all hosts read every window not yet
ended from the table (about 4,000 rows fetched for 110 that overlap the coming week, in the same bench).

PostgreSQL only; they are built without blocking writes.
"""

from django.db import migrations

PG_UP = [
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS slot_live_period ON allocation_bookingdevice "
    "USING gist (tstzrange(starts_at, ends_at)) WHERE live",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS booking_live_maintenance_period ON allocation_booking "
    "USING gist (tstzrange(starts_at, ends_at)) WHERE kind = 'maintenance' AND state = 'live'",
]
PG_DOWN = ["DROP INDEX CONCURRENTLY IF EXISTS booking_live_maintenance_period",
           "DROP INDEX CONCURRENTLY IF EXISTS slot_live_period"]


def _on_postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("allocation", "0004_slot_by_device")]

    operations = [migrations.RunPython(_on_postgresql(PG_UP), _on_postgresql(PG_DOWN))]
