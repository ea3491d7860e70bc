"""The no-overlap invariant, enforced by the database itself.

PostgreSQL: an exclusion constraint over (device, period) for live rows,
with btree_gist so the integer device id can join the GiST index. The
extension needs a role allowed to create it (a superuser, or the database
owner on PostgreSQL 13+ since btree_gist is a trusted extension).

SQLite: triggers that abort an insert or update creating an overlap. They
back up the IMMEDIATE transactions the services run in.
"""

from django.db import migrations

PG_UP = [
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    """ALTER TABLE allocation_bookingdevice ADD CONSTRAINT booking_slot_no_overlap
       EXCLUDE USING gist (device_id WITH =, tstzrange(starts_at, ends_at, '[)') WITH &&) WHERE (live)""",
]
PG_DOWN = ["ALTER TABLE allocation_bookingdevice DROP CONSTRAINT booking_slot_no_overlap"]

_SQLITE_CHECK = """
    WHEN NEW.live AND EXISTS (
        SELECT 1 FROM allocation_bookingdevice s
        WHERE s.device_id = NEW.device_id AND s.live AND s.id IS NOT NEW.id
          AND s.starts_at < NEW.ends_at AND NEW.starts_at < s.ends_at)
    BEGIN SELECT RAISE(ABORT, 'booking overlap: booking_slot_no_overlap'); END
"""
SQLITE_UP = [
    "CREATE TRIGGER booking_slot_no_overlap_insert BEFORE INSERT ON allocation_bookingdevice" + _SQLITE_CHECK,
    "CREATE TRIGGER booking_slot_no_overlap_update BEFORE UPDATE OF live, device_id, starts_at, ends_at "
    "ON allocation_bookingdevice" + _SQLITE_CHECK,
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS booking_slot_no_overlap_insert",
    "DROP TRIGGER IF EXISTS booking_slot_no_overlap_update",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):
    dependencies = [("allocation", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": PG_DOWN, "sqlite": SQLITE_DOWN}),
        ),
    ]
