"""search/text/query_parser.py: what a query's words become before either lane sees them."""

import pytest

from search.errors import InvalidQuery
from search.text import query_parser


def written(text: str) -> list[str]:
    return [t.written for t in query_parser.parse(text).terms]


def test_stop_words_of_every_language_and_repeats_are_dropped() -> None:
    assert written("the pricing of the PRICING") == ["pricing"]
    assert written("le prix de l'offre") == ["prix", "offre"]
    assert query_parser.parse("the of and").searchable is False


def test_each_word_carries_its_stems_written_forms_and_title_forms() -> None:
    (term,) = query_parser.parse("Écrits").terms
    assert term.folded == "ecrits" and "ecrits" in term.surfaces
    assert term.prefix is True  # three characters or more match titles as a prefix
    assert query_parser.parse("ab").terms[0].prefix is False


def test_a_leading_arabic_conjunction_is_also_tried_stripped() -> None:
    (term,) = query_parser.parse("والسياسة").terms
    assert "السياسه" in term.surfaces or "سياسه" in term.title_forms


def test_at_most_max_terms_words_are_kept() -> None:
    text = " ".join(f"word{i}" for i in range(query_parser.MAX_TERMS + 10))
    assert len(query_parser.parse(text).terms) == query_parser.MAX_TERMS


def test_invisible_characters_and_nuls_are_removed_and_spaces_collapsed() -> None:
    assert query_parser.normalize_query_text("  tender\x00\u200b  pricing \n") == "tender pricing"


def test_an_over_long_query_is_refused_with_its_length() -> None:
    with pytest.raises(InvalidQuery) as caught:
        query_parser.validate_query_text("x" * 2001)
    assert "2001 characters" in caught.value.message and caught.value.field == "query"
