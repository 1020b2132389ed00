"""Reads of browse-only state (recent searches: ``presets.selectors``)."""

from __future__ import annotations

from accounts.models import UserProfile


def primary_focus(*, user_id: int | None) -> str:
    """The signed-in user's primary focus, or ``""`` when unset or anonymous."""
    if not user_id:
        return ""
    return UserProfile.objects.filter(user_id=user_id).values_list("primary_focus", flat=True).first() or ""
