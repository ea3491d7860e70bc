"""The limit of active API tokens is the token service's: the account page only shows its refusal, and two
requests at once cannot both pass it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from anchorgpu.accounts.api_tokens import MAX_TOKENS, TooManyTokens, api_token_create, api_token_revoke
from anchorgpu.accounts.models import ApiToken
from tests import shop
from tests.allocation.test_race import run_together


def _fill(user, count: int = MAX_TOKENS):
    return [api_token_create(user=user, name=f"t{i}")[0] for i in range(count)]


@pytest.mark.django_db
def test_the_service_refuses_a_token_beyond_the_limit_and_counts_only_active_ones():
    user = shop.customer()
    tokens = _fill(user)
    with pytest.raises(TooManyTokens) as refused:
        api_token_create(user=user, name="one more")
    assert str(MAX_TOKENS) in refused.value.message
    assert ApiToken.objects.filter(user=user).count() == MAX_TOKENS
    api_token_revoke(token=tokens[0], actor="alice")
    api_token_create(user=user, name="one more")  # a revoked token no longer counts
    assert ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() == MAX_TOKENS
    other = shop.customer("bob@example.com")
    api_token_create(user=other, name="bob's")  # the limit is per customer


@pytest.mark.django_db
def test_the_account_page_shows_the_services_refusal_as_a_400():
    user = shop.customer()
    _fill(user)
    client = Client()
    client.force_login(user)
    with translation.override("en"):
        url = reverse("api_tokens")
    response = client.post(url, {"name": "one more"})
    assert response.status_code == 400
    assert "revoke one before making another" in response.content.decode()
    assert ApiToken.objects.filter(user=user).count() == MAX_TOKENS


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_race
def test_two_requests_at_once_cannot_both_pass_the_limit():
    user = shop.customer()
    _fill(user, MAX_TOKENS - 1)
    results = run_together([lambda i=i: api_token_create(user=user, name=f"race {i}") for i in range(4)])
    granted = [r for outcome, r in results if outcome == "granted"]
    refused = [r for outcome, r in results if outcome == "refused"]
    assert len(granted) == 1 and len(refused) == 3
    assert all(isinstance(r, TooManyTokens) for r in refused), refused
    assert ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() == MAX_TOKENS
