"""Extensions and the two reminders before a term ends (issue 25): an order may extend another (``extends``), the
days its applied extensions added (``extended_days``), and the last-hour reminder beside the 24-hour one.

SQLite adds a column with a default by rebuilding the orders table: the triggers of 0008 are taken down first
and put back after, as in 0012 and 0013."""

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
        ('orders', '0013_step_leases_and_wipes'),
    ]

    operations = [
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_DOWN), _sqlite(_LIVE_BOOKING.SQLITE_UP)),
        migrations.AddField(
            model_name='order',
            name='end_warned_hour_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='last-hour warning sent'),
        ),
        migrations.AddField(
            model_name='order',
            name='extended_days',
            field=models.PositiveSmallIntegerField(default=0, help_text='The term runs for its days plus these.', verbose_name='days added by extensions'),
        ),
        migrations.AddField(
            model_name='order',
            name='extends',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='extensions', to='orders.order', verbose_name='extends order'),
        ),
        migrations.AlterField(
            model_name='orderemail',
            name='kind',
            field=models.CharField(choices=[('order_placed', 'payment details'), ('state_changed', 'order state changed'), ('term_ending', 'term ending'), ('term_ending_hour', 'term ending within the hour'), ('operator_alert', 'alert to the operators'), ('refund_sent', 'refund found on chain')], max_length=20, verbose_name='kind'),
        ),
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_UP), _sqlite(_LIVE_BOOKING.SQLITE_DOWN)),
    ]
