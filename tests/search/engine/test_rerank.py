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
