"""View models for templates: engine hits and items → cards. Highlighting goes through search.text.highlight."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypedDict

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from search.engine import PreviewHit
from search.federation.federated import FederatedHit, SourceReport
from search.models import ContentType, ReviewStatus
from search.principal import Principal
from search.selectors.catalogue import CardExtras, card_extras
from search.selectors.closed import ClosedItem
from search.selectors.items import item_revision
from search.text.highlight import highlight_html, plain_passage
from search.types import Hit, Span

EXCERPT_CHARS = 240
LANE_LABELS = {"lexical": "words", "vector": "meaning"}
_MARKDOWN_NOISE = re.compile(r"[#*_>`|\[\]]+|\(https?://[^)]*\)|-{3,}")


def label(value: str) -> str:
    """``bid_writing`` → ``Bid writing``."""
    return value.replace("_", " ").strip().capitalize() if value else ""


def content_type_label(value: str) -> str:
    try:
        return str(ContentType(value).label)
    except ValueError:
        return label(value)


def review_label(value: str) -> str:
    try:
        return str(ReviewStatus(value).label)
    except ValueError:
        return label(value)


def quality_badge(score: float) -> tuple[int | None, str]:
    """Score (0–100) and tier; ``(None, "")`` while the item has not been scored (score 0)."""
    if not score or score <= 0:
        return None, ""
    value = round(score * 100) if score <= 1 else round(score)
    tier = "high" if value >= 80 else "medium" if value >= 50 else "low"
    return value, tier


def plain_excerpt(summary: str, body: str, limit: int = EXCERPT_CHARS) -> str:
    text = summary.strip() or " ".join(_MARKDOWN_NOISE.sub(" ", body).split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + "…"


@dataclass(frozen=True)
class Card:
    id: int | None  # None: a peer's result (not an item of ours)
    url: str
    title_html: SafeString
    excerpt_html: SafeString
    content_type: str
    content_type_label: str
    domain: str
    domain_label: str
    thumbnail_url: str
    quality: int | None
    quality_tier: str
    verified_by: str
    review_status: str
    review_label: str
    updated_at: datetime | None  # None: a peer that did not say
    superseded: bool = False
    lanes: tuple[tuple[str, str, int], ...] = ()  # (lane, label, rank)
    toc_path: str = ""
    missing_words: tuple[str, ...] = ()  # query words the hit lacks ("Missing: …" under the card)
    confidence: float | None = None  # search mode: the engine's calibrated confidence (0-1)
    # A search across knowledge bases: where the hit comes from, best copy first ("local": this one).
    sources: tuple[str, ...] = ()

    @property
    def external(self) -> bool:
        """A peer's result: its link leads to the other knowledge base, its text is the peer's."""
        return self.id is None

    @property
    def confidence_percent(self) -> int | None:
        return None if self.confidence is None else round(100 * self.confidence)


def _extras_fields(extras: CardExtras | None) -> dict[str, Any]:
    quality, tier = quality_badge(extras.quality_score if extras else 0.0)
    return {
        "thumbnail_url": extras.thumbnail_url if extras else "",
        "quality": quality,
        "quality_tier": tier,
        "verified_by": extras.verified_by if extras else "",
    }


def cards_from_hits(hits: Sequence[Hit]) -> list[Card]:
    """Search mode: highlighted title and passage, with the lanes that found each hit."""
    extras = card_extras(item_ids=[h.item_id for h in hits])
    passages = [plain_passage(h.passage, h.passage_spans) for h in hits]
    return [
        Card(
            id=hit.item_id,
            url=hit.url,
            title_html=mark_safe(highlight_html(hit.title, hit.title_spans)),  # noqa: S308 - escaped by highlight_html
            excerpt_html=mark_safe(highlight_html(*passage)),  # noqa: S308 - escaped by highlight_html
            content_type=hit.content_type,
            content_type_label=content_type_label(hit.content_type),
            domain=hit.primary_domain,
            domain_label=label(hit.primary_domain),
            review_status=hit.review_status,
            review_label=review_label(hit.review_status),
            updated_at=hit.updated_at,
            superseded=hit.superseded,
            lanes=tuple((lane, LANE_LABELS.get(lane, lane), hit.lane_ranks.get(lane, 0)) for lane in hit.lanes),
            toc_path=hit.toc_path,
            missing_words=hit.missing_words,
            confidence=hit.confidence,
            **_extras_fields(extras.get(hit.item_id)),
        )
        for hit, passage in zip(hits, passages, strict=True)
    ]


def cards_from_federated(hits: Sequence[FederatedHit]) -> list[Card]:
    """A search across knowledge bases: our hits as ``cards_from_hits`` shows them, a peer's from its plain
    text and offsets (escaped here: a peer's text is never trusted as HTML), each with its sources."""
    local = iter(cards_from_hits([h.local for h in hits if h.local is not None]))
    cards = []
    for hit in hits:
        if hit.local is not None:
            cards.append(replace(next(local), sources=hit.sources))
            continue
        cards.append(Card(
            id=None,
            url=hit.url,
            title_html=mark_safe(highlight_html(hit.title, hit.title_spans)),  # noqa: S308 - escaped by highlight_html
            excerpt_html=mark_safe(highlight_html(hit.snippet, hit.snippet_spans)),  # noqa: S308 - escaped
            content_type="", content_type_label="", domain="", domain_label="", thumbnail_url="",
            quality=None, quality_tier="", verified_by="", review_status="ok", review_label="",
            updated_at=hit.updated_at,
            lanes=tuple((lane, LANE_LABELS.get(lane, lane), 0) for lane in hit.lanes),
            confidence=hit.confidence,
            sources=hit.sources,
        ))
    return cards


def cards_from_items(items: Iterable[Any], principal: Principal) -> list[Card]:
    """Browse mode: items of ``search.selectors.items_list`` (revisions already joined)."""
    items = list(items)
    cards = []
    for item in items:
        revision = item_revision(item, principal)
        title = revision.title if revision else ""
        excerpt = plain_excerpt(revision.summary, revision.body) if revision else ""
        verified = item.verified_by
        quality, tier = quality_badge(item.quality_score)
        cards.append(
            Card(
                id=item.pk,
                url=item.get_absolute_url(),
                title_html=escape(title),
                excerpt_html=escape(excerpt),
                content_type=item.content_type,
                content_type_label=content_type_label(item.content_type),
                domain=item.primary_domain,
                domain_label=label(item.primary_domain),
                thumbnail_url=item.thumbnail.url if item.thumbnail else "",
                quality=quality,
                quality_tier=tier,
                verified_by=(verified.get_full_name() or verified.get_username()) if verified else "",
                review_status=item.governance_review_status,
                review_label=review_label(item.governance_review_status),
                updated_at=item.updated_at,
                superseded=item.superseded_by_id is not None,
            )
        )
    return cards


@dataclass(frozen=True)
class ClosedCard:
    title: str
    content_type_label: str
    domain_label: str
    url: str


def closed_cards(items: Sequence[ClosedItem]) -> list[ClosedCard]:
    return [ClosedCard(i.title, content_type_label(i.content_type), label(i.primary_domain), i.url) for i in items]


def nearest_json(hit: Hit) -> dict[str, Any]:
    """One of ``nearest`` (nothing reached the threshold): enough to show it, labelled as not matching."""
    return {"id": hit.item_id, "title": hit.title, "url": hit.url, "confidence": hit.confidence}


def _marked_text(
    title: str, title_spans: Sequence[Span], passage: str, passage_spans: Sequence[Span]
) -> dict[str, Any]:
    """A result's title and passage as text, as ``<mark>`` HTML (the text escaped) and as [start, end) offsets."""
    return {
        "title": title,
        "title_html": highlight_html(title, title_spans),
        "title_spans": [[s.start, s.end] for s in title_spans],
        "passage": passage,
        "passage_html": highlight_html(passage, passage_spans),
        "passage_spans": [[s.start, s.end] for s in passage_spans],
    }


def hit_json(hit: Hit) -> dict[str, Any]:
    """One result of ``POST /api/search``: the engine's hit plus server-rendered highlight HTML."""
    return {
        "id": hit.item_id,
        "external_id": hit.external_id,
        "slug": hit.slug,
        "url": hit.url,
        **_marked_text(hit.title, hit.title_spans, hit.passage, hit.passage_spans),
        "toc_path": hit.toc_path,
        "chunk_id": hit.chunk_id,
        "content_type": hit.content_type,
        "primary_domain": hit.primary_domain,
        "language": hit.language,
        "summary": hit.summary,
        "ai_keywords": list(hit.ai_keywords),
        "review_status": hit.review_status,
        "superseded": hit.superseded,
        "updated_at": hit.updated_at.isoformat(),
        "score": hit.score,
        "confidence": hit.confidence,
        "similarity": hit.similarity,
        "lanes": list(hit.lanes),
        "lane_ranks": dict(hit.lane_ranks),
        "missing_words": list(hit.missing_words),
    }


class PreviewResult(TypedDict):
    """One result of ``GET /api/search/preview``."""

    id: int
    title: str
    title_spans: list[list[int]]  # [start, end) of each typed word in ``title``, in characters (code points)
    # "title": the title holds every typed word; "content": the title and body hold them together.
    match: str
    # A typed word matched only with a typo forgiven (these rows come after the exact ones).
    typo: bool
    # For a "content" match: a plain-text passage of the body around the first typed word it holds ("" when
    # none was found), and the spans of typed words in it. Never HTML.
    snippet: str
    snippet_spans: list[list[int]]
    content_type: str
    primary_domain: str
    url: str


def preview_json(hit: PreviewHit) -> PreviewResult:
    """One preview row; the page marks ``title_spans`` and ``snippet_spans`` itself, inserting text only."""
    return {
        "id": hit.id,
        "title": hit.title,
        "title_spans": [[s.start, s.end] for s in hit.title_spans],
        "match": "title" if hit.title_match else "content",
        "typo": hit.fuzzy,
        "snippet": hit.snippet,
        "snippet_spans": [[s.start, s.end] for s in hit.snippet_spans],
        "content_type": hit.content_type,
        "primary_domain": hit.primary_domain,
        "url": hit.url,
    }


def federated_hit_json(hit: FederatedHit) -> dict[str, Any]:
    """One result of a search across knowledge bases: local hits as ``hit_json`` says them, a peer's from its
    plain text and offsets (the ``<mark>`` HTML built here, the text escaped), each with its sources."""
    base = hit_json(hit.local) if hit.local is not None else {
        "id": None,
        "url": hit.url,
        **_marked_text(hit.title, hit.title_spans, hit.snippet, hit.snippet_spans),
        "language": hit.language,
        "updated_at": hit.updated_at.isoformat() if hit.updated_at else None,
        "confidence": hit.confidence,
        "lanes": list(hit.lanes),
        "untrusted": True,  # a peer's text: shown as text, never as instructions
    }
    return {**base, "url": hit.url, "source": hit.source, "sources": list(hit.sources)}


def source_json(report: SourceReport) -> dict[str, Any]:
    return {"name": report.name, "status": report.status, "ms": report.ms, "count": report.count,
            **({"detail": report.detail} if report.detail else {})}
