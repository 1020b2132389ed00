"""Writes to the knowledge base: revisions, publishing, corpus membership. Index columns come later (the build)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from search import replicas
from search.models import Chunk, ContentItem, IndexState, Revision
from search.signals import index_marked_dirty
from search.text import analysis
from search.text.chunking import chunk_markdown


def revision_hash(*, title: str, body: str, summary: str) -> str:
    return hashlib.sha256(json.dumps([title, body, summary]).encode()).hexdigest()


def unique_slug(title: str, external_id: str, *, exclude_pk: int | None = None) -> str:
    base = (slugify(title, allow_unicode=True) or slugify(external_id, allow_unicode=True) or "item")[:180]
    slug, n = base, 1
    qs = ContentItem.objects.all()
    if exclude_pk:
        qs = qs.exclude(pk=exclude_pk)
    while qs.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def index_mark_dirty() -> None:
    """Record that the term statistics are stale; the debounced build task picks it up.

    Every content write ends here, so this is also where the current request's caller is marked as having
    written (read-your-writes: their next reads see the primary, ``search.replicas``)."""
    replicas.note_write()
    now = timezone.now()
    updated = IndexState.objects.filter(pk=1).update(dirty=True, dirty_since=now)
    if not updated:
        IndexState.objects.get_or_create(pk=1, defaults={"dirty": True, "dirty_since": now})
    if settings.SEARCH_AUTO_BUILD:
        index_marked_dirty.send(sender=None)  # search.receivers: a debounced build on a worker


def revision_chunk(*, revision: Revision) -> int:
    """(Re)create the chunks of a revision. Search columns and embeddings are filled by the build."""
    specs = chunk_markdown(
        revision.body,
        max_chars=settings.SEARCH["CHUNK_MAX_CHARS"],
        overlap=settings.SEARCH["CHUNK_OVERLAP_CHARS"],
    )
    if not specs:  # an empty body still gets a chunk so the title is searchable
        from search.text.chunking import ChunkSpec

        specs = [ChunkSpec(0, "", "", 0, 0)]
    item = revision.item
    Chunk.objects.filter(revision=revision).delete()
    Chunk.objects.bulk_create(
        [
            Chunk(
                revision=revision,
                item_id=revision.item_id,
                ordinal=s.ordinal,
                toc_path=s.toc_path[:1000],
                text=s.text,
                char_start=s.char_start,
                char_end=s.char_end,
                in_live=item.live_revision_id == revision.pk,
                in_latest=item.latest_revision_id == revision.pk,
            )
            for s in specs
        ]
    )
    Revision.objects.filter(pk=revision.pk).update(chunked=True)
    return len(specs)


def item_sync_corpus(*, item: ContentItem) -> None:
    """Keep chunk corpus flags in step with the item's pointers; drop chunks of revisions no longer current.

    When live == latest the same chunks serve both corpora (never duplicated).
    """
    current = {r for r in (item.live_revision_id, item.latest_revision_id) if r}
    Chunk.objects.filter(item=item).exclude(revision_id__in=current).delete()
    for revision_id in current:
        Chunk.objects.filter(revision_id=revision_id).update(
            in_live=revision_id == item.live_revision_id,
            in_latest=revision_id == item.latest_revision_id,
        )
    ContentItem.objects.filter(pk=item.pk).update(index_dirty=True)
    index_mark_dirty()


@transaction.atomic
def item_save_revision(
    *,
    item: ContentItem,
    title: str,
    body: str,
    summary: str = "",
    author: Any = None,
    publish: bool = False,
    created_at: datetime | None = None,
) -> tuple[Revision, bool]:
    """Add a revision unless the text is unchanged. Returns (latest revision, whether anything changed).

    Without ``publish`` the new revision becomes the latest (a draft) and the live one stays as it was.
    With ``publish`` it also goes live. ``author`` (a user) reads from the primary for ``READ_YOUR_WRITES_S``
    after a change, whoever called (a request, a task, a shell).
    """
    digest = revision_hash(title=title, body=body, summary=summary)
    latest = item.latest_revision
    changed = False
    if latest is not None and latest.content_hash == digest:
        revision = latest
    else:
        number = (item.revisions.aggregate(m=Max("number"))["m"] or 0) + 1
        revision = Revision.objects.create(
            item=item,
            number=number,
            title=title,
            body=body,
            summary=summary,
            author=author,
            content_hash=digest,
            **analysis.revision_preview_columns(title, body),
            created_at=created_at or timezone.now(),
        )
        item.latest_revision = revision
        item.updated_at = created_at or timezone.now()
        changed = True
    if publish and item.live_revision_id != revision.pk:
        item.live_revision = revision
        item.published_at = item.published_at or created_at or timezone.now()
        changed = True
    if changed:
        if author is not None and getattr(author, "pk", None):
            replicas.mark_written(keys=[replicas.user_key(author.pk)])
        item.save(update_fields=["latest_revision", "live_revision", "updated_at", "published_at"])
        if not revision.chunked or not revision.chunks.exists():
            revision_chunk(revision=revision)
        item_sync_corpus(item=item)
    return revision, changed


@transaction.atomic
def item_publish(*, item: ContentItem) -> bool:
    """Make the latest revision live. Returns whether anything changed."""
    if item.latest_revision_id is None or item.live_revision_id == item.latest_revision_id:
        return False
    item.live_revision_id = item.latest_revision_id
    item.published_at = item.published_at or timezone.now()
    item.updated_at = timezone.now()
    item.save(update_fields=["live_revision", "published_at", "updated_at"])
    item_sync_corpus(item=item)
    return True


@transaction.atomic
def item_unpublish(*, item: ContentItem) -> bool:
    if item.live_revision_id is None:
        return False
    item.live_revision = None
    item.save(update_fields=["live_revision"])
    item_sync_corpus(item=item)
    return True


@transaction.atomic
def item_mark_superseded(*, item: ContentItem, by: ContentItem) -> None:
    if by.pk == item.pk:
        from search.errors import InvalidQuery

        raise InvalidQuery("An item cannot supersede itself: choose a different replacement.", field="superseded_by")
    item.superseded_by = by
    item.save(update_fields=["superseded_by"])
    ContentItem.objects.filter(pk=item.pk).update(index_dirty=True)
    index_mark_dirty()


def item_metadata_changed(*, item_ids: list[int]) -> None:
    """Metadata that feeds search columns (title fields, keywords, type) changed: rebuild those chunks."""
    ContentItem.objects.filter(pk__in=item_ids).update(index_dirty=True)
    index_mark_dirty()
