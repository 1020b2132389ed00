"""``manage.py bench``: latency of every search path at scale, beside the naive ways of doing the same.

For each corpus size, in its own scratch database (``scratch_db``; never the user's):
1. build the corpus (``bench_corpus``: SciFact text, the build's own columns, hash-provider vectors);
2. time, in process, with warm-up: the live preview (``preview.preview_search``), the lexical lane,
   the vector lane and hybrid ``retrieve()``; then the baselines on the same data and queries:
   the preview's word rule as word-by-word ILIKE without its word indexes, stock ``ts_rank`` over a GIN
   index with an OR query, and
   an exact vector scan that cannot use the HNSW index;
3. EXPLAIN ANALYZE the slowest statement of each path (captured with ``connection.execute_wrapper``);
4. start the real ASGI app (uvicorn) on the database and time round trips of ``POST /api/search``,
   GraphQL ``search`` and MCP ``find``, then a sustained mixed-load run (``load`` is the largest size's);
   with ``--replica`` the load runs twice, on the primary alone and with reads on a streaming replica
   (``bench_replica``).

Everything runs as an anonymous visitor (public, published items; the access filter is in every path).
Query embeddings come from the ``hash`` provider and are cached before timing (as repeated queries are
in production), so the vector figures are the index and the SQL, not the embedding model. One more path,
``hybrid_real_embedding``, is hybrid ``retrieve()`` with the query embedded afresh by the product's default
embedder (multilingual-e5-small) on every call, never cached: what a search with a new query costs end to
end. (The corpus vectors stay hash vectors of the same dimension, so its pages are ``hybrid``'s.)
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from benchmarks import bench_corpus, bench_http, real_query, scratch_db
from benchmarks.bench_corpus import PREWARM_TABLES
from benchmarks.bench_stats import load_summary, percentiles
from search.embeddings import providers, spaces
from search.engine import lexical, preview, retrieve, vector
from search.engine.scope import ItemScope
from search.engine.sql import Fragment
from search.principal import ANONYMOUS
from search.services import spaces as space_writes
from search.text import analysis, query_parser
from search.types import RetrievalQuery

PATHS = (
    "preview",
    "lexical",
    "vector",
    "hybrid",
    "hybrid_real_embedding",
    "http_search",
    "http_search_real_embedding",
    "http_graphql",
    "http_mcp",
    "baseline_words",
    "baseline_ts_rank",
    "baseline_exact_vector",
)
# (ours, baseline): the pairs whose latency ratio the report gives.
PAIRS = (("preview", "baseline_words"), ("lexical", "baseline_ts_rank"), ("vector", "baseline_exact_vector"))
PREVIEW_LIMIT = 8  # what the search box asks for
SEARCH_LIMIT = 20  # a results page

ProgressFactory = Callable[..., AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class BenchOptions:
    sizes: tuple[int, ...]
    dataset: Path
    chunks_per_item: int = 5
    seed: int = 42
    queries: int = 300
    baseline_queries: int = 100
    warmup: int = 30
    path_budget_s: float = 180.0
    http: bool = True
    load_seconds: float = 60.0
    load_users: int = 16
    # The load run again with every query embedded afresh by the default embedder (benchmarks/real_query.py).
    real_embedding_load: bool = True
    # A search across this instance and 2 peers on the same corpus, beside each peer alone (bench_federation).
    federation: bool = True
    # After everything else at each size: switch the corpus to another embedding model while searches run
    # (bench_flip); with keep_db on a copy of the kept corpus, which stays on its model for the next run.
    flip: bool = False
    flip_window_s: float = 20.0
    # The flip measured on a next space written by one table rewrite (bench_flip.flip_measure's ``prefill``).
    flip_prefill: bool = False
    workers: int = 2
    keep_db: bool = False
    # The mixed load once on the primary alone and once with reads on a streaming replica (bench_replica).
    replica: bool = False
    # The e5 engines side by side on this many of the dataset's chunks (0: skip; bench_embedding).
    embedding_texts: int = 200


@dataclass(frozen=True)
class BenchQueries:
    search: list[str]  # SciFact claims and 1–3 word keyword queries, mixed
    preview: list[str]  # what a visitor has typed so far: 1–3 words, the last often unfinished
    claims: list[str]
    words: list[str]


def _content_words(text: str) -> list[str]:
    stops = analysis.all_stop_words()
    return [w for w in analysis.WORD_RE.findall(text) if len(w) > 2 and analysis.fold(w) not in stops]


def queries_load(path: Path, *, count: int, seed: int) -> BenchQueries:
    """``count`` search queries (two thirds SciFact claims, one third 1–3 of their words) and ``count``
    typed previews, drawn with a seeded RNG from ``queries.jsonl``."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: --dataset must be a BEIR folder holding queries.jsonl.")
    with path.open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle if line.strip()]
    rng = random.Random(seed)
    claims = rng.sample(texts, min(len(texts), max(1, count * 2 // 3)))

    def window(text: str) -> list[str]:
        words = _content_words(text) or text.split()[:1]
        size = rng.randint(1, min(3, len(words)))
        start = rng.randint(0, len(words) - size)
        return words[start : start + size]

    words = [" ".join(window(rng.choice(texts))) for _ in range(count - len(claims))]
    search = claims + words
    rng.shuffle(search)
    preview = []
    for _ in range(count):
        typed = window(rng.choice(texts))
        last = typed[-1]
        if len(last) > 3 and rng.random() < 0.5:
            typed[-1] = last[: rng.randint(3, len(last) - 1)]
        preview.append(" ".join(typed).lower() if rng.random() < 0.7 else " ".join(typed))
    typist_words = [" ".join(window(rng.choice(texts))) for _ in range(count)]
    return BenchQueries(search=search, preview=preview, claims=claims, words=typist_words)



# --- the paths ---


def _items_sql() -> Fragment:
    items = ItemScope.of(ANONYMOUS).items_sql()
    assert items is not None  # no filters: the access rule alone always compiles
    return items


def path_preview(text: str) -> Any:
    return preview.preview_search(principal=ANONYMOUS, text=text, limit=PREVIEW_LIMIT)


def path_lexical(text: str) -> Any:
    parsed = query_parser.parse(text)
    return lexical.lexical_search(
        parsed=parsed, corpus="live", items_sql=_items_sql(), limit=settings.SEARCH["LANE_DEPTH"]
    )


def path_vector(text: str) -> Any:
    parsed = query_parser.parse(text)
    qvec = vector.query_embedding(parsed.text)
    return vector.vector_search(
        vector=qvec, corpus="live", items_sql=_items_sql(), limit=settings.SEARCH["LANE_DEPTH"]
    )


def path_hybrid(text: str) -> Any:
    return retrieve(query=RetrievalQuery(text=text, principal=ANONYMOUS, limit=SEARCH_LIMIT))


def path_hybrid_real_embedding(text: str) -> Any:
    corpus_provider = providers.get_provider()
    real = providers.provider_named(settings.DEFAULT_EMBEDDING_PROVIDER)
    provider = real_query.RealQueryEmbedding(corpus_provider, real)
    # never answered from the cache (the lane embeds the parsed text)
    vector.query_embedding_forget(query_parser.parse(text).text, provider=provider)
    # the lane's query provider is the active space's (spaces.space_provider asks get_provider first)
    original = spaces.__dict__["get_provider"]
    spaces.__dict__["get_provider"] = lambda: provider
    try:
        return path_hybrid(text)
    finally:
        spaces.__dict__["get_provider"] = original


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def baseline_words(text: str) -> list[int]:
    """The preview's word rule done naively, without its word indexes: titles that hold every typed word
    (ILIKE of each word), newest first, then items whose title and body together hold them (a scan of every
    live revision's text)."""
    items = _items_sql()
    items_sql, items_params = items.sql, list(items.params)
    patterns = [_like(word) for word in query_parser.normalize_query_text(text).split()] or ["%"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT i.id FROM search_contentitem i JOIN search_revision r ON r.id = i.live_revision_id "
            f"WHERE r.title ILIKE ALL(%s) AND i.id IN ({items_sql}) ORDER BY i.updated_at DESC, i.id LIMIT %s",
            [patterns, *items_params, PREVIEW_LIMIT],
        )
        ids = [r[0] for r in cursor.fetchall()]
        if len(ids) < PREVIEW_LIMIT:
            cursor.execute(
                f"SELECT i.id FROM search_contentitem i JOIN search_revision r ON r.id = i.live_revision_id "
                f"WHERE (r.title || ' ' || r.body) ILIKE ALL(%s) AND i.id IN ({items_sql}) "
                f"AND NOT (i.id = ANY(%s)) ORDER BY i.updated_at DESC, i.id LIMIT %s",
                [patterns, *items_params, ids, PREVIEW_LIMIT - len(ids)],
            )
            ids += [r[0] for r in cursor.fetchall()]
    return ids


TSRANK_TABLE = "bench_tsrank"


def baseline_ts_rank_build() -> float:
    """Stock full-text search: one ``to_tsvector('english', title || text)`` per live chunk, GIN-indexed."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TSRANK_TABLE}")
        cursor.execute(
            f"CREATE TABLE {TSRANK_TABLE} AS SELECT c.id AS chunk_id, c.item_id, "
            "to_tsvector('english', r.title || ' ' || c.text) AS tsv "
            "FROM search_chunk c JOIN search_revision r ON r.id = c.revision_id WHERE c.in_live"
        )
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(f"CREATE INDEX {TSRANK_TABLE}_tsv ON {TSRANK_TABLE} USING gin (tsv)")
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute(f"VACUUM ANALYZE {TSRANK_TABLE}")
    return time.monotonic() - started


def baseline_ts_rank(text: str) -> list[tuple[int, int]]:
    """``ts_rank`` over the GIN index with the query's words OR-ed (AND would miss most claims)."""
    items = _items_sql()
    items_sql, items_params = items.sql, list(items.params)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH q AS (SELECT replace(plainto_tsquery('english', %s)::text, ' & ', ' | ')::tsquery AS q) "
            f"SELECT b.chunk_id, b.item_id FROM {TSRANK_TABLE} b, q "
            f"WHERE b.tsv @@ q.q AND b.item_id IN ({items_sql}) "
            "ORDER BY ts_rank(b.tsv, q.q) DESC LIMIT %s",
            [text, *items_params, settings.SEARCH["LANE_DEPTH"]],
        )
        return list(cursor.fetchall())


def baseline_exact_vector(text: str) -> list[tuple[int, int, float]]:
    """The vector lane's query with an ORDER BY the HNSW index cannot serve: an exact scan and sort."""
    parsed = query_parser.parse(text)
    qvec = vector.query_embedding(parsed.text)
    space = space_writes.active_space()
    dims = int(space.dimensions)
    literal = "[" + ",".join(repr(float(v)) for v in qvec) + "]"
    items = _items_sql()
    items_sql, items_params = items.sql, list(items.params)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.id, c.item_id, 1 - ((c.embedding::vector({dims})) <=> %s::vector({dims})) "
            "FROM search_chunk c "
            f"WHERE c.embedding_model = %s AND c.in_live AND c.item_id IN ({items_sql}) "
            f"ORDER BY ((c.embedding::vector({dims})) <=> %s::vector({dims})) + 0 LIMIT %s",
            [literal, space.model, *items_params, literal, settings.SEARCH["LANE_DEPTH"]],
        )
        return list(cursor.fetchall())


IN_PROCESS: dict[str, tuple[Callable[[str], Any], str]] = {
    # path: (function, which query list it takes)
    "preview": (path_preview, "preview"),
    "lexical": (path_lexical, "search"),
    "vector": (path_vector, "search"),
    "hybrid": (path_hybrid, "search"),
    "hybrid_real_embedding": (path_hybrid_real_embedding, "search"),
    "baseline_words": (baseline_words, "preview"),
    "baseline_ts_rank": (baseline_ts_rank, "search"),
    "baseline_exact_vector": (baseline_exact_vector, "search"),
}


MIN_TIMED = 20  # a path's time budget never cuts it below this many timed queries


def time_calls(
    fn: Callable[[str], Any],
    texts: list[str],
    *,
    warmup: int,
    budget_s: float = float("inf"),
    progress: Callable[[int], None] | None = None,
) -> list[float]:
    """Call ``fn`` on the first ``warmup`` texts untimed, then on each text in turn, timing each call (ms).

    ``budget_s`` bounds a slow path: warm-up stops after a quarter of it, timing after all of it (but
    never before ``MIN_TIMED`` calls); the texts are shuffled, so the timed ones are a random sample.
    """
    started_all = time.monotonic()
    for text in texts[:warmup]:
        fn(text)
        if time.monotonic() - started_all > budget_s / 4:
            break
    started_all = time.monotonic()
    out = []
    for text in texts:
        started = time.perf_counter()
        fn(text)
        out.append((time.perf_counter() - started) * 1000)
        if progress:
            progress(1)
        if len(out) >= MIN_TIMED and time.monotonic() - started_all > budget_s:
            break
    return out


# --- EXPLAIN ANALYZE of the hot statements ---


@dataclass
class Statement:
    sql: str
    params: Any
    ms: float


@contextmanager
def captured_statements() -> Iterator[list[Statement]]:
    """Every statement run on the default connection inside the block, with its duration."""
    out: list[Statement] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            out.append(Statement(sql, params, (time.perf_counter() - started) * 1000))

    with connection.execute_wrapper(wrapper):
        yield out


def _is_query(sql: str) -> bool:
    return bool(re.match(r"\s*(SELECT|WITH)\b", sql, re.I))


def explain(fn: Callable[[str], Any], text: str, *, top: int = 1) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE, BUFFERS) of the ``top`` slowest queries ``fn(text)`` runs, each re-run in a
    rolled-back transaction after the ``SET`` statements (and ``set_config('hnsw.…')`` calls) that preceded
    it; the preview's statement timeouts are not replayed."""
    with captured_statements() as statements:
        fn(text)
    ranked = sorted(
        (i for i, s in enumerate(statements) if _is_query(s.sql)), key=lambda i: -statements[i].ms
    )
    plans = []
    for index in ranked[:top]:
        statement = statements[index]
        with transaction.atomic(), connection.cursor() as cursor:
            for earlier in statements[:index]:
                if re.match(r"\s*SET\b", earlier.sql, re.I) or "set_config('hnsw." in earlier.sql:
                    cursor.execute(earlier.sql, earlier.params)
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement.sql, statement.params)
            plan = "\n".join(r[0] for r in cursor.fetchall())
            transaction.set_rollback(True)
        plans.append(
            {
                "query": text,
                "ms": round(statement.ms, 2),
                "sql": statement.sql.strip(),
                "params": _short_params(statement.params),
                "plan": plan,
            }
        )
    return plans


