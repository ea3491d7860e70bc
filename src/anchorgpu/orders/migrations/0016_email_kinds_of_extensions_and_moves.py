# Both branches altered the e-mail kinds; this holds all of them (extensions: the hour's reminder; moves: moved).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0015_merge_extensions_and_moves'),
    ]

    operations = [
        migrations.AlterField(
            model_name='orderemail',
            name='kind',
            field=models.CharField(choices=[('order_placed', 'payment details'), ('state_changed', 'order state changed'), ('term_ending', 'term ending'), ('term_ending_hour', 'term ending within the hour'), ('operator_alert', 'alert to the operators'), ('refund_sent', 'refund found on chain'), ('moved', 'term moved to other cards')], max_length=20, verbose_name='kind'),
        ),
    ]
