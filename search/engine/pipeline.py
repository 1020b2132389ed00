"""The one retrieval entry point: ``retrieve(query=RetrievalQuery) -> RetrievalResult``.

lexical lane + vector lane → weighted RRF → rerank → page; access and filters are applied in SQL
inside each lane (before any cut), so no surface can leak and no page comes back short.

In code: ``retrieve`` picks the database (``replicas.replica_read``: primary or replica), then ``_search``:
``_plan_lanes`` → ``_run_lanes`` (the vector lane in a lane thread while this one runs the lexical lane, then
``_read_ahead`` until the vector lane answers) → ``_fuse`` (fusion and rerank) → ``_page``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from search import replicas
from search.embeddings import spaces
from search.embeddings.providers import EmbeddingProvider
from search.engine import (
    confidence,
    english,
    fusion,
    lane_weights,
    lanes,
    lexical,
    page_rows,
    passages,
    rerank,
    vector,
)
from search.engine.background import QueryBackground
from search.engine.cursors import cursor_decode, cursor_encode
from search.engine.scope import ItemScope
from search.engine.sql import Fragment
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.filters import FILTER_COLUMNS
from search.models import ContentItem
from search.signals import search_performed
from search.text import query_parser
from search.types import LANES, FusionEvidence, Hit, LaneEvidence, RetrievalQuery, RetrievalResult, Span

logger = logging.getLogger(__name__)
H = TypeVar("H", lexical.LexicalHit, vector.VectorHit)

FACET_FIELDS = {name: FILTER_COLUMNS[name] for name in ("domain", "content_type", "layer", "language")}


@dataclass
class _Candidate:
    key: int
    item_id: int
    chunk_id: int
    lanes: dict[str, int] = field(default_factory=dict)
    score: float = 0.0
    complete: bool | None = None
    similarity: float | None = None
    confidence: float = 1.0
    lane_scores: dict[str, float] = field(default_factory=dict)  # each lane's raw score, as fusion saw it
    rerank: float = 1.0


def _fingerprint(query: RetrievalQuery, corpus: str) -> str:
    payload = repr((query.text, corpus, query.principal.cache_key, query.filters, query.granularity, query.mode,
                    query.threshold, query.similar_to))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# A search pages at most this deep: every page fuses the lanes' lists down to ``offset + limit``.
MAX_CURSOR_OFFSET = 100_000
INVALID_CURSOR = (
    "cursor is not valid for this search; start again without a cursor (cursors belong to one query and its "
    "filters)."
)


def _vector_lane(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    corpus: str,
    items_qs: Any,
    items_sql: Fragment,
    depth: int,
) -> tuple[list[vector.VectorHit], QueryBackground | None, list[str], float]:
    """The vector lane's hits, the query's cosine background over the corpus, what degraded the lane, and its
    milliseconds."""
    t = time.perf_counter()
    degraded: list[str] = []
    vec_hits: list[vector.VectorHit] = []
    background: QueryBackground | None = None
    try:
        if query.similar_to is not None:
            qvec = vector.item_vector(query.similar_to, corpus)
            if qvec is None or not ContentItem.objects.searchable(query.principal, corpus).filter(
                pk=query.similar_to
            ).exists():
                qvec = None
        else:
            qvec = vector.query_embedding(parsed.text)
        if qvec is not None:
            found = vector.vector_lane(
                vector=qvec, corpus=corpus, items_sql=items_sql, limit=depth, exclude_item=query.similar_to
            )
            vec_hits, background = found.hits, found.background
    except EmbeddingUnavailable as exc:
        logger.warning("vector lane unavailable: %s", exc)
        degraded.append("embedding_unavailable")
    except EmbeddingModelMismatch as exc:
        logger.error("vector lane refused: %s", exc)
        degraded.append("embedding_model_mismatch")
    return vec_hits, background, degraded, (time.perf_counter() - t) * 1000


def retrieve(*, query: RetrievalQuery) -> RetrievalResult:
    """The search. Its reads run on one database (``search.replicas``: a healthy replica unless the
    principal just wrote; retried once on the primary when the replica fails under it)."""
    # ``query`` checked itself when built (limit, threshold, granularity, mode, corpus and every filter).
    started = time.perf_counter()
    parsed = query_parser.parse(query.text)
    if not parsed.searchable and query.similar_to is None:
        return RetrievalResult()
    searched = replicas.replica_read(query.principal, partial(_search, query, parsed, started))
    if searched is None:
        return RetrievalResult()
    result, corpus = searched
    if result.suggestion and result.total == 0 and query.threshold > 0:
        result = _suggestion_that_answers(query, result)
    search_performed.send(sender=RetrievalQuery, query=query, result=result, corpus=corpus)
    return result


def _suggestion_that_answers(query: RetrievalQuery, result: RetrievalResult) -> RetrievalResult:
    """``result`` (a search that kept nothing) with its "did you mean" only if the suggested query keeps a hit
    at the same threshold, for the same reader and filters: a suggestion must lead somewhere, or "nothing
    here" would send people and agents round in circles. Costs a second search, on empty answers only."""
    assert result.suggestion is not None
    suggested = dataclasses.replace(query, text=result.suggestion, cursor=None, limit=1, with_facets=False)
    parsed = query_parser.parse(suggested.text)
    if parsed.searchable:
        found = replicas.replica_read(query.principal, partial(_search, suggested, parsed, time.perf_counter()))
        if found is not None and found[0].total:
            return result
    return dataclasses.replace(result, suggestion=None)


