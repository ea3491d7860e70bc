"""Access steps run outside transactions (DESIGN §6): the worker's lease on an order's step, the back-off before
the next try, the unreachable-host count, the wipe due after the term and its failed attempts; a step's start;
the operator events about a failed wipe and a refused host, which may be about a host alone (no order).

SQLite adds the counters by rebuilding the orders table: the triggers of 0008 are taken down first and put
back after, as in 0012."""

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
        ('fleet', '0002_host_ssh_and_discovery'),
        ('orders', '0012_order_business_and_tax'),
    ]

    operations = [
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_DOWN), _sqlite(_LIVE_BOOKING.SQLITE_UP)),
        migrations.AddField(
            model_name='operatorevent',
            name='host',
            field=models.ForeignKey(blank=True, help_text='The host the event is about, where there is one.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='operator_events', to='fleet.host'),
        ),
        migrations.AddField(
            model_name='order',
            name='lease_owner',
            field=models.CharField(blank=True, help_text='The worker running a step now: host name, process id, token.', max_length=120, verbose_name='step held by'),
        ),
        migrations.AddField(
            model_name='order',
            name='lease_started_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='step started'),
        ),
        migrations.AddField(
            model_name='order',
            name='lease_step',
            field=models.CharField(blank=True, max_length=32, verbose_name='step under way'),
        ),
        migrations.AddField(
            model_name='order',
            name='lease_until',
            field=models.DateTimeField(blank=True, null=True, verbose_name='step held until'),
        ),
        migrations.AddField(
            model_name='order',
            name='retry_at',
            field=models.DateTimeField(blank=True, help_text='After a failed step or wipe, the back-off before the next try.', null=True, verbose_name='next attempt not before'),
        ),
        migrations.AddField(
            model_name='order',
            name='unreachable_attempts',
            field=models.PositiveSmallIntegerField(default=0, verbose_name='attempts that found the host unreachable'),
        ),
        migrations.AddField(
            model_name='order',
            name='wipe_attempts',
            field=models.PositiveSmallIntegerField(default=0, verbose_name='failed wipe attempts'),
        ),
        migrations.AddField(
            model_name='order',
            name='wipe_due_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='wipe due'),
        ),
        migrations.AddField(
            model_name='provisioningstep',
            name='started_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='started'),
        ),
        migrations.AlterField(
            model_name='operatorevent',
            name='kind',
            field=models.CharField(choices=[('order.underpaid', 'underpaid'), ('order.paid_late', 'paid after expiry, cards taken'), ('order.wrong_asset', 'paid in another coin, token or network'), ('order.reorged', 'payment no longer on chain'), ('order.reorg_resolved', 'payment back on chain'), ('order.provisioning_failed', 'access preparation failed'), ('order.refund_due', 'refund due'), ('order.wipe_failed', 'machine could not be wiped'), ('host.refused', 'host refused: taken off sale or needs a look')], max_length=40, verbose_name='kind'),
        ),
        migrations.AlterField(
            model_name='operatorevent',
            name='order',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='operator_events', to='orders.order'),
        ),
        migrations.AlterField(
            model_name='orderemail',
            name='order',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='emails', to='orders.order'),
        ),
        migrations.AddConstraint(
            model_name='operatorevent',
            constraint=models.UniqueConstraint(condition=models.Q(('order__isnull', True)), fields=('host', 'kind', 'key'), name='host_event_once'),
        ),
        migrations.AddConstraint(
            model_name='operatorevent',
            constraint=models.CheckConstraint(condition=models.Q(('order__isnull', False), ('host__isnull', False), _connector='OR'), name='operator_event_about_something'),
        ),
        migrations.RunPython(_sqlite(_LIVE_BOOKING.SQLITE_UP), _sqlite(_LIVE_BOOKING.SQLITE_DOWN)),
    ]
