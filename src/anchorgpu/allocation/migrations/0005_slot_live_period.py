"""A GiST index of live booking rows by their period alone, for the reads of a whole fleet at once.

The availability search in SQL (``allocation/sweep_sql.py``) asks which rows of any device overlap a
period: at fleet scale (20,000 devices) one probe per device of ``slot_by_device`` costs more than the rest
of the search together. The exclusion constraint's GiST index (device, period) answers the same question
without a device only by reading most of itself (12,000 pages against 680 for this one, measured on the
fleet of ``bench/allocation.py --fleet``).

The index is on ``tstzrange(starts_at, ends_at)`` (bounds ``[)``, the default), not on the constraint's
``tstzrange(starts_at, ends_at, '[)')``: the queries that name this expression can use this index only, and
the constraint's index keeps serving the constraint. PostgreSQL only; it is built without blocking writes.
"""

from django.db import migrations

NAME = "slot_live_period"
PG_UP = (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON allocation_bookingdevice "
         "USING gist (tstzrange(starts_at, ends_at)) WHERE live")
PG_DOWN = f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}"


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("allocation", "0004_slot_by_device")]

    operations = [migrations.RunPython(_on_postgresql(PG_UP), _on_postgresql(PG_DOWN))]
