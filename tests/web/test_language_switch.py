"""The language switcher's endpoint: every language from every other, whatever the browser's
language; the page's query kept; an address off the site never followed; an unknown language a 400."""

import pytest

from anchorgpu.web.language_switch import in_language
from tests import shop

pytestmark = pytest.mark.django_db

LANGUAGES = ("en", "pt", "fr", "ko")
BROWSERS = {"en": "en-US,en;q=0.9", "pt": "pt-BR,pt;q=0.9,en;q=0.5", "fr": "fr-FR,fr;q=0.9", "ko": "ko-KR,ko;q=0.9"}
PAGES = ["/{}/", "/{}/products/h100-sxm-80gb/?quantity=2&term=7", "/{}/checkout/h100-sxm-80gb/?quantity=2&term=30",
         "/{}/planner/?preset=llama-3.1-8b&method=lora&term=7", "/{}/guides/", "/{}/guides/blackwell-lots/",
         "/{}/orders/", "/{}/account/login/?next=/{}/orders/", "/{}/planner/reports/", "/{}/no-such-page/"]


def switch(client, language, next_url, **headers):
    return client.post("/i18n/setlang/", {"language": language, "next": next_url}, **headers)


@pytest.mark.parametrize("browser", LANGUAGES)
def test_every_language_is_reached_from_every_other_whatever_the_browser_speaks(client, browser):
    for page in PAGES:
        for start in LANGUAGES:
            for target in LANGUAGES:
                client.cookies.clear()  # no earlier choice: the browser's language is the active one
                response = switch(client, target, page.replace("{}", start), HTTP_ACCEPT_LANGUAGE=BROWSERS[browser])
                assert response.status_code == 302, (page, start, target)
                assert response["Location"] == page.replace("{}", target), (browser, page, start, target)
                assert response.cookies["django_language"].value == target


def test_the_chosen_language_is_remembered_and_served(client):
    shop.load_shop()
    response = switch(client, "ko", "/pt/guides/blackwell-lots/", HTTP_ACCEPT_LANGUAGE=BROWSERS["en"])
    assert response["Location"] == "/ko/guides/blackwell-lots/"
    page = client.get(response["Location"], HTTP_ACCEPT_LANGUAGE=BROWSERS["en"])
    assert page.status_code == 200 and '<html lang="ko">' in page.content.decode()
    assert client.get("/", HTTP_ACCEPT_LANGUAGE=BROWSERS["pt"]).url == "/ko/"  # the cookie, not the browser


def test_the_query_and_its_encoding_are_kept():
    query = "?quantity=1&term=3&start=2031-05-01T10%3A00&options=ipv4&options=nvme"
    assert in_language(f"/fr/checkout/b200-lot/{query}", "ko") == f"/ko/checkout/b200-lot/{query}"
    # The log-in page's way back follows the new language too, however it is encoded.
    assert in_language("/pt/account/login/?next=/pt/orders/%3Fpage%3D2", "en") == \
        "/en/account/login/?next=/en/orders/%3Fpage%3D2"
    assert in_language("/pt/account/signup/?next=%2Fpt%2Fcheckout%2Fh200%2F%3Fterm%3D3&x=1", "ko") == \
        "/ko/account/signup/?next=%2Fko%2Fcheckout%2Fh200%2F%3Fterm%3D3&x=1"
    assert in_language("/pt/guides/?next=/ptx/&anext=/pt/", "fr") == "/fr/guides/?next=/ptx/&anext=/pt/"
    assert in_language("/pt/planner/#options-title", "fr") == "/fr/planner/#options-title"


@pytest.mark.parametrize("target, expected", [("/", "/ko/"), ("", "/ko/"), ("/guides/", "/ko/guides/"),
                                              ("/admin/", "/admin/"), ("/pt", "/ko"),
                                              ("/ptx/guides/", "/ko/ptx/guides/")])
def test_addresses_without_a_language_prefix(client, target, expected):
    response = switch(client, "ko", target)
    assert response.status_code == 302 and response["Location"] == expected


@pytest.mark.parametrize("target", ["https://evil.example/pt/", "//evil.example/pt/", "http://evil.example/",
                                    "/\\evil.example/", "javascript:alert(1)", "https:///evil.example/"])
def test_an_address_off_the_site_is_not_followed(client, target):
    response = switch(client, "fr", target)
    assert response.status_code == 302 and response["Location"] == "/fr/"
    # Without a usable next, a Referer on this site is where the visitor came from.
    response = switch(client, "fr", target, HTTP_REFERER="http://testserver/pt/guides/?x=1")
    assert response["Location"] == "/fr/guides/?x=1"
    response = switch(client, "fr", target, HTTP_REFERER="https://evil.example/pt/guides/")
    assert response["Location"] == "/fr/"


@pytest.mark.parametrize("language", ["de", "", "xx-yy", "ko-KR", "<script>", "e" * 300])
def test_an_unknown_language_is_a_400_and_sets_nothing(client, language):
    response = switch(client, language, "/pt/guides/")
    assert response.status_code == 400 and "django_language" not in response.cookies
    assert "We could not read that request" in response.content.decode()


def test_only_a_post_switches(client):
    assert client.get("/i18n/setlang/?language=ko&next=/pt/").status_code == 405
