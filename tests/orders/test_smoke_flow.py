import pytest

from anchorgpu.orders.models import Order
from tests import shop

pytestmark = pytest.mark.django_db


def test_place_and_pay():
    shop.load_shop()
    user = shop.customer()
    order = shop.place(user)
    assert order.state == "awaiting_payment"
    assert order.quote.address.startswith("bc1q")
    shop.pay(order)
    order = Order.objects.get(pk=order.pk)
    assert order.state == "paid"
    assert order.invoice.number.startswith("INV-")
