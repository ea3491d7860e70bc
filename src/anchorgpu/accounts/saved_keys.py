"""The SSH public keys a customer keeps on their account: add (parsed and checked exactly as checkout
checks a pasted key), remove, and the keys an order gets when the customer ticks saved ones.

An order copies its keys into ``OrderKey`` rows when it is placed; nothing here touches orders."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from anchorgpu.audit.services import audit_record
from anchorgpu.i18n import message
from anchorgpu.orders.ssh_keys import _PRIVATE_MARKERS, PublicKey, SSHKeyError, parse_key

from .models import SavedKey

MAX_SAVED_KEYS = 20  # per customer
# Checkout's own words for a pasted private key.
PRIVATE_KEY_REFUSED = gettext_lazy("This is a PRIVATE key. Treat it as leaked: delete it, make a new key pair "
                                   "and paste only the public key (the .pub file). It has not been saved.")


class SavedKeyError(Exception):
    """A key we do not save; ``leaked`` is True when it was a private key (never echo it back)."""

    def __init__(self, text: str, *, leaked: bool = False, code: str = "invalid"):
        super().__init__(text)
        self.message, self.leaked, self.code = text, leaked, code


def looks_private(text: str) -> bool:
    """Whether the text holds a private key (which is never echoed back into a page)."""
    return any(marker in (text or "") for marker in _PRIVATE_MARKERS)


def _label(key: PublicKey, label: str) -> str:
    label = " ".join((label or "").split())[:60]
    return label or (key.comment[:60] if key.comment else key.type)


def saved_key_add(*, user, text: str, label: str = "") -> SavedKey:
    """Parse one public key and keep it on the user's account. Raises ``SavedKeyError`` for a key checkout
    would refuse, a private key, a key already saved (same fingerprint) or one key too many."""
    lines = [line for line in (text or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) > 1 and not looks_private(text):
        raise SavedKeyError(_("Add one key at a time."))
    try:
        key = parse_key(text or "")
    except SSHKeyError as exc:
        if exc.leaked:
            raise SavedKeyError(str(PRIVATE_KEY_REFUSED), leaked=True, code="private_key") from None
        raise SavedKeyError(_("This is not an SSH public key we can use: %(reason)s") % {"reason": message(exc)},
                            code="bad_key") from None
    try:
        with transaction.atomic():
            # The customer's row lock makes the count and the insert one step (two tabs adding at once).
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            if SavedKey.objects.filter(user=user, fingerprint=key.fingerprint).exists():
                raise SavedKeyError(_("This key is already saved (%(fingerprint)s).")
                                    % {"fingerprint": key.fingerprint}, code="duplicate")
            if SavedKey.objects.filter(user=user).count() >= MAX_SAVED_KEYS:
                raise SavedKeyError(_("You have %(count)d saved keys; remove one before adding another.")
                                    % {"count": MAX_SAVED_KEYS}, code="too_many")
            saved = SavedKey.objects.create(user=user, label=_label(key, label), key_type=key.type, bits=key.bits,
                                            fingerprint=key.fingerprint, comment=key.comment, public_key=key.line)
            audit_record(actor=user.get_username(), action="saved_key_add", obj=saved,
                         data={"fingerprint": key.fingerprint, "label": saved.label})
    except IntegrityError:  # the same key, added twice at once: the other one won
        raise SavedKeyError(_("This key is already saved (%(fingerprint)s).") % {"fingerprint": key.fingerprint},
                            code="duplicate") from None
    return saved


def saved_keys_keep(*, user, keys: list[PublicKey], label: str = "") -> list[SavedKey]:
    """Keep keys pasted at checkout (already parsed there); those already saved, and any past the limit, are
    skipped without an error: the order was placed, saving is a convenience."""
    kept = []
    for key in keys:
        try:
            kept.append(saved_key_add(user=user, text=key.line, label=label))
        except SavedKeyError:
            continue
    return kept


def saved_key_remove(*, user, key_id: int) -> SavedKey | None:
    """Remove one of the user's saved keys (another user's key, or none, is None). Orders keep their keys."""
    with transaction.atomic():
        saved = SavedKey.objects.select_for_update().filter(user=user, pk=key_id).first()
        if saved is None:
            return None
        audit_record(actor=user.get_username(), action="saved_key_remove", obj=saved,
                     data={"fingerprint": saved.fingerprint, "label": saved.label})
        saved.delete()
    return saved


def saved_keys_of(user):
    """The user's saved keys, newest first (none for a visitor without an account)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return SavedKey.objects.none()
    return SavedKey.objects.filter(user=user)


def public_keys(saved: list[SavedKey]) -> list[PublicKey]:
    """The saved keys as checkout's ``PublicKey``s, parsed again: a key the rules refuse today (saved under
    older rules) is refused here with the same message as a pasted one."""
    return [parse_key(row.public_key) for row in saved]
