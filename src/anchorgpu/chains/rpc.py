"""JSON-RPC to an EVM node through web3.py, batched where the transport
allows it, with every failure turned into ``ChainUnavailable``.

Results are read raw (hex strings from an HTTP node, Python ints from the
in-process eth-tester), and ``coerce`` checks each field's shape, so a node
that answers nonsense stops the poll instead of feeding it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import requests
from web3 import HTTPProvider, Web3

from .base import ChainUnavailable, redact, secrets_of

_HEX = re.compile(r"0x[0-9a-fA-F]*")


class Rpc:
    """One node. ``calls`` counts single reads, ``round_trips`` requests on
    the wire (a batch is one round trip)."""

    def __init__(self, w3: Web3, *, endpoint: str = "", batch_size: int = 500, hide: tuple[str, ...] = ()):
        self.w3 = w3
        self.endpoint = endpoint or _describe(w3)
        self.hide = hide  # parts of the URL (an API key) that no error message may repeat
        self.batch_size = batch_size
        self.calls = 0
        self.round_trips = 0

    @classmethod
    def for_url(cls, url: str, *, timeout: float = 10.0, batch_size: int = 500) -> Rpc:
        # No automatic retries: a slow node must not hold a page request (or a poll) for several timeouts;
        # the next poll is the retry.
        w3 = Web3(HTTPProvider(url, request_kwargs={"timeout": timeout}, exception_retry_configuration=None))
        return cls(w3, endpoint=redact(url), batch_size=batch_size, hide=secrets_of(url))

    @property
    def remote(self) -> bool:
        """A node over HTTP (batches, topic lists) rather than the in-process eth-tester."""
        return isinstance(self.w3.provider, HTTPProvider)

    def fail(self, reason: str) -> ChainUnavailable:
        for secret in self.hide:
            reason = reason.replace(secret, "…")
        return ChainUnavailable(reason, endpoint=self.endpoint)

    def call(self, method: str, params: list) -> Any:
        self.calls += 1
        self.round_trips += 1
        try:
            return self.w3.manager.request_blocking(method, params)
        except Exception as exc:  # the transport, the node's error object, or undecodable bytes
            raise self.fail(f"{method} failed: {_problem(exc)}") from None

    def many(self, requests: Sequence[tuple[str, list]], *, batch_size: int | None = None) -> list[Any]:
        """Results in order. HTTP nodes get JSON-RPC batches of ``batch_size`` (smaller for heavy answers
        such as full blocks); other providers (eth-tester) are asked one by one."""
        if not requests:
            return []
        if not self.remote:
            return [self.call(method, params) for method, params in requests]
        size = batch_size or self.batch_size
        results: list[Any] = []
        for start in range(0, len(requests), size):
            chunk = list(requests[start:start + size])
            self.calls += len(chunk)
            self.round_trips += 1
            try:
                responses = self.w3.provider.make_batch_request(chunk)
            except Exception as exc:
                raise self.fail(f"batch of {len(chunk)} failed: {_problem(exc)}") from None
            if not isinstance(responses, list):
                error = responses.get("error") if isinstance(responses, dict) else responses
                raise self.fail(f"the node refused a batch of {len(chunk)}: {_short(error)}")
            if len(responses) != len(chunk):
                raise self.fail(f"asked {len(chunk)} questions in a batch, got {len(responses)} answers")
            for (method, _params), response in zip(chunk, responses, strict=True):
                if not isinstance(response, dict) or "error" in response or "result" not in response:
                    detail = response.get("error") if isinstance(response, dict) else response
                    raise self.fail(f"{method} failed in a batch: {_short(detail)}")
                results.append(response["result"])
        return results


def _describe(w3: Web3) -> str:
    uri = getattr(w3.provider, "endpoint_uri", None)
    return redact(str(uri)) if uri else type(w3.provider).__name__


def _problem(exc: Exception) -> str:
    """A transport failure in a few words (requests' own texts run to several lines of repr)."""
    if isinstance(exc, requests.exceptions.Timeout):
        return "no answer in time"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "connection refused" if "refused" in str(exc).lower() else "connection failed"
    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code} {exc.response.reason or ''}".rstrip()
    if isinstance(exc, (ValueError, TypeError)) and "JSON" in str(exc) or "decode" in str(exc).lower():
        return "the answer is not JSON-RPC"
    return _short(exc)


def _short(value: Any) -> str:
    text = str(value).replace("\n", " ")
    return text[:200] + ("…" if len(text) > 200 else "")


class coerce:  # noqa: N801 - a namespace of checkers
    """Field checkers: each returns the clean value or raises ``ValueError``."""

    @staticmethod
    def quantity(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"not a quantity: {value!r}")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"negative quantity: {value}")
            return value
        if isinstance(value, str) and _HEX.fullmatch(value) and len(value) > 2:
            return int(value, 16)
        raise ValueError(f"not a quantity: {_short(value)!s}")

    @staticmethod
    def data(value: Any) -> str:
        """Hex data as lowercase ``0x…`` (accepts HexBytes/bytes from eth-tester)."""
        if isinstance(value, (bytes, bytearray)):
            return "0x" + bytes(value).hex()
        if isinstance(value, str) and _HEX.fullmatch(value) and len(value) % 2 == 0:
            return value.lower()
        raise ValueError(f"not hex data: {_short(value)}")

    @classmethod
    def hash32(cls, value: Any) -> str:
        text = cls.data(value)
        if len(text) != 66:
            raise ValueError(f"not a 32-byte hash: {_short(value)}")
        return text

    @classmethod
    def address(cls, value: Any) -> str:
        text = cls.data(value) if not isinstance(value, str) else value.lower()
        if not (len(text) == 42 and _HEX.fullmatch(text)):
            raise ValueError(f"not an address: {_short(value)}")
        return text

    @classmethod
    def optional_address(cls, value: Any) -> str | None:
        """A transaction's "to": none for a contract creation (eth-tester writes it as an empty string)."""
        return None if value in (None, "", "0x", b"") else cls.address(value)

    @classmethod
    def timestamp(cls, value: Any) -> datetime:
        seconds = cls.quantity(value)
        if seconds > 2**40:
            raise ValueError(f"not a block time: {seconds}")
        return datetime.fromtimestamp(seconds, tz=UTC)

    @staticmethod
    def mapping(value: Any, what: str) -> dict:
        if not hasattr(value, "get") or not hasattr(value, "keys"):
            raise ValueError(f"{what} is not an object: {_short(value)}")
        return value
