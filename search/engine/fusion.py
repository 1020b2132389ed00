"""Fusion: pure functions over the lanes' ranked lists (weighted RRF, z-scores), and the same fusion over
several knowledge bases' answers (``federated_scores``)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from search.types import FusionEvidence


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


@dataclass(frozen=True)
class SourceHits:
    """One knowledge base's answer as ``federated_scores`` reads it: what its fusion saw, and each hit's raw lane
    scores and rerank factor (``Hit.lane_scores``, ``Hit.rerank``), best first."""

    evidence: FusionEvidence
    hits: Sequence[tuple[Mapping[str, float], float]]


@dataclass(frozen=True)
class _PooledLane:
    weight: float
    mean: float
    spread: float  # 0: the lane's scores are all equal (its hits count 1, the others 0, as in zscore_fuse)
    floor: float  # the z of a hit the lane did not return (or returned below the pooled lane's depth)
    lowest: float  # the lowest z of a candidate this lane alone returned (the scale's low end, ``low``)
    ranked: npt.NDArray[np.float64]  # the pooled scores, lowest first (ranks, for rrf)
    last: float = math.inf  # the lowest pooled score (inf: the lane is empty)


def _pooled_lanes(sources: Sequence[SourceHits], lane_cap: int) -> list[_PooledLane]:
    """Each lane as one instance holding every source's corpus would have seen it: the sources' lists pooled and
    cut to the length one instance's would have had. Its lexical lane returned every match when all the
    sources' lanes did and their hits together are fewer than its depth: its ``absent`` candidates (those of
    the pooled vector lane the lexical lane did not return) then join the lexical lane's distribution, as
    ``zscore_fuse``'s ``absent``. A source's lexical and vector lists count up to ``lane_cap`` scores (this
    instance's own depth: a peer claiming more cannot outweigh the others)."""
    evidence = [source.evidence for source in sources]
    vector = next((i for i, lane in enumerate(evidence[0].lanes) if lane.name == "vector"), None)
    outside_lexical = np.zeros(0)  # the pooled vector lane's candidates the lexical lane did not return
    if vector is not None:
        scores = np.concatenate([np.asarray(e.lanes[vector].scores[:lane_cap], dtype=np.float64) for e in evidence])
        lexical_too = np.concatenate([
            np.asarray(e.vector_lexical[:lane_cap], dtype=bool)
            if len(e.vector_lexical) == len(e.lanes[vector].scores)
            else np.zeros(len(e.lanes[vector].scores[:lane_cap]), dtype=bool)
            for e in evidence
        ])
        kept = np.argsort(-scores, kind="stable")[: max(min(len(e.lanes[vector].scores), lane_cap) for e in evidence)]
        outside_lexical = scores[kept][~lexical_too[kept]]
    depth = min(max(e.depth for e in evidence), lane_cap)
    pooled_lanes = []
    for i in range(len(evidence[0].lanes)):
        lanes = [e.lanes[i] for e in evidence]
        name = lanes[0].name
        cap = lane_cap if name in ("lexical", "vector") else 2 * lane_cap
        lanes = [replace(lane, scores=lane.scores[:cap]) if len(lane.scores) > cap else lane for lane in lanes]
        pooled = -np.sort(-np.concatenate([np.asarray(lane.scores, dtype=np.float64) for lane in lanes]))
        missing: float | None = None
        values = pooled
        complete = [lane.absent is not None for lane in lanes]
        if name == "lexical" and all(complete) and sum(e.lexical_hits for e in evidence) < depth:
            missing = min(lane.absent for lane in lanes if lane.absent is not None)
            values = np.concatenate([pooled, np.full(len(outside_lexical), missing)])
        elif name == "lexical" and any(complete) and depth:
            # A complete source's list is all it holds, not its depth's worth: one instance's list would be as
            # long as an incomplete source's, or (all complete, too many together) the items of ``depth`` hits.
            partial = [len(lane.scores) for lane, done in zip(lanes, complete, strict=True) if not done]
            hits = sum(e.lexical_hits for e in evidence)
            pooled = values = pooled[: max(partial) if partial else max(1, round(depth * len(pooled) / max(hits, 1)))]
        elif name in ("lexical", "vector"):
            pooled = values = pooled[: max(len(lane.scores) for lane in lanes)]
        # (the English lane scores every candidate the other lanes found: all of them stay)
        weight = sum(lane.weight for lane in lanes) / len(lanes)
        if not len(pooled):
            pooled_lanes.append(_PooledLane(weight, 0.0, 0.0, 0.0, 0.0, pooled, math.inf))
            continue
        mean, spread = float(values.mean()), float(values.std())
        last = float(pooled[-1])
        if spread <= 1e-12:  # as zscore_fuse
            pooled_lanes.append(_PooledLane(weight, mean, 0.0, 0.0, 1.0, pooled[::-1], last))
            continue
        lowest = (last - mean) / spread
        floor = (missing - mean) / spread if missing is not None else lowest
        alone = (float(outside_lexical.min()) - mean) / spread if name == "vector" and len(outside_lexical) else lowest
        pooled_lanes.append(_PooledLane(weight, mean, spread, min(floor, lowest), alone, pooled[::-1], last))
    return pooled_lanes


def _z(lane: _PooledLane, score: float | None) -> float:
    """``score``'s z in the pooled lane, as ``zscore_fuse`` has it: a hit the lane did not return (None), or
    below the pooled lane's last, at the lane's floor."""
    if score is None or score < lane.last:
        return lane.floor
    if lane.spread == 0.0:
        return 1.0
    return max(lane.floor, (score - lane.mean) / lane.spread)


def federated_scores(
    sources: Sequence[SourceHits], *, rrf_k: int, max_rerank: float, lane_cap: int
) -> list[list[float]] | None:
    """Every source's hits scored as one instance holding all their corpora would score them, or None when the
    sources did not fuse alike (another method, other lanes, another embedding model, items against chunks:
    their scores do not compare). Larger is better; the scores of different calls do not compare.

    Each lane's pooled scores stand in for the lane one instance would have run (``_pooled_lanes``); a hit is
    then fused against them as ``zscore_fuse`` would (then scaled to [0, 1] between the sources' lowest-fused
    candidates and the best hit, and times its rerank factor, capped at ``max_rerank``) or as weighted RRF on
    its rank among them; a one-lane order (``lexical``, ``vector``) is that lane's raw score. Cosines of one
    model compare across instances exactly; BM25 scores as far as the corpora's word statistics agree."""
    if not sources:
        return []
    first = sources[0].evidence
    names = tuple(lane.name for lane in first.lanes)
    for source in sources:
        evidence = source.evidence
        if evidence.method != first.method or tuple(lane.name for lane in evidence.lanes) != names or not names:
            return None
        if "vector" in names and evidence.model != first.model:
            return None
        if "english" in names and evidence.english != first.english:
            return None
        if evidence.granularity != first.granularity:
            return None
    if first.method in ("lexical", "vector"):
        lane_name = names[0]
        return [[scores.get(lane_name, -math.inf) for scores, _ in source.hits] for source in sources]
    lanes = _pooled_lanes(sources, lane_cap)
    if first.method == "rrf":
        top = sum(lane.weight / (rrf_k + 1) for lane in lanes) or 1.0

        def rrf_score(scores: Mapping[str, float], factor: float) -> float:
            total = 0.0
            for name, lane in zip(names, lanes, strict=True):
                score = scores.get(name)
                if score is not None and score >= lane.last:
                    above = len(lane.ranked) - int(np.searchsorted(lane.ranked, score, side="right"))
                    total += lane.weight / (rrf_k + 1 + above)
            return total / top * min(max(factor, 1.0), max_rerank)

        return [[rrf_score(scores, factor) for scores, factor in source.hits] for source in sources]
    named = list(zip(names, lanes, strict=True))
    fused = [
        [sum(lane.weight * _z(lane, scores.get(name)) for name, lane in named) for scores, _ in source.hits]
        for source in sources
    ]
    # The lowest fused score one instance would have seen (the low end of the [0, 1] scale ``_fused_scores``
    # maps to before the rerank factor multiplies it). Each of these is a candidate one instance would have had,
    # so its fused score is at or above that low end, and the lowest of them is the estimate: each source's own
    # lowest-fused candidate scored on the pooled lanes (exact for one source) when the pooled lanes still reach
    # it, and without an English lane
    # (which scores every candidate, so none holds one lane alone) the candidate at the lexical lane's lowest
    # and the vector lane's lowest that the lexical lane did not return, each at the other lane's floor.
    floors = sum(lane.weight * lane.floor for lane in lanes)
    worst = [dict(source.evidence.worst) for source in sources if source.evidence.worst]
    candidates = [
        sum(lane.weight * _z(lane, scores.get(name)) for name, lane in named)
        for scores in worst
        # one instance's lexical and vector lanes reach it (else it would not be among its candidates at all)
        if any(name != "english" and scores.get(name, -math.inf) >= lane.last for name, lane in named)
    ]
    if "english" not in names or not candidates:
        candidates += [floors + lane.weight * (lane.lowest - lane.floor) for lane in lanes if len(lane.ranked)]
    low = min(candidates, default=floors)
    high = max((value for values in fused for value in values), default=low)
    scale = high - low
    return [
        [
            (max(0.0, value - low) / scale if scale > 0 else 1.0) * min(max(factor, 1.0), max_rerank)
            for value, (_, factor) in zip(values, source.hits, strict=True)
        ]
        for values, source in zip(fused, sources, strict=True)
    ]
