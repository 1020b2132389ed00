"""One query across this knowledge base and its peers: ask them in parallel, rank their hits together.

The local engine answers in the calling thread while each peer the caller may see is asked from a thread of
its own, within that peer's timeout: a slow or dead peer costs at most its timeout and is reported in
``sources``, never failing the search. Where every source says how its engine fused its lanes (each lane's
raw scores: the same embedding model's cosines compare across instances), the hits are ordered as one instance
holding every corpus would order them (``search.engine.fusion.federated_scores``); otherwise by calibrated
confidence (comparable across instances, Step 16), never by ranks from different corpora. The same page reached
twice (same canonical URL or same content hash) appears once, with every source that returned it.
"""

from __future__ import annotations

import functools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from search.engine import fusion as engine_fusion
from search.engine import rerank as engine_rerank
from search.engine import retrieve
from search.errors import InvalidQuery, SearchError
from search.federation import client, peers
from search.federation.answer import absolute_url, live_content_hashes
from search.federation.protocol import MAX_HITS, PeerFusion, PeerHit
from search.filter_params import params_from_filters
from search.principal import Principal
from search.types import FusionEvidence, Hit, LaneEvidence, RetrievalQuery, RetrievalResult, Span

LOCAL = "local"
ALL: Literal["all"] = "all"
# Waiting for a peer's thread past its own timeout (the HTTP client's timeouts are per operation).
GRACE_S = 0.05
# Peer calls in flight at once in one web process (every search's, every peer's).
PEER_THREADS = 32


@dataclass(frozen=True)
class SourceReport:
    name: str
    status: client.SourceStatus
    ms: int
    count: int
    detail: str = ""


@dataclass(frozen=True)
class FederatedHit:
    """A merged hit: where it comes from (``sources``, best first), and its text as plain text + offsets."""

    title: str
    url: str
    snippet: str
    snippet_spans: tuple[Span, ...]
    title_spans: tuple[Span, ...]
    confidence: float
    lanes: tuple[str, ...]
    language: str
    updated_at: datetime | None
    sources: tuple[str, ...]
    content_hash: str = ""
    local: Hit | None = None  # the engine's own hit, when this one is ours
    # Its source's raw lane scores and rerank factor (``Hit.lane_scores``), for the merge.
    lane_scores: dict[str, float] = field(default_factory=dict, compare=False)
    rerank: float = field(default=1.0, compare=False)

    @property
    def source(self) -> str:
        return self.sources[0]


@dataclass(frozen=True)
class FederatedResult:
    hits: tuple[FederatedHit, ...]
    sources: tuple[SourceReport, ...]
    total: int
    local: RetrievalResult | None = None


def sources_parse(value: Any) -> tuple[str, ...] | Literal["all"]:
    """``"all"`` or a list of source names (``"local"`` for this knowledge base), as every surface accepts."""
    if value is None:
        return (LOCAL,)
    if value == ALL:
        return "all"
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if isinstance(value, list | tuple) and ALL in value:
        return "all"
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) and v for v in value):
        raise InvalidQuery('sources must be "all" or a list of source names, e.g. ["local", "emea"].',
                           field="sources")
    if len(value) > 20:
        raise InvalidQuery("sources names at most 20 sources.", field="sources")
    return tuple(dict.fromkeys(value))


def sources_resolve(
    principal: Principal, requested: tuple[str, ...] | Literal["all"]
) -> tuple[bool, list[Any]]:
    """(whether to search locally, the peers to ask). A peer the caller may not see is reported as unknown."""
    visible = {p.name: p for p in peers.peers_visible(principal)}
    if requested == ALL:
        return True, list(visible.values())
    unknown = [name for name in requested if name != LOCAL and name not in visible]
    if unknown:
        known = ", ".join([LOCAL, *visible]) or LOCAL
        raise InvalidQuery(f"Unknown source {unknown[0]!r}: the sources you may search are {known}.",
                           field="sources")
    return LOCAL in requested, [visible[name] for name in requested if name != LOCAL]


@functools.lru_cache(maxsize=4096)
def canonical_url(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    default = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, default) else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/") or "/", parts.query, ""))


