"""No English left on a page or e-mail in Portuguese, French or Korean.

Every page a customer can meet (the catalog and products, checkout with and
without errors, the planner and its simulation in each state, the order page
in each state with its invoice and credit note, the orders list, the guides,
the account pages, the error pages, pilot reports) and every e-mail they can
receive is rendered in each language, and none may show a piece of English
the catalogs know (see ``untranslated.py``): neither a sentence the catalog
translates otherwise nor a string it does not translate yet."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django.urls import Resolver404, reverse
from django.utils import timezone, translation
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from anchorgpu.guides.loader import SLUGS
from anchorgpu.i18n_catalogs import compile_catalogs
from anchorgpu.orders.fulfilment import provision_due
from anchorgpu.orders.models import Order, OrderEmail
from anchorgpu.orders.notify import _message
from anchorgpu.orders.states import OrderState
from anchorgpu.payments.models import ClaimCheck, Refund
from anchorgpu.payments.refunds import RefundInput, refund_record
from anchorgpu.payments.services import payment_claim, refund_address_set
from anchorgpu.planner.presets import preset
from anchorgpu.planner.progress import STAGES
from anchorgpu.simulations.models import SimulationJob
from tests import shop
from tests.runplans.reports import as_bytes, gpu_report
from tests.web.untranslated import english_left, english_pieces, english_prose, visible_text

pytestmark = pytest.mark.django_db

LANGUAGES = ("pt", "fr", "ko")


@pytest.fixture(autouse=True, scope="module")
def compiled_catalogs():
    """The pages read the compiled catalogs: compile any older than its .po (a fresh checkout has none)."""
    compile_catalogs(only_stale=True)
REFUND_ADDRESS = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"
PLAN = {"preset": "llama-3.1-8b", "method": "lora", "lora_rank": "16", "optimizer": "adamw",
        "precision": "bf16_mixed", "seq_len": "2048", "micro_batch": "1", "grad_checkpointing": "on",
        "parallel": "single", "gpus": "1", "headroom": "10", "term": "7"}
TINY_SETUP = {"method": "lora", "lora_rank": 8, "optimizer": "adamw", "precision": "bf16_mixed", "seq_len": 64,
              "micro_batch": 1, "parallel": "single", "gpus": 1, "grad_checkpointing": False}


# Views that only act (a redirect follows, shown here through the page it leads to) or that are not the
# customer's: every other page of the shop must be among those this test renders.
NOT_PAGES = {"logout", "two_factor", "order_cancel", "order_take_start", "order_extend"}


def _customer_views() -> set[str]:
    from django.urls import get_resolver
    from django.urls.resolvers import URLResolver

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern.name
    return {name for path, name in walk(get_resolver().url_patterns)
            if path[:3] in {f"{code}/" for code in ("en", *LANGUAGES)} and name} - NOT_PAGES


def _recording(client) -> set[str]:
    """The names of the views ``client`` reaches from now on."""
    seen: set[str] = set()
    send = client.request

    def request(**kwargs):
        response = send(**kwargs)
        try:
            seen.add(response.resolver_match.url_name)
        except Resolver404:  # the 404 page: no view
            pass
        return response
    client.request = request
    return seen


def _get(client, url: str, *, ok=(200,), **params) -> str:
    response = client.get(url, params)
    assert response.status_code in ok, (url, response.status_code)
    return response.content.decode()


def _pdf_text(content: bytes) -> str:
    from pypdf import PdfReader

    assert content.startswith(b"%PDF-")
    return " ".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)


def _state(order: Order, state: OrderState) -> Order:
    """An order put in ``state`` as it stands (for the page's wording only; the services' paths are tested
    elsewhere)."""
    Order.objects.filter(pk=order.pk).update(state=state.value)
    return Order.objects.get(pk=order.pk)


def _order(user, code: str, **kwargs) -> Order:
    order = shop.place(user, **kwargs)
    Order.objects.filter(pk=order.pk).update(language=code)
    return Order.objects.select_related("quote__asset").get(pk=order.pk)


def _measured_result() -> list[dict]:
    """A stored simulation result of one single-card step (what the child answers), made up but consistent."""
    gib = 2**30
    categories = {"weights": 2 * gib, "gradients": gib // 8, "optimizer": gib // 4, "activations": gib,
                  "temporaries": gib // 16}
    peak = sum(categories.values())
    return [{"peak": peak, "categories": categories, "phase": "backward", "phases": [["forward", peak - gib // 2],
             ["backward", peak]], "seconds": 2.5, "fake": True, "trainable_bytes": gib // 16, "parallel": "single",
             "gpus": 1, "notes": []}]


def order_pages(client, user, code: str) -> dict[str, str]:
    """The order page (and its live part) in each state it can show, the orders list, invoice and credit note."""
    pages = {}

    def show(name: str, order: Order):
        pages[f"order {name}"] = _get(client, reverse("order", kwargs={"reference": order.reference}))
        pages[f"order status {name}"] = _get(client, reverse("order_status", kwargs={"reference": order.reference}))

    waiting = _order(user, code, product="b200-lot-2x180gb", options=("dedicated-ipv4", "checkpoint-storage-1tb"))
    show("awaiting payment (BTC)", waiting)
    show("awaiting payment (USDC on ERC-20)", _order(user, code, asset="usdc-ethereum", term_days=7))
    show("awaiting payment (ETH)", _order(user, code, asset="eth", quantity=2))
    claimed = _order(user, code, asset="eth")
    claimed = payment_claim(order=claimed, actor=user.username, txid=shop.txid("evm", 7))
    show("claimed", claimed)
    pages["claim with a malformed transaction id"] = client.post(
        reverse("order_claim_payment", kwargs={"reference": claimed.reference}), {"txid": "not a hash"},
        follow=True).content.decode()
    for outcome in ClaimCheck.Outcome.values:  # what checking the pasted transaction id found, each case
        ClaimCheck.objects.filter(order=claimed).delete()
        ClaimCheck.objects.create(order=claimed, txid=claimed.claimed_txid, outcome=outcome, confirmations=3,
                                  required=12, checked_at=timezone.now(), detail={
                                      "amount": str(claimed.quote.amount), "network": "Ethereum mainnet",
                                      "contract": "0x" + "ab" * 20, "sent": "0.5", "orders": "AG-X"})
        pages[f"order status claimed, check {outcome}"] = _get(
            client, reverse("order_status", kwargs={"reference": claimed.reference}))
    expired_claim = _order(user, code)
    payment_claim(order=expired_claim, actor=user.username)
    from anchorgpu.payments.models import Quote
    Quote.objects.filter(order=expired_claim).update(expires_at=timezone.now() - timedelta(minutes=1))
    show("claimed, quote expired", Order.objects.get(pk=expired_claim.pk))

    paid = _order(user, code, product="b200-lot-2x180gb", options=("dedicated-ipv4",))
    shop.pay(paid, txid=shop.txid("btc", 1))
    paid = Order.objects.get(pk=paid.pk)
    show("paid", paid)
    pages["refund address refused"] = client.post(
        reverse("order_refund_address", kwargs={"reference": paid.reference}), {"refund_address": "nonsense"},
        follow=True).content.decode()
    pages["invoice PDF"] = _pdf_text(client.get(reverse("invoice_pdf", kwargs={"reference": paid.reference})).content)
    refund_address_set(order=paid, actor=user.email, address=REFUND_ADDRESS)
    refund_record(order=paid, actor="operator", now=timezone.now(), refund=RefundInput(
        address=REFUND_ADDRESS, amount=paid.quote.amount, rate_choice=Refund.RateChoice.QUOTE, txid="c3" * 32,
        reason="-", whole_order=True, customer_reason="refund"))
    paid = Order.objects.select_related("invoice").get(pk=paid.pk)
    assert paid.state == "refunded"
    show("refunded", paid)
    note = paid.invoice.credit_notes.get()
    pages["credit note PDF"] = _pdf_text(client.get(reverse("credit_note_pdf", kwargs={
        "reference": paid.reference, "number": note.number})).content)

    active = shop.activate(_order(user, code))
    show("active (with its provisioning timeline)", active)
    preparing = _order(user, code, product="h200-141gb")
    shop.pay(preparing, txid=shop.txid("btc", 2))
    show("provisioning", _state(Order.objects.get(pk=preparing.pk), OrderState.PROVISIONING))
    for state in (OrderState.EXPIRED, OrderState.CANCELLED, OrderState.UNDERPAID, OrderState.PAID_LATE,
                  OrderState.COMPLETED, OrderState.FAILED):
        show(state.value, _state(_order(user, code, product="a100-sxm-80gb"), state))
    pages["orders"] = _get(client, reverse("orders"))
    return pages


def shop_pages(client, code: str) -> dict[str, str]:
    pages = {"catalog": _get(client, reverse("catalog")),
             "catalog for 2 units, 7 days": _get(client, reverse("catalog"), term="7", quantity="2")}
    for slug in ("a100-sxm-80gb", "h100-sxm-80gb", "h200-141gb", "mi300x-192gb", "b200-lot-2x180gb"):
        pages[f"product {slug}"] = _get(client, reverse("product", kwargs={"slug": slug}))
        pages[f"checkout {slug}"] = _get(client, reverse("checkout", kwargs={"slug": slug}), quantity="1", term="7")
    checkout = reverse("checkout", kwargs={"slug": "h100-sxm-80gb"})
    pages["checkout with errors"] = client.post(checkout, {
        "quantity": "x", "ssh_keys": "-----BEGIN OPENSSH PRIVATE KEY-----", "email": "not an address"}
    ).content.decode()
    pages["checkout, empty"] = client.post(checkout, {}).content.decode()
    pages["checkout, wrong stack"] = client.post(reverse("checkout", kwargs={"slug": "mi300x-192gb"}), {
        "quantity": "1", "term_days": "7", "environment": "pytorch-cuda124", "ssh_keys": shop.ED25519,
        "name": "Alice", "email": "alice@example.com", "country": "PT"}).content.decode()
    planner = reverse("planner")
    pages["planner"] = _get(client, planner)
    pages["planner with results"] = _get(client, planner, **PLAN)
    pages["planner, fits nowhere"] = _get(client, planner, **{**PLAN, "preset": "llama-3.1-70b", "method": "full"})
    pages["planner, bad input"] = _get(client, planner, ok=(400,), **{**PLAN, "seq_len": "999999"})
    pages["simulation refused"] = client.post(reverse("planner_simulate") + "?" + urlencode(
        {**PLAN, "method": "qlora"})).content.decode()
    pages["guides"] = _get(client, reverse("guides"))
    for slug in SLUGS:
        pages[f"guide {slug}"] = _get(client, reverse("guide", kwargs={"slug": slug}))
    pages["contact"] = _get(client, reverse("contact"), order="AG-ABCDEFGH")
    pages["terms"] = _get(client, reverse("terms"))
    price = reverse("checkout_price", kwargs={"slug": "b200-lot-2x180gb"})
    pages["checkout price"] = _get(client, price, quantity="1", term_days="7", options="dedicated-ipv4")
    pages["checkout price, dated"] = _get(client, price, quantity="1", term_days="3", start="2031-01-05T10:00")
    pages["checkout price, not priced"] = _get(client, price, ok=(200, 400), quantity="x")
    pages["404"] = _get(client, f"/{code}/no-such-page/", ok=(404,))
    return pages


def simulation_pages(client) -> dict[str, str]:
    job = SimulationJob.objects.create(key=uuid.uuid4().hex, model_source={"config": preset("tiny-llama").config},
                                       model_label="tiny-llama", setup=TINY_SETUP, card_counts=[1, 2, 4, 8])
    url = reverse("planner_simulation", kwargs={"job_id": job.pk})
    pages = {"simulation queued": _get(client, url),
             "simulation status": _get(client, reverse("planner_simulation_status", kwargs={"job_id": job.pk}))}
    for stage in STAGES:
        for code in (f"{stage}:0:0:1", f"{stage}:2:3:4"):
            SimulationJob.objects.filter(pk=job.pk).update(state="running", progress=code)
            pages[f"simulation running {code}"] = _get(client, url)
    for failure in SimulationJob.Failure.values:
        error = ("the config lacks hidden_size." if failure == "input"  # the planner's words: marked as English
                 else "The simulation ran longer than 600 s and was stopped.")  # the runner's: translated
        SimulationJob.objects.filter(pk=job.pk).update(state="failed", failure=failure, progress="", error=error)
        pages[f"simulation failed: {failure}"] = _get(client, url)
    SimulationJob.objects.filter(pk=job.pk).update(state="done", failure="", error="", result=_measured_result(),
                                                   seconds=2.5, finished_at=timezone.now())
    pages["simulation done"] = _get(client, url, headroom="10", term="7")
    return pages


def run_plan_pages(client) -> dict[str, str]:
    """The planner with a run's size and a pilot report's throughput: the cost of the run, each purpose."""
    from anchorgpu.orders.models import PURPOSE_CHOICES
    from anchorgpu.pilotreports.models import PilotReport

    report = PilotReport.objects.order_by("uploaded_at").first()
    pages = {}
    for purpose, _label in [("", "")] + list(PURPOSE_CHOICES):
        pages[f"planner, run of 2 epochs with a report, purpose {purpose!r}"] = _get(
            client, reverse("planner"), **PLAN, tokens_per_epoch="50000000", epochs="2", report=str(report.pk),
            purpose=purpose, experiments="3")
    pages["planner, run in steps"] = _get(client, reverse("planner"), **PLAN, steps="2000", global_batch="64")
    pages["planner, run given both ways"] = _get(client, reverse("planner"), ok=(200, 400), **PLAN,
                                                 tokens_per_epoch="1000", steps="10", global_batch="8")
    return pages


def account_pages(client, user, code: str) -> dict[str, str]:
    """Signed out: log-in, sign-up, password reset; signed in: the account's own pages."""
    client.logout()
    pages = {"login": _get(client, reverse("login")),
             "login, wrong password": client.post(reverse("login"), {"username": user.email,
                                                                     "password": "wrong"}).content.decode(),
             "signup": _get(client, reverse("signup")),
             "sign-in code, nothing pending": client.get(reverse("login_code"), follow=True).content.decode(),
             "signup with errors": client.post(reverse("signup"), {"email": "x", "password1": "1",
                                                                   "password2": "2"}).content.decode(),
             "password reset": _get(client, reverse("password_reset")),
             "password reset sent": _get(client, reverse("password_reset_done")),
             "password reset, bad link": _get(client, reverse("password_reset_confirm", kwargs={
                 "uidb64": "x", "token": "y"})),
             "password reset complete": _get(client, reverse("password_reset_complete")),
             "orders, signed out": _get(client, reverse("orders"), ok=(200, 302)),
             "guest sent to log in": client.get(reverse("orders"), follow=True).content.decode()}
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    link = client.get(reverse("password_reset_confirm", kwargs={"uidb64": uid,
                                                                "token": default_token_generator.make_token(user)}),
                      follow=True)
    pages["password reset, new password"] = link.content.decode()
    client.force_login(user)
    for name in ("password_change", "password_change_done", "api_tokens", "ssh_keys"):  # two-factor: operators'
        pages[name] = _get(client, reverse(name))
    return pages


