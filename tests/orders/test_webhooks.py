"""The operators' webhooks against a real HTTP receiver on 127.0.0.1 (a thread with http.server on a random
port) that checks every signature: retried after a failure, delivered on the next attempt, given up after
the last one and shown in the admin; the signature check a receiver uses; the settings refused at start."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse
from django.utils import timezone

from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders import webhook_signature as sig
from anchorgpu.orders.models import OperatorEvent, WebhookDelivery
from anchorgpu.orders.notify import RETRY_AFTER
from anchorgpu.orders.webhooks import body_of, webhooks_send_due
from anchorgpu.production import webhook_problems, webhook_secret, webhook_urls
from tests import shop

pytestmark = pytest.mark.django_db
SECRET = "whsec-test-0123456789-abcdefghijklmnopqrstuvwxyz"


class Receiver:
    """An HTTP server that answers each POST with the next of ``statuses`` (the last one repeats), after
    checking its signature with the receivers' helper (a bad one is answered 400 and recorded)."""

    def __init__(self, statuses, secret=SECRET):
        self.statuses, self.secret, self.seen = list(statuses), secret, []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    signed_at = sig.verify(body, self.headers.get(sig.HEADER), receiver.secret)
                    error = ""
                except sig.SignatureError as exc:
                    signed_at, error = None, str(exc)
                status = 400 if error else (receiver.statuses.pop(0) if len(receiver.statuses) > 1
                                            else receiver.statuses[0])
                receiver.seen.append({"body": json.loads(body), "raw": body, "headers": dict(self.headers),
                                      "signed_at": signed_at, "error": error, "status": status})
                self.send_response(status)
                if status in (301, 302):
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/anchorgpu?token=receiver-own"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store(settings):
    settings.ANCHORGPU_OPERATOR_WEBHOOK_SECRET = SECRET
    settings.ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT = 5
    shop.load_shop()
    return shop.customer()


def underpaid(store, settings, url):
    settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = [url]
    order = shop.place(store)
    shop.pay(order, amount=order.quote.amount - 1_000)
    return order, OperatorEvent.objects.get(order=order)


def test_signed_retried_after_a_500_and_delivered_on_the_second_attempt(store, settings):
    with Receiver([500, 200]) as receiver:
        order, event = underpaid(store, settings, receiver.url)
        start = timezone.now()
        assert webhooks_send_due(now=start) == 0
        delivery = WebhookDelivery.objects.get(event=event)
        assert delivery.attempts == 1 and delivery.last_status == 500 and delivery.last_error == "HTTP 500"
        assert delivery.sent_at is None and delivery.failed_at is None
        assert delivery.due_at == start + RETRY_AFTER[0]
        assert webhooks_send_due(now=start + timedelta(seconds=30)) == 0  # not due yet: nothing sent
        assert len(receiver.seen) == 1
        assert webhooks_send_due(now=start + RETRY_AFTER[0]) == 1
    delivery.refresh_from_db()
    assert delivery.sent_at is not None and delivery.attempts == 2 and delivery.last_status == 200
    first, second = receiver.seen
    assert [first["status"], second["status"]] == [500, 200] and not first["error"] and not second["error"]
    assert first["raw"] == second["raw"] == body_of(event.payload)  # the same event, signed again
    assert first["headers"][sig.EVENT_ID_HEADER] == event.event_id == second["body"]["id"]
    assert first["headers"][sig.EVENT_TYPE_HEADER] == "order.underpaid"
    assert first["headers"]["Content-Type"] == "application/json"
    assert abs(second["signed_at"] - timezone.now().timestamp()) < 60
    data = second["body"]["data"]["order"]
    assert data["reference"] == order.reference and data["state"] == "underpaid"
    assert data["shortfall"] == "1000" and data["amount_due"] == str(order.quote.amount)
    assert isinstance(data["received"], str) and second["body"]["created_at"].endswith("Z")


def test_a_receiver_with_another_secret_refuses_and_the_delivery_is_retried(store, settings):
    with Receiver([200], secret="not-the-shop-secret-" * 3) as receiver:
        underpaid(store, settings, receiver.url)
        webhooks_send_due()
    [seen] = receiver.seen
    assert seen["status"] == 400 and seen["error"] == "the signature does not match the body"
    delivery = WebhookDelivery.objects.get()
    assert delivery.sent_at is None and delivery.last_status == 400 and delivery.failed_at is None


