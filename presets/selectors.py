"""Reads of what a user keeps: recent searches (presets are read through ``presets.services``)."""

from __future__ import annotations

from presets.models import RECENT_SEARCHES_KEPT, RecentSearch


def recent_searches_list(*, user_id: int, limit: int = RECENT_SEARCHES_KEPT) -> list[str]:
    """The user's recent queries, newest first."""
    return list(RecentSearch.objects.filter(user_id=user_id).values_list("query", flat=True)[:limit])
