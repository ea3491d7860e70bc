from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from anchorgpu.allocation import services
from anchorgpu.catalog.models import Product
from anchorgpu.demo import FLEET, PRODUCTS
from tests import factories as f

pytestmark = pytest.mark.django_db

REQUIRED = {"product", "name", "memory_gb_per_card", "cards_per_unit", "stack", "units_free_now",
            "earliest_start", "price", "currency"}


def _by_slug(response):
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/json")
    return {o["product"]: o for o in response.json()}


def _error(response, status=400):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] and body["error"]["message"]
    return body["error"]


def test_every_product_listed_with_required_fields(client, demo_shop):
    offers = _by_slug(client.get("/api/v1/offers?term=7&quantity=2"))
    assert set(offers) == {slug for slug, *_ in PRODUCTS}
    for offer in offers.values():
        assert REQUIRED <= set(offer)
        assert set(offer["price"]) == {"3", "7", "30"}
        assert offer["currency"] == "USD"
        for value in offer["price"].values():
            Decimal(value)  # a decimal string, not a float
            assert isinstance(value, str)
    b200 = offers["b200-lot-2x180gb"]
    assert (b200["cards_per_unit"], b200["memory_gb_per_card"], b200["stack"]) == (2, 180, "blackwell")
    assert offers["mi300x-192gb"]["stack"] == "rocm"


def test_figures_follow_fleet_and_price_list(client, demo_shop):
    hosts = sum(n for _site, slug, n, _c, _p in FLEET if slug == "h100-sxm-80gb")
    h100 = _by_slug(client.get("/api/v1/offers?term=7&quantity=2"))["h100-sxm-80gb"]
    assert h100["units_free_now"] == hosts * 8
    # 2 cards × 7 days × 24 h × 2.19, less the 7-day discount of 5 %.
    assert h100["price"]["7"] == str((Decimal("2.19") * 2 * 7 * 24 * Decimal("0.95")).quantize(Decimal("0.01")))
    assert h100["price"]["3"] == str((Decimal("2.19") * 2 * 3 * 24).quantize(Decimal("0.01")))
    # B200: a lot is two cards, so one lot costs 2 × the card rate.
    b200 = _by_slug(client.get("/api/v1/offers?term=3&quantity=1"))["b200-lot-2x180gb"]
    assert b200["price"]["3"] == str((Decimal("4.49") * 2 * 3 * 24).quantize(Decimal("0.01")))


def test_units_free_and_earliest_start_track_bookings(client, db):
    p = f.product("test-gpu")
    f.host(p, cards=4)
    f.price_list({p: "1.00"})
    start = timezone.now() - timedelta(minutes=1)
    booking = services.hold_place(product=p, quantity=3, start=start, term_days=3)
    offer = _by_slug(client.get("/api/v1/offers?term=3&quantity=2"))["test-gpu"]
    assert offer["units_free_now"] == 1
    assert offer["earliest_start"] == booking.ends_at.isoformat().replace("+00:00", "Z")
    offer = _by_slug(client.get("/api/v1/offers?term=3&quantity=1"))["test-gpu"]
    assert offer["earliest_start"] is not None
    assert abs((timezone.datetime.fromisoformat(offer["earliest_start"]) - timezone.now()).total_seconds()) < 60


def test_quantity_beyond_the_fleet_has_no_earliest_start(client, demo_shop):
    offers = _by_slug(client.get("/api/v1/offers?term=30&quantity=999"))
    assert all(o["earliest_start"] is None for o in offers.values())


def test_requested_start_moves_earliest_start(client, demo_shop):
    later = (timezone.now() + timedelta(days=10)).replace(microsecond=0)
    stamp = later.isoformat().replace("+00:00", "Z")
    offers = _by_slug(client.get("/api/v1/offers", {"term": 7, "quantity": 1, "start": stamp}))
    assert offers["h200-141gb"]["earliest_start"] == stamp


def test_environment_filters_products(client, demo_shop):
    offers = _by_slug(client.get("/api/v1/offers?environment=pytorch-rocm63"))
    assert set(offers) == {"mi300x-192gb"}
    offers = _by_slug(client.get("/api/v1/offers?environment=pytorch-cuda124"))
    assert set(offers) == {"a100-sxm-80gb", "h100-sxm-80gb", "h200-141gb"}


@pytest.mark.parametrize("query, field", [
    ("quantity=0", "quantity"),
    ("quantity=-2", "quantity"),
    ("quantity=1001", "quantity"),
    ("quantity=100000000000000000000000", "quantity"),
    ("quantity=abc", "quantity"),
    ("quantity=1.5", "quantity"),
    ("term=5", "term"),
    ("term=seven", "term"),
    ("term=", None),  # empty falls back to the default: valid
    ("start=2001-01-01T00:00:00Z", "start"),
    ("start=yesterday", "start"),
    ("start=2999-01-01T00:00:00Z", "start"),
    ("environment=no-such-env", "environment"),
    ("environment=../../etc", "environment"),
    ("quantity=1&quantity=2", "request"),
    ("quanity=2", "request"),
    ("%ff%fe=%00", "request"),
    ("quantity==2", "quantity"),
])
def test_bad_query_is_a_clear_400(client, demo_shop, query, field):
    response = client.get("/api/v1/offers?" + query)
    if field is None:
        assert response.status_code == 200
        return
    error = _error(response)
    assert error["code"] == "invalid_request"
    assert field in error["fields"], error


