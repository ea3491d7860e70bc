"""Catalog rules that do not depend on storage: terms, quantities, stacks.

Pure domain code (no Django imports).
"""

from __future__ import annotations

from enum import Enum

TERM_DAYS: tuple[int, ...] = (3, 7, 30)
MAX_QUANTITY = 1000  # larger requests are input errors, not capacity questions


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


class RuleError(ValueError):
    """A request that breaks a catalog rule; the message is for the customer."""


def environment_fits(product_stack: Stack | str, environment_stack: Stack | str) -> bool:
    return Stack(environment_stack) in _RUNS_ON[Stack(product_stack)]


def check_environment(product_name: str, product_stack: Stack | str, environment_name: str, environment_stack: Stack | str) -> None:
    if not environment_fits(product_stack, environment_stack):
        raise RuleError(
            f"The environment “{environment_name}” is built for {Stack(environment_stack).label} "
            f"and cannot run on {product_name} ({Stack(product_stack).label})."
        )


def _whole(value) -> bool:
    # 7.0, Decimal("2.5"), "2" or True must not slip through as a term or a quantity.
    return isinstance(value, int) and not isinstance(value, bool)


def check_term(days: int) -> int:
    if not _whole(days) or days not in TERM_DAYS:
        raise RuleError(f"Terms are {', '.join(map(str, TERM_DAYS))} days; {days} is not one of them.")
    return days


def check_quantity(quantity: int) -> int:
    if not _whole(quantity):
        raise RuleError("Quantity must be a whole number of units.")
    if quantity < 1:
        raise RuleError("Quantity must be at least 1.")
    if quantity > MAX_QUANTITY:
        raise RuleError(f"Quantity must be at most {MAX_QUANTITY}.")
    return quantity
