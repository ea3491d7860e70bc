from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .addresses import Scheme
from .amounts import quoted_places
from .fields import BaseUnitsField

SCHEME_CHOICES = [
    (Scheme.BTC.value, _("Bitcoin (BIP84, native SegWit)")),
    (Scheme.BTC_TESTNET.value, _("Bitcoin testnet (BIP84)")),
    (Scheme.EVM.value, _("EVM (BIP44, coin 60)")),
    (Scheme.TRON.value, _("TRON (BIP44, coin 195)")),
]


class Finality(models.TextChoices):
    """When a transfer counts: after a number of blocks on top of its own, or once the node reports its block
    under a finality tag (``safe`` or ``finalized`` on Ethereum and its L2s; ``finalized`` is TRON's solidified
    block). With a tag, confirmations are counted from the tagged block, not from the tip."""

    DEPTH = "depth", _("a number of confirmations")
    SAFE = "safe", _("the node's “safe” block")
    FINALIZED = "finalized", _("the node's “finalized” block")


class Asset(models.Model):
    """A crypto asset on one network that the shop accepts."""

    code = models.SlugField(_("code"), unique=True, help_text=_("Stable identifier, e.g. btc, eth, usdc-ethereum."))
    symbol = models.CharField(_("symbol"), max_length=12)
    name = models.CharField(_("name"), max_length=80)
    network = models.CharField(_("network"), max_length=40,
                               help_text=_("e.g. bitcoin, ethereum, tron, base, arbitrum, polygon, bsc. Assets that "
                                           "share a symbol are offered as one coin on several networks."))
    network_name = models.CharField(_("network name"), max_length=80)
    scheme = models.CharField(_("address scheme"), max_length=16, choices=SCHEME_CHOICES)
    chain_id = models.PositiveBigIntegerField(_("EVM chain id"), null=True, blank=True)
    decimals = models.PositiveSmallIntegerField(_("decimal places"), validators=[MaxValueValidator(30)])
    quote_decimals = models.PositiveSmallIntegerField(
        _("decimal places quoted"), null=True, blank=True, validators=[MaxValueValidator(30)],
        help_text=_("A quote's amount is rounded up to this many decimal places and shown with them: 8 for "
                    "Bitcoin (one satoshi), 6 for Ether, 2 for a dollar stablecoin. Empty: at most 8. Never more "
                    "than the asset's decimal places; changing it affects new quotes only."))
    contract = models.CharField(_("token contract"), max_length=42, blank=True,
                                help_text=_("ERC-20 contract address (0x…), or a TRC-20 contract's T… address; empty "
                                            "for the network's own coin (TRON: a token is required)."))
    confirmations_required = models.PositiveSmallIntegerField(
        _("confirmations required"), default=1,
        help_text=_("With a finality tag: confirmations counted from the tagged block (1 = the tagged block "
                    "itself)."))
    finality = models.CharField(
        _("finality rule"), max_length=12, choices=Finality.choices, default=Finality.DEPTH,
        help_text=_("EVM and TRON: count confirmations from the tip, or from the block the node tags "
                    "“safe” or “finalized”. Bitcoin counts confirmations."))
    watch_url = models.CharField(
        _("node or explorer URL"), max_length=300, blank=True,
        help_text=_("JSON-RPC URL of a node (EVM assets) or base URL of an Esplora-compatible explorer API (Bitcoin), "
                    "for automatic payment checks. Empty: an operator checks payments by hand. The environment "
                    "variable ANCHORGPU_WATCH_URL_{CODE} overrides it, so a URL with an API key can stay out of "
                    "the database."))
    tolerance_bps = models.PositiveSmallIntegerField(
        _("tolerance (basis points)"), default=0, validators=[MaxValueValidator(500)],
        help_text=_("How far short of the quote a payment may be and still count as paid; 100 = 1 %."))
    position = models.PositiveSmallIntegerField(_("position"), default=0)
    is_active = models.BooleanField(_("accepted"), default=True)

    class Meta:
        ordering = ["position", "code"]
        verbose_name = _("crypto asset")
        verbose_name_plural = _("crypto assets")
        constraints = [
            models.CheckConstraint(condition=Q(scheme__in=["evm", "tron"]) | Q(contract=""),
                                   name="asset_token_only_on_evm"),
            models.CheckConstraint(condition=~Q(scheme="tron") | ~Q(contract=""), name="asset_tron_token_only"),
            models.CheckConstraint(condition=Q(scheme__in=["evm", "tron"]) | Q(finality="depth"),
                                   name="asset_finality_tag_on_evm_or_tron"),
        ]

    def __str__(self) -> str:
        return f"{self.symbol} ({self.network_name})"

    @property
    def chain(self) -> str:
        """The transaction-id family: "btc", "evm" or "tron"."""
        if self.scheme == Scheme.EVM:
            return "evm"
        return "tron" if self.scheme == Scheme.TRON else "btc"

    @property
    def is_token(self) -> bool:
        return bool(self.contract)

    @property
    def quoted_places(self) -> int:
        """Decimal places a quote's amount is rounded up to, and shown with."""
        return quoted_places(self.decimals, self.quote_decimals)

    def tolerance_for(self, amount: int) -> int:
        return min(amount * self.tolerance_bps // 10_000, max(amount - 1, 0))


class DepositKey(models.Model):
    """The operator's account-level extended PUBLIC key for one address scheme,
    and the next unused address index. The private key stays with the operator."""

    scheme = models.CharField(_("address scheme"), max_length=16, choices=SCHEME_CHOICES, unique=True)
    extended_public_key = models.CharField(_("extended public key"), max_length=200,
                                           help_text=_("Account level (m/purpose'/coin'/account'): a zpub for "
                                                       "Bitcoin, an xpub for EVM networks. Never a private key."))
    next_index = models.PositiveIntegerField(_("next address index"), default=0)
    label = models.CharField(_("label"), max_length=80, blank=True)

    class Meta:
        verbose_name = _("deposit key")
        verbose_name_plural = _("deposit keys")

    def __str__(self) -> str:
        return f"{self.get_scheme_display()} · {self.extended_public_key[:12]}…"


class Rate(models.Model):
    """What one whole coin of an asset costs in a fiat currency, entered by the
    operator (or a feed later). A quote locks the newest fresh one."""

    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="rates")
    currency = models.CharField(_("currency"), max_length=3)
    price = models.DecimalField(_("price of one coin"), max_digits=24, decimal_places=8,
                                validators=[MinValueValidator(Decimal("0.00000001"))])
    source = models.CharField(_("source"), max_length=120, help_text=_("Where the figure comes from."))
    observed_at = models.DateTimeField(_("observed at"))
    entered_by = models.CharField(_("entered by"), max_length=150, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["-observed_at", "-id"]
        indexes = [models.Index(fields=["asset", "currency", "-observed_at"], name="rate_latest")]
        verbose_name = _("exchange rate")
        verbose_name_plural = _("exchange rates")

    def __str__(self) -> str:
        return f"1 {self.asset.symbol} = {self.price} {self.currency} ({self.source}, {self.observed_at:%Y-%m-%d})"


class PaymentSettings(models.Model):
    """The operator's payment settings (one row)."""

    quote_minutes = models.PositiveIntegerField(
        _("quote lifetime (minutes)"), default=60, validators=[MinValueValidator(5), MaxValueValidator(24 * 60)],
        help_text=_("How long a quote's rate and the order's hold on the cards last."))
    monitor_hours = models.PositiveIntegerField(
        _("monitoring window (hours)"), default=72, validators=[MaxValueValidator(24 * 30)],
        help_text=_("How long after expiry the deposit address is still watched for late transfers."))
    claim_grace_minutes = models.PositiveIntegerField(
        _("grace after “I've paid” (minutes)"), default=60, validators=[MaxValueValidator(24 * 60)],
        help_text=_("When the customer says they have paid, the cards stay held this long after the quote expires, "
                    "so a transfer still confirming does not lose them."))
    pending_hold_hours = models.PositiveIntegerField(
        _("hold while confirming (hours)"), default=6, validators=[MaxValueValidator(72)],
        help_text=_("A transfer seen before expiry but not yet confirmed keeps the cards held this long "
                    "(at most until the watch window ends)."))
    rate_max_age_minutes = models.PositiveIntegerField(
        _("oldest usable rate (minutes)"), default=24 * 60, validators=[MinValueValidator(1)],
        help_text=_("A quote refuses a rate older than this."))
    # How customers reach the operators: the shop's contact page (and every "contact us") shows these.
    contact_email = models.EmailField(
        _("contact e-mail"), blank=True,
        help_text=_("Where customers write about an order or a payment. Empty: the address the shop's e-mails "
                    "come from."))
    contact_other = models.CharField(
        _("other way to reach us"), max_length=200, blank=True,
        help_text=_("Shown on the contact page as it is written: a phone number, a chat handle or a web "
                    "address."))
    contact_hours = models.CharField(
        _("when we answer"), max_length=120, blank=True,
        help_text=_("e.g. Monday to Friday, 09:00–18:00 UTC."))

    class Meta:
        verbose_name = _("payment settings")
        verbose_name_plural = _("payment settings")

    def __str__(self) -> str:
        return str(_("Payment settings"))

    @classmethod
    def current(cls) -> "PaymentSettings":
        obj, _created = cls.objects.get_or_create(pk=1)
        return obj


class Quote(models.Model):
    """What the customer must pay, in which asset, to which address, until when."""

    order = models.OneToOneField("orders.Order", on_delete=models.CASCADE, related_name="quote")
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="+")
    currency = models.CharField(_("currency"), max_length=3)
    fiat_total = models.DecimalField(_("fiat total"), max_digits=14, decimal_places=2)
    rate = models.DecimalField(_("rate"), max_digits=24, decimal_places=8)
    rate_source = models.CharField(_("rate source"), max_length=120)
    rate_at = models.DateTimeField(_("rate observed at"))
    amount = BaseUnitsField(_("amount (base units)"))
    tolerance = BaseUnitsField(_("tolerance (base units)"), default=0)
    confirmations_required = models.PositiveSmallIntegerField(_("confirmations required"))
    scheme = models.CharField(_("address scheme"), max_length=16, choices=SCHEME_CHOICES)
    address_index = models.PositiveIntegerField(_("address index"))
    address = models.CharField(_("deposit address"), max_length=100, unique=True)
    expires_at = models.DateTimeField(_("expires"))
    unattributed = BaseUnitsField(
        _("coin at the address not matched to a transfer"), default=0,
        help_text=_("Set by the watcher when the address holds more of the network's coin than the transfers it "
                    "found (e.g. sent by a contract): an operator finds the transaction and records it."))
    monitor_until = models.DateTimeField(_("watched until"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scheme", "address_index"], name="quote_address_index_once"),
            models.CheckConstraint(condition=Q(monitor_until__gte=models.F("expires_at")),
                                   name="quote_monitor_after_expiry"),
        ]
        verbose_name = _("quote")
        verbose_name_plural = _("quotes")

    def __str__(self) -> str:
        return f"{self.order} · {self.asset.symbol}"

    @property
    def display_amount(self) -> str:
        from .uri import whole_units

        return whole_units(self.amount, self.asset.decimals)

    @property
    def display_tolerance(self) -> str:
        from .uri import whole_units

        return whole_units(self.tolerance, self.asset.decimals)

    @property
    def uri(self) -> str:
        from .uri import payment_uri

        return payment_uri(scheme=self.scheme, address=self.address, amount=self.amount,
                           decimals=self.asset.decimals, chain_id=self.asset.chain_id, contract=self.asset.contract)


class Transfer(models.Model):
    """One transfer received for an order. A transfer credits one order once:
    the database refuses a second row for the same (chain, txid, index)."""

    class Source(models.TextChoices):
        OPERATOR = "operator", _("recorded by an operator")
        WATCHER = "watcher", _("seen by the chain watcher")

    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="transfers")
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="+")
    chain = models.CharField(_("network"), max_length=40)
    txid = models.CharField(_("transaction id"), max_length=80)
    index = models.PositiveIntegerField(_("output or log index"))
    amount = BaseUnitsField(_("amount (base units)"))
    confirmations = models.PositiveIntegerField(_("confirmations"))
    seen_at = models.DateTimeField(_("first seen"))
    sender = models.CharField(_("sender address"), max_length=100, blank=True,
                              help_text=_("Where it came from, when known; a refund never goes back there."))
    source = models.CharField(_("source"), max_length=16, choices=Source.choices)
    recorded_by = models.CharField(_("recorded by"), max_length=150)
    note = models.TextField(_("note"), blank=True)
    block_number = models.PositiveBigIntegerField(_("block height"), null=True, blank=True)
    block_hash = models.CharField(_("block hash"), max_length=80, blank=True,
                                  help_text=_("The block the watcher saw it in; if that block is replaced, the "
                                              "transfer is withdrawn until it is mined again."))
    withdrawn_at = models.DateTimeField(_("withdrawn"), null=True, blank=True,
                                        help_text=_("Set when its block was replaced before it had all its "
                                                    "confirmations: it no longer counts."))
    paid_to = models.CharField(_("paid to"), max_length=100, blank=True,
                               help_text=_("The deposit address it was sent to, when that is not its order's own "
                                           "(a transfer reassigned to the order it was meant for)."))
    rechecked_at = models.DateTimeField(_("last found on chain"), null=True, blank=True,
                                        help_text=_("When the watcher last found this settled transfer where it "
                                                    "was credited."))
    shared_statement = models.TextField(
        _("shared transaction statement"), blank=True,
        help_text=_("When one transaction pays several orders: the operator's statement of which output pays "
                    "which order, as the explorer shows it."))
    created_at = models.DateTimeField(_("recorded"), auto_now_add=True)

    class Meta:
        ordering = ["seen_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["chain", "txid", "index"], name="transfer_credits_once"),
        ]
        indexes = [models.Index(fields=["asset", "withdrawn_at", "confirmations"], name="transfer_not_final")]
        verbose_name = _("received transfer")
        verbose_name_plural = _("received transfers")

    def __str__(self) -> str:
        return f"{self.chain}:{self.txid}:{self.index}"

    @property
    def address(self) -> str:
        """The deposit address the money went to (where it sits on chain)."""
        return self.paid_to or self.order.quote.address