def test_detail_prices_lines_and_checks_environment(client, demo_shop):
    r = client.get("/api/v1/offers/h100-sxm-80gb?quantity=3&term=30&environment=pytorch-cuda128"
                   "&options=extra-nvme-4tb,dedicated-ipv4")
    assert r.status_code == 200, r.content
    body = r.json()
    kinds = [line["kind"] for line in body["lines"]]
    assert kinds == ["cards", "discount", "option", "option"]
    assert sum(Decimal(line["amount"]) for line in body["lines"]).quantize(Decimal("0.01")) == Decimal(body["total"])
    assert body["total"] == body["price"]["30"]
    nvme = body["lines"][2]
    assert (nvme["quantity"], Decimal(nvme["amount"])) == (3, Decimal("180"))  # per unit: 3 × 60.00

    error = _error(client.get("/api/v1/offers/h100-sxm-80gb?environment=pytorch-rocm63"))
    assert "environment" in error["fields"]
    assert "ROCm" in error["fields"]["environment"][0]
    error = _error(client.get("/api/v1/offers/b200-lot-2x180gb?environment=pytorch-cuda124"))
    assert "Blackwell" in error["fields"]["environment"][0]
    error = _error(client.get("/api/v1/offers/h100-sxm-80gb?options=free-gpus"))
    assert "options" in error["fields"]


def test_unknown_product_and_method(client, demo_shop):
    _error(client.get("/api/v1/offers/no-such-card"), status=404)
    response = client.post("/api/v1/offers")
    _error(response, status=405)
    assert response["Allow"] == "GET, HEAD"
    Product.objects.update(is_active=False)
    assert client.get("/api/v1/offers").json() == []


@pytest.mark.parametrize("offset", ["+23:59", "-23:59:59", "+05:30", "-00:00"])
def test_any_time_zone_offset_is_read_as_utc(client, demo_shop, offset):
    when = (timezone.now() + timedelta(days=20)).replace(microsecond=0)
    local = when.astimezone(timezone.get_fixed_timezone(0)).strftime("%Y-%m-%dT%H:%M:%S")
    from datetime import datetime
    stamp = datetime.fromisoformat(local + offset)  # the same wall time in another zone
    response = client.get("/api/v1/offers", {"term": 7, "quantity": 1, "start": local + offset})
    h200 = _by_slug(response)["h200-141gb"]
    assert h200["earliest_start"].endswith("Z")
    assert datetime.fromisoformat(h200["earliest_start"]) == stamp
    detail = client.get("/api/v1/offers/h200-141gb", {"start": local + offset})
    assert detail.status_code == 200 and detail.json()["earliest_start"].endswith("Z")
    assert client.get("/en/", {"start": local + offset}).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/offers/%00", "/api/v1/offers/h100%00", "/api/v1/offers/%E2%82%AC",
                                  "/api/v1/offers/" + "x" * 5000])
def test_odd_product_paths_are_404_json(client, demo_shop, path):
    _error(client.get(path), status=404)


def test_unreadable_request_is_a_json_400(client, demo_shop):
    query = "&".join(f"p{i}=1" for i in range(1500))  # over Django's field limit
    error = _error(client.get("/api/v1/offers?" + query))
    assert error["code"] in {"bad_request", "invalid_request"}


def test_a_far_future_maintenance_window_does_not_break_the_catalog(client, demo_shop):
    from anchorgpu.allocation.models import Booking, BookingDevice
    from anchorgpu.fleet.models import Host
    host = Host.objects.filter(product__slug="h200-141gb").first()
    start, end = timezone.now(), timezone.datetime(9999, 12, 31, tzinfo=timezone.get_fixed_timezone(0))
    booking = Booking.objects.create(kind="maintenance", host=host, starts_at=start, ends_at=end, reason="legacy row")
    BookingDevice.objects.bulk_create([BookingDevice(booking=booking, device=d, starts_at=start, ends_at=end)
                                       for d in host.devices.all()])
    offers = _by_slug(client.get("/api/v1/offers?term=30&quantity=16"))
    assert offers["h200-141gb"]["earliest_start"] is None  # half the H200 fleet is gone for good
    assert offers["h200-141gb"]["units_total"] == 16
    assert client.get("/en/?term=30&quantity=16").status_code == 200


def test_totals_round_to_the_currency_minor_unit(client, db):
    p = f.product("yen-gpu")
    f.host(p, cards=1)
    f.price_list({p: "123.4567"}, currency="JPY", discounts={3: "0", 7: "5", 30: "15"})
    offer = _by_slug(client.get("/api/v1/offers?term=7&quantity=1"))["yen-gpu"]
    assert offer["currency"] == "JPY"
    assert offer["price"]["7"] == str((Decimal("123.4567") * 168 * Decimal("0.95")).quantize(Decimal("1")))
