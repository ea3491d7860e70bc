"""The exact cache of the catalog's answers (anchorgpu.catalog.answer_cache).

On PostgreSQL the cache keys each answer on the database snapshot, the second and the request. The
requests in these tests run in autocommit (transactional tests), as in the server: inside a test's own
transaction the cache is off. The second is fixed by the ``second`` fixture. Transaction IDs count across
the whole PostgreSQL server, so another writer on it (another test run) may change the snapshot between
two requests; a test that expects a hit repeats the pair until the snapshot was the same throughout.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog.answer_cache import SNAPSHOT_SQL, AnswerCache
from tests.shop import customer, load_shop, place

OFFERS = "/api/v1/offers?term=3"
TABLE = {"HX-Request": "true"}  # the catalog page's offers table alone


@pytest.fixture
def shop(transactional_db):
    answer_cache.clear()
    yield load_shop()
    answer_cache.clear()


class Clock:
    def __init__(self):
        self.now = timezone.now().replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def second(monkeypatch) -> Clock:
    """The second the answers are computed for, fixed until a test moves it."""
    clock = Clock()
    monkeypatch.setattr(answer_cache, "_now", clock)
    return clock


def _snapshot() -> str:
    with connection.cursor() as cursor:
        cursor.execute(SNAPSHOT_SQL)
        return cursor.fetchone()[0]


def _get(client, path, headers=None):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, headers=headers or {})
    return response, [q["sql"] for q in queries.captured_queries]


def _computed(sql: list[str]) -> bool:
    return any(s.startswith("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ") for s in sql)


def _hit_after(client, path, headers=None):
    """The answer to ``path`` asked twice, and the second time's queries, from a try in which the snapshot
    stayed the same (no write anywhere on the server in between)."""
    for _ in range(50):
        before = _snapshot()
        first, _sql = _get(client, path, headers)
        second, sql = _get(client, path, headers)
        if _snapshot() == before:
            return first, second, sql
    pytest.fail("the snapshot changed during every try: another writer on the server never paused")


def together(ask, threads: int = 4) -> None:
    """``ask()`` in several threads at once, each with its own connection (closed after)."""
    barrier = threading.Barrier(threads)

    def run():
        try:
            barrier.wait()
            ask()
        finally:
            connections.close_all()

    started = [threading.Thread(target=run) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()


def _h100(response) -> dict:
    assert response.status_code == 200, response.content
    return next(o for o in response.json() if o["product"] == "h100-sxm-80gb")


# --------------------------------------------------------------------------- PostgreSQL: hits, and exactness

@pytest.mark.parametrize("path, headers", [(OFFERS, None), ("/en/?term=3", TABLE), ("/en/?term=3", None)])
@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_second_identical_request_within_a_second_reads_only_the_snapshot(client, shop, second, path, headers):
    first, again, sql = _hit_after(client, path, headers)
    assert sql == [SNAPSHOT_SQL]
    assert again.status_code == first.status_code == 200
    assert again["Content-Type"] == first["Content-Type"]
    if headers or path == OFFERS:  # the JSON, the table: the same bytes
        assert again.content == first.content
    assert answer_cache._CACHE.hits >= 1


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_cached_answers_are_the_answers_computed_without_the_cache(client, shop, second, settings):
    cached = {path: _hit_after(client, path, TABLE if path.startswith("/en/") else None)[1].content
              for path in (OFFERS, "/en/?term=30&quantity=2")}
    settings.ANCHORGPU_CATALOG_CACHE = False
    assert client.get(OFFERS).content == cached[OFFERS]
    assert client.get("/en/?term=30&quantity=2", headers=TABLE).content == cached["/en/?term=30&quantity=2"]


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_committed_booking_changes_the_answer_at_once_within_the_same_second(client, shop, second):
    before = _h100(client.get(OFFERS))
    table_before = client.get("/en/?term=3", headers=TABLE).content.decode()
    assert _h100(client.get(OFFERS)) == before  # cached, or the same answer computed again
    place(customer(), product="h100-sxm-80gb", quantity=1, term_days=3, now=second.now)  # committed
    response, sql = _get(client, OFFERS)
    assert _computed(sql)
    after = _h100(response)
    assert after["units_free_now"] == before["units_free_now"] - 1
    assert after["units_total"] == before["units_total"]
    table = client.get("/en/?term=3", headers=TABLE).content.decode()
    total = before["units_total"]
    assert f"{before['units_free_now']} / {total}" in table_before
    assert f"{before['units_free_now'] - 1} / {total}" in table
    assert answer_cache._now() == second.now  # all in the same second


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_new_second_is_computed_again(client, shop, second):
    _hit_after(client, OFFERS)
    second.now += timedelta(seconds=1)
    response, sql = _get(client, OFFERS)
    assert response.status_code == 200 and _computed(sql)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_another_language_or_query_is_another_entry(client, shop, second):
    for _ in range(50):
        before = _snapshot()
        english, _sql = _get(client, "/en/?term=3", TABLE)
        portuguese, pt_sql = _get(client, "/pt/?term=3", TABLE)
        week, week_sql = _get(client, "/api/v1/offers?term=7", None)
        three, three_sql = _get(client, OFFERS, None)
        two, two_sql = _get(client, "/api/v1/offers?term=3&quantity=2", None)
        if _snapshot() == before:
            break
    else:
        pytest.fail("the snapshot changed during every try")
    assert _computed(pt_sql) and _computed(week_sql) and _computed(three_sql) and _computed(two_sql)
    assert english.content != portuguese.content
    assert 'href="/pt/products/' in portuguese.content.decode() and 'href="/en/' not in portuguese.content.decode()
    assert {o["term"] for o in week.json()} == {7} and {o["quantity"] for o in two.json()} == {2}
    assert _hit_after(client, "/pt/?term=3", TABLE)[2] == [SNAPSHOT_SQL]


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_bad_queries_are_answered_each_time_and_not_kept(client, shop, second):
    """A query keyed as sent is validated inside the computation; its 400 is computed again each time."""
    for path, headers in (("/api/v1/offers?term=4", None), ("/api/v1/offers?colour=red", None),
                          ("/en/?quantity=0", None), ("/en/?quantity=0", TABLE)):
        for _ in range(2):
            response, sql = _get(client, path, headers)
            assert response.status_code == 400
            assert _computed(sql)
    assert len(answer_cache._CACHE) == 0
    assert client.get("/api/v1/offers?term=4").json()["error"]["code"] == "invalid_request"
    assert "Terms are 3, 7 or 30 days" in client.get("/en/?term=4").content.decode()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_start_is_checked_at_each_request_before_the_cache_is_asked(client, shop, second):
    """Whether a start has passed depends on the moment, not on the second: never keyed as sent."""
    past = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    for path, headers in ((f"/api/v1/offers?start={past}", None), (f"/en/?start={past}", TABLE),
                          (f"/en/?start={past}", None)):
        response, sql = _get(client, path, headers)
        assert response.status_code == 400 and sql == []  # refused before the snapshot is read
    later = (timezone.now() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    first, again, sql = _hit_after(client, f"/api/v1/offers?term=3&start={later}")
    assert again.content == first.content and sql == [SNAPSHOT_SQL]
    assert all(o["earliest_start"] >= later for o in again.json() if o["earliest_start"])


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_page_around_the_cached_table_is_the_visitors_own(client, shop, second, django_user_model):
    """The cached part is the offers table; the menu and the CSRF tokens are rendered for each request."""
    table = client.get("/en/?term=3", headers=TABLE).content.decode()
    assert "csrfmiddlewaretoken" not in table and "Log out" not in table and "Log in" not in table
    alice = django_user_model.objects.create_user("alice@example.com", "alice@example.com", "pw-long-enough-1")
    client.force_login(alice)
    _first, signed_in, _sql = _hit_after(client, "/en/?term=3")
    page = signed_in.content.decode()
    assert "My orders" in page and "Log out" in page and "csrfmiddlewaretoken" in page
    client.logout()
    anonymous = client.get("/en/?term=3").content.decode()
    assert "My orders" not in anonymous and "Log in" in anonymous and "csrfmiddlewaretoken" in anonymous
    assert table in page and table in anonymous


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_threads_asking_for_the_same_key_compute_it_once(shop, second):
    for _ in range(20):
        answer_cache.clear()
        calls, results = [], []

        def compute(now):
            calls.append(now)
            time.sleep(0.2)
            return "answer"

        before = _snapshot()
        together(lambda: results.append(answer_cache.answer("test", ("same",), compute)))
        assert results == ["answer"] * 4
        if _snapshot() == before:
            assert calls == [second.now]
            return
    pytest.fail("the snapshot changed during every try")


# --------------------------------------------------------------------------- when it is off

@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_setting_turns_it_off(client, shop, second, settings):
    settings.ANCHORGPU_CATALOG_CACHE = False
    assert not answer_cache.enabled()
    for path, headers in ((OFFERS, None), ("/en/?term=3", TABLE)):
        for _ in range(2):
            response, sql = _get(client, path, headers)
            assert response.status_code == 200
            assert SNAPSHOT_SQL not in sql and not _computed(sql) and len(sql) > 1
    assert len(answer_cache._CACHE) == 0


@pytest.mark.postgres_only
def test_it_is_off_inside_an_open_transaction(client, db):
    """Its own uncommitted writes are visible to a transaction, and not part of the snapshot."""
    load_shop()
    answer_cache.clear()
    assert connection.in_atomic_block and not answer_cache.enabled()
    response, sql = _get(client, OFFERS)
    assert response.status_code == 200 and SNAPSHOT_SQL not in sql and len(answer_cache._CACHE) == 0


@pytest.mark.django_db(transaction=True)
def test_it_is_off_on_sqlite(client, shop, second, vendor):
    if vendor != "sqlite":
        pytest.skip("the SQLite pass only")
    assert not answer_cache.enabled()
    for _ in range(2):
        response, sql = _get(client, OFFERS)
        assert response.status_code == 200 and len(sql) > 1 and SNAPSHOT_SQL not in sql
        response, sql = _get(client, "/en/?term=3", TABLE)
        assert response.status_code == 200 and len(sql) > 1
    assert len(answer_cache._CACHE) == 0


# --------------------------------------------------------------------------- the map itself

def test_the_map_is_bounded_least_recently_used_first():
    cache, now = AnswerCache(size=3), datetime(2026, 12, 1, 9, 0, 0)
    for n in range(3):
        cache.put(("k", now, n), n, now)
    assert cache.get(("k", now, 0)) == 0  # now the most recently used
    cache.put(("k", now, 3), 3, now)
    assert len(cache) == 3 and cache.get(("k", now, 1)) is None
    assert [cache.get(("k", now, n)) for n in (0, 2, 3)] == [0, 2, 3]


def test_a_new_second_drops_the_entries_of_past_seconds():
    cache, now = AnswerCache(), datetime(2026, 12, 1, 9, 0, 0)
    cache.put(("k", now, "a"), 1, now)
    later = now + timedelta(seconds=1)
    cache.put(("k", later, "a"), 2, later)
    assert cache.get(("k", now, "a")) is None and cache.get(("k", later, "a")) == 2 and len(cache) == 1


def test_one_thread_computes_a_key_the_others_wait_for_it():
    cache, key = AnswerCache(), ("k", datetime(2026, 12, 1, 9, 0, 0), "a")
    assert cache.claim(key) == (False, None, None)  # this one computes
    found, _value, event = cache.claim(key)  # another one waits
    assert not found and event is not None and not event.is_set()
    cache.put(key, "v", key[1])
    cache.release(key)
    assert event.is_set() and cache.claim(key) == (True, "v", None)


def test_a_change_of_settings_empties_it(settings):
    now = datetime(2026, 12, 1, 9, 0, 0)
    answer_cache._CACHE.put(("k", now, "a"), 1, now)
    settings.ANCHORGPU_BOOKING_HORIZON_DAYS = 30
    assert len(answer_cache._CACHE) == 0
