"""This instance's side of federation: the answer ``POST /api/federation/search`` gives a peer's key.

It is the local engine's search, never federated further (no loops), on the live corpus whatever the key may
read here (a peer shows our results to its own users: drafts stay home), with the key's scope deciding which
items it sees. Text is plain text with offsets; URLs are absolute (``SITE_URL``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from django.conf import settings
from pydantic import ValidationError

from search.embeddings.spaces import searched_space
from search.engine import retrieve
from search.federation.protocol import (
    MAX_HITS,
    PROTOCOL_VERSION,
    PeerAnswer,
    PeerFusion,
    PeerHit,
    PeerInfo,
    PeerLane,
)
from search.models import ContentItem
from search.types import FusionEvidence, Hit, RetrievalQuery

logger = logging.getLogger(__name__)


def product_version() -> str:
    try:
        return metadata.version("kb-search")
    except metadata.PackageNotFoundError:  # a source tree that was not installed
        return "unknown"


def absolute_url(path: str) -> str:
    return path if path.startswith(("http://", "https://")) else settings.SITE_URL + path


def live_content_hashes(hits: Sequence[Hit]) -> dict[int, str]:
    """The published text's hash of each hit's item (duplicates across instances share it)."""
    rows = ContentItem.objects.filter(pk__in=[h.item_id for h in hits]).values_list("pk", "live_revision__content_hash")
    return {pk: content_hash or "" for pk, content_hash in rows}


def federation_answer(query: RetrievalQuery) -> dict[str, Any]:
    """The answer to a peer: ``query`` on the live corpus, at most ``MAX_HITS`` hits (JSON-ready)."""
    query = RetrievalQuery(
        text=query.text, principal=query.principal, corpus="live", filters=query.filters,
        limit=min(query.limit, MAX_HITS), threshold=query.threshold, surface="federation",
    )
    result = retrieve(query=query)
    hashes = live_content_hashes(result.hits)
    hits = [
        PeerHit(
            title=hit.title,
            url=absolute_url(hit.url),
            snippet=hit.passage,
            snippet_spans=[(s.start, s.end) for s in hit.passage_spans],
            title_spans=[(s.start, s.end) for s in hit.title_spans],
            confidence=hit.confidence,
            lanes=list(hit.lanes),
            language=hit.language,
            updated_at=hit.updated_at,
            content_hash=hashes.get(hit.item_id) or "",
            lane_scores={name: round(score, 6) for name, score in hit.lane_scores.items()},  # type: ignore[misc]
            rerank=hit.rerank,
        )
        for hit in result.hits
    ]
    try:
        answer = PeerAnswer(
            instance=settings.FEDERATION_INSTANCE_NAME, version=product_version(), protocol=PROTOCOL_VERSION,
            count=result.total, hits=hits, fusion=peer_fusion(result.fusion),
        )
    except ValidationError as exc:  # never fail a peer's search over the merge's evidence: it merges by confidence
        logger.warning("federation answer sent without its fusion evidence: %s", exc.errors()[0]["msg"])
        answer = PeerAnswer(
            instance=settings.FEDERATION_INSTANCE_NAME, version=product_version(), protocol=PROTOCOL_VERSION,
            count=result.total, hits=[hit.model_copy(update={"lane_scores": {}, "rerank": 1.0}) for hit in hits],
        )
    return answer.model_dump(mode="json")


def peer_fusion(evidence: FusionEvidence | None) -> PeerFusion | None:
    """What our fusion saw, as a peer sends it (scores rounded to 6 decimals, as each hit's): 5–10 kB at the
    default lane depths, up to about 80 kB at their maximum."""
    if evidence is None:
        return None
    lanes = [
        PeerLane(
            name=lane.name,  # type: ignore[arg-type]
            weight=lane.weight, scores=[round(s, 6) for s in lane.scores], absent=lane.absent,
        )
        for lane in evidence.lanes
    ]
    return PeerFusion(
        method=evidence.method,  # type: ignore[arg-type]
        lanes=lanes, model=evidence.model, english=evidence.english, candidates=evidence.candidates,
        depth=evidence.depth, lexical_hits=evidence.lexical_hits, vector_lexical=list(evidence.vector_lexical),
        granularity=evidence.granularity,  # type: ignore[arg-type]
        worst={name: round(score, 6) for name, score in evidence.worst},  # type: ignore[misc]
    )


def federation_info() -> dict[str, Any]:
    """``GET /api/federation/info``: who we are and what we run (``federation_peer check`` on a peer)."""
    return PeerInfo(
        instance=settings.FEDERATION_INSTANCE_NAME, version=product_version(), protocol=PROTOCOL_VERSION,
        embedding_model=searched_space()[0],
    ).model_dump(mode="json")
