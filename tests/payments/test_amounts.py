from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.payments.amounts import crypto_amount, fiat_value


@pytest.mark.parametrize("total, rate, decimals, expected", [
    ("2902.42", "1", 6, 2_902_420_000),  # USDT / USDC
    ("2902.42", "0.9998", 6, 2_903_000_601),  # rounds up: 2903000600.12... base units
    ("100.00", "97000", 8, 103_093),  # BTC: 103092.78... satoshi -> 103093
    ("100.00", "3000", 18, 33_333_333_333_333_334),  # ETH in wei
    ("1000000.00", "0.0001", 18, 10**28),  # big totals stay exact
])
def test_known_amounts(total, rate, decimals, expected):
    assert crypto_amount(Decimal(total), rate=Decimal(rate), decimals=decimals) == expected


@pytest.mark.parametrize("total, rate, decimals, error", [
    (Decimal("0"), Decimal("1"), 6, ValueError), (Decimal("10"), Decimal("-1"), 6, ValueError),
    (Decimal("10"), Decimal("1"), 31, ValueError), (10.0, Decimal("1"), 6, TypeError),
])
def test_bad_input(total, rate, decimals, error):
    with pytest.raises(error):
        crypto_amount(total, rate=rate, decimals=decimals)


money = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("1000000"), places=2)
rates = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal("200000"), places=4)


@settings(derandomize=True, database=None, max_examples=400)
@given(money, rates, st.sampled_from([0, 6, 8, 18]))
def test_the_smallest_amount_that_covers_the_total(total, rate, decimals):
    amount = crypto_amount(total, rate=rate, decimals=decimals)
    assert fiat_value(amount, rate=rate, decimals=decimals) >= total
    assert fiat_value(amount - 1, rate=rate, decimals=decimals) < total
