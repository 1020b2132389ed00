"""The one retrieval entry point: ``retrieve(query=RetrievalQuery) -> RetrievalResult``.

lexical lane + vector lane → weighted RRF → rerank → page; access and filters are applied in SQL
inside each lane (before any cut), so no surface can leak and no page comes back short.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections import Counter
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from search import query_parser
from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable, InvalidCursor, InvalidQuery
from search.models import Chunk, Citation, ContentItem
from search.services import fusion, lanes, lexical, passages, rerank, vector
from search.signals import search_performed
from search.types import MAX_LIMIT, Hit, RetrievalQuery, RetrievalResult, Span

logger = logging.getLogger(__name__)

HIT_ITEM_FIELDS = (
    "pk", "external_id", "slug", "content_type", "primary_domain", "language", "updated_at",
    "governance_review_status", "ai_keywords", "superseded_by_id",
    "latest_revision__title", "latest_revision__summary", "live_revision__title", "live_revision__summary",
)
FACET_FIELDS = {"domain": "primary_domain", "content_type": "content_type", "layer": "layer", "language": "language"}


@dataclass
class _Candidate:
    key: int
    item_id: int
    chunk_id: int
    lanes: dict[str, int] = field(default_factory=dict)
    score: float = 0.0
    complete: bool | None = None
    similarity: float | None = None


def _validate(query: RetrievalQuery) -> None:
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidQuery(f"limit must be between 1 and {MAX_LIMIT} (got {query.limit}).", field="limit")
    if not 0.0 <= query.threshold <= 1.0:
        raise InvalidQuery(f"threshold must be between 0 and 1 (got {query.threshold}).", field="threshold")
    if query.granularity not in ("item", "chunk"):
        raise InvalidQuery("granularity must be 'item' or 'chunk'.", field="granularity")
    if query.mode not in ("hybrid", "lexical", "vector"):
        raise InvalidQuery("mode must be 'hybrid', 'lexical' or 'vector'.", field="mode")
    if query.corpus not in ("live", "latest"):
        raise InvalidQuery("corpus must be 'live' or 'latest'.", field="corpus")
    days = query.filters.review_due_within_days
    if days is not None and not 1 <= days <= 365:
        raise InvalidQuery("review_due_within_days must be between 1 and 365.", field="review_due_within_days")


def _fingerprint(query: RetrievalQuery, corpus: str) -> str:
    payload = repr((query.text, corpus, query.principal.cache_key, query.filters, query.granularity, query.mode,
                    query.threshold, query.similar_to))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def encode_cursor(offset: int, fingerprint: str) -> str:
    raw = json.dumps({"o": offset, "f": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, fingerprint: str) -> int:
    if not cursor:
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        offset = int(data["o"])
        if data["f"] != fingerprint or offset < 0 or offset > 100_000:
            raise ValueError
    except (ValueError, KeyError, TypeError, UnicodeError, json.JSONDecodeError):
        raise InvalidCursor(
            "cursor is not valid for this search; start again without a cursor (cursors belong to one query "
            "and its filters).",
            field="cursor",
        ) from None
    return offset


def effective_corpus(query: RetrievalQuery) -> str:
    """Only staff and API keys may search drafts; everyone else gets the live corpus."""
    return query.corpus if query.principal.can_read_drafts else "live"


def searchable_items(query: RetrievalQuery, corpus: str) -> Any:
    """The queryset of items this search may return: access, corpus, archive and every filter."""
    return (
        ContentItem.objects.searchable(query.principal, corpus)
        .apply_filters(query.filters, user_id=query.principal.user_id)
        .order_by()
    )


def _vector_lane(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    corpus: str,
    items_qs: Any,
    items_sql: tuple[str, Any],
    depth: int,
) -> tuple[list[vector.VectorHit], list[str], float]:
    """The vector lane's hits, what degraded it, and its milliseconds."""
    t = time.perf_counter()
    degraded: list[str] = []
    vec_hits: list[vector.VectorHit] = []
    try:
        if query.similar_to is not None:
            qvec = vector.item_vector(query.similar_to, corpus)
            if qvec is None or not items_qs.model.objects.searchable(query.principal, corpus).filter(
                pk=query.similar_to
            ).exists():
                qvec = None
        else:
            qvec = vector.query_embedding(parsed.text)
        if qvec is not None:
            vec_hits = vector.vector_search(
                vector=qvec, corpus=corpus, items_sql=items_sql, limit=depth, exclude_item=query.similar_to
            )
            vec_hits = [h for h in vec_hits if h.similarity >= query.threshold]
    except EmbeddingUnavailable as exc:
        logger.warning("vector lane unavailable: %s", exc)
        degraded.append("embedding_unavailable")
    except EmbeddingModelMismatch as exc:
        logger.error("vector lane refused: %s", exc)
        degraded.append("embedding_model_mismatch")
    return vec_hits, degraded, (time.perf_counter() - t) * 1000


