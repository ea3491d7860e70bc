"""The command-line client against a live shop: tables for people, JSON for scripts, clear errors."""

from __future__ import annotations

import io
import json

import pytest

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.client.commands import run
from anchorgpu.client.tables import render_table
from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop_url(live_server):
    shop.load_shop()
    return live_server.url


@pytest.fixture
def token(shop_url):
    _row, secret = api_token_create(user=shop.customer(), name="cli test")
    return secret


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_offers_as_a_table_and_as_json(shop_url):
    code, out, _ = cli("offers", "--url", shop_url, "--term", "7", "--quantity", "2")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["card", "free", "now"]
    assert "H100 SXM 80 GB" in out and "B200" in out
    code, out, _ = cli("offers", "--url", shop_url, "--json")
    data = json.loads(out)
    assert code == 0 and {o["product"] for o in data} >= {"h100-sxm-80gb", "mi300x-192gb"}


def test_an_order_from_create_to_paid_and_cancel(shop_url, token, tmp_path):
    key = tmp_path / "id_ed25519.pub"
    key.write_text(shop.ED25519 + "\n")
    base = ["--url", shop_url, "--token", token]
    code, out, err = cli("order", "create", *base, "--product", "h100-sxm-80gb", "--term", "3",
                         "--environment", "pytorch-cuda124", "--asset", "btc", "--name", "Alice Example",
                         "--email", "alice@example.com", "--country", "PT", "--ssh-key-file", str(key), "--accept",
                         "--idempotency-key", "cli-test-1", "--json")
    assert code == 0, err
    created = json.loads(out)
    reference = created["reference"]
    assert created["state"] == "awaiting_payment" and created["quote"]["address"].startswith("bc1")
    # Retrying with the same key returns the same order.
    again = cli("order", "create", *base, "--product", "h100-sxm-80gb", "--term", "3",
                "--environment", "pytorch-cuda124", "--asset", "btc", "--name", "Alice Example",
                "--email", "alice@example.com", "--country", "PT", "--ssh-key-file", str(key), "--accept",
                "--idempotency-key", "cli-test-1", "--json")
    assert json.loads(again[1])["reference"] == reference and Order.objects.count() == 1

    code, out, _ = cli("order", "show", *base, reference)
    assert code == 0 and reference in out and created["quote"]["address"] in out and "awaiting payment" in out
    code, out, _ = cli("order", "list", *base)
    assert code == 0 and reference in out
    code, out, err = cli("order", "paid", *base, reference, "--txid", "ab" * 32)
    assert code == 0 and "payment being checked" in out
    code, out, err = cli("order", "cancel", *base, reference)
    assert code == 1 and "awaiting payment" in err  # claimed orders are not cancelled from here


def test_refusals_are_clear_and_exit_non_zero(shop_url, token, tmp_path):
    key = tmp_path / "bad.pub"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    code, _out, err = cli("order", "create", "--url", shop_url, "--token", token, "--product", "h100-sxm-80gb",
                          "--term", "3", "--environment", "pytorch-rocm63", "--asset", "btc", "--name", "A",
                          "--email", "a@example.com", "--country", "PT", "--ssh-key-file", str(key), "--accept")
    assert code == 2 and "PRIVATE key; it was not sent" in err  # refused before anything leaves the machine
    assert not Order.objects.exists()
    key.write_text(shop.ED25519)
    code, _out, err = cli("order", "create", "--url", shop_url, "--token", token, "--product", "h100-sxm-80gb",
                          "--term", "3", "--environment", "pytorch-rocm63", "--asset", "btc", "--name", "A",
                          "--email", "a@example.com", "--country", "PT", "--ssh-key-file", str(key), "--accept")
    assert code == 1 and "environment" in err  # the shop's own refusal, field by field
    assert not Order.objects.exists()
    code, _out, err = cli("order", "show", "--url", shop_url, "--token", "agt_nope_nope", "AG-XXXX")
    assert code == 1 and "401" in err
    code, _out, err = cli("order", "show", "--url", shop_url, "AG-XXXX")
    assert code == 2 and "token" in err


def test_an_unreachable_shop_is_exit_code_3():
    code, _out, err = cli("offers", "--url", "http://127.0.0.1:9")
    assert code == 3 and "Cannot reach" in err


def test_bad_arguments_are_messages_not_tracebacks(shop_url, token):
    code, _out, err = cli("offers", "--url", "foo")
    assert code == 2 and "http://" in err
    code, _out, err = cli("order", "show", "--url", shop_url, "--token", "토큰", "AG-XXXX")
    assert code == 2 and "ASCII" in err
    for reference in ("A B", "주문", "../../offers"):
        code, out, err = cli("order", "show", "--url", shop_url, "--token", token, reference, "--json")
        assert code == 1 and json.loads(out)["error"]["code"] == "not_found", (reference, err)


def test_an_order_create_that_cannot_reach_the_shop_says_how_to_retry_safely(tmp_path, monkeypatch):
    monkeypatch.setattr("anchorgpu.client.commands.time.sleep", lambda _s: None)
    key = tmp_path / "k.pub"
    key.write_text(shop.ED25519)
    code, _out, err = cli("order", "create", "--url", "http://127.0.0.1:9", "--token", "agt_x_y", "--product", "p",
                          "--term", "3", "--environment", "e", "--asset", "btc", "--name", "A", "--email",
                          "a@example.com", "--country", "PT", "--ssh-key-file", str(key), "--accept",
                          "--idempotency-key", "cli-retry-1")
    assert code == 3 and "--idempotency-key cli-retry-1" in err


def test_tables_line_up_wide_characters():
    table = render_table(["이름", "n"], [("한국어", "1"), ("en", "22")], align="<>")
    lines = table.splitlines()
    assert lines[0] == "이름     n" and lines[2] == "한국어   1" and lines[3] == "en      22"
