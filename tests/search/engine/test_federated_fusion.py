"""``federated_scores``: several knowledge bases' hits fused as one instance holding all their corpora would."""

from __future__ import annotations

import random

import pytest

from search.engine.fusion import SourceHits, _pooled_lanes, federated_scores, zscore_fuse
from search.types import FusionEvidence, LaneEvidence

VECTOR_DEPTH = 40
MAX_RERANK = 3.0


def corpus(seed: int, size: int = 300) -> dict[str, tuple[float, float, float]]:
    """Per document: BM25 score (0: holds no query word; about 3 in 4 hold one), cosine, rerank factor."""
    rng = random.Random(seed)
    return {
        f"d{n}": (max(0.0, rng.gauss(2.0, 3.0)), rng.gauss(0.75, 0.05), rng.choice([1.0, 1.0, 1.2, 1.5]))
        for n in range(size)
    }


def one_instance(docs: dict[str, tuple[float, float, float]], *, depth: int, weights=(1.0, 0.8)):
    """What ``search.engine.pipeline._fuse`` does on one instance: the lexical lane's top ``depth`` (every match,
    and ``absent`` 0 for the rest, when there are fewer), the vector lane's top VECTOR_DEPTH, z-score fusion,
    [0, 1], times the rerank factor. Returns every candidate's score, the FusionEvidence, and each candidate's
    (lane scores, rerank)."""
    matches = sorted(((d, v[0]) for d, v in docs.items() if v[0] > 0), key=lambda p: -p[1])
    complete = len(matches) < depth
    lexical = matches[:depth]
    vector = sorted(((d, v[1]) for d, v in docs.items()), key=lambda p: -p[1])[:VECTOR_DEPTH]
    fused = zscore_fuse([lexical, vector], weights=list(weights), absent=[0.0 if complete else None, None])
    low, high = min(fused.values()), max(fused.values())
    scores = {d: (f - low) / (high - low) * docs[d][2] for d, f in fused.items()}
    lanes: dict[str, dict[str, float]] = {d: {} for d in fused}
    for d, s in lexical:
        lanes[d]["lexical"] = s
    for d, s in vector:
        lanes[d]["vector"] = s
    evidence = FusionEvidence(
        "zscore",
        (LaneEvidence("lexical", weights[0], tuple(s for _, s in lexical), 0.0 if complete else None),
         LaneEvidence("vector", weights[1], tuple(s for _, s in vector))),
        "e5", "", len(fused), depth=depth, lexical_hits=len(lexical),
        vector_lexical=tuple("lexical" in lanes[d] for d, _ in vector),
        worst=tuple(sorted(lanes[min(fused, key=lambda d: fused[d])].items())),
    )
    return scores, evidence, {d: (lanes[d], docs[d][2]) for d in fused}


# 300 documents, about 225 matches, three shards of about 75: no lane complete; each shard's lexical lane
# complete but not the whole corpus's; every lane complete.
@pytest.mark.parametrize("depth", [60, 150, 400])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_three_shards_fused_as_one_give_the_whole_corpus_order(seed: int, depth: int) -> None:
    # given a corpus searched whole, and the same corpus split in three knowledge bases
    docs = corpus(seed)
    whole, _, _ = one_instance(docs, depth=depth)
    shards = [{d: v for d, v in docs.items() if int(d[1:]) % 3 == n} for n in range(3)]
    sources, names = [], []
    for shard in shards:
        scores, evidence, of = one_instance(shard, depth=depth)
        ranked = sorted(scores, key=lambda d: -scores[d])  # each knowledge base's own order: every candidate
        sources.append(SourceHits(evidence, [of[d] for d in ranked]))
        names.append(ranked)
    # when their hits are scored together
    merged = federated_scores(sources, rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000)
    assert merged is not None
    score_of = {d: s for ranked, values in zip(names, merged, strict=True) for d, s in zip(ranked, values, strict=True)}
    # then the whole corpus's candidates come in the whole corpus's order, with its scores
    in_whole = sorted(whole, key=lambda d: -whole[d])
    assert sorted(in_whole, key=lambda d: -score_of[d]) == in_whole
    assert max(abs(score_of[d] - whole[d]) for d in in_whole) < 1e-9
    # and a shard's candidate that the whole corpus's lanes did not reach comes after all of them
    extra = set(score_of) - set(whole)
    if extra:
        assert max(score_of[d] for d in extra) <= min(whole.values()) + 1e-9


def test_the_scores_of_one_source_keep_its_order() -> None:
    scores, evidence, of = one_instance(corpus(7), depth=60)
    ranked = sorted(scores, key=lambda d: -scores[d])
    source = SourceHits(evidence, [of[d] for d in ranked])
    [values] = federated_scores([source], rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000)
    assert values == pytest.approx([scores[d] for d in ranked], abs=1e-12)


