"""One Portuguese, Brazilian, throughout: the catalog and the guides say "você",
so no European-only word or construction may sit beside it. And no English
left inside a translation that only copies its source."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest

import anchorgpu

PACKAGE = Path(anchorgpu.__file__).resolve().parent
PT_GUIDES = sorted((PACKAGE / "guides" / "content" / "pt").glob("*.md"))

# European Portuguese where Brazilian says otherwise (the Brazilian word in the comment).
EUROPEAN = [
    r"introduz\w*",  # digite, insira
    r"utilizador\w*",  # usuário
    r"regist[oa]s?", r"registar\w*", r"registad[oa]s?",  # registro, cadastro; registrar
    r"ecrãs?",  # tela
    r"ficheiros?",  # arquivo
    r"telemóve(?:l|is)",  # celular
    r"contact[aeo]\w*",  # entre em contato, contato
    r"equipas?",  # equipe
    r"palavras?-passe",  # senha
    r"partilh\w*",  # compartilhar
    r"descarreg\w*",  # baixar
    r"gerir",  # gerenciar
    r"planea(?:r|mento|da|do)\w*",  # planejar, planejamento
    r"connosco",  # conosco
    r"aced(?:er|ido|ida|e|em)",  # acessar
    r"morada",  # endereço
    r"controlo",  # controle
    r"início de sessão", r"iniciar sessão", r"terminar sessão",  # login, entrar, sair
    r"percentagem",  # porcentagem
    r"carregue",  # clique
    r"activ\w*", r"actual\w*", r"acç\w*", r"direcç\w*", r"seleccion\w*", r"óptim\w*", r"efectu\w*",  # old spelling
    r"facto",  # fato
    r"portátil",  # notebook
    r"aplicação de autenticação", r"aplicações?(?= (?:de|do|da|que|mostra))",  # aplicativo
    r"algarismos?",  # dígitos
    r"(?:está|estão) (?:ligad|deslig)\w*", r"ligar o", r"desligar o",  # ativar, desativar
    r"num", r"numa", r"nuns", r"numas",  # em um, em uma
    r"consigo",  # com você
    r"(?:tem|têm|terá|terão|teria|tenha) de [a-zç]+(?:ar|er|ir)\b",  # tem que, precisa
    r"sítios?",  # site
    r"(?:está|estão|estamos|estou|esteja|estava|estavam|continua|continuam|anda|andam) a [a-zçãé]+(?:ar|er|ir)",
    # está fazendo (the gerund, not "a" + infinitive)
    r"tens", r"podes", r"estás", r"queres", r"contigo", r"teus?", r"tuas?",  # "tu": the shop says "você"
]
_EUROPEAN = re.compile(r"\b(?:" + "|".join(EUROPEAN) + r")\b", re.I)


def _catalog(code: str) -> polib.POFile:
    return polib.pofile(str(PACKAGE / "locale" / code / "LC_MESSAGES" / "django.po"))


def european_forms(text: str) -> list[str]:
    return [m.group(0) for m in _EUROPEAN.finditer(text)]


def test_the_list_finds_european_portuguese():
    assert european_forms("Introduza o código que a sua aplicação de autenticação mostra no telemóvel.") == [
        "Introduza", "aplicação de autenticação", "telemóvel"]
    assert european_forms("O utilizador está a fazer o registo do ficheiro no ecrã; contacte-nos.") == [
        "utilizador", "está a fazer", "registo", "ficheiro", "ecrã", "contacte"]
    assert european_forms("Digite o código que o seu aplicativo mostra no celular; entre em contato.") == []
    assert european_forms("O Idempotency-Key tem de 1 a 255 caracteres.") == []  # "tem de 1 a": from 1 to


def test_the_portuguese_catalog_is_brazilian():
    found = []
    for entry in _catalog("pt").translated_entries():
        for text in (list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]):
            if forms := european_forms(text):
                found.append((forms, text[:80]))
    assert not found, f"{len(found)} European Portuguese forms in the pt catalog, e.g. {found[:5]}"


@pytest.mark.parametrize("guide", PT_GUIDES, ids=lambda p: p.name)
def test_the_portuguese_guides_are_brazilian(guide):
    text = guide.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```|`[^`]*`", " ", text, flags=re.S)  # code is no prose
    found = [(n, forms) for n, line in enumerate(text.splitlines(), 1)
             if not line.startswith("- ") and (forms := european_forms(line))]  # source titles stay as they are
    assert not found, found[:10]
    assert re.search(r"\bvocê\b", text)


# English that a copied msgstr would leave on a page: network names and the shop's own words.
_ENGLISH_ONLY = re.compile(r"\b(?:mainnet|testnet|lot|lots|entered by hand|demo figure)\b")
KOREAN_UNITS = re.compile(r"tokens/s")  # Korean says 토큰/초


@pytest.mark.parametrize("code", ["pt", "fr", "ko"])
def test_no_translation_copies_english_words(code):
    copied = [e.msgid for e in _catalog(code).translated_entries()
              if not e.msgid_plural and e.msgstr == e.msgid and _ENGLISH_ONLY.search(e.msgstr)]
    assert not copied, copied


def test_french_puts_a_no_break_space_before_high_punctuation():
    """« … », and the space before : ; ? ! is a no-break one (a line never starts with the sign)."""
    loose = [text for entry in _catalog("fr").translated_entries()
             for text in (list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr])
             if re.search(r" [:;?!»]|« ", text)]
    assert not loose, loose[:5]


# One word for one thing across a language's catalog and guides: the word kept, and the ones it replaced.
GLOSSARY = {
    "ko": {"청구서 (invoice)": ["인보이스"], "묶음 (a B200 lot)": ["로트"], "크레딧 노트 (credit note)": ["대변표", "신용 메모"]},
    "pt": {"usuário": ["utilizador"], "placa (a GPU card)": ["cartão gráfico"], "cotação (a quote)": ["orçamento"]},
    "fr": {"devis (a quote)": ["cotation"], "durée (a term)": ["terme de location"]},
}


@pytest.mark.parametrize("code", sorted(GLOSSARY))
def test_each_language_keeps_one_word_for_one_thing(code):
    texts = [t for e in _catalog(code).translated_entries()
             for t in (list(e.msgstr_plural.values()) if e.msgid_plural else [e.msgstr])]
    texts += [p.read_text(encoding="utf-8") for p in (PACKAGE / "guides" / "content" / code).glob("*.md")]
    found = {(kept, other) for kept, others in GLOSSARY[code].items() for other in others
             for text in texts if other in text}
    assert not found, sorted(found)


def test_korean_says_its_units():
    left = [e.msgid for e in _catalog("ko").translated_entries()
            if KOREAN_UNITS.search(e.msgstr or " ".join(e.msgstr_plural.values()))]
    assert not left, left


def test_korean_asks_in_one_register():
    """Requests end in 주십시오 / 하십시오, as the catalog does throughout (안녕하세요 is the greeting)."""
    mixed = [t for e in _catalog("ko").translated_entries()
             for t in (list(e.msgstr_plural.values()) if e.msgid_plural else [e.msgstr])
             if re.search(r"(?<!안녕하)세요[.!]", t)]
    assert not mixed, mixed[:5]