def _search(
    query: RetrievalQuery, parsed: query_parser.ParsedQuery, started: float
) -> tuple[RetrievalResult, str] | None:
    """``retrieve`` past its early return: the result and the corpus read, or None when the filters can
    match nothing."""
    scope = ItemScope.of(query.principal, query.corpus, query.filters)
    corpus = scope.corpus
    fingerprint = _fingerprint(query, corpus)
    offset = cursor_decode(
        query.cursor, fingerprint=fingerprint, message=INVALID_CURSOR, max_offset=MAX_CURSOR_OFFSET
    )
    items_qs = scope.items()
    items_sql = scope.items_sql(items_qs)
    if items_sql is None:  # the filters can match nothing (e.g. an id past the column's range)
        return None
    timings: dict[str, float] = {}
    plan = _plan_lanes(query, parsed, offset)
    lanes_run = _run_lanes(query, parsed, corpus, items_qs, items_sql, plan, offset=offset, timings=timings)
    english_lane = (
        _EnglishLane(plan.english, lanes_run.english_vector, plan.english_weight)
        if plan.english is not None and lanes_run.english_vector is not None else None
    )
    ordered, fusion_evidence = _fuse(
        query, parsed, lanes_run.lexical.hits, lanes_run.vector, reach=offset + query.limit,
        page_reads=lanes_run.page_reads, vector_weight=plan.vector_weight, english_lane=english_lane,
        # fewer hits than its depth: the lexical lane returned every chunk that holds a query word; counted so
        # only when one of them holds every word (a partial match, one word of a name in another language's
        # text, would take the first places from the vector lane's answers: -0.076 nDCG@10 on the
        # cross-lingual check against -0.015)
        lexical_complete=len(lanes_run.lexical.hits) < plan.depth and any(h.complete for h in lanes_run.lexical.hits),
        depth=plan.depth,
    )
    coverage = _Coverage.of(parsed, lanes_run.lexical.hits, by_item=query.granularity == "item")
    _confide(query, parsed, ordered, lanes_run, coverage)
    # Below the threshold a hit is not an answer: counts, facets, partial_match and pages are over the rest.
    # "More like this" (similar_to) asks for neighbours, not answers to a question: nothing is floored there.
    floor = 0.0 if query.similar_to is not None else query.threshold
    kept = [c for c in ordered if c.confidence >= floor]
    nearest = ordered[:NEAREST] if not kept and offset == 0 else []
    result = _page(
        query, parsed, corpus, kept, lanes_run, coverage, offset=offset, fingerprint=fingerprint, timings=timings,
        started=started, nearest=nearest,
    )
    return dataclasses.replace(result, fusion=fusion_evidence), corpus


# When nothing clears the threshold, the result names this many nearest candidates (clearly not answers).
NEAREST = 3


