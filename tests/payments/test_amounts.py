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


@pytest.mark.parametrize("total, rate, decimals, places, expected", [
    ("100.00", "3000", 18, 6, 33_334 * 10**12),  # ETH: 0.033333333... -> 0.033334 ETH, a millionth up
    ("100.00", "97000", 8, 8, 103_093),  # BTC at one satoshi: unchanged
    ("2902.42", "0.9998", 6, 2, 2_903_010_000),  # USDC: 2903.0006... -> 2903.01
    ("100.00", "3120", 18, 6, 32_052 * 10**12),  # the demo's ETH rate: 0.0320512... -> 0.032052
    ("3000.00", "3000", 18, 6, 10**18),  # already exact: not rounded further
])
def test_quoted_precision_rounds_up_to_whole_steps(total, rate, decimals, places, expected):
    amount = crypto_amount(Decimal(total), rate=Decimal(rate), decimals=decimals, places=places)
    assert amount == expected
    assert amount % 10 ** (decimals - places) == 0


def test_quoted_places_beyond_the_assets_decimals_are_refused():
    with pytest.raises(ValueError):
        crypto_amount(Decimal("10"), rate=Decimal("1"), decimals=6, places=7)


@settings(derandomize=True, database=None, max_examples=300)
@given(money, rates, st.sampled_from([(8, 8), (18, 6), (6, 2), (18, 0)]))
def test_the_smallest_quoted_step_that_covers_the_total(total, rate, precision):
    decimals, places = precision
    step = 10 ** (decimals - places)
    amount = crypto_amount(total, rate=rate, decimals=decimals, places=places)
    assert amount % step == 0
    assert fiat_value(amount, rate=rate, decimals=decimals) >= total
    assert fiat_value(amount - step, rate=rate, decimals=decimals) < total


@pytest.mark.parametrize("decimals, quote_decimals, expected", [(8, None, 8), (18, None, 8), (18, 6, 6),
                                                                 (6, 2, 2), (2, None, 2), (6, 9, 6)])
def test_quoted_places_default_to_eight_and_never_exceed_the_decimals(decimals, quote_decimals, expected):
    from anchorgpu.payments.amounts import quoted_places

    assert quoted_places(decimals, quote_decimals) == expected
