"""Our own admin pages asked for a row that is not there: a warning on the admin's index in the operator's
language, never a 404 page or a 500 (``anchorgpu.admin_base.missing_object_redirect``)."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from anchorgpu.allocation.models import Booking
from anchorgpu.fleet.models import Host
from anchorgpu.orders.models import Order

pytestmark = pytest.mark.django_db

PAGES = {
    "an order's payment tool": (Order, "record_transfer"),
    "a booking's release": (Booking, "release"),
    "a host's maintenance": (Host, "maintenance"),
}


def _url(model, view, object_id):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=[object_id])


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("object_id", ["987654", "not-a-number"])
def test_a_missing_row_sends_the_operator_to_the_index_with_a_warning(admin_client, page, object_id):
    model, view = PAGES[page]
    response = admin_client.get(_url(model, view, object_id))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")
    [message] = list(get_messages(response.wsgi_request))
    assert message.level_tag == "warning"
    assert str(message) == f"{model._meta.verbose_name} with ID “{object_id}” doesn’t exist. Perhaps it was deleted?"


def test_the_warning_is_in_the_operators_language(admin_client):
    admin_client.cookies["django_language"] = "pt"
    response = admin_client.get(_url(Host, "maintenance", "987654"), HTTP_ACCEPT_LANGUAGE="pt")
    [message] = list(get_messages(response.wsgi_request))
    assert str(message) == "servidor com o ID “987654” não existe. Talvez tenha sido apagado?"