@dataclass(frozen=True)
class _LanePlan:
    """Which lanes a search runs, how deep, and the vector lane's fusion weight."""

    lexical: bool
    vector: bool
    vector_weight: float
    depth: int  # the lexical lane's, and the vector lane's when it runs alone
    vector_depth: int
    parallel: bool  # the vector lane runs in a lane thread while this one runs the lexical lane
    # The English lane (search.engine.english): its embedder and fusion weight; None / 0 when it does not run.
    english: EmbeddingProvider | None = None
    english_weight: float = 0.0


def _plan_lanes(query: RetrievalQuery, parsed: query_parser.ParsedQuery, offset: int) -> _LanePlan:
    depth = max(settings.SEARCH["LANE_DEPTH"], offset + query.limit)
    wants_lexical = parsed.searchable and query.mode != "vector"
    wants_vector = query.mode != "lexical" or query.similar_to is not None
    # In a hybrid search the vector lane counts as much as its embedder was measured to be worth in the
    # query's language (search.engine.lane_weights); where that is nothing, it is not run at all.
    vector_weight = float(settings.SEARCH["VECTOR_WEIGHT"])
    english_provider, english_weight = None, 0.0
    if wants_lexical and wants_vector and query.similar_to is None:
        model = spaces.lane_model()
        shares = lane_weights.corpus_language_shares(query.filters.language)
        vector_weight = lane_weights.vector_weight(model, parsed.text, corpus_languages=shares)
        wants_vector = vector_weight > 0
        # The English lane re-scores the candidates with a second embedder, where it was measured to help.
        english_provider = english.english_provider()
        if english_provider is not None and english_provider.name != model:
            english_weight = lane_weights.vector_weight(
                english.lane_key(english_provider), parsed.text, corpus_languages=shares, default=0.0
            )
        if english_weight <= 0:
            english_provider = None
    # Beside a lexical lane the vector lane may hand fusion fewer hits (SEARCH_VECTOR_DEPTH: HNSW cost grows
    # with the depth; 100 measured -9 ms at 100k items but -0.0026 nDCG@10, so the default matches
    # LANE_DEPTH); alone (vector mode, similar_to) it always goes to LANE_DEPTH.
    vector_depth = (
        max(settings.SEARCH["VECTOR_DEPTH"], offset + query.limit) if wants_lexical else depth
    )
    # Both lanes at once when a lane thread is free (search.engine.lanes). A lane thread sees committed
    # rows only, so never from inside a transaction (tests, a caller's atomic block).
    parallel = bool(
        wants_lexical and wants_vector and settings.SEARCH["LANE_THREADS"]
        and not replicas.read_connection().in_atomic_block
    )
    return _LanePlan(
        wants_lexical, wants_vector, vector_weight, depth, vector_depth, parallel, english_provider, english_weight
    )


@dataclass(frozen=True)
class _LanesRun:
    """What the lanes found: the lexical outcome (empty when the lane did not run), the vector hits, what
    degraded the search, and the rows read so far."""

    lexical: lexical.LexicalOutcome
    vector: list[vector.VectorHit]
    degraded: tuple[str, ...]
    page_reads: _PageReads
    ran_lexical: bool = False
    ran_vector: bool = False
    background: QueryBackground | None = None
    english_vector: list[float] | None = None  # the query's vector of the English lane's model


