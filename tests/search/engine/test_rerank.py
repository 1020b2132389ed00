"""search/engine/rerank.py: the factor stays within the bound fusion prunes with (retrieve._fuse)."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from search.engine import rerank
from search.text import query_parser

NOW = datetime(2026, 12, 1, tzinfo=UTC)
words = st.sampled_from(["tender", "pricing", "offre", "prix", "سياسة", "التسعير", "bid", "the", "a", "zebra"])
texts = st.lists(words, max_size=6).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    query=texts, title=texts, summary=texts, author=texts, keywords=st.lists(texts, max_size=4),
    age_days=st.floats(min_value=-400, max_value=4000, allow_nan=False),
    won=st.integers(min_value=0, max_value=10_000), decided=st.integers(min_value=0, max_value=10_000),
    language=st.sampled_from(["en", "fr", "ar", "de", ""]),
)
def test_the_factor_is_between_1_and_the_bound_fusion_prunes_with(
    query: str, title: str, summary: str, author: str, keywords: list[str], age_days: float, won: int,
    decided: int, language: str,
) -> None:
    signals = rerank.ItemSignals(
        title=title, summary=summary, author_name=author, ai_keywords=tuple(keywords),
        updated_at=NOW - timedelta(days=age_days), language=language, won=won, decided=decided,
    )
    factor = rerank.rerank_factor(query_parser.parse(query), signals, NOW)
    # retrieve._fuse skips reading the signals of a candidate that could not reach the page even at
    # max_factor(): a factor above it would let a skipped candidate outrank one on the page.
    assert 1.0 <= factor <= rerank.max_factor() + 1e-12


def test_every_signal_at_its_top_reaches_the_bound() -> None:
    signals = rerank.ItemSignals(
        title="Tender pricing", summary="tender pricing", author_name="tender pricing",
        ai_keywords=("tender", "pricing"), updated_at=NOW, language="en", won=5, decided=5,
    )
    assert rerank.rerank_factor(query_parser.parse("tender pricing"), signals, NOW) == rerank.max_factor()


def test_a_win_rate_counts_only_from_two_decided_citations_and_never_above_one() -> None:
    assert rerank.win_rate(1, 1) == 0.0
    assert rerank.win_rate(1, 2) == 0.5
    assert rerank.win_rate(9, 3) == 1.0  # more wins than decisions (bad data) is at most a full win rate


def _factor(query: str, *, title: str = "", summary: str = "", keywords: tuple[str, ...] = ()) -> float:
    signals = rerank.ItemSignals(
        title=title, summary=summary, author_name="", ai_keywords=keywords,
        updated_at=NOW - timedelta(days=400), language="en",
    )
    return rerank.rerank_factor(query_parser.parse(query), signals, NOW)


def test_a_title_word_counts_when_it_starts_with_a_typed_word_and_never_from_inside_a_word() -> None:
    # "tend" starts "Tender" but only sits inside "Extend"; one query word of two is in the title
    assert _factor("tend zebra", title="Tender pricing") == 1 + rerank.TITLE_WEIGHT / 2
    assert _factor("tend zebra", title="Extend pricing") == 1.0


def test_keywords_and_summary_count_once_however_many_query_words_they_hold() -> None:
    both = _factor("tender zebra", summary="zebra tender", keywords=("zebra", "tender"))
    one = _factor("tender zebra", summary="a zebra", keywords=("zebra",))
    assert both == one == 1 + rerank.KEYWORD_WEIGHT + rerank.SUMMARY_WEIGHT
    assert _factor("tender zebra", summary="nothing here", keywords=("lion",)) == 1.0
