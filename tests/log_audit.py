"""Every log line the test suite produces, kept and searched for secrets at the end: API tokens, the
passwords the tests use, keys in node URLs, private SSH keys, the secret key, and the SSH logins handed to
customers when access is delivered (the simulated provisioner's hosts). A leak fails the run."""

from __future__ import annotations

import logging
import re

SECRETS = [
    ("an API token", re.compile(r"agt_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{40,}")),
    ("a test password", re.compile(r"correct horse battery|pw-for-tests-only")),
    ("a key from a node URL", re.compile(r"SECRETKEY123")),
    ("a private SSH key", re.compile(r"BEGIN (OPENSSH|RSA|EC|DSA) PRIVATE KEY")),
    ("the secret key", re.compile(re.escape("dev-only-insecure-key-change-me-in-production"))),
    ("a customer's SSH login", re.compile(r"[a-z0-9-]+\.[a-z0-9-]+\.sim\.anchorgpu\.example")),
]


class KeepEverything(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is itself worth a look, not a crash
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += " | " + repr(record.exc_info[1])
        self.lines.append(f"{record.name}: {text}")


def leaks(lines: list[str]) -> list[str]:
    found = []
    for line in lines:
        for what, pattern in SECRETS:
            if pattern.search(line):
                found.append(f"{what} in: {line[:300]}")
    return found
