"""Every payment setting an operator needs is editable in the admin; what is read-only says why; what cannot
work is not offered (a second settings row, deleting a key that issued addresses, deleting the price list in
effect)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from anchorgpu.catalog.models import PriceList
from anchorgpu.payments.models import Asset, DepositKey, PaymentSettings, WatchState
from tests import factories, shop

pytestmark = pytest.mark.django_db


def _editable_fields(model) -> set[str]:
    return {f.name for f in model._meta.concrete_fields if f.editable and not f.primary_key}


def _admin_fields(model, obj=None) -> tuple[set[str], set[str]]:
    model_admin = admin.site._registry[model]
    request = None
    shown = {name for _title, options in model_admin.get_fieldsets(request, obj) for name in options["fields"]}
    return shown, set(model_admin.get_readonly_fields(request, obj))


def test_every_payment_setting_is_on_the_settings_page_and_editable():
    shown, readonly = _admin_fields(PaymentSettings, PaymentSettings.current())
    assert shown == _editable_fields(PaymentSettings)
    assert not readonly


def test_the_settings_page_saves_the_grace_and_the_hold(admin_client):
    row = PaymentSettings.current()
    url = reverse("admin:payments_paymentsettings_change", args=[row.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="claim_grace_minutes"' in page and 'name="pending_hold_hours"' in page
    data = {"quote_minutes": 45, "monitor_hours": 48, "claim_grace_minutes": 90, "pending_hold_hours": 12,
            "rate_max_age_minutes": 60, "contact_email": "", "contact_other": "", "contact_hours": ""}
    assert admin_client.post(url, data).status_code == 302
    row.refresh_from_db()
    assert (row.claim_grace_minutes, row.pending_hold_hours, row.quote_minutes) == (90, 12, 45)
    too_long = admin_client.post(url, {**data, "pending_hold_hours": 500})
    assert too_long.status_code == 200 and "errornote" in too_long.content.decode()


def test_no_second_settings_row_and_no_delete(admin_client):
    PaymentSettings.current()
    assert admin_client.get(reverse("admin:payments_paymentsettings_add")).status_code == 403
    page = admin_client.get(reverse("admin:payments_paymentsettings_change", args=[1])).content.decode()
    assert 'class="deletelink"' not in page


def test_every_asset_field_is_editable_until_the_asset_is_quoted_then_says_why(admin_client):
    shop.load_shop()
    asset = Asset.objects.get(code="btc")
    shown, readonly = _admin_fields(Asset, None)
    assert shown == _editable_fields(Asset) and not readonly
    order = shop.place(shop.customer())
    assert order.quote.asset.code == "btc"
    shown, readonly = _admin_fields(Asset, asset)
    assert shown == _editable_fields(Asset)
    assert readonly == {"code", "network", "scheme", "chain_id", "decimals", "contract", "finality"}
    page = admin_client.get(reverse("admin:payments_asset_change", args=[asset.pk])).content.decode()
    assert "this asset has been quoted, and its quotes and transfers are read with them" in page
    assert 'class="deletelink"' not in page


def test_read_only_fields_of_keys_and_watchers_say_why(admin_client):
    shop.load_shop()
    key = DepositKey.objects.order_by("pk").first()
    page = admin_client.get(reverse("admin:payments_depositkey_change", args=[key.pk])).content.decode()
    assert "would hand out an address already given to a customer" in page
    state = WatchState.objects.create(asset=Asset.objects.get(code="btc"))
    page = admin_client.get(reverse("admin:payments_watchstate_change", args=[state.pk])).content.decode()
    assert "only where the next scan starts is yours to change" in page


def test_a_key_that_issued_addresses_cannot_be_deleted_one_by_one_or_from_the_list(admin_client):
    shop.load_shop()
    shop.place(shop.customer())
    issued = DepositKey.objects.filter(next_index__gt=0).get()
    page = admin_client.get(reverse("admin:payments_depositkey_change", args=[issued.pk])).content.decode()
    assert 'class="deletelink"' not in page
    assert admin_client.post(reverse("admin:payments_depositkey_delete", args=[issued.pk]),
                             {"post": "yes"}).status_code == 403
    response = admin_client.post(reverse("admin:payments_depositkey_changelist"), {
        "action": "delete_selected", ACTION_CHECKBOX_NAME: [issued.pk], "post": "yes"})
    assert DepositKey.objects.filter(pk=issued.pk).exists()
    assert response.status_code in (200, 302)  # "no action selected": the list has no bulk delete
    assert "delete_selected" not in admin_client.get(reverse("admin:payments_depositkey_changelist")).content.decode()


def test_the_price_list_in_effect_cannot_be_deleted_a_future_one_can(admin_client):
    product = factories.product("h200", memory=141)
    current = factories.price_list({product: "3.10"})
    page = admin_client.get(reverse("admin:catalog_pricelist_change", args=[current.pk])).content.decode()
    assert 'class="deletelink"' not in page and "In effect now, so it cannot be deleted" in page
    assert admin_client.post(reverse("admin:catalog_pricelist_delete", args=[current.pk]),
                             {"post": "yes"}).status_code == 403
    admin_client.post(reverse("admin:catalog_pricelist_changelist"), {
        "action": "delete_selected", ACTION_CHECKBOX_NAME: [current.pk], "post": "yes"})
    assert PriceList.objects.filter(pk=current.pk).exists()
    from datetime import timedelta

    from django.utils import timezone
    later = PriceList.objects.create(name="next season", currency="USD",
                                     valid_from=timezone.now() + timedelta(days=30))
    page = admin_client.get(reverse("admin:catalog_pricelist_change", args=[later.pk])).content.decode()
    assert 'class="deletelink"' in page
    assert admin_client.post(reverse("admin:catalog_pricelist_delete", args=[later.pk]),
                             {"post": "yes"}).status_code == 302
    assert not PriceList.objects.filter(pk=later.pk).exists()