def retrieve(*, query: RetrievalQuery) -> RetrievalResult:
    _validate(query)
    started = time.perf_counter()
    parsed = query_parser.parse(query.text)
    if not parsed.searchable and query.similar_to is None:
        return RetrievalResult()
    corpus = effective_corpus(query)
    fingerprint = _fingerprint(query, corpus)
    offset = decode_cursor(query.cursor, fingerprint)
    items_qs = searchable_items(query, corpus)
    try:
        items_sql = items_qs.values("id").query.sql_with_params()
    except EmptyResultSet:  # the filters can match nothing (e.g. an id past the column's range)
        return RetrievalResult()
    depth = max(settings.SEARCH["LANE_DEPTH"], offset + query.limit)
    timings: dict[str, float] = {}
    degraded: list[str] = []

    wants_lexical = parsed.searchable and query.mode != "vector"
    wants_vector = query.mode != "lexical" or query.similar_to is not None

    # Beside a lexical lane the vector lane may hand fusion fewer hits (SEARCH_VECTOR_DEPTH: HNSW cost grows
    # with the depth; 100 measured -9 ms at 100k items but -0.0026 nDCG@10, so the default matches
    # LANE_DEPTH); alone (vector mode, similar_to) it always goes to LANE_DEPTH.
    vector_depth = (
        max(settings.SEARCH["VECTOR_DEPTH"], offset + query.limit) if wants_lexical else depth
    )

    def vector_lane() -> tuple[list[vector.VectorHit], list[str], float]:
        return _vector_lane(query, parsed, corpus, items_qs, items_sql, vector_depth)

    # Both lanes at once when a lane thread is free (search.services.lanes). A lane thread sees committed
    # rows only, so never from inside a transaction (tests, a caller's atomic block).
    pending = (
        lanes.lane_pool().submit(vector_lane)
        if wants_lexical and wants_vector and settings.SEARCH["LANE_THREADS"] and not connection.in_atomic_block
        else None
    )
    lex_hits: list[lexical.LexicalHit] = []
    suggestion: str | None = None
    expansions: tuple[Any, ...] = ()
    if wants_lexical:
        t = time.perf_counter()
        try:
            outcome = lexical.lexical_search(parsed=parsed, corpus=corpus, items_sql=items_sql, limit=depth)
        except BaseException:
            if pending is not None:
                wait([pending])  # never leave the lane running behind an error
            raise
        lex_hits, suggestion, expansions = outcome.hits, outcome.suggestion, outcome.expansions
        timings["lexical_ms"] = (time.perf_counter() - t) * 1000

    vec_hits: list[vector.VectorHit] = []
    if wants_vector:
        vec_hits, lane_degraded, timings["vector_ms"] = pending.result() if pending is not None else vector_lane()
        degraded.extend(lane_degraded)

    ordered = _fuse(query, parsed, lex_hits, vec_hits, reach=offset + query.limit)
    total = len(ordered)
    page = ordered[offset : offset + query.limit]
    next_cursor = encode_cursor(offset + query.limit, fingerprint) if offset + query.limit < total else None
    facets = _facets(ordered) if query.with_facets else {}
    hits = _hits(page, parsed, expansions)
    partial = any(c.complete is False for c in page)
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    result = RetrievalResult(
        hits=tuple(hits), total=total, partial_match=partial, degraded=tuple(degraded), next_cursor=next_cursor,
        facets=facets, timings_ms=timings, suggestion=suggestion,
    )
    search_performed.send(sender=RetrievalQuery, query=query, result=result, corpus=corpus)
    return result


def _fuse(
    query: RetrievalQuery,
    parsed: query_parser.ParsedQuery,
    lex_hits: list[lexical.LexicalHit],
    vec_hits: list[vector.VectorHit],
    *,
    reach: int,
) -> list[_Candidate]:
    """Candidates best first. ``reach``: how many leading places must be exact (offset + limit)."""
    by_item = query.granularity == "item"
    candidates: dict[int, _Candidate] = {}
    lex_order: list[int] = []
    for hit in lex_hits:
        key = hit.item_id if by_item else hit.chunk_id
        if key in candidates:
            continue
        candidates[key] = _Candidate(key, hit.item_id, hit.chunk_id, complete=hit.complete)
        lex_order.append(key)
        candidates[key].lanes["lexical"] = len(lex_order)
    vec_order: list[int] = []
    seen_vec: set[int] = set()
    for hit in vec_hits:
        key = hit.item_id if by_item else hit.chunk_id
        if key in seen_vec:
            continue
        seen_vec.add(key)
        vec_order.append(key)
        cand = candidates.setdefault(key, _Candidate(key, hit.item_id, hit.chunk_id))
        cand.lanes["vector"] = len(vec_order)
        cand.similarity = hit.similarity
    if query.mode == "lexical" or not vec_order:
        order = lex_order
        for rank, key in enumerate(order, start=1):
            candidates[key].score = 1.0 / rank
        return [candidates[k] for k in order] if order else [candidates[k] for k in vec_order]
    if query.mode == "vector" or not lex_order:
        for key in vec_order:
            candidates[key].score = candidates[key].similarity or 0.0
        return [candidates[k] for k in vec_order]
    weights = [settings.SEARCH["LEXICAL_WEIGHT"], settings.SEARCH["VECTOR_WEIGHT"]]
    k = settings.SEARCH["RRF_K"]
    fused = fusion.rrf([lex_order, vec_order], k=k, weights=weights)
    top = fusion.rrf_max(k=k, weights=weights)
    for key, cand in candidates.items():
        cand.score = fused.get(key, 0.0) / top
    # Rerank factors are at least 1 and at most rerank.max_factor(), so a candidate whose fused score
    # times that maximum stays below the reach-th fused score can never reach the first ``reach`` places:
    # only the others need their signals read and scored. Places past ``reach`` keep the fused order (a
    # later page asks for a larger reach, so every page shown is exact).
    scores = sorted((c.score for c in candidates.values()), reverse=True)
    bound = scores[reach - 1] if len(scores) >= reach else 0.0
    ceiling = rerank.max_factor()
    reachable = [c for c in candidates.values() if c.score * ceiling >= bound]
    signals = _signals({c.item_id for c in reachable})
    now = timezone.now()
    for cand in reachable:
        item_signals = signals.get(cand.item_id)
        if item_signals:
            cand.score *= rerank.rerank_factor(parsed, item_signals, now)
    return sorted(candidates.values(), key=lambda c: (-c.score, c.lanes.get("lexical", 10**9), c.key))


