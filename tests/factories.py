"""Test data built through the real services (never by poking rows), then indexed by the real build."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group
from django.utils import timezone

from search.models import ContentItem
from search.services import content, indexing

_ids = itertools.count(1)


def make_item(
    *,
    title: str = "An item",
    body: str = "Some body text.",
    summary: str = "",
    publish: bool = True,
    groups: list[str] | None = None,
    updated_at: datetime | None = None,
    **fields: Any,
) -> ContentItem:
    external_id = fields.pop("external_id", f"t-{next(_ids)}")
    item = ContentItem.objects.create(
        external_id=external_id,
        slug=content.unique_slug(title, external_id),
        updated_at=updated_at or timezone.now(),
        **fields,
    )
    if groups:
        item.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
    content.item_save_revision(item=item, title=title, body=body, summary=summary, publish=publish,
                               created_at=updated_at)
    item.refresh_from_db()
    return item


def build() -> dict[str, Any]:
    return indexing.index_rebuild()