def _run_lanes(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    corpus: str,
    items_qs: Any,
    items_sql: Fragment,
    plan: _LanePlan,
    *,
    offset: int,
    timings: dict[str, float],
) -> _LanesRun:
    """Both lanes (at once when ``plan.parallel``), with the read-ahead while the vector lane finishes.
    Adds each lane's milliseconds to ``timings``."""
    vector_lane = partial(_vector_lane, query, parsed, corpus, items_qs, items_sql, plan.vector_depth)
    pending = lanes.lane_pool().submit(vector_lane) if plan.parallel else None
    english_vector = (
        partial(english.english_query_vector, parsed.text, provider=plan.english) if plan.english else None
    )
    english_pending = lanes.lane_pool().submit(english_vector) if english_vector and plan.parallel else None
    outcome = lexical.LexicalOutcome([])
    if plan.lexical:
        t = time.perf_counter()
        try:
            outcome = lexical.lexical_search(parsed=parsed, corpus=corpus, items_sql=items_sql, limit=plan.depth)
        except BaseException:
            running: list[Future[Any]] = [f for f in (pending, english_pending) if f is not None]
            wait(running)  # never leave a lane running behind an error
            raise
        timings["lexical_ms"] = (time.perf_counter() - t) * 1000
    page_reads = _PageReads(parsed, outcome.expansions)
    if pending is not None:
        _read_ahead(page_reads, outcome.hits, pending, by_item=query.granularity == "item", offset=offset,
                    limit=query.limit)
    vec_hits: list[vector.VectorHit] = []
    degraded: list[str] = []
    background: QueryBackground | None = None
    if plan.vector:
        vec_hits, background, lane_degraded, timings["vector_ms"] = (
            pending.result() if pending is not None else vector_lane()
        )
        degraded.extend(lane_degraded)
    en_vector: list[float] | None = None
    if english_vector is not None:
        en_vector = english_pending.result() if english_pending is not None else english_vector()
    return _LanesRun(
        outcome, vec_hits, tuple(degraded), page_reads, ran_lexical=plan.lexical,
        ran_vector=plan.vector and background is not None, background=background, english_vector=en_vector,
    )


def _read_ahead(
    page_reads: _PageReads,
    lex_hits: list[lexical.LexicalHit],
    pending: Future[tuple[list[vector.VectorHit], QueryBackground | None, list[str], float]],
    *,
    by_item: bool,
    offset: int,
    limit: int,
) -> None:
    """While the vector lane is still running (this core would only wait), read what fusion and the page
    will most likely need: the lexical hits' items, and the chunks and passages of the lexical lane's
    stretch of the page (at 100k items its first 20 keys hold 86% of the fused first page).
    Each step is short and none starts once the lane has answered: the read-ahead never delays fusion."""
    keys = [(h.item_id, h.chunk_id) for h in _first_per_key(lex_hits, by_item=by_item)]
    likely = keys[offset : offset + limit]
    steps: list[Callable[[], object]] = [
        partial(page_reads.read_items, {item_id for item_id, _ in keys[: offset + 2 * limit]}),
        partial(page_reads.read_chunks, {chunk_id for _, chunk_id in likely}),
        *(partial(page_reads.prepare, item_id, chunk_id) for item_id, chunk_id in likely),
        partial(page_reads.read_items, {h.item_id for h in lex_hits}),
    ]
    for step in steps:
        if pending.done():
            break
        step()


def _page(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    corpus: str,
    ordered: list[_Candidate],
    lanes_run: _LanesRun,
    coverage: _Coverage,
    *,
    offset: int,
    fingerprint: str,
    timings: dict[str, float],
    started: float,
    nearest: list[_Candidate],
) -> RetrievalResult:
    """The page of ``ordered`` (the candidates that cleared the threshold) at ``offset``: its hits with their
    passages and missing words, the cursor to the next page, facets over every kept candidate, the nearest
    candidates when none was kept, and the timings (``started``: perf_counter at the start)."""
    total = len(ordered)
    page = ordered[offset : offset + query.limit]
    next_cursor = (
        cursor_encode(offset=offset + query.limit, fingerprint=fingerprint) if offset + query.limit < total else None
    )
    lex = lanes_run.lexical
    shown = page + nearest
    # The words the lanes did not settle are looked up on a lane thread while this one reads the facets and
    # the page's rows and passages (measured at 10k items: the lookup alone added 4-7 ms to a hybrid p50).
    settling = (
        lanes.lane_pool().submit(partial(coverage.settle, shown, lex.expansions, corpus))
        if coverage.unsettled(shown) and settings.SEARCH["LANE_THREADS"]
        and not replicas.read_connection().in_atomic_block
        else None
    )
    try:
        facets = _facets(ordered) if query.with_facets else {}
        lanes_run.page_reads.read_page(shown)
    except BaseException:
        if settling is not None:
            wait([settling])  # never leave the lookup running behind an error
        raise
    if settling is not None:
        settling.result()
    else:
        coverage.settle(shown, lex.expansions, corpus)
    hits = _hits(page, lanes_run.page_reads, coverage)
    partial_match = coverage.partial_match(ordered)
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return RetrievalResult(
        hits=tuple(hits), total=total, partial_match=partial_match, degraded=lanes_run.degraded,
        next_cursor=next_cursor, facets=facets, timings_ms=timings, suggestion=lex.suggestion,
        nearest=tuple(_hits(nearest, lanes_run.page_reads, coverage)),
    )