def _signals(item_ids: set[int]) -> dict[int, rerank.ItemSignals]:
    rows = ContentItem.objects.filter(pk__in=item_ids).values(
        "pk", "latest_revision__title", "latest_revision__summary", "author_name", "ai_keywords", "updated_at",
        "language",
    )
    wins = {
        r["item_id"]: r
        for r in Citation.objects.filter(item_id__in=item_ids)
        .values("item_id")
        .annotate(won=Count("pk", filter=Q(outcome="won")), decided=Count("pk", filter=~Q(outcome="pending")))
    }
    return {
        r["pk"]: rerank.ItemSignals(
            title=r["latest_revision__title"] or "",
            summary=r["latest_revision__summary"] or "",
            author_name=r["author_name"] or "",
            ai_keywords=tuple(r["ai_keywords"] or ()),
            updated_at=r["updated_at"],
            language=r["language"],
            won=wins.get(r["pk"], {}).get("won", 0),
            decided=wins.get(r["pk"], {}).get("decided", 0),
        )
        for r in rows
    }


def _facets(ordered: list[_Candidate]) -> dict[str, dict[str, int]]:
    item_ids = [c.item_id for c in ordered]
    rows = ContentItem.objects.filter(pk__in=set(item_ids)).values("pk", *FACET_FIELDS.values())
    by_pk = {r["pk"]: r for r in rows}
    facets: dict[str, Counter[str]] = {name: Counter() for name in FACET_FIELDS}
    for item_id in item_ids:  # chunk granularity counts each chunk, item granularity each item
        row = by_pk.get(item_id)
        if row:
            for name, column in FACET_FIELDS.items():
                if row[column]:
                    facets[name][row[column]] += 1
    return {name: dict(counter.most_common()) for name, counter in facets.items()}


def _hits(page: list[_Candidate], parsed: query_parser.ParsedQuery, expansions: tuple[Any, ...] = ()) -> list[Hit]:
    if not page:
        return []
    # Only what a hit shows: revision bodies and the item's bookkeeping columns stay in the database.
    items = {
        i.pk: i
        for i in ContentItem.objects.filter(pk__in={c.item_id for c in page})
        .select_related("latest_revision", "live_revision")
        .only(*HIT_ITEM_FIELDS)
        .order_by()
    }
    chunks = {
        c.pk: c
        for c in Chunk.objects.filter(pk__in={c.chunk_id for c in page}).select_related("revision").only(
            "pk", "text", "toc_path", "revision__title", "revision__summary", "revision_id"
        ).order_by()
    }
    hits = []
    for cand in page:
        item = items[cand.item_id]
        chunk = chunks.get(cand.chunk_id)
        revision = chunk.revision if chunk else (item.live_revision or item.latest_revision)
        title = revision.title if revision else ""
        text = chunk.text if chunk else ""
        passage, spans = passages.make_passage(text, parsed, item.language, extra_forms=expansions)
        hits.append(
            Hit(
                item_id=item.pk,
                external_id=item.external_id,
                slug=item.slug,
                title=title,
                url=item.get_absolute_url(),
                content_type=item.content_type,
                primary_domain=item.primary_domain,
                language=item.language,
                updated_at=item.updated_at,
                review_status=item.governance_review_status,
                score=round(cand.score, 6),
                lanes=tuple(lane for lane in ("lexical", "vector") if lane in cand.lanes),
                lane_ranks=dict(cand.lanes),
                chunk_id=cand.chunk_id if chunk else None,
                toc_path=chunk.toc_path if chunk else "",
                passage=passage,
                passage_spans=tuple(spans),
                title_spans=tuple(passages.title_spans(title, parsed)),
                summary=revision.summary if revision else "",
                ai_keywords=tuple(item.ai_keywords),
                superseded=item.superseded_by_id is not None,
                similarity=cand.similarity,
            )
        )
    return hits


__all__ = ["retrieve", "RetrievalQuery", "RetrievalResult", "Hit", "Span"]
