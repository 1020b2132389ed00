"""The language rules shared by the build and the query parser: Arabic normalisation, French elision."""

from __future__ import annotations

import pytest

from search.text import analysis, query_parser


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


# --- tsvector / tsquery literals: the one quoting rule (analysis.quote_lexeme) ---


@pytest.mark.parametrize(
    ("lexeme", "quoted"),
    [
        ("harbour", "'harbour'"),
        ("it's", "'it''s'"),  # an apostrophe is doubled
        ("''", "''''''"),
        ("back\\slash", "'back\\\\slash'"),  # a backslash is doubled
        ("\\'", "'\\\\'''"),  # both, each escaped on its own
        ("a:b", "'a:b'"),  # a colon stays inside the lexeme, not a weight or prefix mark
        ("a | b & !c", "'a | b & !c'"),  # operators too
        ("", "''"),
    ],
)
def test_quote_lexeme_escapes_quotes_and_backslashes(lexeme: str, quoted: str) -> None:
    # when / then
    assert analysis.quote_lexeme(lexeme) == quoted


def test_quote_lexeme_prefix_mark_goes_after_the_closing_quote() -> None:
    # when / then
    assert analysis.quote_lexeme("harb", prefix=True) == "'harb':*"
    assert analysis.quote_lexeme("l'of", prefix=True) == "'l''of':*"


def test_tsquery_any_sorts_drops_duplicates_and_empty_lexemes() -> None:
    # when / then
    assert analysis.tsquery_any(["b", "a", "b", ""]) == "'a' | 'b'"
    assert analysis.tsquery_any(("it's", "x"), prefix=True) == "'it''s':* | 'x':*"
    assert analysis.tsquery_any(iter(["only"])) == "'only'"


@pytest.mark.parametrize("lexemes", [[], [""], ["", ""]])
def test_tsquery_any_of_nothing_is_the_empty_tsquery(lexemes: list[str]) -> None:
    # when / then: the empty string, which PostgreSQL casts to the empty tsquery ("''" would be a syntax error)
    assert analysis.tsquery_any(lexemes) == ""


def test_title_tsquery_ands_one_quoted_group_per_term() -> None:
    # given
    from search.selectors.closed import title_tsquery

    parsed = query_parser.parse("harbour o'neil")
    # when
    text = title_tsquery(parsed)
    # then: every term a group of its title forms, quoted by the one rule, prefixed when the term is long enough
    groups = [analysis.tsquery_any(t.title_forms, prefix=t.prefix) for t in parsed.terms]
    assert text == " & ".join(f"({g})" for g in groups)
    assert text.startswith("('harbour':*)")
    assert title_tsquery(query_parser.parse("")) == ""


@pytest.mark.django_db
@pytest.mark.parametrize("lexeme", ["it's", "back\\slash", "a:b", "a | b", "'", "\\", "x'\\'y"])
def test_postgresql_reads_a_quoted_lexeme_back_as_the_same_single_lexeme(lexeme: str) -> None:
    # given
    from django.db import connection

    vector = analysis.to_tsvector_literal({lexeme: [1]})
    query = analysis.tsquery_any([lexeme])
    # when
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_length(tsvector_to_array(%s::tsvector), 1), (tsvector_to_array(%s::tsvector))[1], "
            "%s::tsvector @@ %s::tsquery, %s::tsvector @@ %s::tsquery",
            [vector, vector, vector, query, vector, analysis.quote_lexeme(lexeme[:1], prefix=True)],
        )
        count, stored, matches, prefix_matches = cursor.fetchone()
    # then: one lexeme, stored as written, found by the tsquery built from it (and by its first character as a
    # prefix)
    assert (count, stored, matches, prefix_matches) == (1, lexeme, True, True)


@pytest.mark.django_db
def test_postgresql_accepts_the_empty_tsquery_and_it_matches_nothing() -> None:
    # given
    from django.db import connection

    # when
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'harbour'::tsvector @@ %s::tsquery", [analysis.tsquery_any([])])
        (matches,) = cursor.fetchone()
    # then
    assert matches is False
