"""The pages a customer walks through, in any language, for the layout and switcher tests:
a demo shop, a signed-in customer with one order, and the addresses of each page type."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.test import Client

from tests import shop

LANGUAGES = ("en", "pt", "fr", "ko")
# A browser that speaks each language: Playwright's locale and the Accept-Language it sends.
BROWSERS = {"en": ("en-US", "en-US,en;q=0.9"), "pt": ("pt-BR", "pt-BR,pt;q=0.9,en;q=0.5"),
            "fr": ("fr-FR", "fr-FR,fr;q=0.9,en;q=0.5"), "ko": ("ko-KR", "ko-KR,ko;q=0.9,en;q=0.5")}
GUIDES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "src" / "anchorgpu" / "guides" / "content"
                                 / "en").glob("*.md"))
PLANNER_QUERY = ("preset=llama-3.1-8b&method=lora&lora_rank=16&optimizer=adamw&precision=bf16_mixed&seq_len=2048"
                 "&micro_batch=1&grad_checkpointing=on&parallel=single&gpus=1&headroom=10&term=7")


@dataclass
class Walk:
    url: str  # the live server
    order: str  # the customer's order reference
    session: str  # the customer's session cookie

    def pages(self, lang: str) -> dict[str, str]:
        """Every page type, by name, as a path in ``lang`` (the query a customer would have)."""
        return {
            "catalog": f"/{lang}/?quantity=1&term=7",
            "product": f"/{lang}/products/h100-sxm-80gb/?quantity=2&term=7",
            "planner": f"/{lang}/planner/?{PLANNER_QUERY}",
            "checkout": f"/{lang}/checkout/h100-sxm-80gb/?quantity=2&term=30",
            "guides": f"/{lang}/guides/",
            **{f"guide-{slug}": f"/{lang}/guides/{slug}/" for slug in GUIDES},
            "orders": f"/{lang}/orders/",
            "order": f"/{lang}/orders/{self.order}/",
            "pilot-reports": f"/{lang}/planner/reports/",
            "not-found": f"/{lang}/no-such-page/",
        }

    def anonymous_pages(self, lang: str) -> dict[str, str]:
        return {"login": f"/{lang}/account/login/?next=/{lang}/orders/", "signup": f"/{lang}/account/signup/"}

    def context(self, browser, lang: str, *, signed_in: bool = True, **options):
        """A browser context that speaks ``lang``, signed in as the customer unless told otherwise."""
        locale, accept = BROWSERS[lang]
        context = browser.new_context(locale=locale, extra_http_headers={"Accept-Language": accept}, **options)
        if signed_in:
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": self.session, "url": self.url}])
        return context


def walk(live_server) -> Walk:
    shop.load_shop()
    user = shop.customer(email="walker@example.com")
    order = shop.place(user, quantity=2, term_days=7)
    client = Client()
    client.force_login(user)
    return Walk(url=live_server.url, order=order.reference, session=client.cookies[settings.SESSION_COOKIE_NAME].value)
