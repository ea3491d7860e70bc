"""Checkout and the customer's order pages. Being written (issue 3)."""

from django.http import Http404


def _todo(request, *args, **kwargs):
    raise Http404("not yet")


checkout = order_list = order_detail = order_claim_payment = order_cancel = order_status = _todo
