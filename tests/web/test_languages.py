"""The shop in four languages: URL prefixes, the first visit, the switcher, local formats."""

import pytest
from django.urls import reverse
from django.utils import translation

from tests import shop

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("accept, prefix", [("pt-BR,pt;q=0.9,en;q=0.5", "/pt/"), ("ko-KR,ko;q=0.9", "/ko/"),
                                            ("fr-CA,fr;q=0.8", "/fr/"), ("de-DE,de;q=0.9", "/en/"), ("", "/en/")])
def test_the_first_visit_follows_the_browsers_language(client, accept, prefix):
    response = client.get("/", HTTP_ACCEPT_LANGUAGE=accept)
    assert response.status_code == 302 and response.url == prefix


def test_the_switcher_keeps_the_page(client):
    shop.load_shop()
    page = client.get("/en/products/h100-sxm-80gb/?term=7").content.decode()
    assert 'action="/i18n/setlang/"' in page and 'value="ko"' in page and "한국어" in page
    response = client.post("/i18n/setlang/", {"language": "ko", "next": "/en/products/h100-sxm-80gb/?term=7"})
    assert response.status_code == 302 and response.url == "/ko/products/h100-sxm-80gb/?term=7"
    # The choice is remembered: the bare address now goes to Korean.
    assert client.get("/", HTTP_ACCEPT_LANGUAGE="en").url == "/ko/"


def test_every_language_prefix_serves_the_catalog(client):
    shop.load_shop()
    for code in ("en", "pt", "fr", "ko"):
        response = client.get(f"/{code}/")
        assert response.status_code == 200 and f'<html lang="{code}">' in response.content.decode()


def test_dates_and_money_follow_the_locale(client):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    order = shop.place(user, quantity=3, term_days=30)
    pages = {}
    for code in ("en", "pt", "fr"):
        with translation.override(code):
            url = reverse("order", kwargs={"reference": order.reference})
        pages[code] = client.get(url).content.decode()
    total = order.fiat_total  # e.g. 4,020.12
    whole, cents = f"{total:,.2f}".split(".")
    assert f"{whole}.{cents} USD" in pages["en"]
    assert f"{whole.replace(',', '.')},{cents} USD" in pages["pt"]  # 4.020,12
    assert f"{order.starts_at:%Y-%m-%d}" in pages["en"]
    assert f"{order.starts_at:%d/%m/%Y}" in pages["pt"] and f"{order.starts_at:%d/%m/%Y}" in pages["fr"]