def test_always_failing_is_given_up_after_the_last_attempt_and_shown(store, settings, admin_client):
    with Receiver([503]) as receiver:
        order, event = underpaid(store, settings, receiver.url)
        now = timezone.now()
        for wait in (timedelta(0), *RETRY_AFTER):
            now += wait
            assert webhooks_send_due(now=now) == 0
        assert webhooks_send_due(now=now + timedelta(days=1)) == 0  # given up: not tried again
    assert len(receiver.seen) == len(RETRY_AFTER) + 1 and all(not s["error"] for s in receiver.seen)
    delivery = WebhookDelivery.objects.get(event=event)
    assert delivery.failed_at is not None and delivery.attempts == len(RETRY_AFTER) + 1
    assert delivery.last_error == "HTTP 503" and delivery.status == "given_up"
    settings.ANCHORGPU_METRICS_TOKEN = "token-for-the-webhook-test"
    metrics = admin_client.get("/metrics", HTTP_AUTHORIZATION="Bearer token-for-the-webhook-test").content.decode()
    assert 'anchorgpu_operator_webhooks_undelivered{status="given_up"} 1.0' in metrics

    listing = admin_client.get(reverse("admin:orders_webhookdelivery_changelist"), {"status": "given_up"})
    page = listing.content.decode()
    assert listing.status_code == 200 and order.reference in page and "given up" in page
    assert "token=receiver-own" not in page  # the receiver's query string is not shown
    assert "/hooks/anchorgpu" in page
    detail = admin_client.get(reverse("admin:orders_webhookdelivery_change", args=[delivery.pk]))
    assert detail.status_code == 200 and event.event_id in detail.content.decode()
    assert SECRET not in detail.content.decode()
    order_page = admin_client.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert 'id="operator-events"' in order_page and "given up after 6 attempts" in order_page
    assert "HTTP 503" in order_page

    # Fixed receiver: the operator sends it again from the list.
    with Receiver([200]) as fixed:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(url=fixed.url)
        settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = [fixed.url]
        answer = admin_client.post(reverse("admin:orders_webhookdelivery_changelist"),
                                   {"action": "send_again", "_selected_action": [delivery.pk]})
        assert answer.status_code == 302
        assert webhooks_send_due() == 1
    delivery.refresh_from_db()
    assert delivery.sent_at is not None and delivery.attempts == 1
    assert AuditEntry.objects.filter(action="webhook_retry", object_id=str(order.pk)).count() == 1


def test_a_receiver_that_is_not_listening_is_retried(store, settings):
    with Receiver([200]) as gone:
        url = gone.url
    underpaid(store, settings, url)  # the port is closed now
    webhooks_send_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.last_status is None and delivery.last_error.startswith("ConnectionError")
    assert "token=receiver-own" not in delivery.last_error and delivery.failed_at is None


def test_a_url_taken_out_of_the_settings_gets_nothing_more(store, settings):
    with Receiver([200]) as receiver:
        underpaid(store, settings, receiver.url)
        settings.ANCHORGPU_OPERATOR_WEBHOOK_URLS = ["https://hooks.example/the-new-one"]
        assert webhooks_send_due() == 0
    delivery = WebhookDelivery.objects.get()
    assert receiver.seen == [] and delivery.failed_at is not None and "no longer in" in delivery.last_error


def test_a_redirect_is_not_followed(store, settings):
    with Receiver([302]) as receiver:
        underpaid(store, settings, receiver.url)
        webhooks_send_due()
    delivery = WebhookDelivery.objects.get()
    assert len(receiver.seen) == 1 and delivery.last_status == 302 and delivery.sent_at is None
    assert "redirects are not followed" in delivery.last_error


def test_staff_who_may_only_look_see_the_list_but_cannot_send_again(store, settings, client):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    watcher = get_user_model().objects.create_user("looker", password="x", is_staff=True)
    watcher.user_permissions.add(Permission.objects.get(codename="view_order"))
    client.force_login(watcher)
    listing = client.get(reverse("admin:orders_webhookdelivery_changelist"))
    assert listing.status_code == 200 and "send_again" not in listing.content.decode()
    customer = get_user_model().objects.create_user("cust", password="x")
    client.force_login(customer)
    assert client.get(reverse("admin:orders_webhookdelivery_changelist")).status_code == 302


# --- the receivers' check --------------------------------------------------------------------------------


