"""Pricing: line items from a price list, the total rounded once. Pure, no database."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest

from anchorgpu.catalog.pricing import Line, OptionPrice, PriceList, price
from anchorgpu.catalog.rules import RuleError

D = Decimal


def price_list(**overrides) -> PriceList:
    values = dict(
        currency="USD",
        rate_per_card_hour={"h100": D("2.50"), "b200": D("4.10"), "tiny": D("0.0123"), "one": D("1")},
        term_discount_percent={3: D("0"), 7: D("5"), 30: D("15")},
        options={
            "checkpoint": OptionPrice("checkpoint", "Checkpoint storage", {3: D("5"), 7: D("12"), 30: D("40")}),
            "nvme": OptionPrice("nvme", "Extra local NVMe", {3: D("4"), 7: D("9.50"), 30: D("30")}, per_unit=True),
            "ipv4": OptionPrice("ipv4", "Dedicated IPv4", {30: D("6")}),
            "half-a": OptionPrice("half-a", "Half cent A", {3: D("0.005")}),
            "half-b": OptionPrice("half-b", "Half cent B", {3: D("0.005")}),
        },
    )
    values.update(overrides)
    return PriceList(**values)


def quote(**kwargs):
    args = dict(product="h100", product_name="H100 SXM", cards_per_unit=1, quantity=1, term_days=3)
    args.update(kwargs)
    return price(price_list(), **args)


def test_cards_line_is_rate_times_cards_times_hours():
    result = quote(quantity=2, term_days=3)
    assert result.currency == "USD"
    assert result.lines == (Line("cards", "H100 SXM: 2 card(s) × 72 h", 144, D("2.50"), D("360.00"),
                                 {"product": "H100 SXM", "cards": 2, "hours": 72}),)
    assert result.total == D("360.00")


def test_term_discount_is_a_negative_line_on_the_cards_amount():
    result = quote(quantity=2, term_days=7)
    cards, discount = result.lines
    assert cards.amount == D("840.00")  # 2.50 × 2 × 168
    assert discount == Line("discount", "7-day term discount (5 %)", 1, D("-42.00"), D("-42.00"),
                           {"days": 7, "percent": "5"})
    assert result.total == D("798.00")


def test_a_zero_discount_adds_no_line():
    assert [line.kind for line in quote(term_days=3).lines] == ["cards"]


def test_thirty_day_discount_label_has_no_trailing_zeros():
    result = price(price_list(term_discount_percent={30: D("12.50")}), product="h100", product_name="H100",
                   cards_per_unit=1, quantity=1, term_days=30)
    assert result.lines[1].description == "30-day term discount (12.5 %)"
    assert result.lines[1].amount == D("-225.0000")  # 2.50 × 720 × 12.5 %
    assert result.total == D("1575.00")


def test_a_lot_is_priced_by_its_cards_and_per_unit_options_by_lots():
    result = price(price_list(), product="b200", product_name="B200 lot", cards_per_unit=2, quantity=3,
                   term_days=3, options=["nvme", "checkpoint"])
    cards, nvme, checkpoint = result.lines
    assert cards.description == "B200 lot: 6 card(s) × 72 h"
    assert cards.amount == D("4.10") * 6 * 72
    assert (nvme.quantity, nvme.unit_price, nvme.amount) == (3, D("4"), D("12"))  # per lot, not per card
    assert (checkpoint.quantity, checkpoint.amount) == (1, D("5"))  # once per order
    assert result.total == D("1788.20")  # 1771.20 + 12 + 5


def test_options_are_priced_for_the_term_in_the_order_given():
    result = quote(quantity=2, term_days=7, options=["checkpoint", "nvme"])
    assert [(line.kind, line.description, line.amount) for line in result.lines] == [
        ("cards", "H100 SXM: 2 card(s) × 168 h", D("840.00")),
        ("discount", "7-day term discount (5 %)", D("-42.00")),
        ("option", "Checkpoint storage", D("12")),
        ("option", "Extra local NVMe", D("19.00")),
    ]
    assert result.total == D("829.00")
    assert result.subtotal_exact == D("829.00")


def test_lines_are_exact_and_the_total_is_rounded_once():
    # 0.0123 × 168 = 2.0664, less 5 % = 1.96308 -> 1.96. Rounding each line first would give
    # 2.07 - 0.10 = 1.97.
    result = quote(product="tiny", product_name="Tiny", term_days=7)
    assert [line.amount for line in result.lines] == [D("2.0664"), D("-0.10332")]
    assert result.subtotal_exact == D("1.96308")
    assert result.total == D("1.96")
    rounded_each = sum(line.amount.quantize(D("0.01"), rounding=ROUND_HALF_UP) for line in result.lines)
    assert rounded_each == D("1.97") != result.total


def test_two_half_cents_make_one_cent_not_two():
    result = quote(product="one", product_name="One", term_days=3, options=["half-a", "half-b"])
    assert result.subtotal_exact == D("72.010")
    assert result.total == D("72.01")
    rounded_each = sum(line.amount.quantize(D("0.01"), rounding=ROUND_HALF_UP) for line in result.lines)
    assert rounded_each == D("72.02")


def test_the_total_rounds_half_up_not_to_even():
    result = quote(product="one", product_name="One", term_days=3, options=["half-a"])
    assert result.subtotal_exact == D("72.005")
    assert result.total == D("72.01")  # banker's rounding would give 72.00
    assert result.total.as_tuple().exponent == -2


def test_the_minor_unit_comes_from_the_price_list():
    prices = price_list(minor_unit=D("1"), currency="JPY")
    result = price(prices, product="tiny", product_name="Tiny", cards_per_unit=1, quantity=1, term_days=7)
    assert result.total == D("2")
    assert result.currency == "JPY"


def test_unknown_option_is_refused():
    with pytest.raises(RuleError, match="Unknown option “gold-support”"):
        quote(options=["gold-support"])


def test_an_option_listed_twice_is_refused():
    with pytest.raises(RuleError, match="The option “nvme” is listed twice"):
        quote(options=["nvme", "checkpoint", "nvme"])


def test_an_option_not_offered_for_the_term_is_refused():
    with pytest.raises(RuleError, match="“Dedicated IPv4” is not offered for a 3-day term"):
        quote(term_days=3, options=["ipv4"])
    assert quote(term_days=30, options=["ipv4"]).lines[-1].amount == D("6")


def test_a_product_without_a_rate_is_refused():
    with pytest.raises(RuleError, match="MI300X has no price in the current price list"):
        quote(product="mi300x", product_name="MI300X")


@pytest.mark.parametrize("term", [0, 5, 14])
def test_bad_terms_are_refused(term):
    with pytest.raises(RuleError, match="Terms are 3, 7, 30 days"):
        quote(term_days=term)


@pytest.mark.parametrize("quantity", [0, -2, 1001])
def test_bad_quantities_are_refused(quantity):
    with pytest.raises(RuleError, match="Quantity must be"):
        quote(quantity=quantity)


def test_a_fractional_quantity_is_refused_not_priced():
    with pytest.raises(RuleError, match="whole number"):
        quote(quantity=D("1.5"))


def test_amounts_are_decimals():
    result = quote(quantity=2, term_days=7, options=["nvme"])
    assert all(isinstance(line.amount, Decimal) and isinstance(line.unit_price, Decimal) for line in result.lines)
    assert isinstance(result.total, Decimal)
