"""Follow reads: a user's follows with their feeds, one follow, and the header's "N new" count.

Every feed read filters its entries through the engine's access rule at read time
(``ContentItem.objects.searchable`` for the owner's principal, live corpus), so an item made private
disappears from the page at once, before the next run deletes its entry: no title the owner may not read is
ever shown. A caller may pass a second ``also_readable_by`` principal (an agent's API key) to narrow it
further.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Q

from follows.models import Follow, FollowItem, FollowPreference
from follows.services import NEWS_CACHE_S, news_cache_key
from search.engine import corpus_for
from search.models import ContentItem
from search.principal import Principal, owner_id_of, principal_for_user

EARLIER_SHOWN = 10


@dataclass(frozen=True)
class FeedEntry:
    id: int
    item_id: int
    kind: str  # "new" | "changed"
    revision_number: int
    rank: int
    found_at: datetime
    seen_at: datetime | None
    title: str
    url: str

    @property
    def is_new(self) -> bool:
        return self.kind == FollowItem.Kind.NEW

    @property
    def kind_label(self) -> str:
        return "New" if self.is_new else "Changed"


@dataclass(frozen=True)
class FollowView:
    follow: Follow
    unseen: tuple[FeedEntry, ...]
    earlier: tuple[FeedEntry, ...]

    @property
    def id(self) -> int:
        return self.follow.pk

    @property
    def new_count(self) -> int:
        return len(self.unseen)

    @property
    def paused(self) -> bool:
        return self.follow.paused

    @property
    def search_url(self) -> str:
        """The followed search on /browse."""
        params: list[tuple[str, str]] = [("q", self.follow.query)] if self.follow.query else []
        for key, values in sorted((self.follow.filters or {}).items()):
            params.extend((key, str(v)) for v in (values if isinstance(values, list) else [values]))
        return "/browse" + ("?" + urlencode(params) if params else "")


@dataclass(frozen=True)
class NewsSummary:
    """The header's line: ``total`` unseen entries over ``follows`` follows; ``label`` of the one with the most."""

    total: int = 0
    follows: int = 0
    label: str = ""


def _readable_items(principal: Principal, also: Principal | None) -> Any:
    qs = ContentItem.objects.searchable(principal, corpus_for(principal, "live"))
    if also is not None:
        qs = qs.filter(pk__in=ContentItem.objects.searchable(also, corpus_for(also, "latest")).values("pk"))
    return qs.values("pk")


def _owner(user: Any) -> tuple[int | None, Principal | None]:
    """The owner's id and principal. The principal is built fresh from the database (not from the session's
    user object) only when ``user`` is an id; a request's user is already current."""
    user_id = owner_id_of(user)
    if user_id is None:
        return None, None
    if hasattr(user, "is_authenticated"):
        return user_id, principal_for_user(user)
    from django.contrib.auth import get_user_model

    found = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return (user_id, principal_for_user(found)) if found is not None else (user_id, None)


def _entries(follow_ids: list[int], principal: Principal, also: Principal | None) -> dict[int, list[FeedEntry]]:
    rows = (
        FollowItem.objects.filter(follow_id__in=follow_ids, item_id__in=_readable_items(principal, also))
        .select_related("item__live_revision")
        .order_by("follow_id", "seen_at", "-found_at", "rank", "id")
    )
    by_follow: dict[int, list[FeedEntry]] = {fid: [] for fid in follow_ids}
    for row in rows:
        revision = row.item.live_revision
        by_follow[row.follow_id].append(FeedEntry(
            id=row.pk, item_id=row.item_id, kind=row.kind, revision_number=row.revision_number, rank=row.rank,
            found_at=row.found_at, seen_at=row.seen_at, title=revision.title if revision else "",
            url=row.item.get_absolute_url(),
        ))
    return by_follow


def _views(follows: list[Follow], principal: Principal, also: Principal | None) -> list[FollowView]:
    entries = _entries([f.pk for f in follows], principal, also)
    views = []
    for follow in follows:
        mine = entries.get(follow.pk, [])
        unseen = tuple(sorted((e for e in mine if e.seen_at is None), key=lambda e: (e.rank, e.id)))
        earlier = tuple(sorted((e for e in mine if e.seen_at is not None), key=lambda e: e.seen_at or e.found_at,
                               reverse=True)[:EARLIER_SHOWN])
        views.append(FollowView(follow, unseen, earlier))
    return views


def follows_list(*, user: Any, also_readable_by: Principal | None = None) -> list[FollowView]:
    """The user's follows, newest first, each with its unseen entries (rank order) and the latest seen ones.
    Two queries whatever the number of follows. Empty for anonymous callers."""
    user_id, principal = _owner(user)
    if user_id is None or principal is None:
        return []
    follows = list(Follow.objects.filter(owner_id=user_id).order_by("-created_at", "-id"))
    return _views(follows, principal, also_readable_by) if follows else []


def follow_get(*, user: Any, follow_id: Any, also_readable_by: Principal | None = None) -> FollowView | None:
    """One of the user's follows with its feed, or ``None`` (not theirs, or no such follow)."""
    user_id, principal = _owner(user)
    try:
        pk = int(str(follow_id).strip())
    except (TypeError, ValueError):
        return None
    if user_id is None or principal is None or not 0 < pk < 2**63:
        return None
    follow = Follow.objects.filter(owner_id=user_id, pk=pk).first()
    return _views([follow], principal, also_readable_by)[0] if follow is not None else None


def follow_find(*, user_id: int | None, query: str, filters: dict[str, list[str]]) -> int | None:
    """The id of the user's follow of exactly this search (canonical filters), for "already following"."""
    if user_id is None:
        return None
    return Follow.objects.filter(owner_id=user_id, query=query, filters=filters).values_list("pk", flat=True).first()


def follow_news(*, user: Any) -> NewsSummary:
    """Unseen, readable entries over the user's follows: one grouped, indexed query, cached for a minute per
    user (every write and run clears it)."""
    user_id = owner_id_of(user)
    if user_id is None:
        return NewsSummary()
    key = news_cache_key(user_id)
    cached = cache.get(key)
    if isinstance(cached, NewsSummary):
        return cached
    _, principal = _owner(user)
    summary = NewsSummary()
    if principal is not None:
        rows = list(
            FollowItem.objects.filter(
                follow__owner_id=user_id, seen_at__isnull=True, item_id__in=_readable_items(principal, None)
            )
            .values("follow_id", "follow__label")
            .annotate(n=Count("id", filter=Q(seen_at__isnull=True)))
            .order_by("-n", "follow_id")
        )
        if rows:
            summary = NewsSummary(
                total=sum(r["n"] for r in rows), follows=len(rows), label=str(rows[0]["follow__label"])
            )
    cache.set(key, summary, NEWS_CACHE_S)
    return summary


def digest_enabled(*, user_id: int | None) -> bool:
    if user_id is None:
        return False
    return bool(
        FollowPreference.objects.filter(user_id=user_id).values_list("email_digest", flat=True).first()
    )


@dataclass(frozen=True)
class DigestState:
    """Whether this server sends e-mail digests (``FOLLOWS_DIGEST``) and whether the user asked for them."""

    available: bool
    enabled: bool


def digest_state(*, user_id: int | None) -> DigestState:
    return DigestState(available=bool(settings.FOLLOWS_DIGEST), enabled=digest_enabled(user_id=user_id))
