# The account models, moved here from the ``web`` app (web 0001-0003 made them). Only Django's idea of the
# models moves: the tables keep their names (``db_table``), rows, indexes and constraints, so the database is not
# touched. web.0004_models_to_accounts_and_api then drops them from ``web``'s state, and web.0005 moves their
# content types (and so the operators' permissions on them) to this app.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('web', '0003_saved_keys'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name='TwoFactorDevice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('secret', models.CharField(max_length=64, verbose_name='secret (base32)')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('confirmed_at', models.DateTimeField(blank=True, null=True, verbose_name='confirmed')),
                ('last_used_step', models.BigIntegerField(blank=True, null=True, verbose_name='last time step used')),
                ('recovery_salt', models.CharField(blank=True, max_length=32, verbose_name='salt of the recovery codes')),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='two_factor', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'two-factor device',
                'verbose_name_plural': 'two-factor devices',
                'db_table': 'web_twofactordevice',
            },
        ),
        migrations.CreateModel(
            name='RecoveryCode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('code_hash', models.CharField(max_length=64, verbose_name='hash of the code')),
                ('used_at', models.DateTimeField(blank=True, null=True, verbose_name='used')),
                ('device', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='recovery_codes', to='accounts.twofactordevice')),
            ],
            options={
                'verbose_name': 'recovery code',
                'verbose_name_plural': 'recovery codes',
                'db_table': 'web_recoverycode',
                'constraints': [models.UniqueConstraint(fields=('device', 'code_hash'), name='recovery_code_once')],
            },
        ),
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=60, verbose_name='name')),
                ('prefix', models.CharField(help_text='The first characters of the token, shown to tell tokens apart.', max_length=8, unique=True, verbose_name='prefix')),
                ('secret_hash', models.CharField(max_length=64, verbose_name='hash of the secret')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('last_used_at', models.DateTimeField(blank=True, null=True, verbose_name='last used')),
                ('revoked_at', models.DateTimeField(blank=True, null=True, verbose_name='revoked')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API token',
                'verbose_name_plural': 'API tokens',
                'db_table': 'web_apitoken',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['user', '-created_at'], name='api_token_by_user')],
            },
        ),
        migrations.CreateModel(
            name='SavedKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('label', models.CharField(max_length=60, verbose_name='label')),
                ('key_type', models.CharField(max_length=64, verbose_name='type')),
                ('bits', models.PositiveIntegerField(verbose_name='bits')),
                ('fingerprint', models.CharField(max_length=80, verbose_name='fingerprint')),
                ('comment', models.CharField(blank=True, max_length=200, verbose_name='comment')),
                ('public_key', models.TextField(verbose_name='public key')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='saved_keys', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'saved SSH key',
                'verbose_name_plural': 'saved SSH keys',
                'db_table': 'web_savedkey',
                'ordering': ['-created_at', '-id'],
                'constraints': [models.UniqueConstraint(fields=('user', 'fingerprint'), name='saved_key_once_per_user')],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[]),
    ]
