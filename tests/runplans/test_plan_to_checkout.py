"""Plan → pilot report → term recommendation → checkout → invoice, through the shop's pages (issue 9).

The cost per million training tokens the checkout shows is the order's own total over the run's tokens,
and the invoice that follows payment has that same total.
"""

from __future__ import annotations

import html
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from anchorgpu.billing.models import Invoice
from anchorgpu.orders.models import Order
from anchorgpu.pilotreports.models import PilotReport
from anchorgpu.planner.recommend import SECONDS_PER_DAY
from anchorgpu.planner.term import Overheads, RunSize, TokenRate, recommend_term, upload_seconds
from tests import shop
from tests.runplans.reports import CPU_REPORT, as_bytes, gpu_report
from tests.runplans.test_reports_upload import upload
from tests.web.test_checkout import form_data

pytestmark = pytest.mark.django_db

SETUP = {"preset": "llama-3.1-8b", "method": "lora", "lora_rank": "16", "optimizer": "adamw",
         "precision": "bf16_mixed", "seq_len": "2048", "micro_batch": "1", "grad_checkpointing": "on",
         "parallel": "single", "gpus": "1", "headroom": "10", "term": "7"}
RATE = 3000.0  # tokens/s the pilot measured on one H100



def planner(client, **run):
    response = client.get(reverse("planner"), {**SETUP, **{k: str(v) for k, v in run.items()}})
    assert response.status_code == 200, response.content.decode()[:3000]
    return response


def row_for(response, slug: str, quantity: int = 1) -> dict:
    return next(r for r in response.context["run"]["rows"] if r["product"] == slug and r["quantity"] == quantity)


