"""Migration payments 0009 gives the assets a shop already has their quoted precision: BTC 8, ETH 6, USDC 2."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("payments", "0008_refund_scope")]
AFTER = [("payments", "0009_asset_quote_decimals")]


@pytest.mark.django_db(transaction=True)
def test_existing_assets_get_their_quoted_precision():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        Asset = executor.loader.project_state(BEFORE).apps.get_model("payments", "Asset")
        for code, symbol, decimals in (("btc", "BTC", 8), ("eth", "ETH", 18), ("usdc-ethereum", "USDC", 6),
                                       ("pepe", "PEPE", 18)):
            Asset.objects.create(code=code, symbol=symbol, name=symbol, network="n", network_name="n",
                                 scheme="btc" if symbol == "BTC" else "evm", decimals=decimals)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        Asset = executor.loader.project_state(AFTER).apps.get_model("payments", "Asset")
        places = dict(Asset.objects.values_list("code", "quote_decimals"))
        assert places == {"btc": 8, "eth": 6, "usdc-ethereum": 2, "pepe": None}  # None: at most 8
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
