"""One index on a booking row's device and period, in place of two.

The partial index ``slot_live_by_device`` (live rows by device, end, start) sat beside the plain index
Django gives the device foreign key. With a year of history per device PostgreSQL estimated the two at
about the same cost and took the plain one, then filtered every past row of each device it probed
(``bench/allocation.py --fleet``). ``slot_by_device`` covers all rows, so it also serves the foreign key,
and the plain index goes.

The foreign key's index is dropped by name rather than by altering the field: SQLite alters a field by
rebuilding the table, which would drop the no-overlap triggers of migration 0002.
"""

from django.db import migrations, models

FK_INDEX = "allocation_bookingdevice_device_id_75a8ddad"


class Migration(migrations.Migration):

    dependencies = [
        ("allocation", "0003_live_maintenance_index"),
        ("fleet", "0001_initial"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="bookingdevice",
            index=models.Index(fields=["device", "ends_at", "starts_at"], name="slot_by_device"),
        ),
        migrations.RemoveIndex(model_name="bookingdevice", name="slot_live_by_device"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="bookingdevice",
                    name="device",
                    field=models.ForeignKey(db_index=False, on_delete=models.deletion.PROTECT,
                                            related_name="slots", to="fleet.device"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f"DROP INDEX IF EXISTS {FK_INDEX}",
                                  f"CREATE INDEX {FK_INDEX} ON allocation_bookingdevice (device_id)"),
            ],
        ),
    ]