def test_plan_report_recommendation_checkout_and_invoice_agree(client, alice):
    assert upload(client, as_bytes(gpu_report(tokens_per_s=RATE))).status_code == 302
    report = PilotReport.objects.get()
    tokens = 1_200_000_000  # 400,000 s of training at the measured rate: more than 3 days, less than 7

    page = planner(client, tokens_per_epoch=tokens // 2, epochs=2, report=report.pk)
    h100 = row_for(page, "h100-sxm-80gb")
    assert h100["source"] == "pilot" and h100["tokens_per_s"] == RATE and h100["term"] == 7
    assert 400_000 < h100["wall_s"] < 7 * SECONDS_PER_DAY / 1.15
    others = [r for r in page.context["run"]["rows"] if r["product"] != "h100-sxm-80gb"]
    assert others and all(r["source"] == "estimate" for r in others)  # the other cards: the planner's estimate
    body = page.content.decode()
    assert "Throughput measured by your pilot on NVIDIA H100 80GB HBM3" in body
    assert "Local NVMe is fast scratch space, not a backup" in body and "If the run overruns" in body
    link = html.unescape(re.search(r'href="(/en/checkout/h100-sxm-80gb/\?quantity=1&amp;plan=[^"]*)"', body).group(1))

    checkout = client.get(link)
    assert checkout.status_code == 200
    shown = checkout.context["plan"]
    price = checkout.context["offer"].price_for_term
    assert checkout.context["offer"].term_days == 7 and shown["tokens"] == tokens
    expected = (price.total * 10**6 / tokens).quantize(Decimal("0.0001"))
    assert shown["per_million_tokens"] == expected
    text = checkout.content.decode()
    assert f"{expected} {price.currency} per million training tokens" in text
    assert "measured by your pilot on this card" in text
    assert "The other products that fit" in text
    assert [r["product"] for r in shown["others"]] == list(dict.fromkeys(r["product"] for r in others))

    form = checkout.context["form"]
    placed = client.post(link, form_data(quantity="1", term="7", submission=form.initial["submission"],
                                         plan=form.initial["plan"], purpose="shorter_step"))
    assert placed.status_code == 302
    order = Order.objects.get()
    assert order.purpose == "shorter_step" and order.fiat_total == price.total
    assert order.run_plan["tokens"] == tokens and order.run_plan["source"] == "pilot"
    assert order.run_plan["report"] == str(report.pk) and order.run_plan["recommended_term"] == 7
    assert Decimal(order.run_plan["cost_per_million_tokens"]) == expected

    order_page = client.get(reverse("order", kwargs={"reference": order.reference})).content.decode()
    assert "a shorter step time" in order_page and f"{expected} {price.currency} per million training tokens" in order_page

    shop.pay(order)
    invoice = Invoice.objects.get(order=order)
    assert invoice.total == order.fiat_total
    # The figure shown at checkout is the invoice's total over the run's tokens, to a hundredth of a cent.
    assert abs(expected * tokens / 10**6 - invoice.total) <= Decimal("0.00005") * tokens / 10**6


def _largest_run_for(days: int) -> int:
    """The most tokens that fit ``days`` with the margin on one H100 at the pilot's rate and checkpoint figures,
    found with the planner's own functions (what the page must agree with)."""
    overheads = Overheads(checkpoint_write_s=45.0, checkpoint_upload_s=upload_seconds(16 * 2**30))
    low, high = 1, 10**12
    while low < high:
        mid = (low + high + 1) // 2
        advice = recommend_term(RunSize.from_epochs(mid, 1), TokenRate.pilot(RATE), overheads=overheads)
        low, high = (mid, high) if advice.term_days is not None and advice.term_days <= days else (low, mid - 1)
    return low


def test_the_term_follows_the_run_at_the_boundaries(client, alice):
    upload(client, as_bytes(gpu_report(tokens_per_s=RATE)))
    report = PilotReport.objects.get().pk
    most = _largest_run_for(7)
    just_fits = row_for(planner(client, tokens_per_epoch=most, report=report), "h100-sxm-80gb")
    assert just_fits["term"] == 7 and just_fits["wall_s"] * 1.15 <= 7 * SECONDS_PER_DAY
    assert 7 * SECONDS_PER_DAY - just_fits["wall_s"] * 1.15 < 60  # within a minute of the boundary
    over = planner(client, tokens_per_epoch=most + 3000 * 60, report=report)  # one more minute of training
    assert row_for(over, "h100-sxm-80gb")["term"] == 30
    assert over.context["run"]["rows"]  # still priced, on the 30-day term
    none = planner(client, tokens_per_epoch=_largest_run_for(30) + 3000 * 3600, report=report)
    assert row_for(none, "h100-sxm-80gb")["term"] is None
    assert row_for(none, "h100-sxm-80gb")["per_run"] is None


def test_a_faster_dearer_card_can_be_cheaper_per_result(client, alice):
    response = planner(client, steps=20_000, global_batch=64)  # no pilot: every card estimated
    rows = [r for r in response.context["run"]["rows"] if r["per_run"]]
    assert rows and all(r["source"] == "estimate" for r in rows)
    assert any("the planner's estimate" in note for note in response.context["run"]["focus"]["notes"])
    cheapest = rows[0]
    assert response.context["run"]["rows"][0]["cheapest"]
    assert all(Decimal(cheapest["per_run"]) <= Decimal(r["per_run"]) for r in rows)


@pytest.mark.parametrize("purpose, code_text", [
    ("independent_experiments", "independent experiments"),
    ("shorter_step", "For a shorter step"),
    ("make_possible", "To make the run possible at all"),
    ("larger_batch", "global batch"),
])
def test_the_advice_follows_the_stated_purpose(client, alice, purpose, code_text):
    response = planner(client, tokens_per_epoch=100_000_000, purpose=purpose, experiments=4)
    advice = " ".join(response.context["run"]["purpose_advice"])
    assert code_text in advice, advice
    if purpose == "independent_experiments":
        assert "single-card runs side by side" in advice and "No distributed run is needed" in advice


@pytest.mark.parametrize("params, text", [
    ({"tokens_per_epoch": 10**9, "steps": 100, "global_batch": 8}, "one way"),
    ({"steps": 100}, "global batch that goes with"),
    ({"tokens_per_epoch": 0}, "greater than or equal to 1"),
    ({"purpose": "world_peace", "tokens_per_epoch": 10**9}, "Select a valid choice"),
])
def test_bad_run_input_is_a_400_with_the_reason(client, alice, params, text):
    response = client.get(reverse("planner"), {**SETUP, **{k: str(v) for k, v in params.items()}})
    assert response.status_code == 400 and text in response.content.decode()


def test_a_tampered_plan_is_ignored_at_checkout(client, alice):
    link = reverse("checkout", kwargs={"slug": "h100-sxm-80gb"}) + "?quantity=1&term=7&plan=forged.token"
    response = client.get(link)
    assert response.status_code == 200 and response.context["plan"] is None
    assert "per million training tokens" not in response.content.decode()


def test_the_pilots_measured_peak_decides_whether_its_configuration_fits(client, alice):
    upload(client, as_bytes(gpu_report(tokens_per_s=RATE, peak_gib=40.0)))
    roomy = planner(client, tokens_per_epoch=10**9, report=PilotReport.objects.get().pk)
    assert roomy.context["run"]["peak_check"]["fits"] and row_for(roomy, "h100-sxm-80gb")["source"] == "pilot"
    assert "Its measured peak, 40.0 GiB per card, fits 1 × H100 SXM 80 GB" in roomy.content.decode()

    # Same model, but the pilot found 72 GiB at the peak: more than an 80 GB card leaves after 10 % headroom.
    upload(client, as_bytes(gpu_report(tokens_per_s=RATE, peak_gib=72.0)))
    tight = planner(client, tokens_per_epoch=10**9, report=PilotReport.objects.order_by("-uploaded_at")[0].pk)
    check = tight.context["run"]["peak_check"]
    assert not check["fits"] and check["estimate_gib"] < check["usable_gib"] < 72  # the estimate alone said yes
    assert not any(r["product"] == "h100-sxm-80gb" and r["quantity"] == 1 for r in tight.context["run"]["rows"])
    assert "does not fit 1 × H100 SXM 80 GB" in tight.content.decode()


def test_a_report_from_a_machine_we_do_not_rent_is_not_taken_for_one_of_our_cards(client, alice):
    upload(client, CPU_REPORT.read_bytes())  # the kit's own report from this CPU machine
    response = planner(client, tokens_per_epoch=10**9, report=PilotReport.objects.get().pk)
    assert all(r["source"] == "estimate" for r in response.context["run"]["rows"])
    assert response.context["run"]["peak_check"] is None
    assert "which is not one of our cards" in response.content.decode()