def _fuse(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    lex_hits: list[lexical.LexicalHit],
    vec_hits: list[vector.VectorHit],
    *,
    reach: int,
    page_reads: _PageReads,
    vector_weight: float,
    english_lane: _EnglishLane | None = None,
    lexical_complete: bool = False,
    depth: int = 0,
) -> tuple[list[_Candidate], FusionEvidence]:
    """Candidates best first, and what ordered them (``FusionEvidence``: each lane's weight and scores, which
    with each candidate's ``lane_scores`` and ``rerank`` let a federated search fuse several knowledge bases'
    hits as one). ``reach``: how many leading places must be exact (offset + limit);
    ``vector_weight``: the vector lane's fusion weight for this query (lane_weights); ``lexical_complete``: the
    lexical lane returned every chunk holding a query word, so a candidate it did not return holds none (BM25
    0: ``fusion.zscore_fuse``'s ``absent``); ``depth``: the lexical lane's. The rerank's item rows come from
    ``page_reads`` (read there when missing)."""
    by_item = query.granularity == "item"
    candidates: dict[int, _Candidate] = {}
    lex_order: list[int] = []
    lex_scored: list[tuple[int, float]] = []
    for hit in _first_per_key(lex_hits, by_item=by_item):
        key = hit.item_id if by_item else hit.chunk_id
        candidates[key] = _Candidate(key, hit.item_id, hit.chunk_id, complete=hit.complete)
        lex_order.append(key)
        lex_scored.append((key, hit.score))
        candidates[key].lanes["lexical"] = len(lex_order)
        candidates[key].lane_scores["lexical"] = hit.score
    vec_order: list[int] = []
    vec_scored: list[tuple[int, float]] = []
    for vec_hit in _first_per_key(vec_hits, by_item=by_item):
        key = vec_hit.item_id if by_item else vec_hit.chunk_id
        vec_order.append(key)
        vec_scored.append((key, vec_hit.similarity))
        cand = candidates.setdefault(key, _Candidate(key, vec_hit.item_id, vec_hit.chunk_id))
        cand.lanes["vector"] = len(vec_order)
        cand.lane_scores["vector"] = vec_hit.similarity
        cand.similarity = vec_hit.similarity
    model = spaces.lane_model() if vec_order else ""
    lexical_lane = LaneEvidence("lexical", 1.0, tuple(score for _, score in lex_scored))
    vector_lane = LaneEvidence("vector", 1.0, tuple(score for _, score in vec_scored))
    if query.mode == "lexical" or not vec_order:
        order = lex_order
        for rank, key in enumerate(order, start=1):
            candidates[key].score = 1.0 / rank
        if order:
            return [candidates[k] for k in order], FusionEvidence(
                "lexical", (lexical_lane,), "", "", len(order), granularity=query.granularity
            )
        return [candidates[k] for k in vec_order], FusionEvidence(
            "vector", (vector_lane,), model, "", len(vec_order), granularity=query.granularity
        )
    if query.mode == "vector" or not lex_order:
        for key in vec_order:
            candidates[key].score = candidates[key].similarity or 0.0
        return [candidates[k] for k in vec_order], FusionEvidence(
            "vector", (vector_lane,), model, "", len(vec_order), granularity=query.granularity
        )
    lists = [lex_scored, vec_scored]
    weights = [settings.SEARCH["LEXICAL_WEIGHT"], vector_weight]
    names = ["lexical", "vector"]
    if english_lane is not None:  # a third opinion on the same candidates (search.engine.english)
        by_chunk = english.english_scores(
            english_lane.vector, provider=english_lane.provider, chunk_ids=[c.chunk_id for c in candidates.values()]
        )
        english_scored = sorted(
            ((key, by_chunk[c.chunk_id]) for key, c in candidates.items() if c.chunk_id in by_chunk),
            key=lambda pair: -pair[1],
        )
        if english_scored:
            lists.append(english_scored)
            weights.append(english_lane.weight)
            names.append("english")
            for key, score in english_scored:
                candidates[key].lane_scores["english"] = score
    absent: list[float | None] = [0.0 if lexical_complete else None] + [None] * (len(lists) - 1)
    _fused_scores(candidates, lists, weights, absent)
    worst = min(candidates.values(), key=lambda c: c.score)
    evidence = FusionEvidence(
        str(settings.SEARCH["FUSION"]),
        tuple(
            LaneEvidence(name, float(weight), tuple(score for _, score in scored), missing)
            for name, weight, scored, missing in zip(names, weights, lists, absent, strict=True)
        ),
        model,
        english_lane.provider.name if english_lane is not None and "english" in names else "",
        len(candidates),
        depth,
        len(lex_hits),
        tuple("lexical" in candidates[key].lanes for key, _ in vec_scored),
        query.granularity,
        tuple(sorted(worst.lane_scores.items())),
    )
    # Rerank factors are at least 1 and at most rerank.max_factor(), so a candidate whose fused score
    # times that maximum stays below the reach-th fused score can never reach the first ``reach`` places:
    # only the others need their signals read and scored. Places past ``reach`` keep the fused order (a
    # later page asks for a larger reach, so every page shown is exact).
    scores = sorted((c.score for c in candidates.values()), reverse=True)
    bound = scores[reach - 1] if len(scores) >= reach else 0.0
    ceiling = rerank.max_factor()
    reachable = [c for c in candidates.values() if c.score * ceiling >= bound]
    page_reads.read_items({c.item_id for c in reachable})
    now = timezone.now()
    for cand in reachable:
        row = page_reads.items.get(cand.item_id)
        if row is not None:
            cand.rerank = rerank.rerank_factor(parsed, row.signals, now)
            cand.score *= cand.rerank
    return sorted(candidates.values(), key=lambda c: (-c.score, c.lanes.get("lexical", 10**9), c.key)), evidence


