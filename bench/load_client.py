"""The HTTP load generator of bench/load.py: simulated clients on keep-alive HTTP/1.1 connections.

One asyncio event loop in one thread drives every client, so the generator costs little CPU on a machine
it shares with the server: each request is a prepared byte string, and an answer is read as far as its
status line, its headers and a body of Content-Length bytes (or chunks). Nothing here knows the shop;
bench/load.py says what to send and how to judge each answer.

A client sends one request, waits for the whole answer, optionally "thinks" for a random time, and sends
the next (a closed loop). It opens a new connection once its connection is ``Phase.recycle_seconds`` old
(see there). A
connection the server closed while it was idle is opened again, and the request sent once more, without
counting as an error; one it closes after the request is an error.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Callable

# One request's record: (endpoint name, start on the perf_counter clock, seconds until the whole answer was
# read, outcome). An outcome that starts with "error" is an error.
Sample = tuple[str, float, float, str]


class Connection:
    """One client's keep-alive connection."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reopened = 0  # idle connections the server had closed, opened again
        self.opened_at = 0.0
        self.set_cookies: list[bytes] = []  # the Set-Cookie values of the last answer

    def age(self) -> float:
        return time.perf_counter() - self.opened_at if self.writer is not None else 0.0

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        """Send one request; return the status and the body."""
        reused = self.writer is not None
        if not reused:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.opened_at = time.perf_counter()
        try:
            self.writer.write(raw)
            status_line = await self.reader.readline()
            if not status_line:
                raise ConnectionResetError("the server closed the connection")
        except ConnectionError:
            await self.close()
            if not reused:
                raise
            self.reopened += 1  # it closed the idle connection before reading a byte of this request
            return await self.send(raw)
        status = int(status_line.split(b" ", 2)[1])
        length, chunked, close = 0, False, False
        self.set_cookies = []
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _colon, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
            elif name == b"set-cookie":
                self.set_cookies.append(value.strip())
        body = await (self._chunks() if chunked else self.reader.readexactly(length))
        if close:
            await self.close()
        return status, body

    async def _chunks(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await self.reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


def get(path: str, host: str, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity", "User-Agent: anchorgpu-load"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def post_json(path: str, host: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity", "User-Agent: anchorgpu-load",
             "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class Action:
    """What a client sends: ``build(client, n)`` makes the request bytes of the client's n-th request;
    ``judge(status, body)`` names the outcome."""

    name: str
    build: Callable[[int, int], bytes]
    judge: Callable[[int, bytes], str]


@dataclass
class Phase:
    clients: int
    seconds: float
    pick: Callable[[random.Random], Action]  # the next action of a client
    think: float = 0.0  # mean think time between a client's requests (exponential); 0: none
    timeout: float = 30.0
    # A client opens a new connection for a request once the one it has is this old (0: never). Connections
    # opened all at once may pile onto one server process, which then holds them for the whole phase (one
    # process of the gthread server uses one core at most); recycled, they go to the processes free to accept.
    recycle_seconds: float = 1.0
    # The clients' cookie jars, by client index, kept from one phase to the next when the same dict is given.
    # With jars, a client sends back the cookies the server set (name and value only), as a browser does; a
    # returning visitor then has the CSRF cookie and is not given a new one. None: no cookies at all.
    cookies: dict[int, dict[bytes, bytes]] | None = None
    samples: list[Sample] = field(default_factory=list)
    reopened: int = 0
    started: float = 0.0
    ended: float = 0.0


async def _client(phase: Phase, index: int, host: str, port: int, deadline: float, seed: int) -> None:
    rng = random.Random(seed)
    connection = Connection(host, port)
    samples = phase.samples
    n = 0
    if phase.think:
        await asyncio.sleep(rng.uniform(0, phase.think))  # clients arrive spread out, not all at once
    while time.perf_counter() < deadline:
        action = phase.pick(rng)
        raw = action.build(index, n)
        n += 1
        jar = phase.cookies.setdefault(index, {}) if phase.cookies is not None else None
        if jar:
            raw = with_cookies(raw, jar)
        if phase.recycle_seconds and connection.age() > phase.recycle_seconds:
            await connection.close()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(phase.timeout):
                status, body = await connection.send(raw)
            outcome = action.judge(status, body)
            if jar is not None:
                keep_cookies(jar, connection.set_cookies)
        except TimeoutError:
            outcome = "error: timeout"
            await connection.close()
        except (OSError, EOFError, ValueError) as exc:
            outcome = f"error: connection ({type(exc).__name__})"
            await connection.close()
        samples.append((action.name, started, time.perf_counter() - started, outcome))
        if phase.think:
            await asyncio.sleep(rng.expovariate(1 / phase.think))
    phase.reopened += connection.reopened
    await connection.close()


def with_cookies(raw: bytes, jar: dict[bytes, bytes]) -> bytes:
    """The request with a Cookie header of the jar, after its request line."""
    line, rest = raw.split(b"\r\n", 1)
    return line + b"\r\nCookie: " + b"; ".join(k + b"=" + v for k, v in jar.items()) + b"\r\n" + rest


def keep_cookies(jar: dict[bytes, bytes], set_cookies: list[bytes]) -> None:
    """Keep the cookies of Set-Cookie values (only name and value: the attributes are not needed here); forget
    a cookie set empty or with ``Max-Age=0`` (how a server deletes one)."""
    for value in set_cookies:
        name, _eq, rest = value.split(b";", 1)[0].partition(b"=")
        name, rest = name.strip(), rest.strip()
        if rest in (b"", b'""') or b"max-age=0" in value.lower().replace(b" ", b""):
            jar.pop(name, None)
        else:
            jar[name] = rest


def run(phase: Phase, host: str, port: int, seed: int = 1) -> Phase:
    """Run the phase's clients until ``phase.seconds`` have passed (requests in flight then are finished)."""

    async def main():
        phase.started = time.perf_counter()
        deadline = phase.started + phase.seconds
        await asyncio.gather(*(_client(phase, i, host, port, deadline, seed * 100_003 + i)
                               for i in range(phase.clients)))
        phase.ended = time.perf_counter()

    asyncio.run(main())
    return phase


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


@dataclass
class Figures:
    requests: int
    per_second: float  # answers completed within the phase's time, per second
    p50: float
    p95: float
    p99: float
    outcomes: dict[str, int]

    @property
    def errors(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome.startswith("error"))


def figures(phase: Phase, name: str) -> Figures:
    mine = [s for s in phase.samples if s[0] == name]
    deadline = phase.started + phase.seconds
    ordered = sorted(s[2] for s in mine)
    outcomes: dict[str, int] = {}
    for s in mine:
        outcomes[s[3]] = outcomes.get(s[3], 0) + 1
    in_time = sum(1 for s in mine if s[1] + s[2] <= deadline)
    return Figures(requests=len(mine), per_second=in_time / phase.seconds, p50=percentile(ordered, 50),
                   p95=percentile(ordered, 95), p99=percentile(ordered, 99), outcomes=outcomes)


# --------------------------------------------------------------------------- CPU accounting (Linux /proc)

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


@dataclass
class CpuSnapshot:
    busy: float  # the whole machine, seconds
    server: float  # the server's master and its worker processes
    generator: float  # this process
    at: float


def cpu_snapshot(server_pid: int) -> CpuSnapshot | None:
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    server = sum(_process_ticks(pid) for pid in [server_pid, *_children(server_pid)])
    return CpuSnapshot(busy=(sum(values[:8]) - idle) / _TICK, server=server / _TICK, generator=time.process_time(),
                       at=time.perf_counter())


def cpu_line(before: CpuSnapshot | None, after: CpuSnapshot | None) -> str:
    """Where the machine's CPU went between two snapshots, in % of one core."""
    if before is None or after is None:
        return "CPU use not available (no /proc)"
    wall = after.at - before.at
    server = 100 * (after.server - before.server) / wall
    generator = 100 * (after.generator - before.generator) / wall
    busy = 100 * (after.busy - before.busy) / wall
    other = max(0.0, busy - server - generator)
    return (f"CPU in % of one core ({os.cpu_count()} cores = {100 * (os.cpu_count() or 1)} %): server {server:.0f} %, "
            f"load generator {generator:.0f} %, everything else (PostgreSQL, other users) {other:.0f} %")
