"""Whole catalog answers from the answer cache (anchorgpu.web.catalog_cache), and the snapshot query standing
in for the connection's health check (anchorgpu.catalog.answer_cache._snapshot).

On PostgreSQL, in autocommit (transactional tests), as in the server. Fixtures and helpers come from
test_answer_cache, which says why a hit is looked for in a pause of the server's other writers.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.middleware.csrf import _unmask_cipher_token
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from anchorgpu.allocation import services
from anchorgpu.catalog import answer_cache
from anchorgpu.catalog.answer_cache import SNAPSHOT_SQL
from anchorgpu.web import catalog_cache, views
from tests.catalog.test_answer_cache import (  # noqa: F401 - fixtures
    _computed, _get, _hit_after, _snapshot, second, shop, together)
from tests.faults.dbkill import backend_pid, kill_connection

PAGE = "/en/?term=3"
_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _token(response) -> str:
    tokens = _TOKEN.findall(response.content.decode())
    assert len(tokens) == 1, tokens  # the language form's
    return tokens[0]


def _without_token(response) -> str:
    return _TOKEN.sub('name="csrfmiddlewaretoken" value=""', response.content.decode())


def _cookie_secret(client) -> str:
    return client.cookies["csrftoken"].value


# ----------------------------------------------------------------- the whole page, for visitors without a session

@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_visitors_without_a_session_get_the_cached_page_with_their_own_csrf_token(shop, second):
    alice, bob = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    for _ in range(50):
        before = _snapshot()
        first, _sql = _get(alice, PAGE)
        again, again_sql = _get(alice, PAGE)
        other, other_sql = _get(bob, PAGE)  # bob's first request: he has no CSRF cookie yet
        if _snapshot() == before:
            break
    else:
        pytest.fail("the snapshot changed during every try")
    assert again_sql == other_sql == [SNAPSHOT_SQL]  # the page, not only its table, from the cache
    assert first.status_code == again.status_code == other.status_code == 200
    for client, response in ((alice, first), (alice, again), (bob, other)):
        assert catalog_cache.CSRF_HOLE not in response.content.decode()
        assert _unmask_cipher_token(_token(response)) == _cookie_secret(client)  # their own, masked afresh
    assert _cookie_secret(alice) != _cookie_secret(bob)
    assert _without_token(first) == _without_token(again) == _without_token(other)
    with pytest.MonkeyPatch.context() as patch:  # the page as the view renders it for a signed-in visitor
        patch.setattr(catalog_cache, "page_key", lambda request: None)
        rendered = Client().get(PAGE)
    assert catalog_cache.CSRF_HOLE not in rendered.content.decode()
    assert _without_token(rendered) == _without_token(again)  # the same page, rendered for the visitor
    assert sorted(rendered.headers) == sorted(again.headers)
    assert again["Vary"] == rendered["Vary"] == "Cookie" and again["Content-Language"] == "en"
    # The token of the cached page works for its visitor, and only for them.
    switch = {"language": "pt", "next": PAGE}
    assert bob.post("/i18n/setlang/", {**switch, "csrfmiddlewaretoken": _token(again)}).status_code == 403
    answer = bob.post("/i18n/setlang/", {**switch, "csrfmiddlewaretoken": _token(other)})
    assert answer.status_code == 302 and answer["Location"] == "/pt/?term=3"


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_page_around_the_table_is_kept_when_the_offers_change(shop, second, monkeypatch):
    """A hold changes the offers table: the cached page follows it, its page around the table is not rendered
    again, and the page is still the one the view renders for the visitor."""
    rendered = []
    real = views.render_to_string

    def counting(template, *args, **kwargs):
        rendered.append(template)
        return real(template, *args, **kwargs)

    monkeypatch.setattr(views, "render_to_string", counting)
    catalog_cache._SHELLS.clear()
    visitor = Client()
    before = visitor.get(PAGE)
    assert rendered.count("web/catalog.html") == 1
    h100 = shop["h100-sxm-80gb"]
    services.hold_place(product=h100, quantity=2, start=second.now, term_days=3)  # a new snapshot
    after = visitor.get(PAGE)
    assert rendered.count("web/catalog.html") == 1  # only the table was rendered again
    assert rendered.count("web/_offers.html") == 2
    assert _without_token(after) != _without_token(before)
    with pytest.MonkeyPatch.context() as patch:  # the page as the view renders it whole
        patch.setattr(catalog_cache, "page_key", lambda request: None)
        whole = Client().get(PAGE)
    assert _without_token(whole) == _without_token(after)
    assert catalog_cache.TABLE_HOLE not in after.content.decode() and after.content.decode().count('id="offers"') == 1
    assert _h100_free(after) == _h100_free(before) - 2  # its units free now, in the table


def _h100_free(response) -> int:
    found = re.search(r'H100 SXM 80 GB.*?<td class="num"[^>]*>(\d+) / \d+</td>', response.content.decode(), re.S)
    return int(found.group(1))


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_page_echoes_the_query_as_it_was_sent(client, shop, second):
    one = client.get("/en/?term=3&quantity=2").content.decode()
    other = client.get("/en/?quantity=2&term=3").content.decode()
    assert "next=/en/%3Fterm%3D3%26quantity%3D2" in one and "next=/en/%3Fquantity%3D2%26term%3D3" not in one
    assert "next=/en/%3Fquantity%3D2%26term%3D3" in other
    assert 'name="next" type="hidden" value="/en/?quantity=2&amp;term=3"' in other


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_query_with_parameters_the_form_ignores_takes_the_offers_table_from_the_cache(client, shop, second):
    """The page is keyed as sent; its offers table on the normalised query, so a campaign's tag costs the
    page's rendering, not the offers."""
    for _ in range(50):
        before = _snapshot()
        client.get(PAGE)
        tagged, sql = _get(client, PAGE + "&utm_source=newsletter")
        if _snapshot() == before:
            break
    assert tagged.status_code == 200 and _computed(sql)  # the page is rendered
    assert not any("fleet_device" in q or "catalog_pricelist" in q for q in sql)  # the offers are not read
    assert 'next=/en/%3Fterm%3D3%26utm_source%3Dnewsletter' in tagged.content.decode()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_page_and_the_api_compute_the_same_offers_once(client, shop, second):
    for _ in range(50):
        before = _snapshot()
        page = client.get("/en/?quantity=2&term=30")
        api, sql = _get(client, "/api/v1/offers?term=30&quantity=2")
        if _snapshot() == before:
            break
    assert page.status_code == api.status_code == 200 and _computed(sql)  # the JSON is made
    assert not any("fleet_device" in q or "catalog_pricelist" in q for q in sql)  # from the page's offers
    h100 = next(o for o in api.json() if o["product"] == "h100-sxm-80gb")
    assert f"{h100['units_free_now']} / {h100['units_total']}" in page.content.decode()