def _fused_scores(
    candidates: dict[int, _Candidate], lists: list[list[tuple[int, float]]], weights: list[float],
    absent: list[float | None],
) -> None:
    """Each candidate's fused score in [0, 1] (``SEARCH_FUSION``) from the lanes' (key, score) lists, best first:
    on their calibrated scores (z-scores, scaled so the best candidate is 1 and the worst 0), or on their ranks
    (weighted RRF over its maximum). Measured on the three dev sets in docs/benchmarks.md."""
    if settings.SEARCH["FUSION"] == "zscore":
        fused = fusion.zscore_fuse(lists, weights=weights, absent=absent)
        low, high = min(fused.values()), max(fused.values())
        for key, cand in candidates.items():
            cand.score = (fused[key] - low) / (high - low) if high > low else 1.0
        return
    k = settings.SEARCH["RRF_K"]
    ranked = fusion.rrf([[key for key, _ in scored] for scored in lists], k=k, weights=weights)
    top = fusion.rrf_max(k=k, weights=weights)
    for key, cand in candidates.items():
        cand.score = ranked.get(key, 0.0) / top


@dataclass(frozen=True)
class _EnglishLane:
    provider: EmbeddingProvider
    vector: list[float]
    weight: float


def _confide(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    ordered: list[_Candidate],
    lanes_run: _LanesRun,
    coverage: _Coverage,
) -> None:
    """Each candidate's confidence (``search.engine.confidence``), from the lanes' evidence as fusion saw it:
    the head is the set of lanes that ran (both, lexical only, vector only)."""
    if not ordered:
        return
    by_item = query.granularity == "item"
    lex_hits = _first_per_key(lanes_run.lexical.hits, by_item=by_item)
    vec_hits = _first_per_key(lanes_run.vector, by_item=by_item)
    evidence = confidence.query_evidence(
        idfs=lanes_run.lexical.idfs,
        background=lanes_run.background,
        lexical_scores=[h.score for h in lex_hits],
        similarities=[h.similarity for h in vec_hits],
    )
    columns = confidence.Columns.gather(
        [c.key for c in ordered],
        [coverage.masks.get(c.key, 0) for c in ordered],
        lexical=[(h.item_id if by_item else h.chunk_id, h.score, h.title_hit) for h in lex_hits],
        vector=[(h.item_id if by_item else h.chunk_id, h.similarity) for h in vec_hits],
    )
    head: confidence.Head = (
        "hybrid" if lanes_run.ran_lexical and lanes_run.ran_vector
        else "vector" if lanes_run.ran_vector else "lexical"
    )
    matrix = confidence.features(columns, evidence)
    # The lexical head does not depend on the embedding model; outside hybrid and vector searches the active
    # space is not read for it (the table's default holds every language's lexical head).
    model = spaces.lane_model() if lanes_run.ran_vector or query.mode == "hybrid" else "*"
    values = confidence.confidences(matrix, model=model, head=head, query_text=parsed.text)
    for cand, value in zip(ordered, values, strict=True):
        cand.confidence = float(value)
    confidence.record(
        confidence.Recorded(parsed.text, head, [c.key for c in ordered], [c.item_id for c in ordered], matrix)
    )


