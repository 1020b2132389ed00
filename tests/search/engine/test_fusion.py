"""Fusion rules: weighted reciprocal ranks and calibrated (z-score) scores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search.engine.fusion import zscore_fuse


def test_zscore_puts_both_lanes_on_one_scale() -> None:
    # given BM25 scores in the tens and cosines below one
    lexical = [("a", 30.0), ("b", 20.0), ("c", 10.0)]
    vector = [("c", 0.9), ("b", 0.8), ("d", 0.1)]
    fused = zscore_fuse([lexical, vector], weights=[1.0, 1.0])
    # then neither scale dominates: "b" (second in both) beats "a" and "d", each first or last in one lane only
    assert fused["b"] > fused["d"]
    assert fused["c"] > fused["d"]
    assert set(fused) == {"a", "b", "c", "d"}


def test_missing_from_a_lane_counts_at_its_lowest() -> None:
    lexical = [("a", 3.0), ("b", 1.0)]
    vector = [("a", 0.9), ("c", 0.5)]
    fused = zscore_fuse([lexical, vector], weights=[1.0, 1.0])
    # "b" is lexical's last and absent from vector: both lanes' lowest z-scores
    assert fused["b"] == pytest.approx(-1.0 + -1.0)
    assert fused["c"] == pytest.approx(-1.0 + -1.0)
    assert fused["a"] == pytest.approx(2.0)


def test_a_lane_of_one_hit_says_only_first() -> None:
    fused = zscore_fuse([[("a", 5.0), ("b", 1.0)], [("b", 0.7)]], weights=[1.0, 1.0])
    assert fused["b"] == pytest.approx(-1.0 + 1.0)
    assert fused["a"] == pytest.approx(1.0 + 0.0)


def test_a_complete_lexical_lane_counts_what_it_did_not_return_at_zero() -> None:
    # given a word only "a" holds (the lexical lane returned every holder: one) and a vector lane of 20 others
    vector = [(f"v{i}", 0.9 - i * 0.01) for i in range(20)] + [("a", 0.5)]
    lexical = [("a", 7.0)]
    # when the lane is known complete, the other 20 candidates score BM25 0 in it
    fused = zscore_fuse([lexical, vector], weights=[1.0, 1.0], absent=[0.0, None])
    # then "a" stands out of 21 candidates by sqrt(20) standard deviations, ahead of the vector lane's best
    assert max(fused, key=fused.__getitem__) == "a"
    # while without that knowledge it only says "first of one", and the vector lane's order wins
    unknown = zscore_fuse([lexical, vector], weights=[1.0, 1.0])
    assert unknown["a"] < unknown["v0"]


def test_an_absent_score_is_the_floor_of_ids_the_lane_did_not_return() -> None:
    fused = zscore_fuse([[("a", 2.0), ("b", 1.0)], [("c", 0.5)]], weights=[1.0, 0.0], absent=[0.0, None])
    # lexical over a=2, b=1, c=0: mean 1, sd sqrt(2/3)
    sd = (2 / 3) ** 0.5
    assert fused["a"] == pytest.approx(1 / sd)
    assert fused["b"] == pytest.approx(0.0)
    assert fused["c"] == pytest.approx(-1 / sd)


def test_absent_scores_must_match_the_lists() -> None:
    with pytest.raises(ValueError, match="absent"):
        zscore_fuse([[("a", 1.0)]], weights=[1.0], absent=[0.0, None])


def test_bad_weights_fail_fast() -> None:
    with pytest.raises(ValueError):
        zscore_fuse([[("a", 1.0)]], weights=[1.0, 1.0])


scored = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.floats(min_value=-50, max_value=50, allow_nan=False)),
    max_size=10,
    unique_by=lambda t: t[0],
)


@given(scored, scored)
def test_a_lane_weighed_at_zero_cannot_reorder_the_other(first: list, second: list) -> None:
    fused = zscore_fuse([first, second], weights=[1.0, 0.0])
    ranked = [ident for ident, _ in sorted(first, key=lambda t: -t[1])]
    # the first lane's own order is kept among its ids (ties may go either way)
    scores = [fused[i] for i in ranked]
    assert all(a >= b - 1e-9 for a, b in zip(scores, scores[1:], strict=False))
    # and an id only the zero-weight lane found never beats one the first lane found
    only_second = {i for i, _ in second} - {i for i, _ in first}
    if first:
        assert all(fused[i] <= min(scores) + 1e-9 for i in only_second)
