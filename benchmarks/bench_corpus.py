"""The benchmark corpus: deterministic items made of real SciFact text, bulk-loaded like the real build.

Each item gets a SciFact title and a body of a lead paragraph plus Markdown sections of recombined
SciFact sentences (so the vocabulary and term frequencies are real), drawn by a per-item seeded RNG:
item ``i`` is the same whatever the batch layout or the number of worker processes.

The rows are what the ORM importer and ``index_rebuild`` would write, only faster:
- chunks come from the real chunker (``chunking.chunk_markdown`` with the configured sizes);
- search columns come from ``indexing.chunk_columns`` (the build's own function);
- vectors are the ``hash`` embedding provider's (``HashEmbedder``: deterministic, L2-normalised
  feature hashing of the chunk's embedding text), computed by an equivalent memoised loop;
then ``indexing.stats_refresh()`` and ``vector_index.vector_index_ensure()`` run exactly as in the build.
Rows go in with ``COPY`` while the secondary indexes are dropped; the indexes are then recreated
from their own definitions (``pg_indexes``), so the schema ends up exactly as migrated. Revisions carry the
preview's word columns (``analysis.revision_preview_columns``, as the content service writes them).
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, connections, models, transaction
from django.utils import timezone
from django.utils.text import slugify

from search.embeddings.providers import HashEmbedder
from search.errors import SearchError
from search.models import Chunk, ContentItem, ContentType, IndexState, Revision, SystemFlag
from search.services import indexing, vector_index
from search.services import spaces as space_writes
from search.services.content import revision_hash
from search.services.vector_index import chunk_embedding_text
from search.text import analysis
from search.text.chunking import chunk_markdown

# Bump when the generator changes: a kept database built by another version is rebuilt.
GENERATOR_VERSION = 1
CORPUS_FLAG = "bench_corpus"
# Item dates are spread over the three years before this instant (not "now": the corpus is fixed).
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)
BATCH_ITEMS = 500
HEADINGS = (
    "Background",
    "Methods",
    "Results",
    "Discussion",
    "Conclusion",
    "Limitations",
    "Study design",
    "Participants",
    "Statistical analysis",
    "Outcomes",
    "Findings",
    "Implications",
    "Key points",
    "Evidence",
    "Mechanism",
    "Clinical relevance",
    "Summary",
)
DOMAINS = (
    "biology",
    "medicine",
    "genetics",
    "immunology",
    "oncology",
    "neuroscience",
    "epidemiology",
    "pharmacology",
)
AUTHORS = ("A. Rivera", "B. Chen", "C. Okafor", "D. Haddad", "E. Laurent", "F. Novak", "")
# Anonymous visitors read public items only; the rest exercise the access filter.
VISIBILITY_WEIGHTS = (("public", 0.85), ("signed_in", 0.10), ("staff", 0.05))
SECTION_CHARS = (600, 1050)  # below CHUNK_MAX_CHARS (1200): about one chunk per section

Progress = Callable[[int], None]


@dataclass(frozen=True)
class CorpusSpec:
    items: int
    chunks_per_item: int = 5
    seed: int = 42

    def fingerprint(self) -> dict[str, int]:
        return {**asdict(self), "version": GENERATOR_VERSION}


@dataclass(frozen=True)
class TextPool:
    titles: tuple[str, ...]
    sentences: tuple[str, ...]


@dataclass
class LoadReport:
    items: int = 0
    revisions: int = 0
    chunks: int = 0
    reused: bool = False
    seconds: dict[str, float] = field(default_factory=dict)


SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def beir_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a BEIR ``.jsonl`` file (``corpus.jsonl``, ``queries.jsonl``), blank lines skipped."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def text_pool_load(corpus_path: Path) -> TextPool:
    """Titles and sentences of a BEIR ``corpus.jsonl`` (SciFact), in file order."""
    if not corpus_path.exists():
        raise SearchError(
            f"{corpus_path} is missing: pass --dataset with a BEIR folder holding corpus.jsonl "
            "(the SciFact copy lives in ../shared/datasets/scifact)."
        )
    titles: list[str] = []
    sentences: list[str] = []
    for record in beir_records(corpus_path):
        title = (record.get("title") or "").strip()
        if 10 <= len(title) <= 200:
            titles.append(title)
        for sentence in SENTENCE_RE.split(record.get("text") or ""):
            sentence = sentence.strip()
            if 20 <= len(sentence) <= 600:
                sentences.append(sentence)
    if not titles or not sentences:
        raise SearchError(f"{corpus_path} has no usable titles or text.")
    return TextPool(tuple(titles), tuple(sentences))


# --- generation (pure, runs in worker processes) ---


class FastHashEmbedder:
    """The ``hash`` provider's vectors (``HashEmbedder``), with each word's features memoised.

    Same tokens, stop words, features, sums and normalisation as ``HashEmbedder.embed``, so a
    vector equals the provider's for the same text (``tests/search/test_bench.py`` pins it).
    """

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.name = HashEmbedder(dimensions).name
        self._features: dict[str, tuple[tuple[int, float], ...]] = {}
        self._stops = analysis.all_stop_words()

    def _word(self, folded: str) -> tuple[tuple[int, float], ...]:
        found = self._features.get(folded)
        if found is None:
            out = []
            for feature in (folded, "s:" + analysis.stem(folded, "en")):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                out.append(
                    (int.from_bytes(digest[:4], "little") % self.dimensions, 1.0 if digest[4] & 1 else -1.0)
                )
            found = self._features[folded] = tuple(out)
        return found

    def embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in analysis.WORD_RE.findall(text):
            folded = analysis.fold(word)
            if not folded or folded in self._stops:
                continue
            for index, sign in self._word(folded):
                vector[index] += sign
        if not any(vector):
            vector[0] = 1.0
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector] if norm else vector


def _pick_visibility(rng: random.Random) -> str:
    roll = rng.random()
    for value, weight in VISIBILITY_WEIGHTS:
        if roll < weight:
            return value
        roll -= weight
    return VISIBILITY_WEIGHTS[0][0]


def _paragraph(rng: random.Random, pool: TextPool) -> str:
    target = rng.randint(*SECTION_CHARS)
    parts: list[str] = []
    size = 0
    while size < target:
        sentence = rng.choice(pool.sentences)
        if parts and size + len(sentence) > SECTION_CHARS[1]:
            break
        parts.append(sentence)
        size += len(sentence) + 1
    return " ".join(parts)


@dataclass(frozen=True)
class GeneratedItem:
    item: dict[str, Any]
    revision: dict[str, Any]
    chunks: list[dict[str, Any]]


def item_generate(index: int, spec: CorpusSpec, pool: TextPool, embedder: FastHashEmbedder) -> GeneratedItem:
    """Item number ``index`` (0-based) of the corpus: its item, revision and chunk column values."""
    rng = random.Random(f"{spec.seed}:{index}")
    pk = index + 1
    title = rng.choice(pool.titles)
    sections = max(1, spec.chunks_per_item + rng.randint(-2, 2))
    parts = [_paragraph(rng, pool)]
    for _ in range(sections - 1):
        parts.append(f"## {rng.choice(HEADINGS)}\n\n{_paragraph(rng, pool)}")
    body = "\n\n".join(parts)
    updated_at = ANCHOR - timedelta(seconds=rng.randint(0, 3 * 365 * 86400))
    title_words = [
        t.folded
        for t in analysis.tokens(title)
        if len(t.folded) > 3 and t.folded not in analysis.all_stop_words()
    ]
    keywords = sorted(set(rng.sample(title_words, min(2, len(title_words))))) if title_words else []
    item = {
        "id": pk,
        "external_id": f"bench-{pk}",
        "slug": f"{slugify(title, allow_unicode=True)[:150] or 'item'}-{pk}",
        "content_type": rng.choice(ContentType.values),
        "primary_domain": rng.choice(DOMAINS),
        "language": "en",
        "author_name": rng.choice(AUTHORS),
        "ai_keywords": keywords,
        "visibility": _pick_visibility(rng),
        "quality_score": round(rng.random(), 3),
        "live_revision_id": pk,
        "latest_revision_id": pk,
        "published_at": updated_at,
        "created_at": updated_at,
        "updated_at": updated_at,
        "index_dirty": False,
    }
    revision = {
        "id": pk,
        "item_id": pk,
        "number": 1,
        "title": title,
        "body": body,
        "summary": "",
        "content_hash": revision_hash(title=title, body=body, summary=""),
        **analysis.revision_preview_columns(title, body),
        "created_at": updated_at,
        "chunked": True,
    }
    unsaved_item = ContentItem(language="en", ai_keywords=keywords, content_type=str(item["content_type"]))
    chunks = []
    specs = chunk_markdown(
        body, max_chars=settings.SEARCH["CHUNK_MAX_CHARS"], overlap=settings.SEARCH["CHUNK_OVERLAP_CHARS"]
    )
    for chunk_spec in specs:
        columns = indexing.chunk_columns(Chunk(text=chunk_spec.text), unsaved_item, title, "")
        vec = embedder.embed(chunk_embedding_text(title, chunk_spec.toc_path, chunk_spec.text))
        chunks.append(
            {
                "revision_id": pk,
                "item_id": pk,
                "ordinal": chunk_spec.ordinal,
                "toc_path": chunk_spec.toc_path[:1000],
                "text": chunk_spec.text,
                "char_start": chunk_spec.char_start,
                "char_end": chunk_spec.char_end,
                "in_live": True,
                "in_latest": True,
                **columns,
                "indexed": True,
                "embedding": "[" + ",".join(map(repr, vec)) + "]",
                "embedding_model": embedder.name,
            }
        )
    return GeneratedItem(item, revision, chunks)


# Set in the parent before the worker processes fork; read by _generate_range.
_WORKER_STATE: dict[str, Any] = {}


def _generate_range(bounds: tuple[int, int]) -> list[GeneratedItem]:
    spec: CorpusSpec = _WORKER_STATE["spec"]
    pool: TextPool = _WORKER_STATE["pool"]
    if "embedder" not in _WORKER_STATE:
        _WORKER_STATE["embedder"] = FastHashEmbedder(_WORKER_STATE["dimensions"])
    embedder: FastHashEmbedder = _WORKER_STATE["embedder"]
    return [item_generate(i, spec, pool, embedder) for i in range(*bounds)]


def items_generate(spec: CorpusSpec, pool: TextPool, *, workers: int) -> Iterator[list[GeneratedItem]]:
    """Batches of generated items in order, computed by ``workers`` forked processes (1 = in process)."""
    ranges = [(start, min(start + BATCH_ITEMS, spec.items)) for start in range(0, spec.items, BATCH_ITEMS)]
    _WORKER_STATE.clear()
    _WORKER_STATE.update(spec=spec, pool=pool, dimensions=settings.HASH_EMBEDDING_DIMENSIONS)
    if workers <= 1:
        for bounds in ranges:
            yield _generate_range(bounds)
        return
    connections.close_all()  # a forked child must not inherit (and later close) the parent's sockets
    with multiprocessing.get_context("fork").Pool(workers) as procs:
        yield from procs.imap(_generate_range, ranges)


# --- loading ---


class _CopyPlan:
    """Column list and per-row values for COPY into a model's table: the generator's values, and each
    other column's model default (so columns added by later migrations are filled as the ORM would)."""

    def __init__(self, model: type[models.Model], given: Sequence[str], *, now: datetime) -> None:
        self.table = model._meta.db_table
        self.given = list(given)
        self.columns = list(given)
        self.defaults: list[Any] = []
        for f in model._meta.concrete_fields:
            if f.column in given or f.primary_key:
                continue
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                value: Any = now
            else:
                value = f.get_default()
            if value is None and not f.null:
                raise SearchError(
                    f"bench cannot fill {model.__name__}.{f.name} (NOT NULL, no default): give it "
                    "a value in benchmarks/bench_corpus.py::item_generate."
                )
            self.columns.append(f.column)
            self.defaults.append(f.get_db_prep_save(value, connection))

    def sql(self) -> str:
        return f"COPY {self.table} ({', '.join(self.columns)}) FROM STDIN"

    def row(self, values: dict[str, Any]) -> list[Any]:
        return [values[c] for c in self.given] + self.defaults