def error_pages(code: str) -> dict[str, str]:
    from anchorgpu.ops.ratelimit import RateLimited, refused_page
    from anchorgpu.web.views import bad_request

    request = RequestFactory().get(f"/{code}/")
    request.user = SimpleNamespace(is_authenticated=False, is_staff=False)
    request.LANGUAGE_CODE = code
    from django.db import OperationalError

    from anchorgpu.ops.dbdown import DatabaseUnavailableMiddleware
    from anchorgpu.web.views import server_error

    pages = {"400": bad_request(request).content.decode(),
             "429": refused_page(request, RateLimited(600)).content.decode(),
             "500": server_error(request).content.decode()}
    for method in ("get", "post"):  # the database is down: reading a page, sending a form
        down = getattr(RequestFactory(), method)(f"/{code}/orders/")
        down.user, down.LANGUAGE_CODE = request.user, code
        answer = DatabaseUnavailableMiddleware(None).process_exception(down, OperationalError("connection refused"))
        assert answer.status_code == 503
        pages[f"503 on {method}"] = answer.content.decode()
    return pages


def report_pages(client) -> dict[str, str]:
    upload = client.post(reverse("pilot_reports"), {"report": SimpleUploadedFile(
        "report.json", as_bytes(gpu_report(tokens_per_s=3210.0)), "application/json")})
    assert upload.status_code == 302
    failed = client.post(reverse("pilot_reports"), {"report": SimpleUploadedFile(
        "report.json", as_bytes(gpu_report(restore_passed=False)), "application/json")})
    bad = client.post(reverse("pilot_reports"), {"report": SimpleUploadedFile("report.json", b"{", "text/plain")})
    return {"pilot report": _get(client, upload["Location"]), "pilot report, restore failed":
            _get(client, failed["Location"]), "pilot reports": _get(client, reverse("pilot_reports")),
            "pilot reports, bad file": bad.content.decode()}


