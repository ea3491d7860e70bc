"""Each request body and each answer of the API, described once as a pydantic Schema. Ninja validates the
bodies with them and generates the OpenAPI document from them; the answers are built as these Schemas
(``answers``), so an answer cannot carry a field the document does not list, or lack one it does."""

from __future__ import annotations

from typing import Literal

from ninja import Schema
from pydantic import ConfigDict, Field

from anchorgpu.billing.tax import Treatment
from anchorgpu.catalog.rules import MAX_QUANTITY, TERM_DAYS
from anchorgpu.orders.models import PURPOSE_CHOICES
from anchorgpu.orders.states import OrderState
from anchorgpu.payments.evaluation import PaymentStatus
from anchorgpu.payments.models import ClaimCheck as ClaimCheckRow
from anchorgpu.web.checkout_form import MAX_KEYS_TEXT, CheckoutForm

from .fields import (
    Flag,
    MaybeMoney,
    MaybeTime,
    Moment,
    Money,
    Slug,
    Slugs,
    Text,
    Time,
    TxId,
    Units,
    Whole,
    documented,
    lines_type,
    slug,
)

PURPOSES = [value for value, _label in PURPOSE_CHOICES]
_TERM = {"enum": list(TERM_DAYS), "description": "Term in days."}
_QUANTITY = {"minimum": 1, "maximum": MAX_QUANTITY, "description": "Units: cards, or lots of two cards for the B200."}


def _form_limit(name: str) -> dict:
    """A text field's length limits, as the checkout form checks them."""
    field = CheckoutForm.base_fields[name]
    limits = {"maxLength": field.max_length} if field.max_length else {}
    if field.required:
        limits["minLength"] = 1
    return limits


def _request_config(required: list[str]) -> ConfigDict:
    """Unknown fields are refused. Every field may be absent to the validator (the form names what is
    missing, with the pages' messages); the document lists ``required``, and no field has a default."""
    def shape(schema: dict) -> None:
        for prop in schema.get("properties", {}).values():
            prop.pop("default", None)
            prop.pop("title", None)
        schema["required"] = list(required)
        schema.pop("title", None)
    return ConfigDict(extra="forbid", json_schema_extra=shape)


class Closed(Schema):
    """An answer: every field is always there (null where there is nothing), and no other."""
    model_config = ConfigDict(extra="forbid")


# Requests ---------------------------------------------------------------------------------------------------

class QuoteRequest(Schema):
    model_config = _request_config(["product", "quantity", "term"])

    product: Text = documented(**slug())
    quantity: Whole = documented(**_QUANTITY)
    term: Whole = documented(**_TERM)
    start: Moment = documented("Earliest start; null: as soon as possible.")
    environment: Text = documented("Checked against the card's software stack.", maxLength=50)
    options: Slugs = documented()


class OrderRequest(Schema):
    # The page may take a coin alone (one on a single network); the API always names the asset, the coin on
    # its network (GET /assets lists them).
    model_config = _request_config([name for name, field in CheckoutForm.base_fields.items()
                                    if field.required and name != "start_mode"] + ["product", "asset"])

    product: Text = documented(**slug())
    quantity: Whole = documented(**_QUANTITY)
    term: Whole = documented(**_TERM)
    start: Moment = documented("Earliest start; null: as soon as possible.")
    environment: Text = documented(**slug())
    options: Slugs = documented()
    name: Text = documented(**_form_limit("name"))
    email: Text = documented(format="email", minLength=3, maxLength=CheckoutForm.base_fields["email"].max_length)
    company: Text = documented(**_form_limit("company"))
    country: Text = documented("ISO 3166-1 alpha-2 code.", minLength=2, maxLength=2, pattern="^[A-Z]{2}$")
    billing_address: Text = documented(**_form_limit("billing_address"))
    vat_id: Text = documented("With its country prefix, e.g. PT123456789 (its form is checked, not the EU's VIES "
                              "register); only with business.", **_form_limit("vat_id"))
    business: Flag = documented("Bought for a business (then company is required). An EU business in another "
                                "member state than the seller's, with its VAT id, is invoiced under reverse charge.")
    ssh_keys: lines_type(MAX_KEYS_TEXT) = documented()
    saved_keys: Slugs = Field(default=None, json_schema_extra={
        "items": {"type": "string", "minLength": 1, "maxLength": 80,
                  "description": "The fingerprint of a key saved on your account (“SHA256:…”, as the account's "
                                 "SSH keys page shows it)."},
        "description": "Saved keys to install, besides or instead of ssh_keys: at least one key in all."})
    purpose: Text = documented("What the rental is for (optional; the planner's advice follows it).",
                               enum=["", *PURPOSES])
    asset: Text = documented("One coin on one network, e.g. usdt-tron, as GET /assets lists them.", **slug())
    accept: Flag = documented("The customer has read that the term is fixed, that disks are wiped at its end and "
                              "are not a backup.", const=True)


