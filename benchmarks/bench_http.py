"""HTTP side of ``bench``: the real ASGI app under uvicorn, round-trip timings and a mixed-load run.

The server is the product as ``manage.py up`` runs it (uvicorn, ``config.asgi``, two workers),
pointed at the bench's scratch database. It listens on loopback only and is stopped on exit.

Rate limits stay in the measured path. Each simulated visitor or agent calls from its own loopback
address (``127.0.x.y``; Linux routes all of 127/8 to ``lo``), the way distinct users reach the server
from distinct addresses, so no single caller outruns its per-minute budget. A 429 counts as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings

from config.runtime import web_command

GRAPHQL_SEARCH = (
    "query Bench($q: String!) { search(input: {query: $q, limit: 20}) { totalCount partialMatch degraded "
    "hits { itemId highlightedTitle highlightedContent score lanes } } }"
)
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def client_addresses(count: int, *, block: int = 10) -> list[str]:
    """``count`` distinct loopback source addresses, ``127.<block>.x.y`` upwards (never 127.0.0.1)."""
    out = []
    for n in range(count):
        high, low = divmod(n, 250)
        out.append(f"127.{block + high // 250}.{high % 250 + 1}.{low + 1}")
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def web_server(
    *, database_url: str, workers: int = 2, startup_timeout: float = 90.0, extra_env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run the product's ASGI app against ``database_url`` (``extra_env`` on top, e.g. ``DATABASE_REPLICA_URLS``);
    yields its base URL, stops it on exit."""
    port = _free_port()
    metrics_dir = tempfile.mkdtemp(prefix="kb-bench-metrics-")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.base"),
        "EMBEDDING_PROVIDER": "hash",
        "HASH_EMBEDDING_DIMENSIONS": str(settings.HASH_EMBEDDING_DIMENSIONS),
        "REDIS_URL": settings.REDIS_URL,
        "SEARCH_AUTO_BUILD": "false",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": metrics_dir,
        "DATABASE_REPLICA_URLS": "",
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        web_command(host="127.0.0.1", port=port, workers=workers),
        cwd=settings.BASE_DIR,
        env=env,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"uvicorn exited with {proc.returncode} before serving; run it by hand to see why"
                )
            try:
                if httpx.get(base_url + "/admin/login/", timeout=2.0).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not answer within {startup_timeout} s")
            time.sleep(0.3)
        yield base_url
    finally:
        _stop(proc)
        for leftover in os.listdir(metrics_dir):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(metrics_dir, leftover))
        with contextlib.suppress(OSError):
            os.rmdir(metrics_dir)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own process group (its workers), then SIGKILL if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


# --- one request of each kind (the same shapes the sync timings and the load run send) ---


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any = None
    params: dict[str, str] | None = None
    headers: dict[str, str] | None = None

    def httpx_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request`` / ``AsyncClient.request`` for this request."""
        return {
            "method": self.method, "url": self.path, "json": self.body, "params": self.params,
            "headers": self.headers,
        }


def search_request(text: str) -> Request:
    return Request("POST", "/api/search", {"query": text, "limit": 20})


def graphql_request(text: str) -> Request:
    return Request("POST", "/graphql", {"query": GRAPHQL_SEARCH, "variables": {"q": text}})


def mcp_request(text: str, request_id: int = 1) -> Request:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "find", "arguments": {"query": text, "limit": 10}},
    }
    return Request("POST", "/mcp", body, headers=MCP_HEADERS)


def preview_request(text: str) -> Request:
    return Request("GET", "/api/search/preview", params={"q": text, "limit": "8"})


REFERENCE_RE = re.compile(r"\(reference [0-9a-f]+\)")


def problem_kind(message: str) -> str:
    """A failure message without per-request parts (error references), so equal failures count together."""
    return REFERENCE_RE.sub("(reference …)", message)


def response_problem(request: Request, response: httpx.Response) -> str | None:
    """Why a response is a failure (status, GraphQL errors, MCP tool error), or None when it is a success."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    if request.path == "/graphql":
        data = response.json()
        if data.get("errors"):
            return problem_kind("graphql: " + str(data["errors"][0].get("message", ""))[:120])
    elif request.path == "/mcp":
        text = response.text
        if text.startswith(("event:", "data:")):  # an SSE answer: the JSON is on the data line
            text = next((line[5:] for line in text.splitlines() if line.startswith("data:")), "{}")
        data = json.loads(text)
        if "error" in data:
            return problem_kind("mcp: " + str(data["error"].get("message", ""))[:120])
        if data.get("result", {}).get("isError"):
            return problem_kind("mcp tool error: " + str(data["result"]["content"][0].get("text", ""))[:120])
    elif request.path == "/api/search" and isinstance(request.body, dict) and request.body.get("sources"):
        # a federated search answers 200 even when a source failed: that source's time is then not measured
        failed = [s for s in response.json().get("sources", []) if s.get("status") != "ok"]
        if failed:
            return problem_kind(f"source {failed[0].get('name')}: {failed[0].get('status')}")
    return None


# --- sequential round trips ---


