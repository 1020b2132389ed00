"""Weighted Reciprocal Rank Fusion: a pure function over ranked lists of ids."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def rrf(
    ranked_lists: Sequence[Sequence[Hashable]], *, k: int = 60, weights: Sequence[float] | None = None
) -> dict[Hashable, float]:
    """Score each id by Σ weight_i / (k + rank_i) over the lists it appears in (ranks start at 1).

    Fails fast on bad arguments: ``k`` must be positive and ``weights`` must match the lists.
    """
    if k <= 0:
        raise ValueError("k must be a positive integer")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    if len(weights) != len(ranked_lists):
        raise ValueError(f"got {len(weights)} weights for {len(ranked_lists)} ranked lists")
    scores: dict[Hashable, float] = {}
    for ranked, weight in zip(ranked_lists, weights, strict=True):
        seen: set[Hashable] = set()
        for rank, ident in enumerate(ranked, start=1):
            if ident in seen:
                continue
            seen.add(ident)
            scores[ident] = scores.get(ident, 0.0) + weight / (k + rank)
    return scores


def rrf_max(*, k: int, weights: Sequence[float]) -> float:
    """The best possible fused score (rank 1 in every list), to normalise scores into [0, 1]."""
    return sum(w / (k + 1) for w in weights)
