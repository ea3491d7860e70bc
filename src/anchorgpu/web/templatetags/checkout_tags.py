"""Template filters about the way to the checkout."""

from django import template

from anchorgpu.web.checkout_refusals import leads_to_checkout as _leads_to_checkout

register = template.Library()


@register.filter
def leads_to_checkout(path) -> bool:
    """Whether a log-in's ``next`` is a checkout (the page then says why it asks)."""
    return _leads_to_checkout(str(path or ""))