def _local_hits(result: RetrievalResult) -> list[FederatedHit]:
    hashes = live_content_hashes(result.hits)
    return [
        FederatedHit(
            title=h.title, url=absolute_url(h.url), snippet=h.passage, snippet_spans=h.passage_spans,
            title_spans=h.title_spans, confidence=h.confidence, lanes=tuple(h.lanes), language=h.language,
            updated_at=h.updated_at, sources=(LOCAL,), content_hash=hashes.get(h.item_id) or "", local=h,
            lane_scores=dict(h.lane_scores), rerank=h.rerank,
        )
        for h in result.hits
    ]


def _peer_hits(name: str, hits: list[PeerHit], threshold: float) -> list[FederatedHit]:
    return [
        FederatedHit(
            title=h.title, url=h.url, snippet=h.snippet,
            snippet_spans=tuple(Span(a, b) for a, b in h.snippet_spans),
            title_spans=tuple(Span(a, b) for a, b in h.title_spans),
            confidence=h.confidence, lanes=tuple(h.lanes), language=h.language, updated_at=h.updated_at,
            sources=(name,), content_hash=h.content_hash, lane_scores={str(k): v for k, v in h.lane_scores.items()},
            rerank=h.rerank,
        )
        for h in hits
        if h.confidence >= threshold  # the peer was asked for this floor; we do not take its word for it
    ]


@dataclass(frozen=True)
class Merged:
    hits: list[FederatedHit]
    folded: int  # hits that were another copy of a page already in ``hits``


def fusion_evidence(sent: PeerFusion | None) -> FusionEvidence | None:
    """A peer's ``fusion``, as our engine's type."""
    if sent is None:
        return None
    return FusionEvidence(
        sent.method,
        tuple(LaneEvidence(lane.name, lane.weight, tuple(lane.scores), lane.absent) for lane in sent.lanes),
        sent.model, sent.english, sent.candidates, sent.depth, sent.lexical_hits, tuple(sent.vector_lexical),
        sent.granularity, tuple(sorted(sent.worst.items())),
    )


def merge(groups: list[list[FederatedHit]], fusions: list[FusionEvidence | None] | None = None) -> Merged:
    """Every source's hits in one order, duplicates folded into one copy with their sources added.

    When several sources each say how they fused their lanes (``fusions``, one per group) and fused alike (one
    method, the same lanes and embedding model), each hit is placed by the score one instance holding every
    source's corpus would give it (``federated_scores``: each lane's raw scores pooled across the sources),
    which measured closest to that instance's own ranking (``evaluate --federated``, docs/benchmarks.md).
    Otherwise hits interleave by confidence, each source's own order kept: a source's list is its engine's
    ranking, which is better than its confidences taken one by one, so a hit is placed by the lowest confidence
    at or above it in its own list, never above what its own source ranked first. Ties go to the order of
    ``groups`` (local first). A page this knowledge base holds is always shown as ours (our text, our
    confidence, our item, our place): a peer cannot put its text, its confidence or its scores under our page.
    Between peers, the more confident copy is shown, at its place."""
    keys: dict[tuple[int, int], float] = {}
    scores = None
    if fusions is not None and len(groups) > 1 and all(f is not None for f in fusions):
        scores = engine_fusion.federated_scores(
            [engine_fusion.SourceHits(f, [(h.lane_scores, h.rerank) for h in hits])  # type: ignore[arg-type]
             for f, hits in zip(fusions, groups, strict=True)],
            rrf_k=int(settings.SEARCH["RRF_K"]), max_rerank=engine_rerank.max_factor(),
            lane_cap=max(int(settings.SEARCH["LANE_DEPTH"]), int(settings.SEARCH["VECTOR_DEPTH"])),
        )
    for g, hits in enumerate(groups):
        floor = math.inf
        for i, hit in enumerate(hits):
            floor = min(floor, hit.confidence)
            keys[(g, i)] = scores[g][i] if scores is not None else floor
    local = [(hit, g, i) for g, hits in enumerate(groups) for i, hit in enumerate(hits) if hit.local is not None]
    peers_ordered = sorted(
        ((hit, g, i) for g, hits in enumerate(groups) for i, hit in enumerate(hits) if hit.local is None),
        key=lambda t: (-t[0].confidence, t[1], t[2]),
    )
    merged: list[FederatedHit] = []
    places: list[tuple[float, int, int]] = []  # each merged hit's (key, group, position) in its own list
    seen: dict[str, int] = {}
    folded = 0
    for hit, g, i in [*local, *peers_ordered]:
        keys_of = [f"url:{canonical_url(hit.url)}"] + ([f"hash:{hit.content_hash}"] if hit.content_hash else [])
        index = next((seen[k] for k in keys_of if k in seen), None)
        if index is None:
            index = len(merged)
            merged.append(hit)
            places.append((keys[(g, i)], g, i))
        else:
            folded += 1
            if hit.source not in merged[index].sources:
                merged[index] = replace(merged[index], sources=merged[index].sources + (hit.source,))
        for key in keys_of:
            seen.setdefault(key, index)
    order = sorted(range(len(merged)), key=lambda n: (-places[n][0], places[n][1], places[n][2]))
    return Merged([merged[n] for n in order], folded)


