"""Reads of browse-only state."""

from __future__ import annotations

from browse.models import RECENT_SEARCHES_KEPT, RecentSearch
from search.models import UserProfile


def recent_searches_list(*, user_id: int, limit: int = RECENT_SEARCHES_KEPT) -> list[str]:
    """The user's recent queries, newest first."""
    return list(RecentSearch.objects.filter(user_id=user_id).values_list("query", flat=True)[:limit])


def primary_focus(*, user_id: int | None) -> str:
    """The signed-in user's primary focus, or ``""`` when unset or anonymous."""
    if not user_id:
        return ""
    return UserProfile.objects.filter(user_id=user_id).values_list("primary_focus", flat=True).first() or ""
