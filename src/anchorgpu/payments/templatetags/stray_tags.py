"""``{% stray_notes order as notes %}``: the sentences about money that reached the order's deposit address on
another EVM network (``payments.strays``)."""

from django import template

from anchorgpu.payments.strays import stray_sentences

register = template.Library()


@register.simple_tag
def stray_notes(order) -> list[str]:
    if order is None or getattr(order, "quote", None) is None:
        return []
    return stray_sentences(order)
