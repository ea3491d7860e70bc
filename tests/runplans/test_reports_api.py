"""Pilot reports through the API, and the purpose of a rental kept on an order placed through it."""

from __future__ import annotations

import pytest
from django.test import Client

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.pilot.report_schema import MAX_REPORT_BYTES
from anchorgpu.pilotreports.models import PilotReport
from tests import shop
from tests.runplans.reports import CPU_REPORT, as_bytes, gpu_report
from tests.web.test_api_orders import Api, order_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    shop.load_shop()
    return Api(Client(), api_token_create(user=shop.customer(), name="t")[1])


def send(api: Api, data: bytes):
    return api.post("/api/v1/pilot-reports", raw=data)


def test_a_report_is_kept_and_read_back(api):
    response = send(api, as_bytes(gpu_report(device="NVIDIA H200", tokens_per_s=4100.5, restore_passed=False)))
    assert response.status_code == 201, response.content
    body = response.json()
    row = PilotReport.objects.get()
    assert response["Location"] == f"/api/v1/pilot-reports/{row.pk}"
    assert (body["product"], body["device"], body["tokens_per_s"]) == ("h200-141gb", "NVIDIA H200", 4100.5)
    assert body["restore"] == {"status": "failed", "first_difference": {
        "what": "optimizer.state.3.exp_avg", "expected": "1.25e-3", "found": "0.0"}}
    assert api.get(response["Location"]).json() == body
    assert [r["id"] for r in api.get("/api/v1/pilot-reports").json()["reports"]] == [str(row.pk)]


@pytest.mark.parametrize("data, status, code", [
    (b'{"kind": "anchorgpu-pilot-report", "schema_version": 2}', 400, "report_schema_version"),
    (CPU_REPORT.read_bytes()[:200], 400, "report_truncated"),
    (b"[1, 2", 400, "report_truncated"),
    (b"not json at all", 400, "report_not_json"),
    (b'{"kind": "something else"}', 400, "report_not_a_report"),
    (b"{" + b" " * MAX_REPORT_BYTES + b"}", 413, "too_large"),
], ids=["wrong-schema-version", "truncated", "truncated-list", "not-json", "foreign", "over-the-limit"])
def test_a_bad_report_is_refused_with_a_code_and_a_reason(api, data, status, code):
    response = send(api, data)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code and response.json()["error"]["message"]
    assert PilotReport.objects.count() == 0


def test_a_report_is_json_only_and_its_owners_only(api):
    wrong_type = api.post("/api/v1/pilot-reports", raw=as_bytes(gpu_report()), content_type="text/plain")
    assert wrong_type.status_code == 415
    row_id = send(api, as_bytes(gpu_report())).json()["id"]
    other = Api(Client(), api_token_create(user=shop.customer("bob@example.com"), name="b")[1])
    assert other.get(f"/api/v1/pilot-reports/{row_id}").status_code == 404
    assert other.get("/api/v1/pilot-reports").json() == {"reports": []}
    assert Api(Client(), None).get(f"/api/v1/pilot-reports/{row_id}").status_code == 401


def test_an_api_order_keeps_its_purpose(api):
    response = api.post("/api/v1/orders", order_body(purpose="independent_experiments"), key="k1")
    assert response.status_code == 201 and response.json()["purpose"] == "independent_experiments"
    refused = api.post("/api/v1/orders", order_body(purpose="fun"), key="k2")
    assert refused.status_code == 400 and "purpose" in refused.json()["error"]["fields"]
