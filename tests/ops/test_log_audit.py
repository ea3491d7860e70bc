"""The suite-wide search for secrets in log lines finds what it must."""

import logging

from tests.log_audit import KeepEverything, leaks


def test_the_log_audit_finds_tokens_passwords_and_keys():
    keeper = KeepEverything()
    log = logging.getLogger("anchorgpu.test_log_audit")
    log.addHandler(keeper)
    log.propagate = False  # these made-up secrets must not reach the suite-wide audit itself
    try:
        log.warning("token agt_ABCDEFGH_%s used", "x" * 43)
        log.warning("login with %s", "correct horse battery")
        log.warning("node http://h/v3/SECRETKEY123 down")
        log.warning("access ready at anchor@fra1-h100-01.fra1.sim.anchorgpu.example:22017")
        log.warning("a plain line with nothing secret")
    finally:
        log.removeHandler(keeper)
        log.propagate = True
    found = leaks(keeper.lines)
    assert [f.split(" in: ")[0] for f in found] == ["an API token", "a test password", "a key from a node URL",
                                                    "a customer's SSH login"]