class Refund(models.Model):
    """Money sent back to an address the customer gave (never the sender's)."""

    class RateChoice(models.TextChoices):
        QUOTE = "quote", _("the quote's locked rate")
        CURRENT = "current", _("the rate on the day of the refund")

    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="refunds")
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="+")
    address = models.CharField(_("refund address"), max_length=100)
    amount = BaseUnitsField(_("amount (base units)"))
    network_fee = BaseUnitsField(_("network fee (base units)"), default=0,
                                 help_text=_("Taken by the network out of the customer's money."))
    fiat_amount = models.DecimalField(_("fiat amount"), max_digits=14, decimal_places=2)
    currency = models.CharField(_("currency"), max_length=3)
    rate = models.DecimalField(_("rate"), max_digits=24, decimal_places=8)
    rate_choice = models.CharField(_("rate used"), max_length=16, choices=RateChoice.choices)
    txid = models.CharField(_("transaction id"), max_length=80)
    reason = models.TextField(_("reason"))
    whole_order = models.BooleanField(_("refunds the whole order"), default=False)
    of_price = models.BooleanField(_("refunds part of the price"), default=False,
                                   help_text=_("Money the order kept, given back (a credit note follows); not an "
                                               "excess."))
    customer_request = models.TextField(
        _("customer's written request"), blank=True,
        help_text=_("When the operator entered the address: where and when the customer asked for it to be used."))
    verified_at = models.DateTimeField(_("verified on chain"), null=True, blank=True,
                                       help_text=_("When the refund's transaction was found on chain paying the "
                                                   "address the amount; the customer sees it as sent from then."))
    verification = models.JSONField(_("chain check"), default=dict, blank=True)
    recorded_by = models.CharField(_("recorded by"), max_length=150)
    created_at = models.DateTimeField(_("recorded"), auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["asset", "txid"], name="refund_txid_once")]
        verbose_name = _("refund")
        verbose_name_plural = _("refunds")

    def __str__(self) -> str:
        return f"{self.order} · {self.fiat_amount} {self.currency}"

    @property
    def shown_as_sent(self) -> bool:
        """Whether the customer is told it was sent: found on chain, or recorded for an asset nobody watches."""
        return self.verified_at is not None or self.verification.get("status", "not_watched") == "not_watched"