@dataclass
class Timed:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ClientPool:
    """Keep-alive clients, one per loopback address, used in turn (each stays within its rate limits)."""

    def __init__(self, base_url: str, *, addresses: int = 64, block: int = 10) -> None:
        self.clients = [
            httpx.Client(
                base_url=base_url, timeout=60.0, transport=httpx.HTTPTransport(local_address=address)
            )
            for address in client_addresses(addresses, block=block)
        ]
        self._next = itertools.cycle(self.clients)

    def send(self, request: Request) -> tuple[float, str | None]:
        client = next(self._next)
        started = time.perf_counter()
        try:
            response = client.request(**request.httpx_arguments())
            problem = response_problem(request, response)
        except httpx.HTTPError as exc:
            problem = f"{exc.__class__.__name__}"
        return (time.perf_counter() - started) * 1000, problem

    def close(self) -> None:
        for client in self.clients:
            client.close()


def round_trips(
    pool: ClientPool,
    make: Callable[[str], Request],
    texts: list[str],
    *,
    warmup: int,
    budget_s: float = float("inf"),
    min_timed: int = 20,
    progress: Callable[[int], None] | None = None,
) -> Timed:
    """Sequential round trips (one request in flight), after ``warmup`` untimed ones; bounded like
    ``bench.time_calls`` (warm-up by a quarter of ``budget_s``, timing by all of it, at least
    ``min_timed``)."""
    started_all = time.monotonic()
    for text in texts[:warmup]:
        pool.send(make(text))
        if time.monotonic() - started_all > budget_s / 4:
            break
    started_all = time.monotonic()
    timed = Timed()
    for text in texts:
        elapsed, problem = pool.send(make(text))
        timed.latencies_ms.append(elapsed)
        if problem:
            timed.errors.append(problem)
        if progress:
            progress(1)
        if len(timed.latencies_ms) >= min_timed and time.monotonic() - started_all > budget_s:
            break
    return timed


# --- sustained mixed load ---

# Session kinds and their shares: visitors typing (live preview, then the search on Enter), API
# searches, GraphQL searches and MCP agents.
LOAD_MIX = (("typist", 0.5), ("search", 0.2), ("graphql", 0.15), ("mcp", 0.15))


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def _load(
    base_url: str,
    *,
    claims: list[str],
    words: list[str],
    users: int,
    seconds: float,
    max_requests: int,
    seed: int,
    think_s: float,
) -> LoadResult:
    result = LoadResult()
    addresses = itertools.cycle(client_addresses(4000, block=20))
    deadline = time.monotonic() + seconds
    rng = random.Random(seed)
    kinds = [k for k, _ in LOAD_MIX]
    weights = [w for _, w in LOAD_MIX]

    async def send(client: httpx.AsyncClient, kind: str, request: Request) -> None:
        started = time.perf_counter()
        try:
            response = await client.request(**request.httpx_arguments())
            problem = response_problem(request, response)
        except httpx.HTTPError as exc:
            problem = exc.__class__.__name__
        result.by_kind.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        result.requests += 1
        if problem:
            result.errors += 1
            result.error_kinds[f"{kind}: {problem}"] = result.error_kinds.get(f"{kind}: {problem}", 0) + 1

    def more() -> bool:
        return time.monotonic() < deadline and result.requests < max_requests

    async def user(number: int) -> None:
        local = random.Random(rng.random())
        request_id = itertools.count(1)
        while more():
            kind = local.choices(kinds, weights)[0]
            transport = httpx.AsyncHTTPTransport(local_address=next(addresses))
            async with httpx.AsyncClient(base_url=base_url, timeout=60.0, transport=transport) as client:
                if kind == "typist":
                    text = local.choice(words)
                    # One preview every two keystrokes from the second character (a debounced search box).
                    for end in range(2, len(text) + 1, 2):
                        if not more():
                            return
                        await send(client, "preview", preview_request(text[:end]))
                        await asyncio.sleep(think_s / 2)
                    if more():
                        await send(client, "search", search_request(text))
                elif kind == "search":
                    await send(client, "search", search_request(local.choice(claims)))
                elif kind == "graphql":
                    await send(client, "graphql", graphql_request(local.choice(claims)))
                else:
                    await send(client, "mcp", mcp_request(local.choice(claims), next(request_id)))
            await asyncio.sleep(think_s)

    started = time.monotonic()
    await asyncio.gather(*(user(n) for n in range(users)))
    result.seconds = time.monotonic() - started
    return result


def load_run(
    base_url: str,
    *,
    claims: list[str],
    words: list[str],
    users: int = 16,
    seconds: float = 60.0,
    max_requests: int = 50_000,
    seed: int = 42,
    think_s: float = 0.1,
) -> LoadResult:
    """Closed-loop mixed traffic from ``users`` concurrent simulated users for ``seconds`` (or until
    ``max_requests``). Every session (one typed query, one search, one agent call) comes from a fresh
    loopback address on a fresh connection."""
    return asyncio.run(
        _load(
            base_url,
            claims=claims,
            words=words,
            users=users,
            seconds=seconds,
            max_requests=max_requests,
            seed=seed,
            think_s=think_s,
        )
    )