def _short_params(params: Any) -> list[str]:
    out = []
    for p in params or []:
        text = repr(p)
        out.append(text if len(text) <= 80 else text[:60] + f"… ({len(text)} chars)")
    return out


def _median_text(texts: list[str], latencies: list[float]) -> str:
    """The query of median latency (``latencies`` may cover only the first texts, after a budget cut)."""
    ordered = sorted(range(len(latencies)), key=lambda i: latencies[i])
    return texts[ordered[len(ordered) // 2]]


# --- the run ---



def prewarm(log: Callable[[str], None]) -> float | None:
    """Read the searched relations into memory (pg_prewarm) before timing anything, so every run measures
    the steady state of a server that has been answering for a while, not the disk: a kept database can
    have been evicted from the kernel's cache since its last run. Returns the seconds it took, or None
    when pg_prewarm is not available (the report says so)."""
    started = time.perf_counter()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    except DatabaseError as exc:
        log(f"  pg_prewarm is not available ({exc.__class__.__name__}): measuring from whatever is cached")
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.oid::regclass::text FROM pg_class c
            WHERE c.relkind IN ('r', 'm', 'i', 't')
              AND (c.relname = ANY(%s)
                   OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname = ANY(%s))
                   OR c.oid IN (SELECT indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                                WHERE t.relname = ANY(%s) OR t.oid IN (
                                    SELECT reltoastrelid FROM pg_class WHERE relname = ANY(%s))))
            ORDER BY pg_relation_size(c.oid) DESC
            """,
            [list(PREWARM_TABLES)] * 4,
        )
        relations = [r[0] for r in cursor.fetchall()]
        for mode in ("read", "buffer"):  # the kernel's cache first, then shared buffers as far as they go
            for relation in relations:
                cursor.execute("SELECT pg_prewarm(%s::regclass, %s)", [relation, mode])
    return time.perf_counter() - started


def machine_speed(repeat: int = 5) -> dict[str, float]:
    """Two fixed workloads (best of ``repeat``, ms), so runs on different days can be compared: these shared
    machines vary by up to 2x from one day to the next, which moves every latency with them."""

    def best(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1000)
        return round(min(times), 1)

    def postgres() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM generate_series(1, 1000000)")
            cursor.fetchone()

    return {"python_ms": best(lambda: sum(i * i for i in range(1_000_000))), "postgres_ms": best(postgres)}


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import psutil

        memory_gb = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil is a dependency
        memory_gb = None
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        pg = cursor.fetchone()[0]
        cursor.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
            [
                [
                    "shared_buffers",
                    "work_mem",
                    "maintenance_work_mem",
                    "effective_cache_size",
                    "jit",
                    "max_parallel_workers_per_gather",
                ]
            ],
        )
        pg_settings = dict(cursor.fetchall())
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=settings.BASE_DIR,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "speed": machine_speed(),
        "nproc": os.cpu_count(),
        "memory_gb": memory_gb,
        "cpu": cpu,
        "python": platform.python_version(),
        "postgres": pg.split(" on ")[0],
        "postgres_settings": pg_settings,
        "loadavg_at_start": os.getloadavg(),
        "git_commit": commit,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _database_name(opts: BenchOptions, size: int) -> str:
    if opts.keep_db:
        return f"kb_bench_{size}_{opts.chunks_per_item}_{opts.seed}"
    return f"kb_bench_{os.getpid()}_{size}"


def bench_run(opts: BenchOptions, *, progress: ProgressFactory, log: Callable[[str], None]) -> dict[str, Any]:
    """Run the whole benchmark; returns the results (see ``docs/benchmarks-scale.md`` for the shape)."""
    pool = bench_corpus.text_pool_load(opts.dataset / "corpus.jsonl")
    queries = queries_load(opts.dataset / "queries.jsonl", count=opts.queries, seed=opts.seed)
    results: dict[str, Any] = {
        "sizes": {},
        "build": {},
        "explain": {},
        "errors": {},
        "machine": {},
        "options": {
            "sizes": list(opts.sizes),
            "chunks_per_item": opts.chunks_per_item,
            "seed": opts.seed,
            "queries": opts.queries,
            "baseline_queries": opts.baseline_queries,
            "warmup": opts.warmup,
            "path_budget_s": opts.path_budget_s,
            "load_seconds": opts.load_seconds if opts.http else 0,
            "load_users": opts.load_users,
            "embedding": f"hash-{settings.HASH_EMBEDDING_DIMENSIONS}",
            "lane_depth": settings.SEARCH["LANE_DEPTH"],
            "hnsw_ef_search": settings.SEARCH["HNSW_EF_SEARCH"],
            "replica": opts.replica,
            "federation": opts.federation,
            "flip": opts.flip,
            "flip_prefill": opts.flip_prefill,
        },
    }
    largest = max(opts.sizes)
    with override_settings(EMBEDDING_PROVIDER="hash", DEBUG=False):
        for size in sorted(opts.sizes):
            spec = bench_corpus.CorpusSpec(items=size, chunks_per_item=opts.chunks_per_item, seed=opts.seed)
            name = _database_name(opts, size)
            log(f"== {size} items: database {name}")
            with scratch_db.scratch_database(name=name, keep=opts.keep_db):
                if not results["machine"]:
                    results["machine"] = machine_info()
                if opts.keep_db and bench_corpus.corpus_loaded(spec):
                    load = bench_corpus.corpus_counts()
                    log(f"  reusing the kept corpus: {load.items} items, {load.chunks} chunks")
                else:
                    with progress(total=size, desc=f"build {size}") as update:
                        load = bench_corpus.corpus_load(
                            spec, pool, workers=opts.workers, progress=update, log=log
                        )
                log(f"  corpus: {load.items} items, {load.chunks} chunks")
                tsrank_s = baseline_ts_rank_build()
                prewarm_s = prewarm(log)
                results["build"][str(size)] = {
                    "items": load.items,
                    "chunks": load.chunks,
                    "reused": load.reused,
                    "seconds": {k: round(v, 2) for k, v in load.seconds.items()},
                    "baseline_ts_rank_table_s": round(tsrank_s, 2),
                    "prewarm_s": round(prewarm_s, 2) if prewarm_s is not None else None,
                }
                measured, plans = _measure_in_process(opts, queries, progress=progress, size=size)
                results["explain"][str(size)] = plans
                if opts.http:
                    url = scratch_db.database_url(name)
                    http, errors, load_result = _measure_http(
                        opts, queries, url, progress=progress, size=size, with_load=not opts.replica, log=log
                    )
                    measured.update(http)
                    results["errors"][str(size)] = errors
                    if opts.replica and opts.load_seconds > 0:
                        from benchmarks import bench_replica

                        compared = bench_replica.replica_compare(opts, queries, url, size=size, log=log)
                        results.setdefault("replica", {})[str(size)] = compared
                        load_result = compared.get("single")
                    if opts.federation:
                        from benchmarks import bench_federation

                        with progress(total=len(queries.search), desc=f"federated @{size}") as update:
                            results.setdefault("federation", {})[str(size)] = bench_federation.federated_latency(
                                url, queries.search, warmup=min(opts.warmup, len(queries.search)),
                                budget_s=opts.path_budget_s, progress=update,
                            )
                        log(_federation_line(results["federation"][str(size)]))
                    if load_result is not None:
                        results.setdefault("load_sizes", {})[str(size)] = load_result
                        if size == largest:
                            results["load"] = load_result
                results["sizes"][str(size)] = {p: measured[p] for p in PATHS if p in measured}
                log(_summary_line(size, results["sizes"][str(size)]))
                if opts.flip and not opts.keep_db:
                    results.setdefault("flip", {})[str(size)] = _flip(opts, queries, log)
            if opts.flip and opts.keep_db:
                # The kept corpus stays as it is (on its model, for the next run): the switch runs on a copy.
                results.setdefault("flip", {})[str(size)] = _flip_on_copy(opts, queries, name, size, log)
    results["ratios"] = ratios(results["sizes"])
    results["growth_p50"] = growth(results["sizes"])
    if opts.embedding_texts > 0:
        from benchmarks import bench_embedding

        results["embedding"] = bench_embedding.engines_compare(
            bench_embedding.chunk_texts_load(opts.dataset / "corpus.jsonl", opts.embedding_texts),
            queries.search[:100],
            log=log,
        )
    return results


def _flip(opts: BenchOptions, queries: BenchQueries, log: Callable[[str], None]) -> dict[str, Any]:
    from benchmarks import bench_flip

    return bench_flip.flip_measure(
        queries.search, window_s=opts.flip_window_s, prefill=opts.flip_prefill, log=log
    )


def _flip_on_copy(
    opts: BenchOptions, queries: BenchQueries, kept: str, size: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """``_flip`` on a copy of the kept corpus ``kept``, dropped afterwards. A copy that cannot be made (a session
    still on ``kept``: psql, another bench) is reported as the flip's error; what was measured before stands."""
    copy = f"kb_bench_flip_{os.getpid()}_{size}"
    log(f"  flip: copying {kept} to {copy}")
    try:
        scratch_db.scratch_database_copy(template=kept, name=copy)
    except DatabaseError as exc:
        log(f"  flip: not run, the kept corpus could not be copied: {exc}")
        return {"error": f"the kept corpus could not be copied: {str(exc)[:500]}"}
    try:
        spaces.space_caches_forget()  # a copy of the same name may have been switched earlier in this process
        with scratch_db.scratch_database(name=copy, keep=True):
            return _flip(opts, queries, log)
    finally:
        scratch_db.scratch_database_drop(copy)
        spaces.space_caches_forget()


# The kinds of typed fragments the completeness report draws from the corpus (beside the SciFact-claim
# fragments of ``queries.preview``): words as they stand in an item's title or body, the last one often cut
# short as while typing, and fragments with one typo in a word of 5 letters or more.
FRAGMENT_KINDS = ("one_word", "two_words", "three_words", "typo")


def _typo(word: str, rng: random.Random) -> str:
    """``word`` with one edit: a letter changed, dropped, doubled or swapped with the next."""
    at = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("change", "drop", "double", "swap"))
    if kind == "change":
        letter = rng.choice([c for c in "aeioulnrst" if c != word[at]])
        return word[:at] + letter + word[at + 1 :]
    if kind == "drop":
        return word[:at] + word[at + 1 :]
    if kind == "double":
        return word[:at] + word[at] + word[at:]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]


