"""Dates far in the future are refused on the operators' forms with a message, never saved and never a 500:
a price list starting in 9999, a maintenance window in 275760, a rate or a transfer seen in the future, and
the lists' date filters asked for such a year."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from anchorgpu.allocation import rules as allocation_rules
from anchorgpu.allocation import services as allocation_services
from anchorgpu.allocation.errors import InvalidRequest
from anchorgpu.allocation.models import Booking
from anchorgpu.catalog import rules as catalog_rules
from anchorgpu.catalog.models import PriceList
from anchorgpu.fleet.models import Host
from anchorgpu.payments.models import Asset, Rate
from tests import factories as f
from tests.catalog.test_admin import _current_rows, _price_list_post

pytestmark = pytest.mark.django_db

FAR = [("9999-12-31", "23:59:59"), ("9999-01-01", "00:00:00"), ("275760-09-13", "00:00:00"),
       ("10000-01-01", "00:00:00")]


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _errors(response) -> str:
    text = response.content.decode()
    assert response.status_code == 200, text[:2000]
    return text


@pytest.fixture
def price_list():
    p = f.product("h200", memory=141)
    return f.price_list({p: "3.10"})


@pytest.mark.parametrize(("day", "time"), FAR)
def test_a_price_list_far_in_the_future_is_refused(admin_client, price_list, day, time):
    before = PriceList.objects.get(pk=price_list.pk).valid_from
    data = _price_list_post(price_list, *_current_rows(price_list), valid_from_0=day, valid_from_1=time)
    text = _errors(admin_client.post(_url(PriceList, "change", price_list.pk), data))
    assert "errornote" in text
    assert (f"A price list starts at most {catalog_rules.PRICE_LIST_AHEAD.days} days from now." in text
            or "Enter a valid date." in text)
    assert PriceList.objects.get(pk=price_list.pk).valid_from == before


def test_a_price_list_for_next_season_is_taken(admin_client, price_list):
    start = datetime.now(UTC) + timedelta(days=90)
    data = _price_list_post(price_list, *_current_rows(price_list), valid_from_0=f"{start:%Y-%m-%d}",
                            valid_from_1="00:00:00")
    assert admin_client.post(_url(PriceList, "change", price_list.pk), data).status_code == 302
    assert PriceList.objects.get(pk=price_list.pk).valid_from.date() == start.date()


@pytest.fixture
def host():
    return f.host(f.product("h100"), cards=2)


@pytest.mark.parametrize(("day", "time"), FAR)
def test_a_maintenance_window_far_in_the_future_is_refused(admin_client, host, day, time):
    data = {"reason": "firmware", "start_0": day, "start_1": time, "end_0": day, "end_1": "23:59:59"}
    text = _errors(admin_client.post(_url(Host, "maintenance", host.pk), data))
    assert (f"A maintenance window starts at most {allocation_rules.MAINTENANCE_AHEAD.days} days from now." in text
            or "Enter a valid date." in text)
    assert not Booking.objects.filter(kind=Booking.Kind.MAINTENANCE).exists()


def test_a_maintenance_window_that_would_last_years_is_refused(admin_client, host):
    start = datetime.now(UTC) + timedelta(days=1)
    data = {"reason": "firmware", "start_0": f"{start:%Y-%m-%d}", "start_1": "00:00:00",
            "end_0": "9999-12-31", "end_1": "23:59:59"}
    text = _errors(admin_client.post(_url(Host, "maintenance", host.pk), data))
    assert f"A maintenance window lasts at most {allocation_rules.MAX_MAINTENANCE.days} days" in text
    assert not Booking.objects.filter(kind=Booking.Kind.MAINTENANCE).exists()


def test_the_service_refuses_a_far_window_too(host):
    start = datetime(9999, 12, 30, tzinfo=UTC)
    with pytest.raises(InvalidRequest, match="starts at most"):
        allocation_services.host_enter_maintenance(host=host, start=start, end=start + timedelta(hours=1),
                                                   actor="test", reason="firmware")


@pytest.mark.parametrize(("day", "time"), FAR)
def test_a_rate_observed_far_in_the_future_is_refused(admin_client, day, time):
    asset = Asset.objects.create(code="btc", symbol="BTC", name="Bitcoin", network="bitcoin",
                                 network_name="Bitcoin", scheme="btc", decimals=8)
    data = {"asset": asset.pk, "currency": "USD", "price": "60000", "source": "an exchange",
            "observed_at_0": day, "observed_at_1": time}
    text = _errors(admin_client.post(_url(Rate, "add"), data))
    assert "A rate cannot have been observed in the future." in text or "Enter a valid date." in text
    assert not Rate.objects.exists()


@pytest.mark.parametrize("year", ["9999", "275760", "0", "-1", "x"])
@pytest.mark.parametrize(("model", "field"), [(PriceList, "valid_from"), (Rate, "observed_at"),
                                              (Booking, "starts_at")])
def test_a_date_filter_for_an_impossible_year_is_not_a_500(admin_client, model, field, year):
    response = admin_client.get(_url(model, "changelist"), {f"{field}__year": year, f"{field}__month": "12",
                                                            f"{field}__day": "31"})
    assert response.status_code in (200, 302)


def test_every_list_with_a_date_filter_bounds_it():
    from django.contrib import admin

    from anchorgpu.admin_base import BoundedDateChangeList

    lists = [model_admin for model_admin in admin.site._registry.values() if model_admin.date_hierarchy]
    assert len(lists) >= 6
    unbounded = [type(model_admin).__name__ for model_admin in lists
                 if not issubclass(model_admin.get_changelist(None), BoundedDateChangeList)]
    assert not unbounded


@pytest.mark.parametrize(("day", "time"), FAR)
def test_a_transfer_seen_far_in_the_future_is_refused(admin_client, day, time):
    from anchorgpu.payments.models import Transfer
    from tests import shop

    shop.load_shop()
    order = shop.place(shop.customer())
    data = {"txid": shop.TXID_BTC, "index": "0", "amount": str(order.quote.amount), "confirmations": "6",
            "seen_at_0": day, "seen_at_1": time, "sender": "", "note": ""}
    url = reverse("admin:orders_order_record_transfer", args=[order.pk])
    text = _errors(admin_client.post(url, data))
    assert "A transfer cannot have been seen in the future" in text or "Enter a valid date." in text
    assert not Transfer.objects.exists()
