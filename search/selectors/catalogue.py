"""Reads the browse page needs beside ranked retrieval: domain counts, filter choices, card extras.

Counts that feed suggestions (top domains, popular topics) are computed over what an anonymous
visitor may read (public, live, not archived, not superseded), so one cached answer serves everyone
and never reveals labels of restricted items.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import Count

from search import replicas
from search.engine.scope import corpus_for
from search.filters import FILTER_COLUMNS, LIST_FILTERS
from search.models import ContentItem
from search.principal import ANONYMOUS, Principal

TOP_DOMAINS_TTL_S = 24 * 3600
POPULAR_TOPICS_TTL_S = 3600
FILTER_OPTIONS_TTL_S = 600
# Fields offered as choices in the filter panel: URL parameter → ContentItem column.
OPTION_FIELDS = {name: FILTER_COLUMNS[name] for name in LIST_FILTERS}


@dataclass(frozen=True)
class DomainCount:
    domain: str
    count: int


def _public_items():  # type: ignore[no-untyped-def]
    return ContentItem.objects.searchable(ANONYMOUS, "live").filter(superseded_by__isnull=True)


@replicas.replica_reads
def top_domains(*, limit: int = 3) -> list[DomainCount]:
    """The ``limit`` primary domains with the most public live items, most first (cached 24 h)."""
    key = f"browse:top_domains:v1:{limit}"
    cached = cache.get(key)
    if cached is not None:
        return [DomainCount(d, c) for d, c in cached]
    rows = (
        _public_items().exclude(primary_domain="").values("primary_domain")
        .annotate(n=Count("id")).order_by("-n", "primary_domain")[:limit]
    )
    result = [(r["primary_domain"], r["n"]) for r in rows]
    cache.set(key, result, TOP_DOMAINS_TTL_S)
    return [DomainCount(d, c) for d, c in result]


@replicas.replica_reads
def popular_topics(*, limit: int = 6) -> list[str]:
    """The most used AI keywords of public live items (cached 1 h): suggestions for an empty search box."""
    key = f"browse:popular_topics:v2:{limit}"
    cached = cache.get(key)
    if cached is not None:
        return list(cached)
    counter: Counter[str] = Counter()
    for keywords in _public_items().values_list("ai_keywords", flat=True).iterator(chunk_size=2000):
        # Bare numbers (years, versions) make poor topics.
        counter.update(k.strip() for k in keywords or () if k.strip() and not k.strip().isdigit())
    topics = [k for k, _ in counter.most_common(limit)]
    cache.set(key, topics, POPULAR_TOPICS_TTL_S)
    return topics


@replicas.replica_reads
def filter_options(*, principal: Principal) -> dict[str, list[str]]:
    """Distinct values per filter field among items this principal may read (cached 10 min per principal)."""
    key = f"browse:filter_options:v1:{principal.cache_key}"
    cached = cache.get(key)
    if cached is not None:
        return dict(cached)
    qs = ContentItem.objects.searchable(principal, corpus_for(principal)).order_by()
    options: dict[str, list[str]] = {}
    for param, column in OPTION_FIELDS.items():
        values = qs.exclude(**{column: ""}).values_list(column, flat=True).distinct()
        options[param] = sorted(set(values), key=str.lower)
    cache.set(key, options, FILTER_OPTIONS_TTL_S)
    return options


@dataclass(frozen=True)
class CardExtras:
    """What a result card shows beyond the engine's ``Hit``."""

    thumbnail_url: str
    quality_score: float
    verified_by: str
    author_name: str
    subtopic: str
    layer: str


def _display_name(user) -> str:  # type: ignore[no-untyped-def]
    if user is None:
        return ""
    return (user.get_full_name() or user.get_username()).strip()


@replicas.replica_reads
def card_extras(*, item_ids: Iterable[int]) -> dict[int, CardExtras]:
    """Thumbnail, quality score and verified-by name of the given items, in one query."""
    ids = set(item_ids)
    if not ids:
        return {}
    rows = ContentItem.objects.filter(pk__in=ids).select_related("verified_by").only(
        "pk", "thumbnail", "quality_score", "author_name", "subtopic", "layer",
        "verified_by__first_name", "verified_by__last_name", "verified_by__username",
    )
    return {
        item.pk: CardExtras(
            thumbnail_url=item.thumbnail.url if item.thumbnail else "",
            quality_score=item.quality_score,
            verified_by=_display_name(item.verified_by),
            author_name=item.author_name,
            subtopic=item.subtopic,
            layer=item.layer,
        )
        for item in rows
    }