def test_a_rerank_factor_past_this_instance_maximum_is_capped() -> None:
    lanes = (LaneEvidence("lexical", 1.0, (3.0, 1.0)), LaneEvidence("vector", 1.0, (0.9, 0.8)))
    evidence = FusionEvidence("zscore", lanes, "e5", "", 2)
    honest = SourceHits(evidence, [({"lexical": 3.0, "vector": 0.9}, 1.0)])
    boastful = SourceHits(evidence, [({"lexical": 1.0, "vector": 0.8}, 100.0)])
    [[first], [second]] = federated_scores([honest, boastful], rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000)
    assert second <= first * MAX_RERANK


def test_one_lane_orders_are_that_lanes_raw_scores_and_rrf_is_on_pooled_ranks() -> None:
    vec = lambda scores: FusionEvidence("vector", (LaneEvidence("vector", 1.0, scores),), "e5", "", len(scores))  # noqa: E731
    merged = federated_scores(
        [SourceHits(vec((0.9, 0.7)), [({"vector": 0.9}, 1.0), ({"vector": 0.7}, 1.0)]),
         SourceHits(vec((0.8,)), [({"vector": 0.8}, 1.0)])], rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000,
    )
    assert merged == [[0.9, 0.7], [0.8]]
    rrf = lambda lex, v: FusionEvidence("rrf", (LaneEvidence("lexical", 1.0, lex), LaneEvidence("vector", 1.0, v)),  # noqa: E731
                                        "e5", "", 2)
    merged = federated_scores(
        [SourceHits(rrf((5.0, 1.0), (0.9, 0.1)), [({"lexical": 5.0, "vector": 0.9}, 1.0), ({"lexical": 1.0}, 1.0)]),
         SourceHits(rrf((4.0, 2.0), (0.8, 0.2)), [({"lexical": 4.0, "vector": 0.8}, 1.0)])],
        rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000,
    )
    # each lane two deep, as each source's: 1.0 (lexical 4th, vector none) is in no lane one instance would run
    top = 2 / 21
    assert merged == [[pytest.approx(1.0), 0.0], [pytest.approx((2 / 22) / top)]]


BOTH = (LaneEvidence("lexical", 1.0, (1.0,)), LaneEvidence("vector", 1.0, (0.5,)))


@pytest.mark.parametrize(
    "other",
    [
        FusionEvidence("zscore", BOTH, "minilm", "", 1),
        FusionEvidence("rrf", BOTH, "e5", "", 1),
        FusionEvidence("lexical", BOTH[:1], "", "", 1),
    ],
    ids=["another-model", "another-method", "another-lanes"],
)
def test_sources_that_did_not_fuse_alike_are_not_scored_together(other: FusionEvidence) -> None:
    ours = FusionEvidence("zscore", BOTH, "e5", "", 1)
    hit = ({"lexical": 1.0}, 1.0)
    pair = [SourceHits(ours, [hit]), SourceHits(other, [hit])]
    assert federated_scores(pair, rrf_k=20, max_rerank=3.0, lane_cap=2000) is None


def test_an_english_lane_a_hit_without_scores_and_other_granularities() -> None:
    three = (LaneEvidence("lexical", 1.0, (5.0, 3.0, 1.0)), LaneEvidence("vector", 1.0, (0.9, 0.8, 0.7)),
             LaneEvidence("english", 0.5, (0.6, 0.5, 0.4, 0.3)))
    evidence = FusionEvidence("zscore", three, "e5", "minilm", 4, depth=200, lexical_hits=3,
                              vector_lexical=(True, True, False))
    strong = ({"lexical": 5.0, "vector": 0.9, "english": 0.6}, 1.0)
    weak = ({"lexical": 3.0, "english": 0.4}, 1.0)
    bare: tuple[dict[str, float], float] = ({}, 1.0)  # a hit no lane scored: at every lane's floor
    merged = federated_scores([SourceHits(evidence, [strong, weak]), SourceHits(evidence, [bare])],
                              rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000)
    assert merged is not None
    [[first, second], [third]] = merged
    assert first > second > third == 0.0
    chunks = FusionEvidence("zscore", three, "e5", "minilm", 4, granularity="chunk")
    other = federated_scores([SourceHits(evidence, [strong]), SourceHits(chunks, [strong])],
                             rrf_k=20, max_rerank=MAX_RERANK, lane_cap=2000)
    assert other is None


def test_a_source_counts_no_more_scores_a_lane_than_our_own_depth() -> None:
    lanes = lambda lex, vec: (LaneEvidence("lexical", 1.0, lex), LaneEvidence("vector", 1.0, vec))  # noqa: E731
    ours = SourceHits(FusionEvidence("zscore", lanes((4.0, 3.0, 2.0), (0.9, 0.8, 0.7)), "e5", "", 3), [])

    def pooled(peer_scores: int, lane_cap: int) -> list[tuple[int, float, float]]:
        peer = FusionEvidence("zscore", lanes((1.0,) * peer_scores, (0.1,) * peer_scores), "e5", "", peer_scores)
        return [(len(lane.ranked), lane.mean, lane.spread)
                for lane in _pooled_lanes([ours, SourceHits(peer, [])], lane_cap)]

    # a peer sending 1,000 scores a lane weighs as one sending our depth's worth (here 3), not more
    assert pooled(1000, lane_cap=3) == pooled(3, lane_cap=3)
    assert pooled(1000, lane_cap=2000)[0][0] == 1000