def corpus_fragments(count: int, *, seed: int) -> dict[str, list[str]]:
    """``count`` typed fragments of each of ``FRAGMENT_KINDS``, drawn with a seeded RNG from the titles and
    bodies of items anonymous visitors may read: consecutive words (1, 2 or 3), the last cut to a prefix of
    3 letters or more half the time; a typo fragment is 1 or 2 words, one of 5 letters or more mistyped."""
    rng = random.Random(seed)
    items = _items_sql()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.title, left(r.body, 3000) FROM search_contentitem i "
            f"JOIN search_revision r ON r.id = i.live_revision_id WHERE i.id IN ({items.sql}) "
            f"ORDER BY md5(i.id::text || %s) LIMIT %s",
            [*items.params, str(seed), count * len(FRAGMENT_KINDS) * 2],
        )
        texts = [title if rng.random() < 0.3 else body for title, body in cursor.fetchall()]
    out: dict[str, list[str]] = {kind: [] for kind in FRAGMENT_KINDS}
    for i, text in enumerate(texts):
        kind = FRAGMENT_KINDS[i % len(FRAGMENT_KINDS)]
        if len(out[kind]) >= count:
            continue
        words = [w for w in analysis.WORD_RE.findall(text) if len(w) > 1]
        size = {"one_word": 1, "two_words": 2, "three_words": 3, "typo": rng.randint(1, 2)}[kind]
        if len(words) < size:
            continue
        start = rng.randint(0, len(words) - size)
        typed = words[start : start + size]
        if kind == "typo":
            long = [j for j, w in enumerate(typed) if len(w) >= 5]
            if not long:
                continue
            j = rng.choice(long)
            typed[j] = _typo(typed[j], rng)
        elif len(typed[-1]) > 3 and rng.random() < 0.5:
            typed[-1] = typed[-1][: rng.randint(3, len(typed[-1]) - 1)]
        out[kind].append(" ".join(typed).lower() if rng.random() < 0.7 else " ".join(typed))
    return out


