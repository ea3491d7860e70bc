"""Portuguese pages write every figure the Portuguese way, money and crypto alike (issue 20, item 5).

Before: the pt planner printed "3.4416 USD" beside "1.057" tokens/s, the order page "0.00505469 BTC" beside
"91.250,00 USD", an ETH amount with 17 decimals, and the invoice a discount of "-24,276".
"""

from __future__ import annotations

import io
import re
from decimal import Decimal

import pytest
from django.core import mail
from django.db import transaction
from django.urls import reverse
from django.utils import translation
from pypdf import PdfReader

from anchorgpu.billing import pdf
from anchorgpu.orders.models import Order
from anchorgpu.orders.notify import emails_send_due
from tests import shop

pytestmark = pytest.mark.django_db

# A pt figure: groups of three after dots, a comma before the decimals.
PT_MONEY = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d{2}$")
PT_UNIT = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d{2,4}$")
AMOUNT = r"(-?[\d.,]+)(?:\s|&nbsp;)"


def amounts(page: str, code: str) -> list[str]:
    return re.findall(AMOUNT + re.escape(code) + r"\b(?! =)", page)  # "1 BTC = …" is the rate's unit


def assert_pt(page: str, code: str, pattern: re.Pattern = PT_UNIT, at_least: int = 1) -> list[str]:
    found = amounts(page, code)
    assert len(found) >= at_least, f"fewer than {at_least} {code} amounts on the page"
    wrong = [a for a in found if not pattern.match(a)]
    assert not wrong, f"{code} amounts not written the Portuguese way: {wrong}"
    return found



def pt_order(user, *, asset: str = "btc", term_days: int = 7) -> Order:
    order = shop.place(user, asset=asset, term_days=term_days, options=("dedicated-ipv4",))
    Order.objects.filter(pk=order.pk).update(language="pt")
    return Order.objects.get(pk=order.pk)


PLAN = {"preset": "llama-3.1-8b", "method": "lora", "lora_rank": "16", "optimizer": "adamw",
        "precision": "bf16_mixed", "seq_len": "2048", "micro_batch": "1", "grad_checkpointing": "on",
        "parallel": "single", "gpus": "1", "headroom": "10", "term": "7",
        "tokens_per_epoch": "600000000", "epochs": "2"}


def test_the_pt_planner_writes_prices_and_costs_per_million_tokens_the_portuguese_way(client, alice):
    response = client.get("/pt/planner/", PLAN)
    assert response.status_code == 200
    page = response.content.decode()
    assert response.context["run"]["rows"], "the run plan has no rows to show"
    assert_pt(page, "USD", at_least=4)  # prices per term, per run and per million tokens (up to 4 decimals)
    assert not re.search(r"\d\.\d{1,2} USD|\d\.\d{4} USD", page)  # "3.4416 USD": an English decimal point
    # Throughput in the same convention: "1.057" is one thousand and fifty-seven, beside "3,4416 USD".
    rates = [r["tokens_per_s"] for r in response.context["run"]["rows"] if r["tokens_per_s"] >= 1000]
    assert rates
    assert f"{round(rates[0]):,}".replace(",", ".") in page


def test_the_pt_catalog_writes_every_price_the_portuguese_way(client, alice):
    page = client.get("/pt/?quantity=2&term=30").content.decode()
    assert_pt(page, "USD", PT_MONEY, at_least=10)


@pytest.mark.parametrize("asset, places", [("btc", 8), ("eth", 6), ("usdc-ethereum", 2)])
def test_the_pt_order_page_writes_crypto_and_fiat_with_one_decimal_separator(client, alice, asset, places):
    order = pt_order(alice, asset=asset)
    page = client.get("/pt" + reverse("order", kwargs={"reference": order.reference})[3:]).content.decode()
    symbol = order.quote.asset.symbol
    fiat = assert_pt(page, "USD", PT_UNIT, at_least=2)
    coins = assert_pt(page, symbol, re.compile(r"^\d{1,3}(\.\d{3})*,\d{%d}$" % places))
    assert all("," in a for a in fiat + coins)  # one separator for both on the page
    # The copy button carries the exact amount as a wallet takes it: a dot, no grouping.
    wallet = format(Decimal(order.quote.amount).scaleb(-order.quote.asset.decimals), f".{places}f")
    assert f'data-copy="{wallet}"' in page
    assert f'data-copy="{order.quote.address}"' in page
    assert "Copied" in page or "Copiado" in page  # the confirmation text the script shows


def test_the_pt_invoice_writes_lines_discount_total_and_crypto_the_portuguese_way(alice):
    order = pt_order(alice, term_days=7)  # a 7-day term: a 5 % discount line, a negative amount
    with transaction.atomic():
        shop.pay(order, txid=f"{order.pk:064x}")
    order = Order.objects.select_related("invoice").get(pk=order.pk)
    reader = PdfReader(io.BytesIO(pdf.invoice_pdf(order.invoice)))
    text = "\n".join(page.extract_text() for page in reader.pages)
    found = assert_pt(text, "USD", PT_UNIT, at_least=3)
    negatives = [a for a in found if a.startswith("-")]
    assert negatives and all(PT_MONEY.match(a) for a in negatives), found  # "-24,28 USD", not "-24,276"
    assert_pt(text, "BTC", re.compile(r"^\d{1,3}(\.\d{3})*,\d{8}$"))


def test_the_pt_order_email_writes_the_amount_and_expiry_the_portuguese_way(settings, alice):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    order = pt_order(alice, asset="eth")
    emails_send_due()
    body = next(m.body for m in mail.outbox if order.reference in m.subject + m.body)
    assert_pt(body, "ETH", re.compile(r"^\d{1,3}(\.\d{3})*,\d{6}$"))
    assert re.search(r"\d{2}/\d{2}/\d{4} \d{2}:\d{2} UTC", body)  # dd/mm/yyyy, in UTC


def test_the_planners_pilot_report_choices_are_written_the_portuguese_way():
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from django.utils import translation

    from anchorgpu.planner_pages.form import PlannerForm

    report = SimpleNamespace(pk=7, uploaded_at=datetime(2026, 12, 2, 18, 51, tzinfo=UTC), device_name="H100",
                             tokens_per_s=3057.4)
    with translation.override("pt"):
        label = dict(PlannerForm(reports=[report]).fields["report"].choices)["7"]
    assert label == "02/12/2026 18:51 UTC · H100 · 3.057 tokens/s"


def test_a_discount_line_is_money_in_both_columns_and_the_note_says_how_the_total_is_rounded(client):
    shop.load_shop()
    with translation.override("pt"):
        url = reverse("product", kwargs={"slug": "h100-sxm-80gb"}) + "?quantity=1&term=7"
    body = client.get(url).content.decode()
    row = re.search(r"<tr>\s*<td>[^<]*Desconto[^<]*</td>(.*?)</tr>", body, re.S)
    assert row, "the term discount line"
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    unit, amount = cells[-2].strip(), cells[-1].strip()
    assert re.fullmatch(r"-\d+,\d{2}( USD)?", unit) and re.fullmatch(r"-\d+,\d{2}( USD)?", amount), cells
