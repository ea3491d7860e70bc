"""No English left on the Portuguese, French and Korean pages of the purchase
path, nor in the emails: every English sentence the catalogs translate must
not appear on a page served in another language."""

from __future__ import annotations

import html
import re
from pathlib import Path

import polib
import pytest
from django.urls import reverse
from django.utils import translation

import anchorgpu
from anchorgpu.orders.notify import emails_send_due
from anchorgpu.payments.services import payment_claim
from tests import shop

pytestmark = pytest.mark.django_db

_PLACEHOLDER = re.compile(r"%\([a-z_]+\)[sd]|%[sd]|<[^>]+>")


def english_fragments(code: str) -> set[str]:
    """Pieces (12+ characters) of the English sentences the catalog of ``code`` translates differently."""
    catalog = polib.pofile(str(Path(anchorgpu.__file__).parent / "locale" / code / "LC_MESSAGES" / "django.po"))
    pieces = set()
    for entry in catalog.translated_entries():
        translated = entry.msgstr or entry.msgstr_plural.get(0, "")
        if translated == entry.msgid or len(re.findall(r"\b[a-z]{4,}\b", entry.msgid)) < 2:
            continue
        for piece in _PLACEHOLDER.split(entry.msgid):
            piece = piece.strip(" .,:;()“”\"'")
            if len(piece) >= 12 and piece not in translated:
                pieces.add(piece)
    return pieces


def visible_text(page: str) -> str:
    page = re.sub(r"<(script|style|svg)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("code", ["pt", "fr", "ko"])
def test_purchase_path_pages_and_emails_have_no_english(client, code, mailoutbox, django_capture_on_commit_callbacks):
    shop.load_shop()
    user = shop.customer()
    client.force_login(user)
    fragments = english_fragments(code)
    assert len(fragments) > 200  # the check has teeth
    with translation.override(code):
        urls = [reverse("catalog") + "?term=7&quantity=2", reverse("product", kwargs={"slug": "h100-sxm-80gb"}),
                reverse("checkout", kwargs={"slug": "h100-sxm-80gb"}) + "?quantity=2&term=7", reverse("orders")]
        bad_checkout = reverse("checkout", kwargs={"slug": "h100-sxm-80gb"})
    pages = [client.get(url).content.decode() for url in urls]
    pages.append(client.post(bad_checkout, {"quantity": "x", "ssh_keys": "-----BEGIN OPENSSH PRIVATE KEY-----"})
                 .content.decode())  # a page full of form errors
    with translation.override(code), django_capture_on_commit_callbacks(execute=True):
        order = shop.place(user)
        order.language = code
        order.save(update_fields=["language"])
        payment_claim(order=order, actor=user.username)
        order_url = reverse("order", kwargs={"reference": order.reference})
    pages.append(client.get(order_url).content.decode())
    for page in pages:
        text = visible_text(page)
        left = sorted(f for f in fragments if f in text)
        assert not left, left[:5]
    assert emails_send_due() == 2  # the worker sends them, in the order's language
    assert len(mailoutbox) == 2  # payment details, then "payment being checked"
    for message in mailoutbox:
        left = sorted(f for f in fragments if f in message.subject + message.body)
        assert not left, left[:5]
