"""Django settings, all from environment variables.

ANCHORGPU_DATABASE_URL or DATABASE_URL   postgres://user@host:5432/name (default: SQLite file)
ANCHORGPU_DATA_DIR                       where the SQLite file lives (default: ./var)
ANCHORGPU_SECRET_KEY                     required in production
ANCHORGPU_DEBUG                          "1" for development error pages
ANCHORGPU_ENV                            "production" checks the key, DEBUG and hosts, and turns on secure cookies,
                                         HSTS (ANCHORGPU_HSTS_SECONDS) and the HTTPS redirect (ANCHORGPU_SSL_REDIRECT;
                                         X-Forwarded-Proto trusted unless ANCHORGPU_BEHIND_TLS_PROXY=0)
ANCHORGPU_ALLOWED_HOSTS                  comma-separated host names
ANCHORGPU_HOLD_MINUTES                   how long a hold lasts when no quote sets it (60)
ANCHORGPU_ACCESS_MINUTES                 how long access preparation may take: an as-soon-as-possible order
                                         holds its cards that much past the term, so the term can start
                                         when access is ready (30)
ANCHORGPU_SITE_URL                       the shop's public address, for links in emails
ANCHORGPU_ALLOW_TEST_KEYS                "1" lets quotes use the demo's public test deposit keys (serve sets it)
ANCHORGPU_FROM_EMAIL                     sender of the customer emails
ANCHORGPU_OPERATOR_EMAILS                comma-separated addresses of the operators' alerts (a payment gone from the
                                         chain); unset: the active staff users' addresses
ANCHORGPU_OPERATOR_WEBHOOK_URLS          http(s) URLs (comma-separated) that get each operator alert as a signed POST
ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE   file holding the webhooks' signing secret (or _SECRET: the secret itself)
ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT       seconds one webhook delivery may take (10)
ANCHORGPU_EMAIL_HOST / _PORT / _USER / _PASSWORD / _TLS   SMTP (default: emails go to the console; refused in
                                         production)
ANCHORGPU_EMAIL_DISABLED                 "1": send no e-mail at all and log none (production needs this or an SMTP host)
ANCHORGPU_PROVISIONER                    dotted path of the provisioner (default: the simulated one; the real one is
                                         anchorgpu.access.provisioner.SSHProvisioner)
ANCHORGPU_HOST_SSH_KEY_FILE              file holding the operator's private SSH key for the GPU hosts (or
                                         ANCHORGPU_HOST_SSH_KEY: the key itself, from a secret store); never in the
                                         database
ANCHORGPU_HOST_SSH_TIMEOUT               seconds to connect to a host, and for one command on it (30)
ANCHORGPU_STEP_LEASE_SECONDS             how long a worker's claim on one access step lasts before another may take
                                         it over (900)
ANCHORGPU_WORKSPACE_GIB_PER_CARD         GiB of /workspace sold with each card; the health check finds it free (50)
ANCHORGPU_SIMULATION_TIMEOUT             seconds one planner simulation may run before it is stopped (1800)
ANCHORGPU_SIMULATION_QUEUE_LIMIT         planner simulations waiting at most, all visitors together (20)
ANCHORGPU_SIMULATION_PER_REQUESTER       unfinished planner simulations one visitor may have (2)
ANCHORGPU_WATCH_URL_<CODE>               node/explorer URL for one asset (code upper-cased, "-" as "_"); overrides the
                                         admin
ANCHORGPU_WATCH_TIMEOUT                  seconds one chain read may take in the worker (10)
ANCHORGPU_WATCH_CLAIM_TIMEOUT            seconds checking a pasted hash may take during "I've paid" (5)
ANCHORGPU_WATCH_MAX_BLOCKS               blocks one poll scans at most while catching up (500)
ANCHORGPU_WATCH_LOOKBACK                 blocks below the tip the first poll of an asset starts at (100)
ANCHORGPU_WATCH_STALL_SECONDS            a watcher without a good poll for this long is shown as stalled (600)
ANCHORGPU_WATCH_TIP_AGE_SECONDS          ... or whose newest block is older than this (7200)
ANCHORGPU_RATE_LIMITS                    "0" turns off the rate limits on log-in, sign-up, reset, "I've paid", orders
ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY      "1": a proxy in front appends the visitor's address to X-Forwarded-For; the
                                         per-address limits then use its last hop (off: the connection's address)
ANCHORGPU_ADMIN_2FA                      "1": operators need two-factor sign-in (TOTP) to reach the admin; on by
                                         default in production ("0" turns it off there). Operators who set it up
                                         always give a code at sign-in, whatever this says
ANCHORGPU_METRICS_TOKEN                  bearer token for /metrics (unset: /metrics answers 403 to everyone, except to
                                         the machine itself with ANCHORGPU_DEBUG on)
ANCHORGPU_LOG_FORMAT                     "json" (default: one JSON object per line) or "plain"
ANCHORGPU_CATALOG_CACHE                  "0" turns off the exact cache of the catalog's and offers API's answers (on by
                                         default; PostgreSQL only: keyed on the database snapshot, the second and the
                                         query, see anchorgpu.catalog.answer_cache; always off on SQLite)
ANCHORGPU_COMPANY_NAME / _ADDRESS / _COUNTRY / _VAT_ID / _REGISTRATION / _CONTACT   the seller on invoices (legal
                                         name; address, "|" between lines; ISO country; VAT id, blank: not registered
                                         for VAT; company registration; e-mail or telephone); production refuses the
                                         placeholder address and needs the country
ANCHORGPU_BENCH_CEILING                  "1" mounts the load test's bare view at /bench/ceiling (bench/load.py sets
                                         it; never mounted in production)
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.utils.translation import gettext_lazy as _

from anchorgpu.production import (
    PLACEHOLDER_COMPANY_ADDRESS,
    admin_two_factor_required,
    webhook_problems,
    webhook_secret,
    webhook_urls,
)

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("ANCHORGPU_DATA_DIR", Path.cwd() / "var")).resolve()


def _whole(name: str, default: int, minimum: int = 1) -> int:
    """A whole-number setting; a bad value stops the start with a message that names the variable."""
    from django.core.exceptions import ImproperlyConfigured

    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}.")
    return value


def _flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _flag("ANCHORGPU_DEBUG")
PRODUCTION = os.environ.get("ANCHORGPU_ENV", "development").strip().lower() == "production"
if PRODUCTION:
    from django.core.exceptions import ImproperlyConfigured

    from anchorgpu.production import ProductionSettingsError, check

    try:
        check(secret_key=os.environ.get("ANCHORGPU_SECRET_KEY"), debug=DEBUG,
              allowed_hosts=os.environ.get("ANCHORGPU_ALLOWED_HOSTS"),
              email_host=os.environ.get("ANCHORGPU_EMAIL_HOST"), email_disabled=_flag("ANCHORGPU_EMAIL_DISABLED"),
              behind_proxy=_flag("ANCHORGPU_BEHIND_TLS_PROXY", default=True),
              client_address_from_proxy=os.environ.get("ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY"),
              company={"name": os.environ.get("ANCHORGPU_COMPANY_NAME", "AnchorGPU"),
                       "address": os.environ.get("ANCHORGPU_COMPANY_ADDRESS"),
                       "country": os.environ.get("ANCHORGPU_COMPANY_COUNTRY"),
                       "vat_id": os.environ.get("ANCHORGPU_COMPANY_VAT_ID", "")})
    except ProductionSettingsError as exc:
        raise ImproperlyConfigured(str(exc)) from None
SECRET_KEY = os.environ.get("ANCHORGPU_SECRET_KEY") or "dev-only-insecure-key-change-me-in-production"
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ANCHORGPU_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
    if h.strip()
]

# Browser-side protections, everywhere; the ones that need TLS, in production.
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# A checkout sent with a stale token comes back as the checkout, saying so (web.checkout_refusals).
CSRF_FAILURE_VIEW = "anchorgpu.web.checkout_csrf.csrf_failure"
if PRODUCTION:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = _whole("ANCHORGPU_HSTS_SECONDS", 365 * 24 * 3600, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_SSL_REDIRECT = _flag("ANCHORGPU_SSL_REDIRECT", default=True)
    if _flag("ANCHORGPU_BEHIND_TLS_PROXY", default=True):
        # The TLS proxy in front says the original scheme; it must overwrite a client's own header.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "anchorgpu.apps.OperationsAdminConfig",  # django.contrib.admin, with the shop's own site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_countries",
    "anchorgpu.audit",
    "anchorgpu.catalog",
    "anchorgpu.fleet",
    "anchorgpu.allocation",
    "anchorgpu.payments",
    "anchorgpu.orders",
    "anchorgpu.billing",
    "anchorgpu.simulations",
    "anchorgpu.pilotreports",
    "anchorgpu.planner_pages",
    "anchorgpu.ops",
    "anchorgpu.accounts",
    "anchorgpu.api",
    "anchorgpu.web",
]

MIDDLEWARE = [
    "anchorgpu.ops.logs.RequestIdMiddleware",
    "anchorgpu.ops.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "anchorgpu.production.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Every /admin/ address: two-factor first (below the others, so its redirects carry their headers).
    "anchorgpu.accounts.two_factor_gate.AdminTwoFactorMiddleware",
    # Last, so it is the first to see a view's exception: a lost database connection answers 503, not 500.
    "anchorgpu.ops.dbdown.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "anchorgpu.urls"
WSGI_APPLICATION = "anchorgpu.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "anchorgpu.web.context.login_next",
            ],
        },
    },
]


def _database() -> dict:
    url = os.environ.get("ANCHORGPU_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        if config["ENGINE"] == "django.db.backends.sqlite3":
            config.setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
        return config
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATA_DIR / "anchorgpu.sqlite3"),
        "OPTIONS": dict(_SQLITE_OPTIONS),
        # Tests use a file too: an in-memory shared-cache database raises
        # "table is locked" between threads instead of waiting for the lock.
        "TEST": {"NAME": os.environ.get("ANCHORGPU_SQLITE_TEST_NAME") or str(DATA_DIR / "test-anchorgpu.sqlite3")},
    }


# Every transaction takes SQLite's write lock when it begins, so a booking's
# availability check and its insert cannot interleave with another writer's.
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
}

DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Argon2id for new and changed passwords; older PBKDF2 hashes still verify and are upgraded at the next log-in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [
    ("en", _("English")),
    ("pt", _("Portuguese")),
    ("fr", _("French")),
    ("ko", _("Korean")),
]
LOCALE_PATHS = [PACKAGE_DIR / "locale"]
FORMAT_MODULE_PATH = ["anchorgpu.formats"]  # our English date formats; the others are Django's per locale
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("ANCHORGPU_STATIC_ROOT", DATA_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing folder
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production sets ANCHORGPU_MANIFEST_STATIC=1 after `collectstatic` for
    # hashed, compressed, far-future-cached files.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
                    if _flag("ANCHORGPU_MANIFEST_STATIC") else
                    "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve straight from the app folders when collectstatic has not run (dev).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Email: printed to the console unless an SMTP host is set (production refuses that: an SMTP host, or
# ANCHORGPU_EMAIL_DISABLED=1, which sends nothing and logs no message's content).
ANCHORGPU_SITE_URL = os.environ.get("ANCHORGPU_SITE_URL", "http://127.0.0.1:8000")
DEFAULT_FROM_EMAIL = os.environ.get("ANCHORGPU_FROM_EMAIL", "AnchorGPU <orders@anchorgpu.example>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# Alerts to the operators (orders.operator_events); empty: the active staff users' addresses.
ANCHORGPU_OPERATOR_EMAILS = os.environ.get("ANCHORGPU_OPERATOR_EMAILS", "").strip()
# ... and to these URLs, signed (orders.webhooks); a URL or secret that cannot work stops the start.
ANCHORGPU_OPERATOR_WEBHOOK_URLS = webhook_urls(os.environ.get("ANCHORGPU_OPERATOR_WEBHOOK_URLS"))
ANCHORGPU_OPERATOR_WEBHOOK_SECRET, _webhook_problems = webhook_secret(
    secret=os.environ.get("ANCHORGPU_OPERATOR_WEBHOOK_SECRET"),
    secret_file=os.environ.get("ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE"))
_webhook_problems += webhook_problems(
    urls=ANCHORGPU_OPERATOR_WEBHOOK_URLS, secret=ANCHORGPU_OPERATOR_WEBHOOK_SECRET,
    secret_file=os.environ.get("ANCHORGPU_OPERATOR_WEBHOOK_SECRET_FILE"), production=PRODUCTION)
if _webhook_problems:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("Operator webhook settings refused:\n- " + "\n- ".join(_webhook_problems))
ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT = _whole("ANCHORGPU_OPERATOR_WEBHOOK_TIMEOUT", 10)
if os.environ.get("ANCHORGPU_EMAIL_HOST"):
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = os.environ["ANCHORGPU_EMAIL_HOST"]
    EMAIL_PORT = int(os.environ.get("ANCHORGPU_EMAIL_PORT", "587"))
    EMAIL_HOST_USER = os.environ.get("ANCHORGPU_EMAIL_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("ANCHORGPU_EMAIL_PASSWORD", "")
    EMAIL_USE_TLS = _flag("ANCHORGPU_EMAIL_TLS", default=True)
    EMAIL_TIMEOUT = 20
elif _flag("ANCHORGPU_EMAIL_DISABLED"):
    EMAIL_BACKEND = "anchorgpu.ops.mail.DiscardingBackend"
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
ANCHORGPU_EMAIL_DISABLED = EMAIL_BACKEND == "anchorgpu.ops.mail.DiscardingBackend"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "orders"
LOGOUT_REDIRECT_URL = "catalog"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
                   "json": {"()": "anchorgpu.ops.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "formatter": "plain" if os.environ.get("ANCHORGPU_LOG_FORMAT") == "plain" else "json"}},
    "root": {"handlers": ["console"], "level": os.environ.get("ANCHORGPU_LOG_LEVEL", "INFO")},
    # Their debug lines carry a node's full URL, which may hold an API key: never below WARNING.
    "loggers": {name: {"level": "WARNING"} for name in ("web3", "urllib3", "requests")},
}

# Business settings the operator may change per deployment.
ANCHORGPU_HOLD_MINUTES = int(os.environ.get("ANCHORGPU_HOLD_MINUTES", "60"))
ANCHORGPU_ACCESS_MINUTES = _whole("ANCHORGPU_ACCESS_MINUTES", 30, minimum=0)
ANCHORGPU_BOOKING_HORIZON_DAYS = int(os.environ.get("ANCHORGPU_BOOKING_HORIZON_DAYS", "365"))
# Quotes to the demo's public test-vector deposit keys (anyone can spend from them): refused unless allowed.
ANCHORGPU_ALLOW_TEST_KEYS = _flag("ANCHORGPU_ALLOW_TEST_KEYS", default=DEBUG)
# Planner simulations (background jobs, run by the worker and by `anchorgpu serve`).
ANCHORGPU_SIMULATION_TIMEOUT = _whole("ANCHORGPU_SIMULATION_TIMEOUT", 1800, minimum=10)
ANCHORGPU_SIMULATION_QUEUE_LIMIT = _whole("ANCHORGPU_SIMULATION_QUEUE_LIMIT", 20)
ANCHORGPU_SIMULATION_PER_REQUESTER = _whole("ANCHORGPU_SIMULATION_PER_REQUESTER", 2)
# Chain watchers (the worker polls; "I've paid" checks a pasted hash at once).
ANCHORGPU_WATCH_TIMEOUT = _whole("ANCHORGPU_WATCH_TIMEOUT", 10)
ANCHORGPU_WATCH_CLAIM_TIMEOUT = _whole("ANCHORGPU_WATCH_CLAIM_TIMEOUT", 5)
ANCHORGPU_WATCH_MAX_BLOCKS = _whole("ANCHORGPU_WATCH_MAX_BLOCKS", 500)
ANCHORGPU_WATCH_LOOKBACK = _whole("ANCHORGPU_WATCH_LOOKBACK", 100, minimum=0)
ANCHORGPU_WATCH_STALL_SECONDS = _whole("ANCHORGPU_WATCH_STALL_SECONDS", 600, minimum=30)
ANCHORGPU_WATCH_TIP_AGE_SECONDS = _whole("ANCHORGPU_WATCH_TIP_AGE_SECONDS", 7200, minimum=60)
# Rate limits on log-in, sign-up, password reset, "I've paid" and order creation (anchorgpu.ops.ratelimit).
ANCHORGPU_RATE_LIMITS = _flag("ANCHORGPU_RATE_LIMITS", default=True)
# Only when the deployment says a proxy in front appends the visitor's address to X-Forwarded-For: the
# visitor's address for the per-address limits is then its last hop (off by default: a client can write the
# header itself).
ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY = _flag("ANCHORGPU_CLIENT_ADDRESS_FROM_PROXY")
# Operators reach the admin only after two-factor sign-in (anchorgpu.accounts.two_factor_gate); on in production.
ANCHORGPU_ADMIN_2FA = admin_two_factor_required(production=PRODUCTION, value=os.environ.get("ANCHORGPU_ADMIN_2FA"))
# /metrics answers only with this bearer token; without one, to nobody (with DEBUG on, to the machine itself).
ANCHORGPU_METRICS_TOKEN = os.environ.get("ANCHORGPU_METRICS_TOKEN", "").strip()
# The catalog's answers, cached per process under the PostgreSQL snapshot, the second and the query: exact
# (anchorgpu.catalog.answer_cache); never used on SQLite.
ANCHORGPU_CATALOG_CACHE = _flag("ANCHORGPU_CATALOG_CACHE", default=True)
# bench/load.py's ceiling: a bare view that touches no database (anchorgpu.ops.bench_ceiling); off unless asked for.
ANCHORGPU_BENCH_CEILING = _flag("ANCHORGPU_BENCH_CEILING") and not PRODUCTION
ANCHORGPU_PROVISIONER = os.environ.get("ANCHORGPU_PROVISIONER", "anchorgpu.orders.provisioner.SimulatedProvisioner")
# The real provisioner's and fleet discovery's SSH to the hosts (anchorgpu.fleet.ssh): the key is read when used.
ANCHORGPU_HOST_SSH_KEY_FILE = os.environ.get("ANCHORGPU_HOST_SSH_KEY_FILE", "").strip()
ANCHORGPU_HOST_SSH_KEY = os.environ.get("ANCHORGPU_HOST_SSH_KEY", "")
ANCHORGPU_HOST_SSH_TIMEOUT = _whole("ANCHORGPU_HOST_SSH_TIMEOUT", 30)
ANCHORGPU_STEP_LEASE_SECONDS = _whole("ANCHORGPU_STEP_LEASE_SECONDS", 900, minimum=30)
# Space on /workspace sold with each card (the real provisioner's health check insists it is free).
ANCHORGPU_WORKSPACE_GIB_PER_CARD = _whole("ANCHORGPU_WORKSPACE_GIB_PER_CARD", 50, minimum=1)
# The seller on invoices and credit notes (anchorgpu.billing.seller); the VAT rates are the admin's (VatRate).
ANCHORGPU_COMPANY_NAME = os.environ.get("ANCHORGPU_COMPANY_NAME", "AnchorGPU").strip()
ANCHORGPU_COMPANY_ADDRESS = os.environ.get("ANCHORGPU_COMPANY_ADDRESS", PLACEHOLDER_COMPANY_ADDRESS)  # |: line
ANCHORGPU_COMPANY_COUNTRY = os.environ.get("ANCHORGPU_COMPANY_COUNTRY", "").strip().upper()
ANCHORGPU_COMPANY_VAT_ID = "".join(os.environ.get("ANCHORGPU_COMPANY_VAT_ID", "").split()).upper()
ANCHORGPU_COMPANY_REGISTRATION = os.environ.get("ANCHORGPU_COMPANY_REGISTRATION", "").strip()
ANCHORGPU_COMPANY_CONTACT = os.environ.get("ANCHORGPU_COMPANY_CONTACT", "").strip()