def test_paths_written_alike_but_decoded_differently_are_different_pages():
    """Raw UTF-8 bytes in a query and their percent-encoded Latin-1 reading give the same full path; the form
    reads different values from them, so they are different keys."""
    factory = RequestFactory()
    raw = factory.get("/en/", QUERY_STRING="quantity=" + "\u0663".encode().decode("latin-1"))
    encoded = factory.get("/en/", QUERY_STRING="quantity=%C3%99%C2%A3")
    assert raw.get_full_path() == encoded.get_full_path()
    assert raw.GET["quantity"] != encoded.GET["quantity"]
    assert catalog_cache.page_key(raw) != catalog_cache.page_key(encoded)


@pytest.mark.parametrize("cookies, whole", [({}, True), ({"csrftoken": "x" * 32}, True),
                                            ({"sessionid": "abc"}, False), ({"messages": "abc"}, False)])
def test_only_visitors_without_a_session_or_messages_get_the_whole_page_cached(cookies, whole):
    request = RequestFactory().get(PAGE)
    request.COOKIES.update(cookies)
    assert (catalog_cache.page_key(request) is not None) is whole


def test_queries_are_keyed_by_their_parameters_sorted_and_never_with_a_start():
    factory = RequestFactory()
    assert (catalog_cache.query_params(factory.get("/api/v1/offers?term=3&quantity=2").GET)
            == catalog_cache.query_params(factory.get("/api/v1/offers?quantity=2&term=3").GET)
            == (("quantity", ("2",)), ("term", ("3",))))
    assert catalog_cache.query_params(factory.get("/api/v1/offers?term=3&term=7").GET) == (("term", ("3", "7")),)
    assert catalog_cache.query_params(factory.get("/api/v1/offers?start=2026-12-01T09:00Z").GET) is None
    assert catalog_cache.query_params(factory.get("/api/v1/offers?start=&start=2026-12-01").GET) is None
    assert catalog_cache.query_params(factory.get("/api/v1/offers?start=").GET) == (("start", ("",)),)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_signed_in_visitor_gets_the_page_rendered_for_them(client, shop, second, django_user_model):
    alice = django_user_model.objects.create_user("alice@example.com", "alice@example.com", "pw-long-enough-1")
    client.force_login(alice)
    _first, page, sql = _hit_after(client, PAGE)
    assert "My orders" in page.content.decode() and "Log in" not in page.content.decode()
    assert SNAPSHOT_SQL in sql and len(sql) > 1  # her session and her user are read; the table is cached
    assert not any(_computed([s]) for s in sql)