def _facets(ordered: list[_Candidate]) -> dict[str, dict[str, int]]:
    item_ids = [c.item_id for c in ordered]
    values = page_rows.facet_values(set(item_ids), FACET_FIELDS.values())
    facets: dict[str, Counter[str]] = {name: Counter() for name in FACET_FIELDS}
    for item_id in item_ids:  # chunk granularity counts each chunk, item granularity each item
        for name, value in zip(FACET_FIELDS, values.get(item_id, ()), strict=False):
            if value:
                facets[name][value] += 1
    return {name: dict(counter.most_common()) for name, counter in facets.items()}


def _first_per_key(hits: Sequence[H], *, by_item: bool) -> list[H]:
    """Each fusion key's first hit in lane order: an item's best chunk, or each chunk."""
    seen: set[int] = set()
    firsts = []
    for hit in hits:
        key = hit.item_id if by_item else hit.chunk_id
        if key not in seen:
            seen.add(key)
            firsts.append(hit)
    return firsts


@dataclass
class _PageReads:
    """The rows and passages a search reads after its lanes, each once: some are read ahead (while the
    vector lane runs), the rest when fusion and the page ask for them."""

    parsed: query_parser.ParsedQuery
    expansions: tuple[Any, ...]
    items: dict[int, page_rows.ItemRow] = field(default_factory=dict)
    chunks: dict[int, page_rows.ChunkRow] = field(default_factory=dict)
    prepared: dict[int, tuple[str, list[Span], list[Span]]] = field(default_factory=dict)

    def read_items(self, item_ids: set[int]) -> None:
        self.items.update(page_rows.item_rows(item_ids - self.items.keys()))

    def read_chunks(self, chunk_ids: set[int]) -> None:
        self.chunks.update(page_rows.chunk_rows(chunk_ids - self.chunks.keys()))

    def read_page(self, page: list[_Candidate]) -> None:
        """Every row and passage the page's hits need (each read once; later calls find them here)."""
        self.read_items({c.item_id for c in page})
        self.read_chunks({c.chunk_id for c in page})
        for cand in page:
            self.prepare(cand.item_id, cand.chunk_id)

    def prepare(self, item_id: int, chunk_id: int) -> tuple[str, list[Span], list[Span]] | None:
        """The chunk's passage, its spans and its title's spans (None when the item or chunk is gone)."""
        if chunk_id in self.prepared:
            return self.prepared[chunk_id]
        item, chunk = self.items.get(item_id), self.chunks.get(chunk_id)
        if item is None or chunk is None:
            return None
        passage, spans = passages.make_passage(
            chunk.text, self.parsed, item.language, extra_forms=self.expansions
        )
        self.prepared[chunk_id] = (passage, spans, passages.title_spans(chunk.title, self.parsed))
        return self.prepared[chunk_id]