class PaidRequest(Schema):
    model_config = _request_config([])

    txid: TxId = documented("The transfer's transaction id, if known.")


class EmptyRequest(Schema):
    model_config = _request_config([])


class ExtendRequest(Schema):
    model_config = _request_config(["days", "asset"])

    days: Whole = documented("Days to add to the term, on the same cards, right after it.", enum=list(TERM_DAYS))
    asset: Text = documented("The asset to pay the extension's own quote in.", **slug())


# Answers ----------------------------------------------------------------------------------------------------

class ErrorDetail(Closed):
    code: str = Field(min_length=1, max_length=64, pattern=r"^[a-z_]+$", description="Stable, for programs.")
    message: str = Field(min_length=1, description="For people, in the request's language (Accept-Language).")
    fields: dict[str, list[str]] = Field(default=None, description="Messages per field of the request.",
                                         json_schema_extra=lambda s: s.pop("default", None))


class Error(Closed):
    error: ErrorDetail


class PriceLine(Closed):
    kind: str = Field(max_length=20)
    description: str
    quantity: int
    unit_price: Money
    amount: Money


class Links(Closed):
    self: str
    paid: str
    cancel: str
    page: str


class PaymentAsset(Closed):
    """One coin on one network that orders may be paid in: a client picks the coin (``symbol``), then the
    network, and sends the row's ``asset`` slug."""

    asset: Slug = Field(description="What an order or an extension's ``asset`` takes.")
    symbol: str = Field(description="The coin, e.g. USDT; the same coin on several networks has several rows.")
    name: str
    network: str = Field(description="The network's slug, e.g. ethereum, tron, base, arbitrum, polygon, bsc.")
    network_name: str = Field(description="The network as people name it, with its token standard where one is "
                                          "usual, in the request's language where the catalogs have it.")
    chain_id: int | None = Field(description="The network's eth_chainId (EVM and TRON), else null.")
    contract: str | None = Field(description="The token contract on that network (0x… or T…); null for the "
                                             "network's own coin. Only this contract's token pays.")
    decimals: int
    confirmations_required: int
    finality: Literal["depth", "safe", "finalized"] = Field(
        description="depth: confirmations counted from the tip; safe / finalized: from the block the node tags so.")
    uri_carries_amount: bool = Field(description="Whether the quote's payment_uri asks for the amount (BIP21, "
                                                 "EIP-681); false on TRON, where it is the bare address.")


class PaymentQuote(Closed):
    asset: Slug
    symbol: str
    network: str
    network_name: str
    decimals: int
    contract: str | None
    amount: Units
    amount_display: str = Field(description="The amount in whole coins, as a decimal string.")
    tolerance: Units
    address: str
    payment_uri: str = Field(description="A BIP21 / EIP-681 URI for what is still to pay: the whole amount, or "
                                         "what is missing once an order is underpaid. On TRON, which has no "
                                         "such URI that wallets agree on, the bare deposit address: send the "
                                         "amount as amount_display says.")
    rate: Money
    rate_currency: str = Field(max_length=3)
    rate_source: str
    rate_at: Time
    expires_at: Time
    monitor_until: Time
    confirmations_required: int


class Payment(Closed):
    status: Literal[tuple(s.value for s in PaymentStatus)]
    received: Units
    unconfirmed: Units
    shortfall: Units


class ClaimCheck(Closed):
    txid: str
    outcome: Literal[tuple(o.value for o in ClaimCheckRow.Outcome)]
    confirmations: int
    required: int
    message: str = Field(description="For people, in the request's language.")
    checked_at: Time


class Access(Closed):
    host: str
    port: int
    user: str


class Invoice(Closed):
    number: str


class Vat(Closed):
    treatment: Literal[tuple(t.value for t in Treatment)] = Field(
        description="Decided at checkout under the seller's rules: standard (VAT at rate, inside total), "
                    "reverse_charge (EU business in another member state, with its VAT id), outside_eu, "
                    "not_registered (the seller charges no VAT).")
    rate: Money = Field(description="Percent; 0 unless standard.")
    country: str = Field(max_length=2, description="Whose rate (standard), else the customer's country.")
    amount: Money = Field(description="The VAT inside total, in currency (the invoice states it).")
    note: str = Field(description="What the invoice says of it, in the request's language.")


class OrderSummary(Closed):
    reference: str = Field(max_length=20)
    state: Literal[tuple(s.value for s in OrderState)]
    state_label: str = Field(description="The state in the request's language.")
    product: Slug
    quantity: int
    term: int
    starts_at: Time
    ends_at: Time
    term_sliding: bool = Field(description="True until an as-soon-as-possible term is fixed: it starts when "
                                           "access is ready, starts_at being the earliest it can.")
    total: Money
    currency: str = Field(max_length=3)
    created_at: Time
    links: Links


