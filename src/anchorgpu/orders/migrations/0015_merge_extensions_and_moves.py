# The extensions branch and the moves branch each added an orders migration 0014; this joins them.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0014_extensions'),
        ('orders', '0014_moves'),
    ]

    operations = [
    ]
