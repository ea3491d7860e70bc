"""Saved SSH public keys: the service (checked as checkout checks keys), the account page, the header's
account menu, and checkout with ticked saved keys."""

from __future__ import annotations

import json
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.urls import reverse

from anchorgpu.accounts.api_tokens import api_token_create
from anchorgpu.accounts.models import SavedKey
from anchorgpu.accounts.saved_keys import MAX_SAVED_KEYS, SavedKeyError, saved_key_add, saved_key_remove
from anchorgpu.audit.models import AuditEntry
from anchorgpu.orders.models import Order, OrderKey
from anchorgpu.orders.ssh_keys import parse_key
from tests import shop

pytestmark = pytest.mark.django_db

PRIVATE_KEY = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
-----END OPENSSH PRIVATE KEY-----"""


def new_key(comment: str = "bob@desk") -> str:
    public = ed25519.Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}"


@pytest.fixture
def alice():
    return shop.customer()


# --- the service ---------------------------------------------------------------------------------------------------

def test_a_valid_key_is_saved_with_its_fingerprint_and_audited(alice):
    saved = saved_key_add(user=alice, text="  " + shop.ED25519 + "\n", label="  work   laptop ")
    assert saved.label == "work laptop" and saved.key_type == "ssh-ed25519" and saved.bits == 256
    assert saved.fingerprint == parse_key(shop.ED25519).fingerprint
    assert saved.public_key == shop.ED25519 and saved.comment == "alice@laptop"
    assert AuditEntry.objects.filter(action="saved_key_add", object_id=str(saved.pk)).exists()


def test_without_a_label_the_comment_names_the_key(alice):
    assert saved_key_add(user=alice, text=shop.ED25519).label == "alice@laptop"


@pytest.mark.parametrize("text, code, words", [
    (PRIVATE_KEY, "private_key", "PRIVATE key"),
    ("ssh-ed25519 not-base64!", "bad_key", "does not decode"),
    ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "bad_key", "not an SSH public key"),
    ("", "bad_key", "looks like"),
    (shop.ED25519 + "\n" + new_key(), "invalid", "one key at a time"),
])
def test_keys_checkout_refuses_are_refused_and_nothing_is_saved(alice, text, code, words):
    with pytest.raises(SavedKeyError) as refused:
        saved_key_add(user=alice, text=text)
    assert refused.value.code == code and words.lower() in refused.value.message.lower()
    assert refused.value.leaked == (code == "private_key")
    assert not SavedKey.objects.exists()


def test_the_same_key_twice_is_a_duplicate_even_with_another_comment(alice):
    saved_key_add(user=alice, text=shop.ED25519)
    same_blob = shop.ED25519.rsplit(" ", 1)[0] + " other@comment"
    with pytest.raises(SavedKeyError) as refused:
        saved_key_add(user=alice, text=same_blob)
    assert refused.value.code == "duplicate" and "already saved" in refused.value.message
    assert SavedKey.objects.count() == 1
    # Another customer may save the same public key on their own account.
    assert saved_key_add(user=shop.customer("bob@example.com"), text=shop.ED25519).user.email == "bob@example.com"


def test_saved_keys_are_limited_per_customer(alice):
    for n in range(MAX_SAVED_KEYS):
        saved_key_add(user=alice, text=new_key(f"k{n}"))
    with pytest.raises(SavedKeyError) as refused:
        saved_key_add(user=alice, text=new_key())
    assert refused.value.code == "too_many" and SavedKey.objects.count() == MAX_SAVED_KEYS


def test_removing_is_only_for_the_owner(alice):
    saved = saved_key_add(user=alice, text=shop.ED25519)
    assert saved_key_remove(user=shop.customer("bob@example.com"), key_id=saved.pk) is None
    assert SavedKey.objects.filter(pk=saved.pk).exists()
    assert saved_key_remove(user=alice, key_id=saved.pk).fingerprint == saved.fingerprint
    assert not SavedKey.objects.exists()
    assert AuditEntry.objects.filter(action="saved_key_remove", object_id=str(saved.pk)).exists()


# --- the account page and the header -------------------------------------------------------------------------------

@pytest.fixture
def customer_client(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    client.user = user
    return client


def test_keys_page_needs_a_log_in(client):
    response = client.get(reverse("ssh_keys"))
    assert response.status_code == 302 and "/account/login/" in response.url


def test_keys_page_adds_lists_and_removes(customer_client):
    url = reverse("ssh_keys")
    response = customer_client.post(url, {"label": "desk", "public_key": shop.ED25519}, follow=True)
    assert response.status_code == 200
    saved = SavedKey.objects.get(user=customer_client.user)
    page = response.content.decode()
    assert "desk" in page and saved.fingerprint in page and saved.created_at.strftime("%Y-%m-%d") in page
    assert "is saved" in page
    response = customer_client.post(url, {"remove": str(saved.pk)}, follow=True)
    assert response.status_code == 200 and not SavedKey.objects.exists()
    assert "Orders placed with it keep it" in response.content.decode()


def test_keys_page_refuses_a_private_key_without_echoing_it(customer_client):
    response = customer_client.post(reverse("ssh_keys"), {"label": "oops", "public_key": PRIVATE_KEY})
    assert response.status_code == 400
    page = response.content.decode()
    assert "PRIVATE key" in page and "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in page
    assert not SavedKey.objects.exists()


@pytest.mark.parametrize("data, words", [
    ({"public_key": "ssh-ed25519 not-base64!"}, "does not decode"),
    ({"public_key": ""}, "required"),
    ({"public_key": "x" * 20_000}, "at most"),
    ({"label": "L" * 100, "public_key": shop.ED25519}, "at most"),
])
def test_keys_page_bad_input_is_a_400_with_the_reason(customer_client, data, words):
    response = customer_client.post(reverse("ssh_keys"), data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert words in " ".join(e for field in errors.values() for e in field).lower()
    assert not SavedKey.objects.exists()


def test_keys_page_duplicate_is_a_400(customer_client):
    saved_key_add(user=customer_client.user, text=shop.ED25519)
    response = customer_client.post(reverse("ssh_keys"), {"public_key": shop.ED25519})
    assert response.status_code == 400 and "already saved" in response.content.decode()


def test_removing_another_customers_key_changes_nothing(customer_client):
    theirs = saved_key_add(user=shop.customer("bob@example.com"), text=shop.ED25519)
    assert customer_client.post(reverse("ssh_keys"), {"remove": str(theirs.pk)}).status_code == 302
    assert customer_client.post(reverse("ssh_keys"), {"remove": "not-a-number"}).status_code == 302
    assert SavedKey.objects.filter(pk=theirs.pk).exists()


def test_the_header_account_menu_links_the_account_pages(customer_client):
    page = customer_client.get(reverse("catalog")).content.decode()
    menu = page[page.index('class="account-menu"'):page.index("</details>")]
    for name in ("orders", "ssh_keys", "api_tokens", "password_change", "logout"):
        assert reverse(name) in menu, name
    assert reverse("api_tokens") == "/en/account/tokens/"


def test_a_visitor_sees_no_account_menu(client):
    shop.load_shop()
    page = client.get(reverse("catalog")).content.decode()
    assert "account-menu" not in page and reverse("api_tokens") not in page


# --- checkout with saved keys --------------------------------------------------------------------------------------

def form_data(**overrides):
    data = {"quantity": "1", "term": "3", "start_mode": "asap", "start": "", "environment": "pytorch-cuda124",
            "name": "Alice Example", "email": "alice@example.com", "company": "", "country": "PT",
            "billing_address": "", "vat_id": "", "ssh_keys": "", "asset": "btc", "accept": "on"}
    data.update(overrides)
    return data


def checkout_url(slug="h100-sxm-80gb"):
    return reverse("checkout", kwargs={"slug": slug})


def test_checkout_lists_saved_keys_to_tick(customer_client):
    saved = saved_key_add(user=customer_client.user, text=shop.ED25519, label="desk")
    page = customer_client.get(checkout_url()).content.decode()
    assert f'value="{saved.fingerprint}"' in page and "desk" in page and reverse("ssh_keys") in page


def test_a_ticked_saved_key_lands_on_the_order_and_survives_its_removal(customer_client):
    saved = saved_key_add(user=customer_client.user, text=shop.ED25519, label="desk")
    response = customer_client.post(checkout_url(), form_data(saved_keys=[saved.fingerprint]))
    assert response.status_code == 302, response.context["form"].errors
    order = Order.objects.get()
    assert [(k.fingerprint, k.public_key) for k in order.ssh_keys.all()] == [(saved.fingerprint, shop.ED25519)]
    saved_key_remove(user=customer_client.user, key_id=saved.pk)
    assert list(OrderKey.objects.filter(order=order).values_list("fingerprint", flat=True)) == [saved.fingerprint]
    assert saved.fingerprint in customer_client.get(response.url).content.decode()


def test_pasted_and_ticked_keys_join_without_repeats(customer_client):
    saved = saved_key_add(user=customer_client.user, text=shop.ED25519)
    other = new_key()
    response = customer_client.post(checkout_url(), form_data(ssh_keys=other + "\n" + shop.ED25519,
                                                              saved_keys=[saved.fingerprint]))
    assert response.status_code == 302
    fingerprints = list(Order.objects.get().ssh_keys.values_list("fingerprint", flat=True))
    assert fingerprints == [parse_key(other).fingerprint, saved.fingerprint]
    assert SavedKey.objects.count() == 1  # nothing asked to be saved


def test_pasted_keys_are_saved_when_asked(customer_client):
    saved_key_add(user=customer_client.user, text=shop.ED25519)
    other = new_key("new@laptop")
    response = customer_client.post(checkout_url(), form_data(ssh_keys=f"{shop.ED25519}\n{other}", save_keys="on"))
    assert response.status_code == 302
    assert sorted(SavedKey.objects.values_list("label", flat=True)) == ["alice@laptop", "new@laptop"]


def test_another_customers_saved_key_cannot_be_ticked(customer_client):
    theirs = saved_key_add(user=shop.customer("bob@example.com"), text=new_key())
    response = customer_client.post(checkout_url(), form_data(saved_keys=[theirs.fingerprint]))
    assert response.status_code == 400
    assert "not one of your saved keys" in " ".join(response.context["form"].errors["saved_keys"])
    assert not Order.objects.exists()


def test_no_key_pasted_or_ticked_is_a_clear_error(customer_client):
    saved_key_add(user=customer_client.user, text=shop.ED25519)
    response = customer_client.post(checkout_url(), form_data())
    assert response.status_code == 400
    assert "tick one of your saved keys" in " ".join(response.context["form"].errors["ssh_keys"])
    assert not Order.objects.exists()


def test_a_refused_checkout_keeps_the_ticked_keys(customer_client):
    saved = saved_key_add(user=customer_client.user, text=shop.ED25519)
    response = customer_client.post(checkout_url(), form_data(saved_keys=[saved.fingerprint], accept=""))
    assert response.status_code == 400
    page = response.content.decode()
    box = page[page.index(f'value="{saved.fingerprint}"') - 200:page.index(f'value="{saved.fingerprint}"') + 120]
    assert "checked" in box


# --- the API: saved keys named by fingerprint ----------------------------------------------------------------------

def _api_order(client, token, body):
    return client.post("/api/v1/orders", data=json.dumps(body), content_type="application/json",
                       headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex})


def api_body(**overrides):
    body = {"product": "h100-sxm-80gb", "quantity": 1, "term": 3, "start": None, "environment": "pytorch-cuda124",
            "name": "Alice Example", "email": "alice@example.com", "country": "PT", "asset": "btc", "accept": True}
    body.update(overrides)
    return body


def test_an_api_order_may_name_saved_keys_by_fingerprint(client):
    shop.load_shop()
    alice = shop.customer()
    _row, token = api_token_create(user=alice, name="cli")
    saved = saved_key_add(user=alice, text=shop.ED25519)
    response = _api_order(client, token, api_body(saved_keys=[saved.fingerprint]))
    assert response.status_code == 201, response.content
    order = Order.objects.get(reference=response.json()["reference"])
    assert list(order.ssh_keys.values_list("fingerprint", flat=True)) == [saved.fingerprint]


def test_an_api_order_cannot_name_another_customers_key_or_none(client):
    shop.load_shop()
    alice = shop.customer()
    _row, token = api_token_create(user=alice, name="cli")
    theirs = saved_key_add(user=shop.customer("bob@example.com"), text=shop.ED25519)
    refused = _api_order(client, token, api_body(saved_keys=[theirs.fingerprint]))
    assert refused.status_code == 400 and "saved_keys" in refused.json()["error"]["fields"]
    empty = _api_order(client, token, api_body())
    assert empty.status_code == 400 and "ssh_keys" in empty.json()["error"]["fields"]
    assert not Order.objects.exists()
