"""``anchorgpu order extend`` against a live shop (issue 25): what can be bought, then the extension."""

from __future__ import annotations

import io
import json

import pytest

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.client.commands import run
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db(transaction=True)


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_order_extend_shows_the_options_then_extends(live_server):
    shop.load_shop()
    user = shop.customer()
    _row, token = api_token_create(user=user, name="cli")
    order = shop.place(user)
    shop.pay(order)
    provision_due()
    base = ["--url", live_server.url, "--token", token]
    code, out, err = cli("order", "extend", order.reference, *base)
    assert code == 0, err
    assert "can be extended from" in out and "30" in out and "USD" in out
    code, out, err = cli("order", "extend", order.reference, *base, "--days", "3", "--asset", "btc", "--json")
    assert code == 0, err
    ext = json.loads(out)
    assert ext["extends"] == order.reference and ext["term"] == 3
    assert Order.objects.get(reference=ext["reference"]).extends_id == order.pk
    code, out, err = cli("order", "extend", order.reference, *base)
    assert code == 0 and "cannot be extended now" in out and ext["reference"] in out
    code, out, err = cli("order", "extend", order.reference, *base, "--days", "3", "--asset", "btc")
    assert code == 1 and "waiting for its payment" in err
    code, _out, err = cli("order", "extend", order.reference, *base, "--days", "3")
    assert code == 2 and "--asset" in err
