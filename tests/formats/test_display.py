"""One way to write numbers, money, crypto amounts and times in en, pt, fr and ko (anchorgpu.formats.display)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from django.template import Context, Template
from django.utils import translation

from anchorgpu.formats import display

NBSP = "\u00a0"  # French groups thousands with a no-break space
FR_GROUPED = f"91{NBSP}250,00 USD"


@pytest.fixture(params=["en", "pt", "fr", "ko"])
def lang(request):
    with translation.override(request.param):
        yield request.param


MONEY = {"en": "91,250.00 USD", "pt": "91.250,00 USD", "fr": FR_GROUPED, "ko": "91,250.00 USD"}
NEGATIVE = {"en": "-24.28 USD", "pt": "-24,28 USD", "fr": "-24,28 USD", "ko": "-24.28 USD"}
MILLION = {"en": "1,234,567", "pt": "1.234.567", "fr": f"1{NBSP}234{NBSP}567", "ko": "1,234,567"}
DECIMAL = {"en": "80.6", "pt": "80,6", "fr": "80,6", "ko": "80.6"}
PERCENT = {"en": "12.5%", "pt": "12,5%", "fr": f"12,5{NBSP}%", "ko": "12.5%"}
BTC = {"en": "0.00505469 BTC", "pt": "0,00505469 BTC", "fr": "0,00505469 BTC", "ko": "0.00505469 BTC"}
ETH = {"en": "1,000.032052 ETH", "pt": "1.000,032052 ETH", "fr": f"1{NBSP}000,032052 ETH", "ko": "1,000.032052 ETH"}
USDC = {"en": "2,903.10 USDC", "pt": "2.903,10 USDC", "fr": f"2{NBSP}903,10 USDC", "ko": "2,903.10 USDC"}
MOMENT = {"en": "2026-12-02 18:51 UTC", "pt": "02/12/2026 18:51 UTC", "fr": "02/12/2026 18:51 UTC",
          "ko": "2026-12-02 18:51 UTC"}
DAY = {"en": "2 Dec 2026", "fr": "2 décembre 2026", "ko": "2026년 12월 2일"}


def test_fiat_money_groups_and_separates_as_the_language_does(lang):
    assert display.money(Decimal("91250"), "USD") == MONEY[lang]
    assert display.money("91250.00", "USD") == MONEY[lang]  # stored price lines keep amounts as text


def test_negative_money_is_rounded_half_up_to_cents_with_its_code(lang):
    assert display.money(Decimal("-24.276"), "USD") == NEGATIVE[lang]
    assert display.money(Decimal("-0.004"), "USD") in ("0.00 USD", "0,00 USD")  # never "-0.00"


def test_money_refuses_floats():
    with pytest.raises(TypeError):
        display.money(24.28, "USD")


def test_unit_prices_keep_up_to_four_decimals_where_they_have_them(lang):
    sep = "." if lang in ("en", "ko") else ","
    assert display.unit_price(Decimal("3.4416"), "USD") == f"3{sep}4416 USD"
    assert display.unit_price(Decimal("2.50000000"), "USD") == f"2{sep}50 USD"  # a DecimalField's zeros dropped
    assert display.unit_price(Decimal("0.123456"), "USD") == f"0{sep}1235 USD"


def test_plain_numbers_and_percentages(lang):
    assert display.number(1234567) == MILLION[lang]
    assert display.number(80.55, 1) == DECIMAL[lang]
    assert display.percent(12.5, 1) == PERCENT[lang]


@pytest.mark.parametrize("bad", ["abc", "nan", "inf", True])
def test_what_is_not_a_number_is_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        display.number(bad)


def test_crypto_at_each_assets_quoted_precision(lang):
    assert display.crypto(505_469, 8, 8, "BTC") == BTC[lang]
    assert display.crypto(1_000_032_052 * 10**12, 18, 6, "ETH") == ETH[lang]
    assert display.crypto(2_903_100_000, 6, 2, "USDC") == USDC[lang]  # padded to the quoted two places


def test_crypto_never_hides_a_base_unit():
    with translation.override("en"):
        # A transfer that is not a whole quoted step (a partial payment) shows every digit it has.
        assert display.crypto(12_345_678_901_234_567, 18, 6, "ETH") == "0.012345678901234567 ETH"
        assert display.crypto(2_903_105_000, 6, 2, "USDC") == "2,903.105 USDC"
        assert display.crypto(0, 8, 8, "BTC") == "0.00000000 BTC"
        assert display.crypto(10**30 + 1, 18, 6) == "1,000,000,000,000.000000000000000001"
    with pytest.raises(TypeError):
        display.crypto(1.5, 8, 8)


def test_the_wallet_amount_has_a_dot_and_no_grouping_in_every_language(lang):
    assert display.wallet_amount(1_000_032_052 * 10**12, 18, 6) == "1000.032052"
    assert display.wallet_amount(505_469, 8, 8) == "0.00505469"
    assert display.wallet_amount(2_903_100_000, 6, 2) == "2903.10"
    assert Decimal(display.wallet_amount(12_345_678_901_234_567, 18, 6)).scaleb(18) == 12_345_678_901_234_567


def test_times_are_shown_in_utc_and_say_so(lang):
    moment = datetime(2026, 12, 2, 18, 51, tzinfo=UTC)
    assert display.moment(moment) == MOMENT[lang]
    assert display.moment(moment.astimezone(timezone(timedelta(hours=9)))) == MOMENT[lang]  # Seoul's clock: same
    assert display.moment_value(moment) == MOMENT[lang].removesuffix(" UTC")
    assert display.day(moment) == display.day(moment.date())  # a guide's date (no time) the same way
    if lang in DAY:
        assert display.day(moment) == DAY[lang]
    else:
        assert display.day(moment).lower() == "2 de dezembro de 2026"
    with pytest.raises(ValueError):
        display.moment(datetime(2026, 12, 2, 18, 51))


class _Asset:
    decimals, quoted_places, symbol = 18, 6, "ETH"


def render(source: str, **context) -> str:
    return Template("{% load locale_formats %}" + source).render(Context(context))


def test_the_template_filters_use_the_same_rules(lang):
    asset = _Asset()
    assert render("{{ v|money:'USD' }}", v=Decimal("91250")) == MONEY[lang]
    assert render("{{ v|crypto:a }}", v=1_000_032_052 * 10**12, a=asset) == ETH[lang]
    assert render("{{ v|crypto_number:a }}", v=1_000_032_052 * 10**12, a=asset) == ETH[lang].removesuffix(" ETH")
    assert render("{{ v|wallet_amount:a }}", v=1_000_032_052 * 10**12, a=asset) == "1000.032052"
    assert render("{{ v|share:1 }}", v=0.125) == PERCENT[lang]
    assert render("{{ v|moment }}", v=datetime(2026, 12, 2, 18, 51, tzinfo=UTC)) == MOMENT[lang]


def test_a_filter_given_no_number_shows_it_as_it_is_and_never_fails():
    assert render("{{ v|money:'USD' }}", v="n/a") == "n/a"
    assert render("[{{ v|num }}]", v=None) == "[]"
    assert render("{{ v|crypto:a }}", v="12x", a=_Asset()) == "12x"


def test_a_discount_lines_percentage_has_the_readers_decimal_separator():
    from anchorgpu.orders.lines import line_label

    line = {"kind": "discount", "params": {"days": 7, "percent": "12.50"}}
    with translation.override("pt"):
        assert "(12,5 %)" in line_label(line)
    with translation.override("en"):
        assert "(12.5 %)" in line_label(line)
