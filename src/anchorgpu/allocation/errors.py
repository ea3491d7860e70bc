"""Errors the allocation services raise; each message is fit for a customer or operator."""


class AllocationError(Exception):
    code = "allocation_error"


class NoLongerAvailable(AllocationError):
    code = "no_longer_available"


class NoStartFree(AllocationError):
    """No start within the booking horizon has enough units free for the whole term."""

    code = "no_start_free"


class HoldExpired(AllocationError):
    code = "hold_expired"


class InvalidBookingState(AllocationError):
    code = "invalid_booking_state"


class InvalidRequest(AllocationError):
    code = "invalid_request"


class BookingOfLiveOrder(AllocationError):
    """The booking holds the cards of an order that still counts on them: only an order service may end it."""

    code = "booking_of_live_order"
