"""Errors the order and payment services raise. Their messages are meant for
the person who acted (customer or operator) and are translated."""

from __future__ import annotations


class OrderError(Exception):
    code = "order_error"

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class InvalidOrder(OrderError):
    """The request itself is wrong (a 400): bad combination, stale data."""

    code = "invalid"


class NotAllowedNow(OrderError):
    """The order's state does not allow this (a 409)."""

    code = "conflict"


class Unavailable(OrderError):
    """Cards, rates or addresses are not there to be had (a 409)."""

    code = "unavailable"