def preview_completeness(fragments: dict[str, list[str]]) -> dict[str, Any]:
    """What the preview's time budget costs in results: each fragment is previewed within the budget (as
    timed) and without it (every step runs to the end); a fragment is complete when the budgeted preview
    shows every item the unbudgeted one puts in its first ``PREVIEW_LIMIT``. Per kind and overall: how many
    fragments, how many have matches, how many of those showed some, and how many are complete."""

    def tally(pairs: list[tuple[list[int], list[int]]]) -> dict[str, Any]:
        matched = [(w, u) for w, u in pairs if u]
        complete = sum(1 for w, u in pairs if set(u) <= set(w))
        return {
            "previews": len(pairs),
            "with_matches": len(matched),
            "showed_some": sum(1 for w, _ in matched if w),
            "showed_all": sum(1 for w, u in matched if set(u) <= set(w)),
            "complete": complete,
            "share": round(complete / len(pairs), 4) if pairs else None,
        }

    by_kind: dict[str, list[tuple[list[int], list[int]]]] = {}
    for kind, texts in fragments.items():
        for text in texts:
            within = [h.id for h in path_preview(text)]
            with override_settings(SEARCH={**settings.SEARCH, "PREVIEW_BUDGET_MIN_CHUNKS": 10**15}):
                unbounded = [h.id for h in path_preview(text)]
            by_kind.setdefault(kind, []).append((within, unbounded))
    every = [pair for pairs in by_kind.values() for pair in pairs]
    return {
        **tally(every),
        "by_kind": {kind: tally(pairs) for kind, pairs in by_kind.items()},
        "budgeted": preview.preview_budgeted(),
    }


