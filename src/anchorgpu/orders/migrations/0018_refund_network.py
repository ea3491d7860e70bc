"""The network the customer wants a refund on (issue 26): ``refund_asset``, the quote's coin on another network the
shop has for it; empty: the quote's network.

SQLite adds a column by rebuilding the orders table: the triggers of 0008 are taken down first and put back after,
as in 0012, 0013 and 0014."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

_LIVE_BOOKING = importlib.import_module("anchorgpu.orders.migrations.0008_order_needs_live_booking")


def _sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for sql in statements:
                schema_editor.execute(sql, params=None)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0017_service_credit_email'),
        ('payments', '0011_networks'),
    ]

    operations = [
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_DOWN), _sqlite(_LIVE_BOOKING.SQLITE_UP)),
        migrations.AddField(
            model_name='order',
            name='refund_asset',
            field=models.ForeignKey(blank=True, help_text="The same coin as the quote on the network the customer wants the refund on; empty: the quote's network.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='payments.asset', verbose_name='refund network chosen by the customer'),
        ),
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_UP), _sqlite(_LIVE_BOOKING.SQLITE_DOWN)),
    ]
