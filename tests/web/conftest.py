import pytest

from anchorgpu.demo import load_catalog, load_fleet, load_price_list


@pytest.fixture
def demo_shop(db):
    """The demo catalog, prices and fleet, without demo bookings."""
    products = load_catalog()
    load_price_list(products)
    load_fleet(products)
    return products


@pytest.fixture
def alice(client, db):
    """The demo shop, and a customer signed in on ``client``."""
    from tests import shop

    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    return user
