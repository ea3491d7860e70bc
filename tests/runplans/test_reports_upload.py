"""Uploading a pilot report on the shop's page: accepted with its figures and plots, refused with a reason."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES
from anchorgpu.pilotreports.models import PilotReport
from tests import shop
from tests.runplans.reports import CPU_REPORT, as_bytes, gpu_report

pytestmark = pytest.mark.django_db



def upload(client, data: bytes, name: str = "report.json"):
    return client.post(reverse("pilot_reports"), {"report": SimpleUploadedFile(name, data, "application/json")})


def test_a_valid_report_is_kept_and_shown_with_its_figures_and_plots(client, alice):
    response = upload(client, as_bytes(gpu_report(tokens_per_s=3210.0)))
    row = PilotReport.objects.get()
    assert response.status_code == 302 and response.url == reverse("pilot_report", kwargs={"report_id": row.pk})
    assert (row.user, row.product_slug, row.device_count, row.restore) == (alice, "h100-sxm-80gb", 1, "passed")
    assert row.tokens_per_s == 3210.0 and row.peak_memory_bytes == int(61.5 * 2**30)
    page = client.get(response.url)
    body = page.content.decode()
    assert page.status_code == 200
    assert "3,210" in body and "NVIDIA H100 80GB HBM3" in body and "Restore proof passed" in body
    assert body.count("<svg") == 2  # step-time histogram and memory over the steps
    assert "FAILED" not in body


def test_a_failed_restore_proof_is_marked_with_its_first_difference(client, alice):
    upload(client, as_bytes(gpu_report(restore_passed=False)))
    body = client.get(reverse("pilot_report", kwargs={"report_id": PilotReport.objects.get().pk})).content.decode()
    assert "The restore proof FAILED." in body and "optimizer.state.3.exp_avg" in body
    assert "Restore proof passed" not in body
    listing = client.get(reverse("pilot_reports")).content.decode()
    assert '<strong class="unavailable">failed</strong>' in listing


@pytest.mark.parametrize("data, status, text", [
    (b'{"kind": "anchorgpu-pilot-report", "schema_version": 99}', 400, "format version is not one this shop reads"),
    (CPU_REPORT.read_bytes()[:-40], 400, "looks cut short"),
    (b"step,seconds\n1,0.5\n", 400, "not JSON"),
    (b'{"hello": "world"}', 400, "not a pilot report"),
    (b"\xff\xfe\x00garbage", 400, "not UTF-8"),
    (b" " * (MAX_REPORT_BYTES + 1), 413, "larger than 2 MiB"),
], ids=["wrong-schema-version", "truncated", "not-json", "foreign-json", "not-utf8", "over-the-limit"])
def test_a_bad_file_is_refused_with_a_clear_reason_and_nothing_kept(client, alice, data, status, text):
    response = upload(client, data)
    assert response.status_code == status
    assert text in response.content.decode()
    assert PilotReport.objects.count() == 0


def test_a_missing_field_names_it(client, alice):
    report = gpu_report()
    del report["restore"]["passed"]
    response = upload(client, json.dumps(report).encode())
    assert response.status_code == 400 and "restore.passed" in response.content.decode()


def test_another_customers_report_is_not_found(client, alice):
    upload(client, as_bytes(gpu_report()))
    row = PilotReport.objects.get()
    client.force_login(shop.customer("bob@example.com"))
    assert client.get(reverse("pilot_report", kwargs={"report_id": row.pk})).status_code == 404
    assert "NVIDIA H100" not in client.get(reverse("pilot_reports")).content.decode()


def test_reports_need_an_account(client):
    shop.load_shop()
    response = client.get(reverse("pilot_reports"))
    assert response.status_code == 302 and "/account/login/" in response.url
