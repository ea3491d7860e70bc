"""The API's answers, built as their Schemas (``schemas``) from the shop's rows and figures. Money is a
decimal string, crypto amounts are whole base units as strings, times are UTC ISO-8601 with a ``Z``."""

from __future__ import annotations

from datetime import UTC

from django.urls import reverse
from django.utils.translation import gettext

from anchorgpu.billing import tax
from anchorgpu.billing.words import order_vat_note
from anchorgpu.orders.lines import line_label
from anchorgpu.orders.models import Order as OrderRow
from anchorgpu.orders.term_slide import is_sliding
from anchorgpu.payments.claim_check import describe, latest_claim_check
from anchorgpu.payments.services import payment_status
from anchorgpu.payments.uri import carries_amount
from anchorgpu.pilotreports.services import report_summary

from . import schemas as s
from .due import units_due


def iso(moment) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def _price_lines(price) -> dict:
    """The lines and total of a catalog price (none and null when no price is set)."""
    if price is None:
        return {"lines": [], "total": None}
    return {"lines": [s.PriceLine(kind=line.kind, description=line_label({"kind": line.kind, "params": line.params,
                                                                           "description": line.description}),
                                  quantity=line.quantity, unit_price=f"{line.unit_price:f}",
                                  amount=f"{line.amount:f}") for line in price.lines],
            "total": f"{price.total:f}"}


def _offer_fields(offer) -> dict:
    product = offer.product
    return {"product": product.slug, "name": product.name, "vendor": product.vendor,
            "memory_gb_per_card": product.memory_gb_per_card, "cards_per_unit": product.cards_per_unit,
            "stack": product.stack, "stack_label": offer.stack_label, "term": offer.term_days,
            "quantity": offer.quantity, "units_total": offer.units_total, "units_free_now": offer.units_free_now,
            "earliest_start": iso(offer.earliest_start),
            "price": {str(days): f"{p.total:f}" for days, p in offer.prices.items()},
            "currency": offer.currency or None}


def offer(offer) -> s.Offer:
    return s.Offer(**_offer_fields(offer))


def offer_detail(offer, *, environment, environments, options) -> s.OfferDetail:
    return s.OfferDetail(**_offer_fields(offer), environment=environment.slug if environment else None,
                         environments=[e.slug for e in environments], options=list(options),
                         **_price_lines(offer.price_for_term))


def quote(offer, *, start, environment, options) -> s.Quote:
    return s.Quote(product=offer.product.slug, quantity=offer.quantity,
                   cards=offer.quantity * offer.product.cards_per_unit, term=offer.term_days, start=iso(start),
                   environment=environment.slug if environment else None, options=list(options),
                   available=offer.earliest_start is not None, units_free_now=offer.units_free_now,
                   earliest_start=iso(offer.earliest_start), **_price_lines(offer.price_for_term),
                   currency=offer.currency or None)


def _links(order: OrderRow) -> s.Links:
    api = reverse("api-order", kwargs={"reference": order.reference})
    return s.Links(self=api, paid=f"{api}/paid", cancel=f"{api}/cancel",
                   page=reverse("order", kwargs={"reference": order.reference}))


def _summary_fields(order: OrderRow) -> dict:
    return {"reference": order.reference, "state": order.state, "state_label": str(order.state_label),
            "product": order.product.slug, "quantity": order.quantity, "term": order.term_days,
            "starts_at": iso(order.starts_at), "ends_at": iso(order.ends_at),
            # An as-soon-as-possible term not fixed yet: it starts when access is ready (starts_at: the earliest).
            "term_sliding": is_sliding(order), "total": f"{order.fiat_total:f}", "currency": order.currency,
            "created_at": iso(order.created_at), "links": _links(order)}


def order_summary(order: OrderRow) -> s.OrderSummary:
    return s.OrderSummary(**_summary_fields(order))


def payment_asset(asset) -> s.PaymentAsset:
    return s.PaymentAsset(
        asset=asset.code, symbol=asset.symbol, name=gettext(asset.name), network=asset.network,
        network_name=gettext(asset.network_name), chain_id=asset.chain_id, contract=asset.contract or None,
        decimals=asset.decimals, confirmations_required=asset.confirmations_required, finality=asset.finality,
        uri_carries_amount=carries_amount(asset.scheme))


