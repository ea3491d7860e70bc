"""Prices are data the operator edits on the price list's page."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from anchorgpu.catalog.models import PriceList, Product
from tests import factories as f

pytestmark = pytest.mark.django_db


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _price_list_post(pl, rates, discounts, option_prices, **changes):
    data = {"name": pl.name, "currency": pl.currency, "valid_from_0": f"{pl.valid_from:%Y-%m-%d}",
            "valid_from_1": f"{pl.valid_from:%H:%M:%S}", "is_active": "on" if pl.is_active else ""}
    for prefix, rows, keys in (("rates", rates, ("product", "rate_per_card_hour")),
                               ("discounts", discounts, ("term_days", "percent")),
                               ("option_prices", option_prices, ("option", "term_days", "price"))):
        data.update({f"{prefix}-TOTAL_FORMS": len(rows), f"{prefix}-INITIAL_FORMS": sum(1 for r in rows if r[0]),
                     f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000})
        for i, (obj, *values) in enumerate(rows):
            data[f"{prefix}-{i}-id"] = obj.pk if obj else ""
            data[f"{prefix}-{i}-price_list"] = pl.pk
            data.update({f"{prefix}-{i}-{k}": v for k, v in zip(keys, values)})
    data.update(changes)
    return data


@pytest.fixture
def prices():
    p = f.product("h200", memory=141)
    pl = f.price_list({p: "3.10"})
    opt = f.option("dedicated-ipv4", {30: "4"}, pl)
    return p, pl, opt


def _current_rows(pl):
    rates = [(r, r.product_id, r.rate_per_card_hour) for r in pl.rates.all()]
    discounts = [(d, d.term_days, d.percent) for d in pl.discounts.order_by("term_days")]
    options = [(o, o.option_id, o.term_days, o.price) for o in pl.option_prices.all()]
    return rates, discounts, options


def test_operator_edits_prices_inline(admin_client, prices):
    p, pl, opt = prices
    rates, discounts, options = _current_rows(pl)
    rates = [(rates[0][0], p.pk, "3.40")]
    options.append((None, opt.pk, 7, "1.50"))
    response = admin_client.post(_url(PriceList, "change", pl.pk), _price_list_post(pl, rates, discounts, options))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert pl.rates.get().rate_per_card_hour == Decimal("3.40")
    assert pl.option_prices.get(term_days=7).price == Decimal("1.50")


def test_duplicate_rate_and_negative_price_are_form_errors(admin_client, prices):
    p, pl, opt = prices
    rates, discounts, options = _current_rows(pl)
    twice = rates + [(None, p.pk, "9.99")]
    response = admin_client.post(_url(PriceList, "change", pl.pk), _price_list_post(pl, twice, discounts, options))
    assert response.status_code == 200
    negative = [(rates[0][0], p.pk, "-1")]
    response = admin_client.post(_url(PriceList, "change", pl.pk), _price_list_post(pl, negative, discounts, options))
    assert response.status_code == 200
    too_much = [(discounts[0][0], discounts[0][1], "95")] + discounts[1:]
    response = admin_client.post(_url(PriceList, "change", pl.pk), _price_list_post(pl, rates, too_much, options))
    assert response.status_code == 200
    assert pl.rates.get().rate_per_card_hour == Decimal("3.10")
    assert not pl.rates.filter(rate_per_card_hour=Decimal("9.99")).exists()


def test_bad_currency_is_a_form_error(admin_client, prices):
    _, pl, _ = prices
    response = admin_client.post(_url(PriceList, "change", pl.pk),
                                 _price_list_post(pl, *_current_rows(pl), currency="U$D"))
    assert response.status_code == 200
    assert "three-letter ISO 4217 code" in response.content.decode()
    pl.refresh_from_db()
    assert pl.currency == "USD"


def test_price_list_in_effect_is_marked(admin_client, prices):
    _, pl, _ = prices
    page = admin_client.get(_url(PriceList, "changelist"))
    assert page.context["cl"].result_list.get(pk=pl.pk)._in_effect is True


def test_product_slug_is_set_once(admin_client, prices):
    p, _, _ = prices
    page = admin_client.get(_url(Product, "change", p.pk))
    assert page.status_code == 200
    assert 'name="slug"' not in page.content.decode()
    assert 'name="slug"' in admin_client.get(_url(Product, "add")).content.decode()