def _measure_in_process(
    opts: BenchOptions, queries: BenchQueries, *, progress: ProgressFactory, size: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    # Query embeddings are cached before anything is timed (see the module docstring); the default
    # embedder is loaded before its path is timed.
    for text in queries.search:
        vector.query_embedding(query_parser.parse(text).text)
    providers.embed_query(providers.provider_named(settings.DEFAULT_EMBEDDING_PROVIDER), "warm-up")
    measured: dict[str, Any] = {}
    plans: dict[str, Any] = {}
    for path, (fn, kind) in IN_PROCESS.items():
        texts = getattr(queries, kind)
        if path.startswith("baseline_"):
            texts = texts[: opts.baseline_queries]
        with progress(total=len(texts), desc=f"{path} @{size}") as update:
            latencies = time_calls(
                fn, texts, warmup=min(opts.warmup, len(texts)), budget_s=opts.path_budget_s, progress=update
            )
        measured[path] = {**percentiles(latencies), "n": len(latencies)}
        plans[path] = explain(fn, _median_text(texts, latencies), top=2 if path == "preview" else 1)
    fragments = {"claims": queries.preview[: opts.baseline_queries],
                 **corpus_fragments(opts.baseline_queries, seed=opts.seed)}
    measured["preview"]["completeness"] = preview_completeness(fragments)
    return measured, plans


def _measure_http(
    opts: BenchOptions,
    queries: BenchQueries,
    database_url: str,
    *,
    progress: ProgressFactory,
    size: int,
    with_load: bool,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, Any] | None]:
    measured: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    load: dict[str, Any] | None = None
    kinds: dict[str, Callable[[str], bench_http.Request]] = {
        "http_search": bench_http.search_request,
        "http_graphql": bench_http.graphql_request,
        "http_mcp": bench_http.mcp_request,
    }
    with bench_http.web_server(database_url=database_url) as base_url:
        pool = bench_http.ClientPool(base_url, block=10 + (size % 7))
        try:
            for path, make in kinds.items():
                with progress(total=len(queries.search), desc=f"{path} @{size}") as update:
                    timed = bench_http.round_trips(
                        pool,
                        make,
                        queries.search,
                        warmup=min(opts.warmup, len(queries.search)),
                        budget_s=opts.path_budget_s,
                        progress=update,
                    )
                measured[path] = {
                    **percentiles(timed.latencies_ms),
                    "n": len(timed.latencies_ms),
                    "errors": len(timed.errors),
                }
                errors[path] = sorted(set(timed.errors))[:10]
        finally:
            pool.close()
        if with_load and opts.load_seconds > 0:
            log(f"  sustained load: {opts.load_users} users for {opts.load_seconds:.0f} s")
            result = _load_run(opts, queries, base_url)
            load = load_summary(result, users=opts.load_users, items=size)
    if with_load and opts.load_seconds > 0 and opts.real_embedding_load:
        measured.update(_measure_http_real_embedding(opts, queries, database_url, progress=progress, size=size,
                                                     log=log, load=load))
    return measured, errors, load


