"""Threads that ask for the database snapshot at the same moment share one read of it
(anchorgpu.catalog.answer_cache.SharedReads), and only a read sent after they asked.

The reads here are a controlled stand-in for the query: each one blocks until the test lets it answer, and
answers with its number, so a test sees which read each thread got. PostgreSQL's part (that a read sent
later sees every transaction completed before) is tests/catalog/test_answer_cache.py's.
"""

from __future__ import annotations

import threading
import time

import pytest

from anchorgpu.catalog import answer_cache
from anchorgpu.catalog.answer_cache import SharedReads


class Reads:
    """The stand-in: read n answers "s<n>" once ``release(n)`` is called; ``fail`` makes a read raise."""

    def __init__(self):
        self._lock = threading.Lock()
        self.sent = 0
        self._gates: dict[int, threading.Event] = {}
        self.fail: set[int] = set()
        self.by_thread: dict[str, int] = {}

    def _gate(self, n: int) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(n, threading.Event())

    def __call__(self, _connection) -> str:
        with self._lock:
            self.sent += 1
            n = self.sent
            self.by_thread[threading.current_thread().name] = n
        assert self._gate(n).wait(10), f"read {n} was never released"
        if n in self.fail:
            raise ConnectionError(f"read {n} failed")
        return f"s{n}"

    def release(self, n: int) -> None:
        self._gate(n).set()


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


class Asker(threading.Thread):
    def __init__(self, shared: SharedReads, reads: Reads, name: str):
        super().__init__(name=name, daemon=True)
        self.shared, self.reads = shared, reads
        self.value: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.shared.snapshot(None, self.reads)
        except BaseException as exc:  # noqa: BLE001 - the test checks it
            self.error = exc

    def answer(self) -> str | None:
        self.join(10)
        assert not self.is_alive(), f"{self.name} is still waiting"
        return self.value


def ask(shared, reads, name: str) -> Asker:
    asker = Asker(shared, reads, name)
    asker.start()
    return asker


def queued(shared: SharedReads, size: int):
    return lambda: shared._next is not None and shared._next.size == size


def three_behind_one(shared: SharedReads, reads: Reads, first: str = "first") -> tuple[Asker, list[Asker]]:
    """A thread whose read is on its way, and three threads queued behind it."""
    ahead = ask(shared, reads, first)
    wait_for(lambda: reads.sent == 1, "the first read")
    later = [ask(shared, reads, f"later-{i}") for i in range(3)]
    wait_for(queued(shared, 3), "three threads queued")
    return ahead, later


def test_a_thread_alone_reads_at_once():
    shared, reads = SharedReads(), Reads()
    reads.release(1)
    reads.release(2)
    assert shared.snapshot(None, reads) == "s1"
    assert shared.snapshot(None, reads) == "s2"  # nothing is kept: each moment has its own read
    assert (reads.sent, shared.reads, shared.shared) == (2, 2, 0)


def test_threads_that_ask_during_a_read_share_the_next_one_not_that_one():
    shared, reads = SharedReads(), Reads()
    first = ask(shared, reads, "first")
    wait_for(lambda: reads.sent == 1, "the first read")
    later = [ask(shared, reads, f"later-{i}") for i in range(5)]
    wait_for(queued(shared, 5), "five threads queued")
    assert reads.sent == 1  # they wait: no read of their own
    reads.release(1)
    assert first.answer() == "s1"
    wait_for(lambda: reads.sent == 2, "the batch's read")
    reads.release(2)
    # The first read was on its way before they asked: none of them may get its answer.
    assert [a.answer() for a in later] == ["s2"] * 5
    assert (reads.sent, shared.reads, shared.shared) == (2, 2, 4)
    assert shared._owner is None and shared._next is None


