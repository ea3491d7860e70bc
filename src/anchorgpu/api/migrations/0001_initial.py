# The API's idempotency keys, moved here from the ``web`` app (web 0001 made them). Only Django's idea of the
# model moves: the table keeps its name (``db_table``), rows and constraints, so the database is not touched.
# web.0004_models_to_accounts_and_api then drops it from ``web``'s state, and web.0005 moves its content type
# (and so the operators' permissions on it) to this app.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('web', '0003_saved_keys'),
        ('orders', '0004_order_idempotency_key'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name='ApiIdempotency',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=64, verbose_name='idempotency key')),
                ('fingerprint', models.CharField(max_length=64, verbose_name='fingerprint of the request body')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('order', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='orders.order')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API idempotency key',
                'verbose_name_plural': 'API idempotency keys',
                'db_table': 'web_apiidempotency',
                'constraints': [models.UniqueConstraint(fields=('user', 'key'), name='api_idempotency_key_once'), models.CheckConstraint(condition=models.Q(('key', ''), _negated=True), name='api_idempotency_key_not_empty')],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[]),
    ]