def _load_run(opts: BenchOptions, queries: BenchQueries, base_url: str) -> bench_http.LoadResult:
    return bench_http.load_run(
        base_url, claims=queries.claims, words=queries.words, users=opts.load_users, seconds=opts.load_seconds,
        seed=opts.seed,
    )


def _measure_http_real_embedding(
    opts: BenchOptions,
    queries: BenchQueries,
    database_url: str,
    *,
    progress: ProgressFactory,
    size: int,
    log: Callable[[str], None],
    load: dict[str, Any] | None,
) -> dict[str, Any]:
    """``http_search`` round trips and the mixed load again, on a web server whose searches each embed the
    query afresh with the default embedder (``benchmarks/real_query.py``); the load goes in ``load`` under
    ``real_embedding``."""
    measured: dict[str, Any] = {}
    extra_env = {real_query.ENV_FLAG: "1", "E5_ENGINE": settings.E5_ENGINE}
    with bench_http.web_server(database_url=database_url, extra_env=extra_env, startup_timeout=180.0) as base_url:
        pool = bench_http.ClientPool(base_url, block=30 + (size % 7))
        try:
            with progress(total=len(queries.search), desc=f"http_search_real_embedding @{size}") as update:
                timed = bench_http.round_trips(
                    pool,
                    bench_http.search_request,
                    queries.search,
                    warmup=min(opts.warmup, len(queries.search)),
                    budget_s=opts.path_budget_s,
                    progress=update,
                )
        finally:
            pool.close()
        measured["http_search_real_embedding"] = {
            **percentiles(timed.latencies_ms),
            "n": len(timed.latencies_ms),
            "errors": len(timed.errors),
        }
        log(f"  sustained load, real query embedding: {opts.load_users} users for {opts.load_seconds:.0f} s")
        result = _load_run(opts, queries, base_url)
    if load is not None:
        engine = f"{settings.DEFAULT_EMBEDDING_PROVIDER} on {settings.E5_ENGINE}"
        load["real_embedding"] = {**load_summary(result, users=opts.load_users, items=size), "engine": engine}
    return measured