# --------------------------------------------------------------------------- the snapshot query as the health check

@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_snapshot_query_is_the_health_check_of_a_connection_due_one(shop, second, monkeypatch):
    assert connection.settings_dict["CONN_HEALTH_CHECKS"]
    answer_cache.answer("test", ("health",), lambda now: "answer")  # the connection is open
    checks = []
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append("SELECT 1") or True)
    for _ in range(50):
        before = _snapshot()
        connection.health_check_done = False  # as at the start of every request (close_old_connections)
        with CaptureQueriesContext(connection) as queries:
            assert answer_cache.answer("test", ("health",), lambda now: "answer") == "answer"
        if _snapshot() == before:
            break
        checks.clear()  # the test's own snapshot read, on a connection already checked: nothing to check
    assert checks == []  # Django's own check was not sent
    assert [q["sql"] for q in queries.captured_queries] == [SNAPSHOT_SQL]
    assert connection.health_check_done


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_dropped_connection_due_its_check_is_replaced_and_the_answer_given(client, shop, second):
    expected = client.get("/api/v1/offers?term=7").content
    dropped = kill_connection()
    connection.health_check_done = False  # a new request on the kept connection
    response = client.get("/api/v1/offers?term=7")
    assert response.status_code == 200 and response.content == expected
    assert backend_pid() != dropped


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_connection_dropped_after_its_check_fails_like_any_query(shop, second):
    answer_cache.answer("test", ("dropped",), lambda now: "answer")
    kill_connection()
    connection.health_check_done = True  # checked earlier in this request
    with pytest.raises(OperationalError):
        answer_cache.answer("test", ("dropped",), lambda now: "answer")
    connection.close()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_snapshot_sent_through_libpq_is_the_one_the_cursor_reads(shop, second, monkeypatch):
    """Where queries are not recorded (the server), the snapshot query skips the cursor's layers."""
    checks = []
    for _ in range(50):
        with connection.cursor() as cursor:  # the ORM's way
            cursor.execute(SNAPSHOT_SQL)
            through_cursor = cursor.fetchone()[0]
        assert not connection.queries_logged
        monkeypatch.setattr(connection, "is_usable", lambda: checks.append("SELECT 1") or True)
        connection.health_check_done = False
        direct = answer_cache._snapshot(connection)
        monkeypatch.undo()
        if direct == through_cursor:
            break
    assert direct == through_cursor and re.fullmatch(r"\d+:\d+:[\d,]*", direct)
    assert checks == [] and connection.health_check_done


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_error_of_the_snapshot_sent_through_libpq_is_djangos(shop, second, monkeypatch):
    from django.db import ProgrammingError

    answer_cache._snapshot(connection)
    monkeypatch.setattr(answer_cache, "_SNAPSHOT_SQL_BYTES", b"SELECT no_such_column")
    with pytest.raises(ProgrammingError, match="no_such_column"):
        answer_cache._read_snapshot(connection)
    monkeypatch.undo()
    assert re.fullmatch(r"\d+:\d+:[\d,]*", answer_cache._read_snapshot(connection))  # the connection is fine


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_threads_waiting_for_an_answer_that_is_not_kept_compute_their_own_side_by_side(shop, second):
    """An error (a 400) is not kept: the threads that waited for it compute at once, not one after another."""
    for _ in range(20):
        answer_cache.clear()
        starts, answers, lock = [], [], threading.Lock()

        def compute(now):
            with lock:
                starts.append(time.monotonic())
            time.sleep(0.5)
            return "an error"

        before = _snapshot()
        together(lambda: answers.append(answer_cache.answer("test", ("bad",), compute, keep=lambda value: False)))
        assert answers == ["an error"] * 4
        if _snapshot() == before:
            break
    else:
        pytest.fail("the snapshot changed during every try")
    starts.sort()
    assert len(starts) == 4 and len(answer_cache._CACHE) == 0
    assert starts[1] - starts[0] >= 0.45  # the others waited for the first computation
    assert starts[3] - starts[1] < 0.4  # then computed side by side (in turn, 1 s apart at least)
