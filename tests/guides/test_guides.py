import re

import pytest

from anchorgpu.guides import loader

LANGS = loader.LANGUAGES
SLUGS = loader.SLUGS
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def _raw(slug, lang):
    return loader.guide_path(slug, lang).read_text(encoding="utf-8")


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("lang", LANGS)
def test_every_guide_exists_in_every_language_with_title_and_sources(slug, lang):
    raw = loader.parse(_raw(slug, lang))
    assert raw.title and raw.summary
    assert str(raw.updated) == "2026-11-30"
    assert len(raw.sources) >= 5
    assert all(s.url.startswith("https://") and s.name for s in raw.sources)


@pytest.mark.parametrize("slug", SLUGS)
def test_translations_keep_the_same_shape(slug):
    def shape(lang):
        body = loader.parse(_raw(slug, lang)).body
        return {
            "sections": len(re.findall(r"^## ", body, re.M)),
            "links": sorted(re.findall(r"\]\((\{[a-z]+\}|\.\./[a-z-]+/)\)", body)),
            "code blocks": body.count("```"),
            "table rows": len(re.findall(r"^\|", body, re.M)),
            "sources": [s.url for s in loader.parse(_raw(slug, lang)).sources],
        }

    english = shape("en")
    for lang in LANGS:
        assert shape(lang) == english, lang


@pytest.mark.parametrize("slug", SLUGS)
def test_each_guide_links_the_catalog_planner_and_pilot_kit(slug):
    for lang in LANGS:
        body = loader.parse(_raw(slug, lang)).body
        for name in ("catalog", "planner", "pilot"):
            assert f"]({{{name}}})" in body, (lang, name)


def test_a_missing_translation_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "CONTENT_DIR", tmp_path)
    loader._read.cache_clear()
    loader._render.cache_clear()
    try:
        with pytest.raises(loader.GuideError):
            loader.load("choosing-a-gpu", "pt")
    finally:
        loader._read.cache_clear()
        loader._render.cache_clear()


def test_unknown_slug_or_language_is_refused():
    with pytest.raises(loader.GuideError):
        loader.guide_path("../secrets", "en")
    with pytest.raises(loader.GuideError):
        loader.guide_path("choosing-a-gpu", "de")


@pytest.mark.parametrize("text", [
    "no front matter",
    "---\ntitle: T\nsummary: S\nupdated: 2026-11-30\n---\nbody",  # no sources
    "---\ntitle: T\nsummary: S\nupdated: 2026-11-30\nsources:\n- Name | http://insecure.example/\n---\nbody",
    "---\ntitle: T\nsummary: S\nupdated: soon\nsources:\n- Name | https://example.org/\n---\nbody",
])
def test_malformed_front_matter_is_refused(text):
    with pytest.raises(loader.GuideError):
        loader.parse(text)


def test_pending_pages_link_to_the_coming_section_which_disappears_once_built():
    body = ("Use the [planner]({planner}) and the [kit]({pilot}).\n\n<!-- coming -->\n## Soon {#coming}\n\n"
            "<!-- coming:planner -->\nPlanner soon.\n<!-- /coming:planner -->\n\n"
            "<!-- coming:pilot -->\nKit soon.\n<!-- /coming:pilot -->\n<!-- /coming -->\n")
    pending = loader._resolve(body, {"catalog": "/en/", "planner": "#coming", "pilot": "#coming"}, origin="t")
    assert "](#coming)" in pending and "Planner soon." in pending and "Kit soon." in pending
    half = loader._resolve(body, {"catalog": "/en/", "planner": "/en/planner/", "pilot": "#coming"}, origin="t")
    assert "](/en/planner/)" in half and "Planner soon." not in half and "Kit soon." in half
    built = loader._resolve(body, {"catalog": "/en/", "planner": "/en/planner/", "pilot": "/en/pilot/"}, origin="t")
    assert "Soon" not in built and "soon." not in built and "<!--" not in built


def test_unknown_placeholder_is_an_error():
    with pytest.raises(loader.GuideError):
        loader._resolve("[x]({nowhere})", {"catalog": "/en/"}, origin="t")


@pytest.mark.django_db
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("slug", SLUGS)
def test_guide_page_renders_in_each_language(client, lang, slug):
    response = client.get(f"/{lang}/guides/{slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    guide = response.context["guide"]
    assert f'<html lang="{lang}"' in html and f'lang="{lang}"' in html.split("<article", 1)[1]
    assert f'href="/{lang}/"' in guide.html  # the guide's own link to the catalog, in its language
    for placeholder in ("{catalog}", "{planner}", "{pilot}"):
        assert placeholder not in html
    assert "<!-- coming" not in html
    for source in guide.sources:
        assert f'href="{source.url}"' in html
    if "#coming" in guide.html:
        assert 'id="coming"' in html
    assert f"<h1>{guide.title}</h1>" in html.replace("&#x27;", "'")
    if lang == "ko":
        assert HANGUL.search(guide.html)


@pytest.mark.django_db
@pytest.mark.parametrize("lang", LANGS)
def test_guides_index_lists_both_guides(client, lang):
    response = client.get(f"/{lang}/guides/")
    assert response.status_code == 200
    html = response.content.decode()
    for slug in SLUGS:
        assert f'href="/{lang}/guides/{slug}/"' in html
    assert f'href="/{lang}/guides/"' in html  # the nav link


@pytest.mark.django_db
def test_unknown_guide_is_404(client):
    assert client.get("/en/guides/no-such-guide/").status_code == 404
    assert client.get("/ko/guides/choosing-a-gpu-x/").status_code == 404
