"""The customer's business flag and the VAT treatment decided at checkout (``billing.tax``).

SQLite adds these columns by rebuilding the orders table, which drops the triggers of 0008 on it and is
refused while the bookings' trigger names the table: those triggers are taken down first and put back after,
the same statements as 0008's. PostgreSQL adds the columns in place and keeps its triggers. Orders placed with a VAT id were a business's."""

import importlib

from django.db import migrations, models

_LIVE_BOOKING = importlib.import_module("anchorgpu.orders.migrations.0008_order_needs_live_booking")


def _sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for sql in statements:
                schema_editor.execute(sql, params=None)
    return run


def _vat_id_meant_business(apps, schema_editor):
    """Before the flag, a VAT id was given only for a business purchase: those orders are a business's."""
    apps.get_model("orders", "Order").objects.exclude(vat_id="").update(business=True)


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0011_order_email_note_for_customers'),
    ]

    operations = [
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_DOWN), _sqlite(_LIVE_BOOKING.SQLITE_UP)),
        migrations.AddField(
            model_name='order',
            name='business',
            field=models.BooleanField(default=False, verbose_name='business customer'),
        ),
        migrations.AddField(
            model_name='order',
            name='tax',
            field=models.JSONField(blank=True, default=dict, verbose_name='VAT treatment'),
        ),
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_UP), _sqlite(_LIVE_BOOKING.SQLITE_DOWN)),
        migrations.RunPython(_vat_id_meant_business, migrations.RunPython.noop),
    ]
