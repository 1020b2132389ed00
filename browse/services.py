"""Writes of the browse surface: the user's primary focus (recent searches: ``presets.services``)."""

from __future__ import annotations

from accounts.models import UserProfile
from search.errors import InvalidQuery


def profile_set_focus(*, user_id: int, focus: str) -> None:
    """Set the user's primary focus (one of ``UserProfile.Focus``), creating the profile if needed."""
    if focus not in UserProfile.Focus.values:
        raise InvalidQuery(f"focus must be one of {', '.join(UserProfile.Focus.values)}.", field="focus")
    UserProfile.objects.update_or_create(user_id=user_id, defaults={"primary_focus": focus})
