"""The checkout says the price and the term before "Place the order": every line and the total (what the order
then records), what each option offered adds for the term, and when the term starts and ends (a dated start,
or as soon as possible: from when access is ready, for the full term)."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import formats, timezone, translation

from anchorgpu.orders.models import Order
from tests.web.test_checkout import checkout_url, form_data

pytestmark = pytest.mark.django_db

OPTIONS = ["checkpoint-storage-1tb", "extra-nvme-4tb", "dedicated-ipv4"]



def price_url(query: str, slug: str = "h100-sxm-80gb") -> str:
    return reverse("checkout_price", kwargs={"slug": slug}) + "?" + query


def option_rows(page: str) -> dict[str, str]:
    """Each option row of the summary: its slug and its amount cell."""
    return dict(re.findall(r'<tr data-option="([\w-]+)"[^>]*>.*?<td class="num">([^<]+)</td></tr>', page, re.S))


def total_shown(page: str) -> str:
    return re.search(r'Total for the term, options included: ([\d.,]+ USD)', page).group(1)


def test_the_summary_shows_every_option_and_the_total_that_the_order_then_records(client, alice):
    page = client.get(checkout_url() + "?quantity=2&term=7&options=extra-nvme-4tb").content.decode()
    rows = option_rows(page)
    assert set(rows) == set(OPTIONS)  # every option offered, chosen or not
    assert rows["extra-nvme-4tb"].strip() == "36.00 USD"  # per unit: 2 × 18.00 for 7 days
    assert rows["checkpoint-storage-1tb"].strip() == "12.00 USD" and rows["dedicated-ipv4"].strip() == "6.00 USD"
    assert "chosen, in the total" in page

    # The customer ticks another option: the summary comes again (htmx), for what the form now holds.
    query = "quantity=2&term=7&start_mode=asap&options=extra-nvme-4tb&options=dedicated-ipv4"
    fragment = client.get(price_url(query), HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert fragment.status_code == 200 and 'hx-swap-oob="true"' in body
    total = total_shown(body)

    placed = client.post(checkout_url(), form_data(quantity="2", term="7", options=["extra-nvme-4tb",
                                                                                     "dedicated-ipv4"]))
    order = Order.objects.get()
    assert placed.status_code == 302
    assert total == f"{order.fiat_total:,.2f} USD"
    for line in order.lines:  # every line of the order was on the summary, with its amount
        assert f'{Decimal(line["amount"]):,.2f}' in body, line


def test_the_summary_follows_quantity_and_term(client, alice):
    three = client.get(price_url("quantity=1&term=3&start_mode=asap")).content.decode()
    thirty = client.get(price_url("quantity=3&term=30&start_mode=asap&options=extra-nvme-4tb")).content.decode()
    assert total_shown(three) != total_shown(thirty)
    assert option_rows(thirty)["extra-nvme-4tb"].strip() == "180.00 USD"  # 3 × 60.00 for 30 days
    assert "Options for a 30-day term" in thirty


def test_a_choice_that_cannot_be_priced_says_why_with_a_400(client, alice):
    response = client.get(price_url("quantity=0&term=7"))
    assert response.status_code == 400 and "Quantity must be at least 1" in response.content.decode()


def test_a_dated_term_says_when_it_starts_and_ends(client, alice):
    start = (timezone.now() + timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    query = f"quantity=1&term=7&start_mode=date&start={start:%Y-%m-%dT%H:%M}"
    page = client.get(price_url(query)).content.decode()
    with translation.override("en"):
        starts = formats.date_format(start, "SHORT_DATETIME_FORMAT")
        ends = formats.date_format(start + timedelta(days=7), "SHORT_DATETIME_FORMAT")
    assert f"The term starts on {starts} UTC and ends on {ends} UTC: 7 days." in page
    # The checkout page itself, opened with that start, says the same.
    assert f"starts on {starts} UTC" in client.get(checkout_url() + f"?term=7&start={start:%Y-%m-%dT%H:%M}") \
        .content.decode()


def test_an_asap_term_starts_when_access_is_ready_and_lasts_the_full_term(client, alice):
    for page in (client.get(checkout_url() + "?term=30").content.decode(),
                 client.get(price_url("term=30&start_mode=asap&start=2031-01-01T00:00")).content.decode()):
        assert ("the term starts when your access is ready, after your payment is confirmed, and lasts the full "
                "30 days from then") in page
        assert "The term starts on" not in page  # a start typed but not chosen is not the term's


@pytest.mark.parametrize("start", ["9999-12-31T23:59", "2200-01-01T00:00", "0001-01-01T00:00"])
def test_a_start_past_the_horizon_in_the_link_shows_no_dates_and_no_500(client, alice, start):
    url = reverse("checkout", kwargs={"slug": "h100-sxm-80gb"}) + f"?start_mode=date&start={start}"
    response = client.get(url)
    assert response.status_code == 200
    assert "The term starts on" not in response.content.decode()
