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


def zscore_fuse(
    scored_lists: Sequence[Sequence[tuple[Hashable, float]]],
    *,
    weights: Sequence[float],
    absent: Sequence[float | None] | None = None,
) -> dict[Hashable, float]:
    """Fuse lanes on their calibrated scores: each lane's scores become z-scores over the lane's own hits
    (BM25 and cosine live on different scales, and each query's spread differs), and an id scores
    Σ weight_i · z_i, where an id a lane did not return counts at that lane's lowest z-score.

    ``absent[i]``, when not None, is what lane i knows an id it did not return scores: a lexical lane that
    returned every item holding a query word (fewer than its depth) knows that every other candidate holds
    none, BM25 0. Those ids then take part in the lane's distribution at that score, so a word only one item
    holds makes that item stand out by as much as it should (one hit among 200 candidates: z ≈ 14), instead
    of counting "first of one" against the other lane's spread.

    ``scored_lists`` hold (id, raw score) in lane order, each id once. A lane of one hit, or whose scores are
    all equal, says only "these first": its ids count 1, the others 0 (unless ``absent`` says more). Fails
    fast on bad arguments.
    """
    if len(weights) != len(scored_lists):
        raise ValueError(f"got {len(weights)} weights for {len(scored_lists)} scored lists")
    absent = list(absent) if absent is not None else [None] * len(scored_lists)
    if len(absent) != len(scored_lists):
        raise ValueError(f"got {len(absent)} absent scores for {len(scored_lists)} scored lists")
    ids = {ident for scored in scored_lists for ident, _ in scored}
    normalised: list[tuple[dict[Hashable, float], float]] = []
    for scored, missing in zip(scored_lists, absent, strict=True):
        values = [s for _, s in scored]
        if not values:
            normalised.append(({}, 0.0))
            continue
        if missing is not None:
            values += [missing] * (len(ids) - len(scored))
        mean = sum(values) / len(values)
        spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        if spread <= 1e-12:
            normalised.append(({ident: 1.0 for ident, _ in scored}, 0.0))
            continue
        z = {ident: (s - mean) / spread for ident, s in scored}
        floor = (missing - mean) / spread if missing is not None else min(z.values())
        normalised.append((z, floor))
    return {
        ident: sum(w * z.get(ident, floor) for (z, floor), w in zip(normalised, weights, strict=True))
        for ident in ids
    }
