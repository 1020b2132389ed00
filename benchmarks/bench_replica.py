"""``bench --replica``: the sustained mixed load on the primary alone, then with reads on a streaming replica.

Both runs are the same ``bench_http.load_run`` (same users, seconds, seed and queries) against the real web app
(uvicorn, two workers), each after an untimed warm-up of the same load. The replica is a hot standby of the
bench database's server, copied with ``pg_basebackup`` and started here (``config.standby``: the whole server
is copied, every database on it; it is stopped and deleted at the end). Reported for each run: throughput,
latency percentiles, errors, the CPU seconds the primary's server processes (postmaster and every backend)
and the replica's spent during the timed run, and, with the replica, how far behind it was (sampled every
0.5 s) and the share of reads ``/metrics`` counted on it.

On one machine the primary and the replica share the same cores, so the throughput of the second run says
little about two machines; the primary CPU it saves (the reads it no longer serves) is the meaningful figure.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from django.db import connection

from benchmarks import bench_http
from benchmarks.bench_corpus import PREWARM_TABLES
from benchmarks.bench_stats import load_summary

WARMUP_FRACTION = 0.25  # of --load-seconds, at least 5 s: the untimed load before each timed run
LAG_SAMPLE_S = 0.5


def server_pid() -> int | None:
    """The postmaster of the server ``connection`` talks to, when it runs on this machine (its data folder is
    readable here), else None."""
    with connection.cursor() as cursor:
        try:
            cursor.execute("SELECT current_setting('data_directory')")
        except Exception:  # noqa: BLE001 - not allowed to read it: not ours to measure
            return None
        data_dir = Path(cursor.fetchone()[0])
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def server_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) of a server: the postmaster, every live backend and worker under it, and
    the backends that have exited (the postmaster's children times), so backends that come and go count."""
    if pid is None:
        return None
    import psutil

    try:
        postmaster = psutil.Process(pid)
        own = postmaster.cpu_times()
        total = own.user + own.system + own.children_user + own.children_system
        for child in postmaster.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:  # exited in between: its time is in the postmaster's children times now
                continue
            total += times.user + times.system
    except psutil.Error:
        return None
    return float(total)