def emails(user, code: str, mailoutbox) -> dict[str, str]:
    """Every e-mail a customer can get, in ``code``: each kind the order outbox sends, the state change of each
    state, and the account's (password reset, sign-in code)."""
    order = _order(user, code, asset="usdc-ethereum")
    shop.pay(order, txid=shop.txid("evm", 3), confirmations=12)
    order = Order.objects.get(pk=order.pk)
    refund_address_set(order=order, actor=user.email, address="0x" + "d4" * 20)
    refund_record(order=order, actor="operator", now=timezone.now(), refund=RefundInput(
        address="0x" + "d4" * 20, amount=order.quote.amount, rate_choice=Refund.RateChoice.QUOTE,
        txid="0x" + "c5" * 32, reason="-", whole_order=True, customer_reason="refund"))
    Refund.objects.filter(order=order).update(verified_at=timezone.now())
    order = Order.objects.get(pk=order.pk)
    found = {}
    customer_kinds = set(OrderEmail.Kind) - {OrderEmail.Kind.OPERATOR_ALERT}  # the operators read English
    for kind in customer_kinds - {OrderEmail.Kind.STATE_CHANGED}:
        found[kind] = "\n".join(_message(OrderEmail(order=order, kind=kind)))
    active = _order(user, code, product="mi300x-192gb")  # its access is in the e-mail
    shop.pay(active, txid=shop.txid("btc", 9))
    provision_due()
    active = Order.objects.get(pk=active.pk)
    assert active.state == "active"
    for state in OrderState:
        found[f"state_changed {state.value}"] = "\n".join(_message(OrderEmail(
            order=active if state in (OrderState.ACTIVE, OrderState.COMPLETED) else order,
            kind=OrderEmail.Kind.STATE_CHANGED, state=state.value)))
    from anchorgpu.accounts.login_guard import email_code_send
    with translation.override(code):
        email_code_send(user=user, pending={})
    mails = list(mailoutbox)
    assert mails, "the sign-in code e-mail was sent"
    for i, message in enumerate(mails):
        found[f"mail {i}: {message.subject}"] = message.subject + "\n" + message.body
    return found


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_customer_page_and_email_has_no_english(client, code, mailoutbox, settings):
    settings.ANCHORGPU_EMAIL_DISABLED = False
    assert len(english_pieces(code)) > 1000  # the check has teeth
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    seen = _recording(client)
    with translation.override(code):
        pages = {**shop_pages(client, code), **order_pages(client, user, code), **simulation_pages(client),
                 **report_pages(client), **run_plan_pages(client), **error_pages(code),
                 **account_pages(client, user, code)}
        client.post(reverse("password_reset"), {"email": user.email})
    texts = {name: visible_text(page) for name, page in pages.items() if "PDF" not in name}
    texts.update({name: page for name, page in pages.items() if "PDF" in name})
    texts.update({f"email {name}": body for name, body in emails(user, code, mailoutbox).items()})
    assert _customer_views() <= seen, f"pages this test does not render: {sorted(_customer_views() - seen)}"
    assert len(texts) > 80
    assert any("Alice" in t for t in texts.values())  # the pages are the customer's own
    leaks = {name: left for name, text in texts.items() if (left := english_left(text, code) + english_prose(text))}
    report = "\n".join(f"{name}: {left[:6]}" for name, left in sorted(leaks.items()))
    assert not leaks, f"{len(leaks)} pages or e-mails in {code} show English:\n{report}"