def ratios(sizes: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """ours / baseline at p50 and p95 per size (below 1 means ours is faster; 0.1 = ten times faster)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for size, paths in sizes.items():
        out[size] = {}
        for ours, base in PAIRS:
            if ours in paths and base in paths:
                out[size][f"{ours}/{base}"] = {
                    q: (
                        round(paths[ours][f"{q}_ms"] / paths[base][f"{q}_ms"], 4)
                        if paths[base][f"{q}_ms"]
                        else None
                    )
                    for q in ("p50", "p95")
                }
    return out


def growth(sizes: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """p50 at the largest size / p50 at the smallest, per path (the cost of more items)."""
    if len(sizes) < 2:
        return {}
    keys = sorted(sizes, key=int)
    small, large = sizes[keys[0]], sizes[keys[-1]]
    return {
        path: (round(large[path]["p50_ms"] / small[path]["p50_ms"], 2) if small[path]["p50_ms"] else None)
        for path in PATHS
        if path in small and path in large
    }


def _federation_line(measured: dict[str, Any]) -> str:
    return (f"  federated over 2 peers p50 {measured['federated_peers_only']['p50_ms']:.1f} ms, slower peer alone "
            f"{measured['slowest_peer_p50']:.1f} ms: overhead {measured['overhead_p50_ms']:+.1f} ms (target ≤ 15); "
            f"with this instance too {measured['federated']['p50_ms']:.1f} ms; over 2 replay peers (no CPU) "
            f"{measured['replay']['federated_p50']:.1f} ms against {measured['replay']['slowest_peer_p50']:.1f} ms: "
            f"overhead {measured['replay']['overhead_p50_ms']:+.1f} ms, "
            f"{measured['replay']['past_slower_delay_p50_ms']} ms past the slower delay")


def _summary_line(size: int, paths: dict[str, Any]) -> str:
    return f"  {size}: " + ", ".join(
        f"{p} p50 {v['p50_ms']:.1f}/p95 {v['p95_ms']:.1f}" for p, v in paths.items()
    )


def json_line(results: dict[str, Any]) -> str:
    """The ``--json`` line: sizes → path → percentiles, the load run, ratios, growth and build times."""
    keep = (
        "sizes", "load", "load_sizes", "replica", "ratios", "growth_p50", "build", "machine", "options", "embedding",
        "federation", "flip",
    )
    return json.dumps({k: results[k] for k in keep if k in results}, default=str)