@contextmanager
def lag_sampled(lag: Callable[[], float | None]) -> Iterator[list[float]]:
    """Samples of ``lag()`` every ``LAG_SAMPLE_S`` while the block runs (unanswered samples left out)."""
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(LAG_SAMPLE_S):
            value = lag()
            if value is not None:
                samples.append(value)

    thread = threading.Thread(target=sample, name="bench-lag", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join(timeout=10)


def reads_by_database(base_url: str) -> dict[str, float]:
    """``kb_db_reads_total`` by database from the web app's ``/metrics`` (all its workers)."""
    text = httpx.get(base_url + "/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r'^kb_db_reads_total\{database="([^"]+)"\} (\S+)$',
                                                                  text, re.M)}


def _timed_load(
    opts: Any,
    queries: Any,
    database_url: str,
    *,
    size: int,
    extra_env: dict[str, str],
    pids: dict[str, int | None],
    lag: Callable[[], float | None] | None,
    log: Callable[[str], None],
) -> dict[str, Any]:

    with bench_http.web_server(database_url=database_url, extra_env=extra_env) as base_url:
        warmup_s = max(5.0, opts.load_seconds * WARMUP_FRACTION)
        bench_http.load_run(base_url, claims=queries.claims, words=queries.words, users=opts.load_users,
                            seconds=warmup_s, seed=opts.seed + 1)
        reads_before = reads_by_database(base_url)
        cpu_before = {name: server_cpu_s(pid) for name, pid in pids.items()}
        with lag_sampled(lag or (lambda: None)) as lags:
            result = bench_http.load_run(base_url, claims=queries.claims, words=queries.words,
                                         users=opts.load_users, seconds=opts.load_seconds, seed=opts.seed)
        cpu_after = {name: server_cpu_s(pid) for name, pid in pids.items()}
        reads_after = reads_by_database(base_url)
    summary = load_summary(result, users=opts.load_users, items=size)
    for name in pids:
        before, after = cpu_before[name], cpu_after[name]
        spent = round(after - before, 2) if before is not None and after is not None else None
        summary[f"{name}_cpu_s"] = spent
        summary[f"{name}_cpu_ms_per_request"] = (
            round(1000 * spent / result.requests, 3) if spent is not None and result.requests else None
        )
    reads = {db: reads_after.get(db, 0.0) - reads_before.get(db, 0.0) for db in reads_after}
    total_reads = sum(reads.values())
    summary["reads"] = {db: int(n) for db, n in sorted(reads.items())}
    summary["reads_on_replicas_share"] = (
        round(sum(n for db, n in reads.items() if db != "default") / total_reads, 4) if total_reads else None
    )
    if lag is not None:
        summary["lag_max_s"] = round(max(lags), 3) if lags else None
        summary["lag_mean_s"] = round(sum(lags) / len(lags), 3) if lags else None
        summary["lag_samples"] = len(lags)
    log(
        f"  {'with replica' if lag else 'primary only'}: {summary['requests']} requests, {summary['errors']} "
        f"errors, {summary['rps']} req/s, p95 {summary['p95_ms']:.1f} ms, primary CPU {summary.get('primary_cpu_s')} s"
    )
    return summary


def replica_compare(
    opts: Any, queries: Any, database_url: str, *, size: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """The two load runs (``single``: the primary alone; ``replica``: reads on a streaming replica) and the
    figures that compare them. A replica that cannot be started is reported as ``error``, not raised."""
    from urllib.parse import unquote, urlparse

    from config.standby import standby_create

    primary_pid = server_pid()
    out: dict[str, Any] = {"items": size, "primary_pid_found": primary_pid is not None}
    log(f"  replica comparison: primary only, {opts.load_users} users for {opts.load_seconds:.0f} s")
    out["single"] = _timed_load(opts, queries, database_url, size=size, extra_env={},
                                pids={"primary": primary_pid}, lag=None, log=log)
    log("  starting a streaming replica of the bench database's server (pg_basebackup)")
    started = time.monotonic()
    try:
        standby = standby_create(database_url, database=unquote(urlparse(database_url).path.lstrip("/")))
        standby.wait_caught_up(timeout=600)
    except Exception as exc:  # noqa: BLE001 - the rest of the bench stands without it
        log(f"  no replica: {exc}")
        out["error"] = str(exc)[:500]
        return out
    out["replica_start_s"] = round(time.monotonic() - started, 1)
    try:
        _prewarm(standby.url)
        log(f"  with reads on the replica ({standby.url.split('?')[0]}), same load")
        out["replica"] = _timed_load(
            opts, queries, database_url, size=size, extra_env={"DATABASE_REPLICA_URLS": standby.url},
            pids={"primary": primary_pid, "replica": standby.pid()}, lag=standby.lag_s, log=log,
        )
    finally:
        standby.destroy()
    single, replica = out["single"], out["replica"]
    if single.get("primary_cpu_ms_per_request") and replica.get("primary_cpu_ms_per_request") is not None:
        out["primary_cpu_per_request_saved"] = round(
            1 - replica["primary_cpu_ms_per_request"] / single["primary_cpu_ms_per_request"], 3
        )
    if single["rps"]:
        out["throughput_ratio"] = round(replica["rps"] / single["rps"], 3)
    return out


def _prewarm(url: str) -> None:
    """The searched relations into the replica's memory, as ``bench.prewarm`` does on the primary (pg_prewarm,
    created on the primary, streamed with the rest), so neither run starts from a cold cache."""
    import psycopg


    try:
        with psycopg.connect(url, autocommit=True) as conn:
            relations = [r[0] for r in conn.execute(
                """SELECT c.oid::regclass::text FROM pg_class c
                   WHERE c.relkind IN ('r', 'm', 'i', 't') AND (c.relname = ANY(%s)
                      OR c.oid IN (SELECT indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                                   WHERE t.relname = ANY(%s)))""",
                [list(PREWARM_TABLES), list(PREWARM_TABLES)],
            ).fetchall()]
            for relation in relations:
                conn.execute("SELECT pg_prewarm(%s::regclass, 'buffer')", [relation])
    except psycopg.Error:
        pass  # no pg_prewarm: the warm-up load warms it instead
