import django.core.validators
from django.db import migrations, models

# The precision a quote is rounded up to, for the assets a shop usually has (others keep the default: 8).
_KNOWN = {"BTC": 8, "TBTC": 8, "ETH": 6, "USDC": 2, "USDT": 2, "DAI": 2}


def set_known(apps, schema_editor):
    Asset = apps.get_model("payments", "Asset")
    for asset in Asset.objects.all():
        places = _KNOWN.get(asset.symbol.upper())
        if places is not None:
            asset.quote_decimals = min(places, asset.decimals)
            asset.save(update_fields=["quote_decimals"])


class Migration(migrations.Migration):

    dependencies = [
        ("payments", "0008_refund_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="asset",
            name="quote_decimals",
            field=models.PositiveSmallIntegerField(
                blank=True, help_text="A quote's amount is rounded up to this many decimal places and shown with "
                "them: 8 for Bitcoin (one satoshi), 6 for Ether, 2 for a dollar stablecoin. Empty: at most 8. Never "
                "more than the asset's decimal places; changing it affects new quotes only.", null=True,
                validators=[django.core.validators.MaxValueValidator(30)], verbose_name="decimal places quoted"),
        ),
        migrations.RunPython(set_known, migrations.RunPython.noop),
    ]
