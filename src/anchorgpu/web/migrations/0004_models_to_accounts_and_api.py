# The account models went to the ``accounts`` app and the API's idempotency keys to ``api`` (their 0001 migrations
# took them into their state, on the same tables). Here they leave ``web``'s state; the database is not touched:
# the tables, their rows, indexes and constraints stay as they are.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('web', '0003_saved_keys'),
        ('accounts', '0001_initial'),
        ('api', '0001_initial'),
    ]

    state_operations = [
        migrations.DeleteModel(name='RecoveryCode'),
        migrations.DeleteModel(name='TwoFactorDevice'),
        migrations.DeleteModel(name='ApiToken'),
        migrations.DeleteModel(name='SavedKey'),
        migrations.DeleteModel(name='ApiIdempotency'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[]),
    ]