def test_verify_accepts_its_own_signature_and_refuses_everything_else():
    body = b'{"id":"evt_1","type":"order.underpaid"}'
    header = sig.sign(body, SECRET, timestamp=1_764_687_600)
    assert header.startswith("t=1764687600,v1=") and len(header.split("v1=")[1]) == 64
    assert sig.verify(body, header, SECRET, now=1_764_687_600 + 299) == 1_764_687_600
    with pytest.raises(sig.SignatureError, match="more than 300 s"):
        sig.verify(body, header, SECRET, now=1_764_687_600 + 301)  # a replay, later
    with pytest.raises(sig.SignatureError, match="does not match"):
        sig.verify(body + b" ", header, SECRET, now=1_764_687_600)
    with pytest.raises(sig.SignatureError, match="does not match"):
        sig.verify(body, header, "another secret", now=1_764_687_600)
    with pytest.raises(sig.SignatureError, match="does not match"):  # the timestamp is signed too
        sig.verify(body, header.replace("t=1764687600", "t=1764687601"), SECRET, now=1_764_687_600)
    for bad, why in ((None, "no AnchorGPU-Signature"), ("", "no AnchorGPU-Signature"),
                     ("v1=abc", "no timestamp"), ("t=1764687600", "no v1="), ("t=soon,v1=ab", "whole number")):
        with pytest.raises(sig.SignatureError, match=why):
            sig.verify(body, bad, SECRET, now=1_764_687_600)
    rotated = f"{header},v1={'0' * 64}"
    assert sig.verify(body, rotated, SECRET, now=1_764_687_600)


def test_the_known_answer():
    """A receiver in another language can check its HMAC against this."""
    body = b'{"id":"evt_0","type":"order.refund_due"}'
    assert sig.sign(body, "secret", timestamp=1700000000) == (
        "t=1700000000,v1=4ee85d955dd05aad6bfd3c3a776da5249981d101baeca5113d2d291873020e9c")  # docs/operator-webhooks.md


# --- the settings ----------------------------------------------------------------------------------------


def test_webhook_settings_that_cannot_work_are_refused(tmp_path):
    good = "https://hooks.example/anchorgpu"
    assert webhook_urls(f" {good}, http://127.0.0.1:8080/in {good}") == [good, "http://127.0.0.1:8080/in"]
    assert webhook_problems(urls=[good], secret=SECRET, secret_file=None, production=True) == []
    assert webhook_problems(urls=[], secret="", secret_file=None, production=True) == []

    def problem(*urls, secret=SECRET, production=False):
        [found] = webhook_problems(urls=list(urls), secret=secret, secret_file=None, production=production)
        return found

    assert "is not an http:// or https:// URL" in problem("ftp://hooks.example/in")
    assert "is not an http:// or https:// URL" in problem("hooks.example/in")
    assert "is not a URL" in problem("https://hooks.example:port/in")
    assert "plain http; production sends webhooks over https only" in problem("http://hooks.example/in",
                                                                              production=True)
    assert "user name or password" in problem("https://me:pw@hooks.example/in")
    assert "without a signing secret" in problem(good, secret="")
    weak = problem(good, secret="short")
    assert "too weak" in weak and "short" not in weak.replace("shortest", "")  # the secret is never repeated

    kept = tmp_path / "webhook-secret"
    kept.write_text(SECRET + "\n")
    assert webhook_secret(secret=None, secret_file=str(kept)) == (SECRET, [])
    assert webhook_secret(secret=f" {SECRET} ", secret_file=None) == (SECRET, [])
    _none, [missing] = webhook_secret(secret=None, secret_file=str(tmp_path / "absent"))
    assert "cannot be read" in missing
    _none, [both] = webhook_secret(secret=SECRET, secret_file=str(kept))
    assert "give one" in both


def test_the_settings_module_stops_the_start_with_the_problems(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ANCHORGPU_OPERATOR_WEBHOOK_URLS": "ftp://hooks.example/in",
           "ANCHORGPU_OPERATOR_WEBHOOK_SECRET": "", "ANCHORGPU_ENV": "development"}
    env.pop("ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE", None)
    run = subprocess.run([sys.executable, "-c", "import anchorgpu.settings"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    assert "ImproperlyConfigured: Operator webhook settings refused:" in run.stderr
    assert "'ftp://hooks.example/in' is not an http:// or https:// URL" in run.stderr
    assert "without a signing secret" in run.stderr
