"""Writes of the browse surface: recent searches and the user's primary focus."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from browse.models import RECENT_QUERY_MAX_CHARS, RECENT_SEARCHES_KEPT, RecentSearch
from search.errors import InvalidQuery
from search.models import UserProfile
from search.query_parser import normalize_query_text


def recent_search_record(*, user_id: int, query: str) -> str:
    """Remember ``query`` as the user's newest recent search; keeps the newest 10. Returns the stored text."""
    text = normalize_query_text(query)[:RECENT_QUERY_MAX_CHARS].strip()
    if not text:
        raise InvalidQuery("query is empty: nothing to remember.", field="query")
    with transaction.atomic():
        RecentSearch.objects.update_or_create(user_id=user_id, query=text, defaults={"used_at": timezone.now()})
        stale = RecentSearch.objects.filter(user_id=user_id).order_by("-used_at", "-id")[RECENT_SEARCHES_KEPT:]
        RecentSearch.objects.filter(pk__in=list(stale.values_list("pk", flat=True))).delete()
    return text


def recent_search_clear(*, user_id: int) -> int:
    """Forget every recent search of the user. Returns how many were removed."""
    deleted, _ = RecentSearch.objects.filter(user_id=user_id).delete()
    return deleted


def profile_set_focus(*, user_id: int, focus: str) -> None:
    """Set the user's primary focus (one of ``UserProfile.Focus``), creating the profile if needed."""
    if focus not in UserProfile.Focus.values:
        raise InvalidQuery(f"focus must be one of {', '.join(UserProfile.Focus.values)}.", field="focus")
    UserProfile.objects.update_or_create(user_id=user_id, defaults={"primary_focus": focus})
