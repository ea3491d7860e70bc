"""What production requires of the settings, checked when they load.

``ANCHORGPU_ENV=production`` turns the checks on: the shop then refuses to
start with the development secret key (or a short one), with DEBUG on,
without its own host names, or without a way to send e-mail (an SMTP host, or
``ANCHORGPU_EMAIL_DISABLED=1`` said plainly: the development default prints
every e-mail, password-reset links included, into the server's log), and it sets the cookie and transport options a
shop behind TLS needs. There the admin also requires two-factor sign-in by
default (``ANCHORGPU_ADMIN_2FA``). Plain functions of the environment, so they
are tested without starting Django.
"""

from __future__ import annotations

DEV_SECRET_KEY = "dev-only-insecure-key-change-me-in-production"
MIN_SECRET_KEY_LENGTH = 50


# The seller's address on invoices until the operator sets ANCHORGPU_COMPANY_ADDRESS ("|" separates lines).
PLACEHOLDER_COMPANY_ADDRESS = "PLACEHOLDER ADDRESS|not a real one"

_OFF = {"0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}


def admin_two_factor_required(*, production: bool, value: str | None) -> bool:
    """``ANCHORGPU_ADMIN_2FA``: in production the admin requires two-factor sign-in unless the variable
    says plainly that it must not (0, false, no, off; anything else keeps it on); elsewhere only when it
    says 1, true, yes or on."""
    text = (value or "").strip().lower()
    return text not in _OFF if production else text in _ON


def company_address_is_placeholder(address: str | None) -> bool:
    text = (address or "").strip()
    return not text or text == PLACEHOLDER_COMPANY_ADDRESS or "placeholder" in text.lower()


def company_problems(*, name: str | None, address: str | None, country: str | None, vat_id: str | None) -> list[str]:
    """What invoices may not be issued without: the seller's legal name, real address and country; a VAT id, if
    given, of the seller's country's shape."""
    from anchorgpu.billing.tax import normalise_vat_id, vat_id_problem

    found = []
    if not (name or "").strip():
        found.append("ANCHORGPU_COMPANY_NAME is empty: give the seller's legal name, as invoices must show it")
    if company_address_is_placeholder(address):
        found.append("ANCHORGPU_COMPANY_ADDRESS is the placeholder: give the seller's legal address for invoices "
                     "(| separates lines)")
    code = (country or "").strip().upper()
    if len(code) != 2 or not code.isalpha():
        found.append("ANCHORGPU_COMPANY_COUNTRY is not set: give the seller's country as a two-letter ISO code "
                     "(e.g. PT); the VAT rules start from it")
    elif vat_id and vat_id_problem(normalise_vat_id(vat_id), code) is not None:
        found.append(f"ANCHORGPU_COMPANY_VAT_ID {vat_id!r} is not the shape of a VAT id of {code}")
    return found


class ProductionSettingsError(Exception):
    """Raised as ImproperlyConfigured by settings.py; the message lists every problem at once."""


def problems(*, secret_key: str | None, debug: bool, allowed_hosts: str | None, email_host: str | None = None,
             email_disabled: bool = False, behind_proxy: bool = False,
             client_address_from_proxy: str | None = "0", company: dict | None = None) -> list[str]:
    found = []
    if not secret_key or secret_key == DEV_SECRET_KEY:
        found.append("ANCHORGPU_SECRET_KEY is not set: give a random value of at least "
                     f"{MIN_SECRET_KEY_LENGTH} characters (e.g. python -c 'import secrets; "
                     "print(secrets.token_urlsafe(64))')")
    elif len(secret_key) < MIN_SECRET_KEY_LENGTH or len(set(secret_key)) < 8:
        found.append(f"ANCHORGPU_SECRET_KEY is too weak: at least {MIN_SECRET_KEY_LENGTH} characters, "
                     "and not a repeated pattern")
    if debug:
        found.append("ANCHORGPU_DEBUG is on: debug pages show settings and code to anyone; set it to 0")
    hosts = [h.strip() for h in (allowed_hosts or "").split(",") if h.strip()]
    if not hosts:
        found.append("ANCHORGPU_ALLOWED_HOSTS is not set: list the shop's host names, comma-separated")
    elif "*" in hosts:
        found.append("ANCHORGPU_ALLOWED_HOSTS contains '*': list the shop's own host names")
    if not (email_host or "").strip() and not email_disabled:
        found.append("ANCHORGPU_EMAIL_HOST is not set: without a mail server every e-mail, password-reset links "
                     "included, would be printed into the server's log; set the SMTP settings, or "
                     "ANCHORGPU_EMAIL_DISABLED=1 to send no e-mail at all")
    if behind_proxy and not (client_address_from_proxy or "").strip():
        found.append("ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY is not set while the shop runs behind a TLS proxy: "
                     "without it every visitor has the proxy's address, and the per-address limits (log-in, "
                     "sign-up, orders) would hold the whole shop back together; set 1 if the proxy appends the "
                     "visitor's address to X-Forwarded-For, or 0 to say it does not and accept that")
    if company is not None:
        found += company_problems(**company)
    return found


def check(
    *,
    secret_key: str | None,
    debug: bool,
    allowed_hosts: str | None,
    email_host: str | None = None,
    email_disabled: bool = False,
    behind_proxy: bool = False,
    client_address_from_proxy: str | None = "0",
    company: dict | None = None,
) -> None:
    found = problems(secret_key=secret_key, debug=debug, allowed_hosts=allowed_hosts, email_host=email_host,
                     email_disabled=email_disabled, behind_proxy=behind_proxy,
                     client_address_from_proxy=client_address_from_proxy, company=company)
    if found:
        raise ProductionSettingsError("Production settings refused (ANCHORGPU_ENV=production):\n- "
                                      + "\n- ".join(found))


MIN_WEBHOOK_SECRET_LENGTH = 32


def webhook_urls(text: str | None) -> list[str]:
    """``ANCHORGPU_OPERATOR_WEBHOOK_URLS``: comma- or space-separated URLs, in order, each once."""
    seen: list[str] = []
    for url in (text or "").replace(",", " ").split():
        if url not in seen:
            seen.append(url)
    return seen


def webhook_problems(*, urls: list[str], secret: str | None, secret_file: str | None,
                     production: bool) -> list[str]:
    """What is wrong with the operators' webhook settings (checked at every start, not only in production:
    a URL that cannot work would otherwise fail only at the first event). The secret itself is never
    repeated in a message."""
    from urllib.parse import urlsplit

    found = []
    for url in urls:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            found.append(f"ANCHORGPU_OPERATOR_WEBHOOK_URLS: {url!r} is not a URL")
            continue
        if parts.scheme not in ("http", "https") or not parts.hostname:
            found.append(f"ANCHORGPU_OPERATOR_WEBHOOK_URLS: {url!r} is not an http:// or https:// URL with a host")
        elif production and parts.scheme != "https":
            found.append(f"ANCHORGPU_OPERATOR_WEBHOOK_URLS: {url!r} is plain http; production sends webhooks "
                         "over https only")
        elif parts.username or parts.password:
            found.append(f"ANCHORGPU_OPERATOR_WEBHOOK_URLS: {parts.hostname!r} carries a user name or password "
                         "in the URL; the signature is what proves a delivery is ours")
    if urls and not secret:
        where = f" (the file {secret_file!r} is empty)" if secret_file else ""
        found.append("ANCHORGPU_OPERATOR_WEBHOOK_URLS is set without a signing secret" + where + ": set "
                     "ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE (or ANCHORGPU_OPERATOR_WEBHOOK_SECRET) to a random "
                     f"value of at least {MIN_WEBHOOK_SECRET_LENGTH} characters")
    elif urls and (len(secret) < MIN_WEBHOOK_SECRET_LENGTH or len(set(secret)) < 8):
        found.append(f"the operators' webhook secret is too weak: at least {MIN_WEBHOOK_SECRET_LENGTH} "
                     "characters, and not a repeated pattern")
    return found


def webhook_secret(*, secret: str | None, secret_file: str | None) -> tuple[str, list[str]]:
    """The signing secret from ``ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE`` (stripped) or the variable, and what
    is wrong with where it comes from."""
    if secret_file and secret:
        return "", ["both ANCHORGPU_OPERATOR_WEBHOOK_SECRET and ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE are set: "
                    "give one"]
    if secret_file:
        try:
            with open(secret_file, encoding="utf-8") as handle:
                return handle.read().strip(), []
        except OSError as exc:
            return "", [f"ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE {secret_file!r} cannot be read: {exc.strerror}"]
    return (secret or "").strip(), []


# The Content-Security-Policy of every page: scripts, styles, fonts and fetches from the shop itself only
# (no inline script or style anywhere: htmx runs with eval and its injected styles turned off), images also
# as data: URIs (the QR code), no plugins, no framing, forms posting back to the shop.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class SecurityHeadersMiddleware:
    """Adds the Content-Security-Policy (Django 5.2 has none of its own) and keeps the browser from
    guessing types or leaking full addresses to other sites."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        response.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
        return response