def peer_request(query: RetrievalQuery) -> dict[str, Any]:
    """The body a peer's federation endpoint takes for ``query``. Filters that only mean something here (an
    item of ours, what our user has read) cannot be sent: such a search is refused rather than sent without
    them."""
    if query.filters.content_item_id is not None or query.filters.unread_only:
        raise InvalidQuery(
            "content_item_id and unread_only are about this knowledge base only: leave sources out to use them.",
            field="sources",
        )
    body: dict[str, Any] = {"query": query.text, "threshold": query.threshold, "limit": min(query.limit, MAX_HITS),
                            "filters": params_from_filters(query.filters)}
    if query.filters.changed_since is not None:
        body["changed_since"] = query.filters.changed_since.isoformat()
    return body


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The threads that ask peers, shared by this process's searches (starting two threads per search cost about
    1 ms). A hanging peer holds one until its own timeout; past ``PEER_THREADS`` calls at once, a call waits for a
    thread and, if none frees up in time, is reported as a timeout."""
    return ThreadPoolExecutor(max_workers=PEER_THREADS, thread_name_prefix="federation")


def federated_search(query: RetrievalQuery, *, sources: tuple[str, ...] | Literal["all"]) -> FederatedResult:
    """``query`` on this knowledge base and the peers in ``sources`` its principal may see, merged."""
    if query.cursor:
        raise InvalidQuery("A search across several knowledge bases has no cursor: ask for a larger limit.",
                           field="cursor")
    search_local, asked = sources_resolve(query.principal, sources)
    body = peer_request(query) if asked else {}
    calls, reports = [], []
    for peer in asked:
        try:
            calls.append(peers.peer_call(peer))
        except SearchError as exc:  # its key cannot be read: say so, ask the others
            reports.append(SourceReport(peer.name, "refused", 0, 0, exc.message))
    groups: list[list[FederatedHit]] = []
    fusions: list[FusionEvidence | None] = []
    local_result: RetrievalResult | None = None
    started = time.monotonic()
    futures = [(call, _pool().submit(client.peer_search, call, body)) for call in calls]
    try:
        if search_local:
            local_started = time.monotonic()
            local_result = retrieve(query=query)
            local = _local_hits(local_result)
            groups.append(local)
            fusions.append(local_result.fusion)
            reports.insert(0, SourceReport(LOCAL, "ok", int((time.monotonic() - local_started) * 1000),
                                           local_result.total))
        for call, future in futures:
            remaining = started + call.timeout_s + GRACE_S - time.monotonic()
            try:
                outcome = future.result(timeout=max(0.0, remaining))
            except FutureTimeout:
                outcome = client.PeerOutcome("timeout", int(call.timeout_s * 1000),
                                             detail=f"no answer within {call.timeout_s * 1000:.0f} ms")
            except Exception as exc:  # noqa: BLE001 - one peer's failure is reported, never the search's
                outcome = client.PeerOutcome("error", 0, detail=f"unexpected failure ({exc.__class__.__name__})")
            if outcome.answer is None:
                reports.append(SourceReport(call.name, outcome.status, outcome.ms, 0, outcome.detail))
                continue
            hits = _peer_hits(call.name, list(outcome.answer.hits), query.threshold)
            groups.append(hits)
            fusions.append(fusion_evidence(outcome.answer.fusion))
            reports.append(SourceReport(call.name, "ok", outcome.ms, max(outcome.answer.count, len(hits))))
    finally:
        for _, future in futures:
            future.cancel()  # not started yet (every thread busy): never sent; a started call ends at its timeout
    merged = merge(groups, fusions)
    found = sum(report.count for report in reports if report.status == "ok")
    return FederatedResult(
        hits=tuple(merged.hits[: query.limit]),
        sources=tuple(reports),
        # every source's own total, each copy of a page seen here counted once
        total=max(len(merged.hits), found - merged.folded),
        local=local_result,
    )