def _payment_quote(order: OrderRow, quote, evaluation) -> s.PaymentQuote:
    asset = quote.asset
    return s.PaymentQuote(
        asset=asset.code, symbol=asset.symbol, network=asset.network, network_name=asset.network_name,
        decimals=asset.decimals, contract=asset.contract or None, amount=str(quote.amount),
        amount_display=quote.display_amount, tolerance=str(quote.tolerance), address=quote.address,
        payment_uri=units_due(order, quote, evaluation)[1], rate=f"{quote.rate:f}", rate_currency=quote.currency,
        rate_source=quote.rate_source, rate_at=iso(quote.rate_at), expires_at=iso(quote.expires_at),
        monitor_until=iso(quote.monitor_until), confirmations_required=quote.confirmations_required)


def _claim_check(order: OrderRow, quote) -> s.ClaimCheck | None:
    check = latest_claim_check(order)
    if check is None or quote is None:
        return None
    return s.ClaimCheck(txid=check.txid, outcome=check.outcome, confirmations=check.confirmations,
                        required=check.required, message=describe(check, quote.asset),
                        checked_at=iso(check.checked_at))


def order(order: OrderRow) -> s.Order:
    quote = getattr(order, "quote", None)
    evaluation = payment_status(order) if quote else None
    invoice = getattr(order, "invoice", None)
    active = order.state == "active" and bool(order.access_host)
    return s.Order(
        **_summary_fields(order), cards=order.cards, start_asap=order.start_asap,
        extends=order.extends.reference if order.extends_id else None,
        extensions=list(order.extensions.order_by("created_at", "pk").values_list("reference", flat=True)),
        environment=order.environment.slug, options=list(order.option_slugs),
        lines=[s.PriceLine(kind=line["kind"], description=line_label(line), quantity=line["quantity"],
                           unit_price=line["unit_price"], amount=line["amount"]) for line in order.lines],
        quote=_payment_quote(order, quote, evaluation) if quote else None,
        payment=s.Payment(status=evaluation.status.value, received=str(evaluation.confirmed_total),
                          unconfirmed=str(evaluation.unconfirmed_total),
                          shortfall=str(evaluation.shortfall)) if evaluation else None,
        claimed_txid=order.claimed_txid or None, claimed_at=iso(order.claimed_at),
        claim_check=_claim_check(order, quote), paid_at=iso(order.paid_at),
        access=s.Access(host=order.access_host, port=order.access_port, user=order.access_user) if active else None,
        invoice=s.Invoice(number=invoice.number) if invoice else None, vat=_vat(order),
        purpose=order.purpose or None)


def extension_options(found, prices: dict, currency: str | None, message: str) -> s.ExtensionOptions:
    return s.ExtensionOptions(
        reference=found.order.reference, extendable=found.possible, days=list(found.days),
        prices={str(d): f"{p:f}" for d, p in prices.items()}, currency=currency, starts_at=iso(found.start),
        free_until=iso(found.free_until), refusal=found.refusal or None, message=message or None,
        pending=found.pending.reference if found.pending is not None else None)


def _vat(order: OrderRow) -> s.Vat | None:
    if not order.tax:
        return None
    decision = tax.Decision.from_data(order.tax)
    return s.Vat(treatment=decision.treatment.value, rate=f"{decision.rate:f}", country=decision.country,
                 amount=f"{tax.tax_inside(order.fiat_total, decision.rate, order.currency):f}",
                 note=order_vat_note(order))


def pilot_report(row) -> s.PilotReport:
    summary = report_summary(row)
    restore = summary.restore
    return s.PilotReport(
        id=str(row.pk), uploaded_at=iso(row.uploaded_at), filename=row.filename or None,
        device=row.device_name or None, device_count=row.device_count, product=row.product_slug or None,
        tokens_per_s=summary.tokens_per_s, peak_memory_bytes=summary.peak_memory_bytes,
        step_time_p50_s=summary.step_time_p50_s, step_time_p95_s=summary.step_time_p95_s,
        data_wait_share=summary.data_wait_share, checkpoint_bytes=summary.checkpoint_bytes,
        checkpoint_write_s=summary.checkpoint_write_s,
        restore=s.Restore(status=restore.status,
                          first_difference=({k: str(v) for k, v in restore.first_difference.items()}
                                            if restore.first_difference else None)))
