"""Against the product as ``manage.py up`` runs it: uvicorn with two workers sharing their metrics.

An MCP agent talks to it with the official client over streamable HTTP; ``/metrics`` (whichever worker
answers) counts the requests of both workers, with handshakes, listings and each tool apart.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from analytics.metrics import multiprocess_dir_prepare
from analytics.models import QueryLog
from tests.mcp_api.client import database_url_for, mcp_calls, spawn_uvicorn

WORKERS = 2


@contextlib.contextmanager
def two_worker_server(db_name: str, metrics_dir: Path, startup_timeout: float = 90.0) -> Iterator[str]:
    proc, base_url = spawn_uvicorn(
        {
            "DATABASE_URL": database_url_for(db_name),
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.test"),
            "CONN_MAX_AGE": "0",
            "LOG_LEVEL": "WARNING",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        },
        workers=WORKERS,
    )
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {proc.returncode} before serving")
            try:
                httpx.get(base_url + "/admin/login/", timeout=1.0)
                # both workers up: each writes its metric files when Django starts
                if len({f.name.rsplit("_", 1)[-1] for f in metrics_dir.glob("*.db")}) >= WORKERS:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start {WORKERS} workers within {startup_timeout} s")
            time.sleep(0.2)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def item_counts_per_worker(metrics_dir: Path) -> list[float]:
    """Item-page requests counted in each worker's histogram file."""
    counts = []
    for path in metrics_dir.glob("histogram_*.db"):
        merged = MultiProcessCollector.merge([str(path)])
        counts.append(
            sum(
                s.value
                for m in merged
                for s in m.samples
                if s.name == "kb_http_request_duration_seconds_count" and s.labels.get("operation") == "item"
            )
        )
    return counts


def sample(text: str, name: str, **labels: str) -> float:
    """One sample's value from exposition text (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


@pytest.mark.django_db(transaction=True)
def test_two_workers_share_metrics_and_the_agent_session_is_logged(
    corpus: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the server as `up` starts it (a fresh metrics folder, two workers)
    from django.db import connection

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics_dir = Path(multiprocess_dir_prepare(tmp_path))
    (metrics_dir / "counter_999999.db").write_bytes(b"stale")  # a previous run's file is removed on start
    metrics_dir = Path(multiprocess_dir_prepare(tmp_path))
    assert not (metrics_dir / "counter_999999.db").exists()
    with two_worker_server(connection.settings_dict["NAME"], metrics_dir) as base_url:
        # when pages are served by both workers (a new connection each time; the kernel decides which
        # worker accepts it, so keep going until each has served some)
        sent = 0
        deadline = time.monotonic() + 60
        while sent < 12 or sum(1 for n in item_counts_per_worker(metrics_dir) if n) < WORKERS:
            assert time.monotonic() < deadline, f"one worker accepted all {sent} connections for 60 s"
            assert httpx.get(base_url + "/items/no-such-item", timeout=10).status_code == 404
            sent += 1
        # and an agent shakes hands, searches and reads one result
        (find,) = mcp_calls(base_url, [("find", {"query": "discount approval"})])
        item_id = find.structuredContent["results"][0]["item_id"]  # type: ignore[index]
        (read,) = mcp_calls(base_url, [("read", {"item_id": item_id})])
        assert not find.isError and not read.isError
        scrapes = [httpx.get(base_url + "/metrics", timeout=10).text for _ in range(6)]
    # then every scrape, whichever worker answered, counts the requests of both
    items = {
        sample(t, "kb_http_request_duration_seconds_count", surface="browse", operation="item", tool="")
        for t in scrapes
    }
    assert items == {float(sent)}
    last = scrapes[-1]
    assert (
        sample(last, "kb_http_request_duration_seconds_count", surface="mcp", operation="initialize", tool="")
        == 2
    )
    assert (
        sample(
            last, "kb_http_request_duration_seconds_count", surface="mcp", operation="tools/call", tool="find"
        )
        == 1
    )
    assert (
        sample(
            last, "kb_http_request_duration_seconds_count", surface="mcp", operation="tools/call", tool="read"
        )
        == 1
    )
    assert sample(last, "kb_search_duration_seconds_count", surface="mcp", tool="find") == 1
    # (the values live in one file per worker process; their sum is what /metrics showed)
    per_worker = item_counts_per_worker(metrics_dir)
    assert len(per_worker) == WORKERS and all(per_worker) and sum(per_worker) == sent
    # and the search is in the log, credited with the agent's read
    row = QueryLog.objects.get()
    assert (row.surface, row.tool, row.principal_kind, row.clicked_item_id) == (
        "mcp",
        "find",
        "anonymous",
        item_id,
    )
