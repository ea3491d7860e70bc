"""The published credit rule: the terms page and the guides say what ``billing.credit_rule`` does, with its own
numbers, in every language."""

from __future__ import annotations

import re

import pytest

from anchorgpu.billing import credit_rule as rule
from anchorgpu.guides import loader
from anchorgpu.web.terms import credit_example

LANGS = ("en", "pt", "fr", "ko")
# How each guide says "twice its price" (the rule's multiplier) and the grace in minutes.
TWICE = {"en": "twice its price", "pt": "dobro do seu preço", "fr": "double de son prix", "ko": "두 배"}
GRACE = {"en": "{n} minutes", "pt": "{n} minutos", "fr": "{n} minutes", "ko": "{n}분"}


def test_the_worked_example_is_the_rules_own_answer():
    example = credit_example()
    # 1000.00 × 2 × 3 h / 168 h = 35.714… → 35.71
    assert example["credit"] == rule.round_half_up(
        rule.Fraction(1000) * rule.MULTIPLIER * 3 / 168, "EUR") == rule.Decimal("35.71")


@pytest.mark.django_db
@pytest.mark.parametrize("lang", LANGS)
def test_the_terms_page_states_the_rule_and_is_linked_from_every_page(client, lang):
    page = client.get(f"/{lang}/terms/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="service-credit"' in html
    assert f'href="/{lang}/terms/"' in client.get(f"/{lang}/").content.decode()  # the footer
    if lang == "en":
        assert f"within {rule.published()['grace_minutes']} minutes" in html
        assert f"at {rule.MULTIPLIER} times its price" in html
        assert "35.71" in html and "50 %" in html


@pytest.mark.parametrize("lang", LANGS)
def test_each_guide_states_the_same_numbers(lang):
    body = loader.parse(loader.guide_path("choosing-a-gpu", lang).read_text(encoding="utf-8")).body
    section = body.split("{#service-credit}", 1)[1].split("\n## ", 1)[0]
    assert rule.MULTIPLIER == 2 and TWICE[lang] in section
    assert GRACE[lang].format(n=rule.published()["grace_minutes"]) in section
    assert "]({terms})" in section
    if lang == "fr":  # a no-break space before the high punctuation
        assert not re.search(r"[^\u00a0][:;?!](\s|$)", section.replace("](", "")), "missing no-break space"