def test_a_thread_that_asks_while_its_batch_read_is_on_its_way_waits_for_the_next():
    shared, reads = SharedReads(), Reads()
    first = ask(shared, reads, "first")
    wait_for(lambda: reads.sent == 1, "the first read")
    second = ask(shared, reads, "second")
    wait_for(queued(shared, 1), "the second queued")
    reads.release(1)
    wait_for(lambda: reads.sent == 2, "the second's read")  # sent: a thread asking now comes too late for it
    third = ask(shared, reads, "third")
    wait_for(queued(shared, 1), "the third queued")
    reads.release(2)
    reads.release(3)
    assert (first.answer(), second.answer(), third.answer()) == ("s1", "s2", "s3")
    assert reads.by_thread == {"first": 1, "second": 2, "third": 3}  # each batch's leader sends its read


def test_a_failed_shared_read_leaves_each_thread_its_own():
    shared, reads = SharedReads(), Reads()
    first, later = three_behind_one(shared, reads)
    reads.fail.add(2)
    for n in range(1, 6):
        reads.release(n)
    assert first.answer() == "s1"
    answers = {a.name: (a.answer(), a.error) for a in later}
    failed = [name for name, (_value, error) in answers.items() if error is not None]
    assert len(failed) == 1 and reads.by_thread[failed[0]] == 2  # the leader gets its own read's error
    assert sorted(value for value, error in answers.values() if error is None) == ["s3", "s4"]
    assert reads.sent == 4
    assert shared._owner is None and shared._next is None


def test_a_hung_read_costs_one_wait_to_those_behind_it_and_nothing_to_later_threads(monkeypatch):
    monkeypatch.setattr(answer_cache, "_WAIT_SECONDS", 0.2)
    shared, reads = SharedReads(), Reads()
    hung, later = three_behind_one(shared, reads, "hung")
    reads.release(2)  # the batch's read, once its leader stops waiting for the hung one
    assert sorted(a.answer() for a in later) == ["s2"] * 3
    assert shared._owner is None and shared._next is None  # the batch took the queue over and let it go
    reads.release(3)
    started = time.monotonic()
    assert shared.snapshot(None, reads) == "s3"  # a later thread reads at once, while read 1 still hangs
    assert time.monotonic() - started < 0.15
    reads.release(1)
    assert hung.answer() == "s1"
    assert shared._owner is None and shared._next is None  # the hung read, back, hands nothing on
    assert reads.sent == 3


def test_threads_behind_a_batch_read_that_hangs_read_their_own(monkeypatch):
    monkeypatch.setattr(answer_cache, "_WAIT_SECONDS", 0.2)
    shared, reads = SharedReads(), Reads()
    first, later = three_behind_one(shared, reads)
    reads.release(1)
    assert first.answer() == "s1"
    wait_for(lambda: reads.sent == 2, "the batch's read")  # it hangs: the two others give up on it
    wait_for(lambda: reads.sent == 4, "the followers' own reads")
    reads.release(3)
    reads.release(4)
    reads.release(2)
    answers = {a.name: a.answer() for a in later}
    leader = next(name for name, n in reads.by_thread.items() if n == 2)
    assert answers.pop(leader) == "s2"
    assert sorted(answers.values()) == ["s3", "s4"]
    assert shared._owner is None and shared._next is None


@pytest.mark.parametrize("seed", range(3))
def test_many_threads_each_get_a_read_sent_after_they_asked(seed):
    """Free-running: reads answer at once, threads ask in a storm. Each answer must come from a read sent
    after the thread asked (numbered reads: at least the count sent when it asked, plus one)."""
    shared = SharedReads()
    lock = threading.Lock()
    sent = [0]

    def read(_connection) -> str:
        with lock:
            sent[0] += 1
            n = sent[0]
        time.sleep(0.0005)
        return str(n)

    problems: list[str] = []

    def worker(i: int) -> None:
        for _ in range(200):
            with lock:
                before = sent[0]
            got = int(shared.snapshot(None, read))
            if got <= before:
                problems.append(f"thread {i} asked after read {before} was sent and got read {got}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not problems, problems[:3]
    assert shared.reads + shared.shared == 8 * 200
    assert shared.shared > 0  # with 8 threads asking at once, some reads were shared
    assert shared._owner is None and shared._next is None
