import pytest

from tests import shop


@pytest.fixture
def alice(client):
    """The demo shop, and a customer signed in on ``client``."""
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    return user