class ExtensionOptions(Closed):
    reference: str = Field(max_length=20)
    extendable: bool = Field(description="Whether the term can be extended now (by one of days).")
    days: list[int] = Field(description="The terms that fit on the same cards right after this term.")
    prices: dict[str, Money] = Field(description="The price now of each of days, in currency.")
    currency: str | None
    starts_at: MaybeTime = Field(description="Where an extension would begin (the end of the term's cards).")
    free_until: MaybeTime = Field(description="How far after the term the same cards stay free (within the "
                                              "longest term); equal to starts_at when the next booking starts "
                                              "at the term's end.")
    refusal: Literal["not_extendable", "not_on_sale", "pending", "booked_at_end", "too_short", None] = Field(
        description="Why no extension can be bought now; null when one can.")
    message: str | None = Field(description="The refusal, for people, in the request's language.")
    pending: str | None = Field(description="The extension waiting for its payment, if any.")


class Order(OrderSummary):
    extends: str | None = Field(description="For an extension: the order whose term it lengthens.")
    extensions: list[str] = Field(description="This order's extensions, oldest first (see their states).")
    cards: int
    start_asap: bool
    environment: Slug
    options: list[str]
    lines: list[PriceLine]
    quote: PaymentQuote | None
    payment: Payment | None
    claimed_txid: str | None
    claimed_at: MaybeTime
    claim_check: ClaimCheck | None = Field(description="What checking the claimed transaction id on chain found.")
    paid_at: MaybeTime
    access: Access | None = Field(description="How to log in, once the order is active.")
    invoice: Invoice | None
    vat: Vat | None = Field(description="The VAT in the total; null for an order placed before it was stated.")
    purpose: Literal[tuple(PURPOSES)] | None = Field(description="What the rental is for, as the customer said.")


class OrderList(Closed):
    orders: list[OrderSummary]


class Offer(Closed):
    product: Slug
    name: str
    vendor: str
    memory_gb_per_card: int
    cards_per_unit: int
    stack: str
    stack_label: str
    term: Literal[tuple(TERM_DAYS)]
    quantity: int
    units_total: int
    units_free_now: int
    earliest_start: MaybeTime
    price: dict[str, Money] = Field(description="The price for `quantity` units, keyed by term in days.")
    currency: str | None = Field(max_length=3)


class OfferDetail(Offer):
    environment: str | None
    environments: list[str]
    options: list[str]
    lines: list[PriceLine]
    total: MaybeMoney


class Quote(Closed):
    product: Slug
    quantity: int
    cards: int
    term: Literal[tuple(TERM_DAYS)]
    start: MaybeTime
    environment: str | None
    options: list[str]
    available: bool
    units_free_now: int
    earliest_start: MaybeTime
    lines: list[PriceLine]
    total: MaybeMoney
    currency: str | None = Field(max_length=3)


class Restore(Closed):
    status: Literal["passed", "failed", "skipped"]
    first_difference: dict[str, str] | None


class PilotReport(Closed):
    id: str = Field(min_length=36, max_length=36, json_schema_extra={"format": "uuid"})
    uploaded_at: Time
    filename: str | None
    device: str | None
    device_count: int = Field(ge=1)
    product: str | None
    tokens_per_s: float = Field(ge=0)
    peak_memory_bytes: int
    step_time_p50_s: float = Field(ge=0)
    step_time_p95_s: float = Field(ge=0)
    data_wait_share: float = Field(ge=0)
    checkpoint_bytes: int
    checkpoint_write_s: float = Field(ge=0)
    restore: Restore


class PilotReportList(Closed):
    reports: list[PilotReport]


# Query strings ----------------------------------------------------------------------------------------------
# The live catalog's query is read by the catalog's own form (OfferQueryForm, shared with the catalog page and
# keyed as sent in the answer cache); this Schema states it for the document. tests/api check that it names the
# form's fields.

class OfferQuery(Schema):
    term: int = Field(default=None, json_schema_extra={**_TERM, "type": "integer"})
    quantity: int = Field(default=None, json_schema_extra={**_QUANTITY, "type": "integer"})
    start: str = Field(default=None, description="Earliest start; times are UTC in the answer.",
                       json_schema_extra={"format": "date-time", "maxLength": 40})
    environment: str = Field(default=None, description="Only cards that run this software environment.",
                             json_schema_extra=slug())


class ProductQuery(OfferQuery):
    options: list[str] = Field(default=None, description="Option slugs.", json_schema_extra={
        "maxItems": 100, "uniqueItems": True, "items": {"type": "string", **slug()}})


class PilotReportBody(Schema):
    """The JSON file ``anchorgpu pilot run`` wrote, as it is (kind anchorgpu-pilot-report, at most 2 MiB)."""
    model_config = ConfigDict(extra="allow", json_schema_extra=lambda schema: schema.pop("title", None))