@dataclass
class _Coverage:
    """Which query words each hit holds (bit i: term i), for ``Hit.missing_words`` and ``partial_match``.

    The lexical lane reports the terms of every chunk it scored; an item holds what any of its chunks
    holds. Page hits the lane did not cover completely (only the vector lane found them, or the words
    are spread over chunks the lane did not return) are settled with one small query (``term_masks``).
    """

    parsed: query_parser.ParsedQuery
    by_item: bool
    masks: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, parsed: query_parser.ParsedQuery, lex_hits: list[lexical.LexicalHit], *, by_item: bool) -> _Coverage:
        coverage = cls(parsed, by_item)
        for hit in lex_hits:
            key = hit.item_id if by_item else hit.chunk_id
            coverage.masks[key] = coverage.masks.get(key, 0) | hit.matched_mask
        return coverage

    @property
    def full(self) -> int:
        return (1 << len(self.parsed.terms)) - 1

    def unsettled(self, page: list[_Candidate]) -> list[int]:
        """Keys of page hits whose words the lanes did not settle (none for a search without words)."""
        if not self.parsed.searchable:
            return []
        return [c.key for c in page if self.masks.get(c.key, 0) != self.full]

    def settle(self, page: list[_Candidate], expansions: tuple[Any, ...], corpus: str) -> None:
        unsettled = self.unsettled(page)
        if unsettled:
            found = lexical.term_masks(self.parsed, expansions, corpus=corpus, ids=unsettled, by_item=self.by_item)
            for key, mask in found.items():
                self.masks[key] = self.masks.get(key, 0) | mask

    def missing_words(self, key: int) -> tuple[str, ...]:
        mask = self.masks.get(key, 0)
        return tuple(t.written for i, t in enumerate(self.parsed.terms) if not mask & (1 << i))

    def partial_match(self, ordered: list[_Candidate]) -> bool:
        """The one definition of ``partial_match`` (``search.types.PARTIAL_MATCH``): the query has words, the
        search found something, and no hit holds every word. Known for every hit the lexical lane scored and
        every hit of this page; a hit past the page that only the vector lane found counts as lacking words
        (the lexical lane ranks chunks that hold every word first, so such a hit is rarely complete)."""
        if not self.parsed.searchable or not ordered:
            return False
        return not any(self.masks.get(c.key, 0) == self.full for c in ordered)


def _hits(page: list[_Candidate], page_reads: _PageReads, coverage: _Coverage) -> list[Hit]:
    if not page:
        return []
    page_reads.read_page(page)  # read already by _page; a no-op unless called on its own
    hits = []
    for cand in page:
        item = page_reads.items.get(cand.item_id)
        if item is None:  # deleted since the lanes read it
            continue
        chunk = page_reads.chunks.get(cand.chunk_id)
        prepared = page_reads.prepare(cand.item_id, cand.chunk_id)
        if chunk is not None and prepared is not None:
            title, summary, toc_path = chunk.title, chunk.summary, chunk.toc_path
            passage, spans, title_spans = prepared
        else:
            (title, summary), toc_path = item.shown_revision(), ""
            passage, spans, title_spans = "", [], passages.title_spans(title, page_reads.parsed)
        hits.append(
            Hit(
                item_id=item.pk,
                external_id=item.external_id,
                slug=item.slug,
                title=title,
                url=item.url,
                content_type=item.content_type,
                primary_domain=item.primary_domain,
                language=item.language,
                updated_at=item.updated_at,
                review_status=item.review_status,
                score=round(cand.score, 6),
                lanes=tuple(lane for lane in LANES if lane in cand.lanes),
                lane_ranks=dict(cand.lanes),
                chunk_id=cand.chunk_id if chunk is not None else None,
                toc_path=toc_path,
                passage=passage,
                passage_spans=tuple(spans),
                title_spans=tuple(title_spans),
                summary=summary,
                ai_keywords=item.ai_keywords,
                superseded=item.superseded,
                similarity=cand.similarity,
                missing_words=coverage.missing_words(cand.key),
                confidence=round(cand.confidence, 4),
                lane_scores=dict(cand.lane_scores),
                rerank=round(cand.rerank, 6),
            )
        )
    return hits


__all__ = ["retrieve", "RetrievalQuery", "RetrievalResult", "Hit", "Span"]