class WatchState(models.Model):
    """Where the chain watcher stands for one asset: the operators' status page reads it."""

    asset = models.OneToOneField(Asset, on_delete=models.CASCADE, related_name="watch_state")
    next_block = models.PositiveBigIntegerField(
        _("next block to scan"), null=True, blank=True,
        help_text=_("Lower it to scan earlier blocks again; empty: start near the chain tip."))
    tip = models.PositiveBigIntegerField(_("last block seen"), null=True, blank=True)
    tip_hash = models.CharField(_("its hash"), max_length=80, blank=True)
    tip_time = models.DateTimeField(_("its time"), null=True, blank=True)
    recent = models.JSONField(_("hashes of the blocks not yet final"), default=dict, blank=True,
                              help_text=_("Height → hash of the last blocks read: a replaced one is read again."))
    last_poll_at = models.DateTimeField(_("last poll"), null=True, blank=True)
    last_success_at = models.DateTimeField(_("last successful poll"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    last_error_at = models.DateTimeField(_("last error at"), null=True, blank=True)
    errors_in_row = models.PositiveIntegerField(_("failed polls in a row"), default=0)
    watched = models.PositiveIntegerField(_("addresses watched"), default=0)
    found = models.PositiveIntegerField(_("transfers found in the last poll"), default=0)
    calls = models.PositiveIntegerField(_("calls in the last poll"), default=0)
    round_trips = models.PositiveIntegerField(_("round trips in the last poll"), default=0)
    duration_ms = models.PositiveIntegerField(_("last poll took (ms)"), default=0)

    class Meta:
        verbose_name = _("chain watcher status")
        verbose_name_plural = _("chain watcher status")

    def __str__(self) -> str:
        return str(self.asset)

    @property
    def lag_blocks(self) -> int | None:
        """Blocks at the tip not yet scanned."""
        if self.tip is None or self.next_block is None:
            return None
        return max(0, self.tip + 1 - self.next_block)


class ClaimCheck(models.Model):
    """What checking the transaction id a customer gave with "I've paid" found (latest per order and id)."""

    class Outcome(models.TextChoices):
        FOUND = "found", _("found")
        PENDING = "pending", _("waiting to be mined")
        NOT_FOUND = "not_found", _("unknown on this network")
        WRONG_NETWORK = "wrong_network", _("on another network")
        OTHER_ADDRESS = "other_address", _("pays another address")
        WRONG_ASSET = "wrong_asset", _("another coin or token")
        FAILED = "failed", _("failed on chain")
        BAD_DATA = "bad_data", _("data does not match its id")
        ALREADY_CREDITED = "already_credited", _("already credited to another order")
        UNAVAILABLE = "unavailable", _("could not be checked yet")
        NOT_WATCHED = "not_watched", _("checked by an operator")

    # Outcomes that a later look cannot change: the poll stops re-checking them.
    FINAL = frozenset({Outcome.WRONG_NETWORK, Outcome.OTHER_ADDRESS, Outcome.WRONG_ASSET, Outcome.FAILED,
                       Outcome.ALREADY_CREDITED})

    order = models.ForeignKey("orders.Order", on_delete=models.CASCADE, related_name="claim_checks")
    txid = models.CharField(_("transaction id"), max_length=80)
    outcome = models.CharField(_("outcome"), max_length=20, choices=Outcome.choices)
    confirmations = models.PositiveIntegerField(_("confirmations"), default=0)
    required = models.PositiveIntegerField(_("confirmations required"), default=0)
    detail = models.JSONField(_("detail"), default=dict, blank=True)
    checks = models.PositiveIntegerField(_("times checked"), default=1)
    checked_at = models.DateTimeField(_("checked"))

    class Meta:
        ordering = ["-checked_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["order", "txid"], name="claim_check_once_per_txid")]
        verbose_name = _("claim check")
        verbose_name_plural = _("claim checks")

    def __str__(self) -> str:
        return f"{self.txid[:14]}… {self.outcome}"

    @property
    def settled(self) -> bool:
        """Nothing more to learn: a final refusal, or found with all its confirmations."""
        return self.outcome in self.FINAL or (self.outcome == self.Outcome.FOUND
                                              and self.confirmations >= self.required)


class StrayTransfer(models.Model):
    """A transfer of an order's coin to its deposit address on another EVM network than the one quoted (USDT
    on Polygon to an order that quoted USDT on Base). EVM deposit addresses are one key on every EVM chain, so
    the operator holds the money and can return it; it never pays the order. Seen by the watcher of the
    network it arrived on; one row per transfer, whatever reorganisations do."""

    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="stray_transfers")
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="+",
                              help_text=_("What arrived: the asset of the network it arrived on."))
    network = models.CharField(_("network"), max_length=40)
    txid = models.CharField(_("transaction id"), max_length=80)
    index = models.PositiveIntegerField(_("log index"))
    amount = BaseUnitsField(_("amount (base units)"))
    address = models.CharField(_("deposit address"), max_length=100)
    sender = models.CharField(_("sender address"), max_length=100, blank=True)
    block_number = models.PositiveBigIntegerField(_("block height"), null=True, blank=True)
    block_hash = models.CharField(_("block hash"), max_length=80, blank=True)
    seen_at = models.DateTimeField(_("first seen"))
    withdrawn_at = models.DateTimeField(_("withdrawn"), null=True, blank=True,
                                        help_text=_("Set when its block was replaced before it had the asset's "
                                                    "confirmations and it is in no block now: nothing arrived."))

    class Meta:
        ordering = ["seen_at", "id"]
        constraints = [models.UniqueConstraint(fields=["network", "txid", "index"], name="stray_transfer_once")]
        verbose_name = _("transfer on another network")
        verbose_name_plural = _("transfers on another network")

    def __str__(self) -> str:
        return f"{self.network}:{self.txid}:{self.index}"
