"""The language rules shared by the build and the query parser: Arabic normalisation, French elision."""

from __future__ import annotations

import pytest

from search import analysis, query_parser


def folded_words(text: str) -> list[str]:
    return [t.folded for t in analysis.tokens(text)]


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("مدرسة", "مدرسه"),  # ta marbuta
        ("على", "علي"),  # alef maqsura
        ("إسلام", "اسلام"),  # alef with hamza below
        ("أحمد", "احمد"),  # alef with hamza above
        ("آمن", "امن"),  # alef with madda
        ("ٱلله", "الله"),  # alef wasla
        ("العـــربية", "العربيه"),  # tatweel
        ("مُدَرِّسَةٌ", "مدرسه"),  # harakat, shadda, tanwin
    ],
)
def test_arabic_variants_fold_to_one_form(variant: str, plain: str) -> None:
    # given an Arabic word written with a letter variant or diacritics
    # then it folds to the plain form, so index and query meet
    assert analysis.fold(variant) == plain
    assert analysis.fold(plain) == plain


def test_arabic_folding_keeps_offsets() -> None:
    # the preview and highlighting cut the original text at folded offsets: one character stays one
    text = "مدرسة على الطريق"
    assert len(analysis.folded_text(text)) == len(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("l'offre", ["offre"]),
        ("L’ÉQUIPE", ["equipe"]),  # typographic apostrophe, capitals, accent
        ("lʼoffre", ["offre"]),  # U+02BC, a "letter" to the regex engine
        ("qu'il parte", ["il", "parte"]),
        ("jusqu'à demain", ["a", "demain"]),
        ("lorsqu'elle", ["elle"]),
        ("d'abord", ["abord"]),
        ("aujourd'hui", ["aujourd", "hui"]),  # not an elision
        ("don't stop", ["don", "t", "stop"]),  # English is untouched
        ("l' offre", ["l", "offre"]),  # an apostrophe followed by a space elides nothing
    ],
)
def test_french_elisions_are_split_off(text: str, words: list[str]) -> None:
    assert folded_words(text) == words


def test_elision_same_in_index_and_query() -> None:
    # given a body with an elided word and a query for the bare word
    stems, surface, _ = analysis.index_terms("Le prix de l’offre", "fr")
    parsed = query_parser.parse("offre")
    # then the query's forms are the index's
    assert "offre" in surface
    assert set(parsed.terms[0].surfaces) & set(surface)
    assert set(parsed.terms[0].stems) & set(stems)


def test_arabic_normalisation_same_in_index_and_query() -> None:
    # a ta-marbuta body and a ha-ending query (and the other way round) share forms
    _, surface, _ = analysis.index_terms("المدرسة الجديدة", "ar")
    parsed = query_parser.parse("المدرسه")
    assert set(parsed.terms[0].surfaces) & set(surface)
