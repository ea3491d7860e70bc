"""How the API writes quotes and orders as JSON. Money is a decimal string,
crypto amounts are whole base units as strings, times are UTC ISO-8601."""

from __future__ import annotations

from datetime import timezone as dt_timezone

from django.urls import reverse

from anchorgpu.orders.lines import line_label
from anchorgpu.orders.models import Order
from anchorgpu.orders.term_slide import is_sliding
from anchorgpu.payments.claim_check import describe, latest_claim_check
from anchorgpu.payments.services import payment_status


def iso(moment) -> str | None:
    return moment.astimezone(dt_timezone.utc).isoformat().replace("+00:00", "Z") if moment else None


def price_json(price) -> dict:
    """The lines and total of a catalog price (``None`` when no price is set)."""
    if price is None:
        return {"lines": [], "total": None}
    return {"lines": [{"kind": line.kind, "description": line_label({"kind": line.kind, "params": line.params,
                                                                     "description": line.description}),
                       "quantity": line.quantity,
                       "unit_price": f"{line.unit_price:f}", "amount": f"{line.amount:f}"} for line in price.lines],
            "total": f"{price.total:f}"}


def offer_quote_json(offer, *, start, environment, options) -> dict:
    price = offer.price_for_term
    return {
        "product": offer.product.slug,
        "quantity": offer.quantity,
        "cards": offer.quantity * offer.product.cards_per_unit,
        "term": offer.term_days,
        "start": iso(start),
        "environment": environment.slug if environment else None,
        "options": list(options),
        "available": offer.earliest_start is not None,
        "units_free_now": offer.units_free_now,
        "earliest_start": iso(offer.earliest_start),
        **price_json(price),
        "currency": offer.currency or None,
    }


def _links(order: Order) -> dict:
    api = reverse("api-order", kwargs={"reference": order.reference})
    return {"self": api, "paid": f"{api}/paid", "cancel": f"{api}/cancel",
            "page": reverse("order", kwargs={"reference": order.reference})}


def order_summary_json(order: Order) -> dict:
    return {
        "reference": order.reference,
        "state": order.state,
        "state_label": str(order.state_label),
        "product": order.product.slug,
        "quantity": order.quantity,
        "term": order.term_days,
        "starts_at": iso(order.starts_at),
        "ends_at": iso(order.ends_at),
        # An as-soon-as-possible term not fixed yet: it starts when access is ready (starts_at: the earliest).
        "term_sliding": is_sliding(order),
        "total": f"{order.fiat_total:f}",
        "currency": order.currency,
        "created_at": iso(order.created_at),
        "links": _links(order),
    }


def _quote_json(quote) -> dict:
    asset = quote.asset
    return {
        "asset": asset.code,
        "symbol": asset.symbol,
        "network": asset.network,
        "network_name": asset.network_name,
        "decimals": asset.decimals,
        "contract": asset.contract or None,
        "amount": str(quote.amount),
        "amount_display": quote.display_amount,
        "tolerance": str(quote.tolerance),
        "address": quote.address,
        "payment_uri": quote.uri,
        "rate": f"{quote.rate:f}",
        "rate_currency": quote.currency,
        "rate_source": quote.rate_source,
        "rate_at": iso(quote.rate_at),
        "expires_at": iso(quote.expires_at),
        "monitor_until": iso(quote.monitor_until),
        "confirmations_required": quote.confirmations_required,
    }


def _claim_check_json(order: Order, quote) -> dict | None:
    check = latest_claim_check(order)
    if check is None or quote is None:
        return None
    return {"txid": check.txid, "outcome": check.outcome, "confirmations": check.confirmations,
            "required": check.required, "message": describe(check, quote.asset), "checked_at": iso(check.checked_at)}


def order_json(order: Order) -> dict:
    quote = getattr(order, "quote", None)
    evaluation = payment_status(order) if quote else None
    invoice = getattr(order, "invoice", None)
    active = order.state == "active" and bool(order.access_host)
    return {
        **order_summary_json(order),
        "cards": order.cards,
        "start_asap": order.start_asap,
        "environment": order.environment.slug,
        "options": list(order.option_slugs),
        "lines": [{"kind": line["kind"], "description": line_label(line), "quantity": line["quantity"],
                   "unit_price": line["unit_price"], "amount": line["amount"]} for line in order.lines],
        "quote": _quote_json(quote) if quote else None,
        "payment": {"status": evaluation.status.value, "received": str(evaluation.confirmed_total),
                    "unconfirmed": str(evaluation.unconfirmed_total),
                    "shortfall": str(evaluation.shortfall)} if evaluation else None,
        "claimed_txid": order.claimed_txid or None,
        "claimed_at": iso(order.claimed_at),
        "claim_check": _claim_check_json(order, quote),
        "paid_at": iso(order.paid_at),
        "access": {"host": order.access_host, "port": order.access_port, "user": order.access_user}
        if active else None,
        "invoice": {"number": invoice.number} if invoice else None,
        "purpose": order.purpose or None,
    }