def _secondary_indexes(tables: Sequence[str]) -> list[tuple[str, str]]:
    """(name, definition) of indexes on ``tables`` that back no constraint (those stay during the load)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = current_schema() "
            "AND i.tablename = ANY(%s) "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname) "
            "ORDER BY i.tablename, i.indexname",
            [list(tables)],
        )
        return list(cursor.fetchall())


def _copy_batch(batch: list[GeneratedItem], plans: dict[str, _CopyPlan], now: datetime) -> None:
    """COPY one batch of generated items, their revisions and chunks (``plans`` is filled on first use)."""
    if not plans:
        plans.update({
            "item": _CopyPlan(ContentItem, list(batch[0].item), now=now),
            "revision": _CopyPlan(Revision, list(batch[0].revision), now=now),
            "chunk": _CopyPlan(Chunk, list(batch[0].chunks[0]), now=now),
        })
    with transaction.atomic(), connection.cursor() as cursor:
        # Items and revisions point at each other; the FK checks are deferred to the commit.
        with cursor.copy(plans["item"].sql()) as copy:
            for g in batch:
                copy.write_row(plans["item"].row(g.item))
        with cursor.copy(plans["revision"].sql()) as copy:
            for g in batch:
                copy.write_row(plans["revision"].row(g.revision))
        with cursor.copy(plans["chunk"].sql()) as copy:
            for g in batch:
                for chunk in g.chunks:
                    copy.write_row(plans["chunk"].row(chunk))


def corpus_loaded(spec: CorpusSpec) -> bool:
    flag = SystemFlag.objects.filter(key=CORPUS_FLAG).first()
    return bool(flag and flag.value.get("spec") == spec.fingerprint())


def corpus_load(
    spec: CorpusSpec,
    pool: TextPool,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> LoadReport:
    """Fill the (empty, migrated) current database with the corpus of ``spec`` and build the index.

    Precondition: the default connection points at a scratch database (``scratch_db``). Returns
    row counts and the seconds each phase took (generation + COPY, each index, statistics, HNSW).
    """
    if ContentItem.objects.exists():
        raise SearchError("The bench database is not empty; corpus_load only fills a fresh scratch database.")
    report = LoadReport()
    say = log or (lambda _msg: None)
    provider = HashEmbedder(settings.HASH_EMBEDDING_DIMENSIONS)
    space_writes.space_activate(provider=provider)
    now = timezone.now()
    tables = [ContentItem._meta.db_table, Revision._meta.db_table, Chunk._meta.db_table]
    indexes = _secondary_indexes(tables)
    with connection.cursor() as cursor:
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    generated_started = time.monotonic()
    plans: dict[str, _CopyPlan] = {}
    for batch in items_generate(spec, pool, workers=workers):
        _copy_batch(batch, plans, now)
        report.items += len(batch)
        report.revisions += len(batch)
        report.chunks += sum(len(g.chunks) for g in batch)
        if progress:
            progress(len(batch))
    report.seconds["generate_copy"] = time.monotonic() - generated_started
    with connection.cursor() as cursor:
        for table in (ContentItem._meta.db_table, Revision._meta.db_table):
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            )
        cursor.execute("SET maintenance_work_mem = '1GB'")
        started = time.monotonic()
        for name, definition in indexes:
            t = time.monotonic()
            cursor.execute(definition)
            if time.monotonic() - t >= 1.0:  # the big ones (GIN, trigram) are worth reporting one by one
                report.seconds[f"index {name}"] = time.monotonic() - t
                say(f"  index {name}: {time.monotonic() - t:.1f} s")
        report.seconds["secondary_indexes"] = time.monotonic() - started
        cursor.execute("RESET maintenance_work_mem")
        started = time.monotonic()
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
        report.seconds["vacuum_analyze"] = time.monotonic() - started
    started = time.monotonic()
    indexing.stats_refresh()
    report.seconds["stats_refresh"] = time.monotonic() - started
    say(f"  term statistics: {report.seconds['stats_refresh']:.1f} s")
    started = time.monotonic()
    vector_index.vector_index_ensure()
    report.seconds["hnsw_index"] = time.monotonic() - started
    say(f"  HNSW index: {report.seconds['hnsw_index']:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    IndexState.objects.update_or_create(
        pk=1,
        defaults={
            "dirty": False,
            "dirty_since": None,
            "built_at": timezone.now(),
            "build_seconds": sum(report.seconds.values()),
        },
    )
    SystemFlag.objects.update_or_create(
        key=CORPUS_FLAG,
        defaults={"value": {"spec": spec.fingerprint(), "chunks": report.chunks, "seconds": report.seconds}},
    )
    return report


def corpus_counts() -> LoadReport:
    """Counts of the corpus already in the current database (a kept bench database being reused)."""
    flag = SystemFlag.objects.filter(key=CORPUS_FLAG).first()
    return LoadReport(
        items=ContentItem.objects.count(),
        revisions=Revision.objects.count(),
        chunks=Chunk.objects.count(),
        reused=True,
        seconds=dict((flag.value.get("seconds") if flag else None) or {}),
    )


# Everything the measured paths read: tables, their TOAST tables and all their indexes.
PREWARM_TABLES = (
    "search_chunk", "search_postings", "search_term_stats", "search_corpus_stats", "search_revision",
    "search_contentitem", "search_citation", "search_embeddingspace",
)
