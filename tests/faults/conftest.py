"""The chain fixtures (an in-process eth-tester chain) for the payment fault tests."""

from tests.chains.conftest import tester_w3  # noqa: F401 - a fixture, used by name
