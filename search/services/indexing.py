"""The build: everything a search would otherwise compute while serving is written here, ahead of time.

- per-chunk search columns (stems, surface forms, title forms, metadata terms) and lengths;
- chunk embeddings for the active model (through the embedding cache);
- the term-statistics materialized views (document frequency per term and field, corpus size,
  average lengths), refreshed ``CONCURRENTLY`` so searches never wait on the build;
- the HNSW index of the active embedding model.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from search.models import Chunk, ContentItem, IndexState
from search.services import vector_index
from search.text import analysis, language

logger = logging.getLogger(__name__)

BATCH = 500
Progress = Callable[[int], None]


def _stem_language(code: str) -> str:
    return code if code in analysis.STEM_LANGUAGES else "simple"


def chunk_columns(chunk: Chunk, item: ContentItem, title: str, summary: str) -> dict[str, Any]:
    """The search columns the build writes for one chunk (term maps, title and keyword lexemes, lengths, folded
    text, language): public for bulk loaders that write rows themselves (the benchmark corpus)."""
    # The body is stemmed in the chunk's own language (an English section of a French item is English);
    # keywords and the type belong to the item and are stemmed in its language.
    chunk_language = language.chunk_language(chunk.text, item_language=item.language)
    stems, surface, length = analysis.index_terms(chunk.text, _stem_language(chunk_language))
    titles = analysis.title_terms(title)
    meta_terms = []
    for phrase in [*item.ai_keywords, item.content_type.replace("_", " ")]:
        for token in analysis.tokens(phrase):
            meta_terms.append(analysis.stem(token.folded, _stem_language(item.language)))
    return {
        "tf_stem": json.dumps({term: len(positions) for term, positions in stems.items()}, ensure_ascii=False),
        "tf_surface": json.dumps({term: len(positions) for term, positions in surface.items()}, ensure_ascii=False),
        "lex_title": analysis.terms_tsvector(titles),
        "lex_meta": analysis.terms_tsvector(meta_terms),
        "body_len": length,
        "title_len": len(titles),
        "folded_text": analysis.folded_text(f"{title}\n{chunk.text}"),
        "language": chunk_language,
    }


def _batches(qs: Any, size: int) -> Iterator[list[Any]]:
    last = 0
    while True:
        batch = list(qs.filter(pk__gt=last).order_by("pk")[:size])
        if not batch:
            return
        yield batch
        last = batch[-1].pk


def columns_pending() -> Any:
    return Chunk.objects.current().filter(Q(indexed=False) | Q(item__index_dirty=True))


def columns_build(*, progress: Progress | None = None) -> int:
    """Write search columns for chunks that are new or whose item changed. Returns chunks written."""
    dirty_items = list(ContentItem.objects.filter(index_dirty=True).values_list("pk", flat=True))
    if dirty_items:
        Chunk.objects.filter(item_id__in=dirty_items).update(indexed=False)
        ContentItem.objects.filter(pk__in=dirty_items).update(index_dirty=False)
    written = 0
    pending = Chunk.objects.current().filter(indexed=False).select_related("item", "revision")
    for batch in _batches(pending, BATCH):
        values = [(c.pk, chunk_columns(c, c.item, c.revision.title, c.revision.summary)) for c in batch]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                """
                UPDATE search_chunk SET tf_stem = %s::jsonb, tf_surface = %s::jsonb,
                       lex_title = %s::tsvector, lex_meta = %s::tsvector, body_len = %s, title_len = %s,
                       folded_text = %s, language = %s, indexed = true
                WHERE id = %s
                """,
                [
                    (
                        v["tf_stem"], v["tf_surface"], v["lex_title"], v["lex_meta"],
                        v["body_len"], v["title_len"], v["folded_text"], v["language"], pk,
                    )
                    for pk, v in values
                ],
            )
        written += len(batch)
        if progress:
            progress(len(batch))
    return written


# The postings refresh sorts every (term, chunk) pair: give it memory instead of temporary files.
POSTINGS_WORK_MEM = "256MB"


def stats_refresh() -> None:
    """Refresh the term statistics and postings (concurrently once populated, so readers never block).

    ``search_corpus_stats`` comes first: its ``max_chunk_id`` must not pass the postings' snapshot, or a
    chunk written in between would be neither in the postings nor "newer than the build".
    """
    with connection.cursor() as cursor:
        for view in ("search_corpus_stats", "search_term_stats", "search_postings"):
            cursor.execute("SELECT relispopulated FROM pg_class WHERE relname = %s", [view])
            row = cursor.fetchone()
            concurrently = "CONCURRENTLY" if row and row[0] else ""
            with transaction.atomic():
                if view == "search_postings":
                    cursor.execute(f"SET LOCAL work_mem = '{POSTINGS_WORK_MEM}'")
                cursor.execute(f"REFRESH MATERIALIZED VIEW {concurrently} {view}")


def index_rebuild(*, progress: Progress | None = None, embed: bool = True) -> dict[str, Any]:
    """The whole build: columns, embeddings of the active model, statistics, vector index."""

    started = time.monotonic()
    state, _ = IndexState.objects.get_or_create(pk=1)
    marked_at = timezone.now()
    columns = columns_build(progress=progress)
    embedded = vector_index.embeddings_backfill(progress=progress) if embed else 0
    if embed:
        vector_index.english_embeddings_backfill(progress=progress)
    stats_refresh()
    vector_index.vector_index_ensure()
    elapsed = time.monotonic() - started
    # Only clear the flag if nothing marked the index dirty while we were building.
    IndexState.objects.filter(pk=state.pk).filter(Q(dirty_since__lte=marked_at) | Q(dirty_since__isnull=True)).update(
        dirty=False
    )
    IndexState.objects.filter(pk=state.pk).update(built_at=timezone.now(), build_seconds=elapsed)
    logger.info("index build: %s chunks written, %s embedded, %.1f s", columns, embedded, elapsed)
    return {"columns": columns, "embedded": embedded, "seconds": round(elapsed, 2)}


def index_status() -> dict[str, Any]:
    state = IndexState.objects.filter(pk=1).first()
    return {
        "dirty": bool(state and state.dirty),
        "built_at": state.built_at if state else None,
        "pending_columns": columns_pending().count(),
    }
