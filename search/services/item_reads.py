"""Which items a signed-in user has opened (the unread-only filter reads it)."""

from __future__ import annotations

from django.utils import timezone

from search.models import ItemRead


def item_mark_read(*, user_id: int, item_id: int) -> None:
    """Record that the user opened the item (idempotent; refreshes ``read_at``)."""
    ItemRead.objects.update_or_create(user_id=user_id, item_id=item_id, defaults={"read_at": timezone.now()})