def test_a_string_the_catalog_does_not_translate_yet_is_found(tmp_path):
    (tmp_path / "pt" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "pt" / "LC_MESSAGES" / "django.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "Copy the address"\nmsgstr ""\n\n'  # new, no translation yet
        '#, fuzzy\nmsgid "Copied"\nmsgstr "Copiar"\n\n'  # fuzzy: not used by the shop
        'msgid "Remove"\nmsgstr "Remover"\n', encoding="utf-8")
    page = visible_text("<button>Copy the address</button> <span>Copied</span> <button>Remover</button>")
    assert [p for p, _m in english_left(page, "pt", tmp_path)] == ["Copied", "Copy the address"]


def test_the_check_finds_english_it_should():
    page = "<p>Pedido <strong>B200 lot, 2 × 180 GB</strong></p><pre>building the model</pre>"
    assert [p for p, _m in english_left(visible_text(page), "pt")] == ["B200 lot, 2 × 180 GB"]
    assert english_left(visible_text("<p>Lote B200, 2 × 180 GB</p>"), "pt") == []
    assert english_left("Status: building the model on the meta device", "ko")
    assert english_prose("Estado: the order is on its way") == ["the order is on its way"]  # not in any catalog
    assert english_prose("Le lot est en route ; on a reçu le paiement") == []
