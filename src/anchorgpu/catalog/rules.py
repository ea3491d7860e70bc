"""Catalog rules that do not depend on storage: terms, quantities, stacks.

Pure domain code (no Django imports).
"""

from __future__ import annotations

from datetime import timedelta
from enum import Enum

from anchorgpu.messages import DomainError, gettext_noop

TERM_DAYS: tuple[int, ...] = (3, 7, 30)
MAX_QUANTITY = 1000  # larger requests are input errors, not capacity questions
# How far ahead a price list may start: further is a typing error (year 9999), not next season's prices.
PRICE_LIST_AHEAD = timedelta(days=2 * 365)


class Stack(str, Enum):
    CUDA = "cuda"
    ROCM = "rocm"
    BLACKWELL = "blackwell"  # CUDA with a build that targets Blackwell (sm_100)

    @property
    def label(self) -> str:
        return {
            Stack.CUDA: "CUDA",
            Stack.ROCM: "ROCm",
            Stack.BLACKWELL: "CUDA, Blackwell-ready build",
        }[self]


# Which environment stacks run on which product stack. A Blackwell-ready
# CUDA build also carries kernels for Ampere and Hopper, so it is offered on
# every CUDA product; a plain CUDA build lacks Blackwell kernels, and nothing
# CUDA runs on AMD.
_RUNS_ON: dict[Stack, frozenset[Stack]] = {
    Stack.CUDA: frozenset({Stack.CUDA, Stack.BLACKWELL}),
    Stack.BLACKWELL: frozenset({Stack.BLACKWELL}),
    Stack.ROCM: frozenset({Stack.ROCM}),
}


class RuleError(DomainError):
    """A request that breaks a catalog rule; the message is for the customer."""


def environment_fits(product_stack: Stack | str, environment_stack: Stack | str) -> bool:
    return Stack(environment_stack) in _RUNS_ON[Stack(product_stack)]


def check_environment(product_name: str, product_stack: Stack | str, environment_name: str,
                      environment_stack: Stack | str) -> None:
    if not environment_fits(product_stack, environment_stack):
        raise RuleError(gettext_noop("The environment “%(environment)s” is built for %(environment_stack)s and cannot "
                                     "run on %(product)s (%(stack)s)."),
                        environment=environment_name, environment_stack=Stack(environment_stack).label,
                        product=product_name, stack=Stack(product_stack).label)


def _whole(value) -> bool:
    # 7.0, Decimal("2.5"), "2" or True must not slip through as a term or a quantity.
    return isinstance(value, int) and not isinstance(value, bool)


def check_term(days: int) -> int:
    if not _whole(days) or days not in TERM_DAYS:
        raise RuleError(gettext_noop("Terms are %(terms)s days; %(days)s is not one of them."),
                        terms=", ".join(map(str, TERM_DAYS)), days=days)
    return days


def check_quantity(quantity: int) -> int:
    if not _whole(quantity):
        raise RuleError(gettext_noop("Quantity must be a whole number of units."))
    if quantity < 1:
        raise RuleError(gettext_noop("Quantity must be at least 1."))
    if quantity > MAX_QUANTITY:
        raise RuleError(gettext_noop("Quantity must be at most %(most)d."), most=MAX_QUANTITY)
    return quantity
