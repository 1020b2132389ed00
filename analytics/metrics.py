"""Prometheus metrics: request latency per surface and per MCP operation/tool, search latency per lane,
zero-result and degraded counters, reads per database and replica lag; and who may read ``/metrics``.

Two kinds of latency are measured on purpose:

- ``kb_http_request_duration_seconds{surface, operation, tool}``: the whole HTTP request, as the caller
  sees it (``analytics.middleware``). For ``/mcp`` the operation is the JSON-RPC method, so handshakes
  (``initialize``, ``notifications/initialized``) and tool listings (``tools/list``) are counted apart from
  tool calls (``tools/call``, labelled with the tool name). An endpoint-wide p95 cannot hide a slow tool.
- ``kb_search_duration_seconds{surface, tool}`` and ``kb_search_lane_duration_seconds{surface, lane}``:
  the engine's own time (``RetrievalResult.timings_ms``), from the ``search_performed`` signal.

Several web processes (``manage.py up`` runs two uvicorn workers): when ``PROMETHEUS_MULTIPROC_DIR`` is
set, every process writes its values to files in that folder and ``/metrics`` merges them, so any
worker answers for all. ``up`` sets it to a fresh folder for its web workers; other deployments must
set it (and empty the folder when the server starts). Without it, values are per process.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from search.types import RetrievalResult

# Seconds. Dense around the 0.1–3 s range where search latency budgets live.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)

REQUEST_LATENCY = Histogram(
    "kb_http_request_duration_seconds",
    "HTTP request latency per surface and operation (/mcp: the JSON-RPC method, and the tool of tools/call).",
    ["surface", "operation", "tool"],
    buckets=LATENCY_BUCKETS,
)
REQUESTS = Counter(
    "kb_http_requests",
    "HTTP requests per surface, operation, tool and status class (2xx, 4xx, 5xx).",
    ["surface", "operation", "tool", "status"],
)
SEARCH_LATENCY = Histogram(
    "kb_search_duration_seconds",
    "Engine time of one search (retrieve total_ms) per surface and MCP tool.",
    ["surface", "tool"],
    buckets=LATENCY_BUCKETS,
)
LANE_LATENCY = Histogram(
    "kb_search_lane_duration_seconds",
    "Engine time per retrieval lane (lexical, vector, …) per surface.",
    ["surface", "lane"],
    buckets=LATENCY_BUCKETS,
)
SEARCHES = Counter("kb_searches", "Searches per surface and MCP tool.", ["surface", "tool"])
ZERO_RESULTS = Counter("kb_search_zero_results", "Searches that found nothing.", ["surface", "tool"])
PARTIAL_MATCHES = Counter(
    "kb_search_partial_matches", "Searches whose results miss some query words.", ["surface", "tool"]
)
DEGRADED = Counter(
    "kb_search_degraded", "Degraded searches per reason (e.g. embedding_unavailable).", ["surface", "reason"]
)
QUERY_LOG_FAILURES = Counter(
    "kb_query_log_failures", "Searches the query log could not record (the search itself still answered)."
)
# Reads on the primary and its replicas (search.replicas): one per read-only call (a search, a preview, a
# page's reads, a GraphQL query); a read a failing replica handed back to the primary counts on both.
DATABASE_READS = Counter(
    "kb_db_reads", "Read-only calls per database they ran on (default = the primary, replica_N).", ["database"]
)
# Set by each process's replica probe (every REPLICA_PROBE_S); the most recent value wins across processes.
REPLICA_LAG = Gauge(
    "kb_replica_lag_seconds",
    "Seconds a replica is behind the primary, as last probed (NaN: it did not answer).",
    ["database"],
    multiprocess_mode="mostrecent",
)
REPLICA_UP = Gauge(
    "kb_replica_up",
    "1 while reads may go to the replica (answering and within REPLICA_MAX_LAG_S), else 0.",
    ["database"],
    multiprocess_mode="mostrecent",
)

_LABEL = re.compile(r"^[a-z0-9_./-]{1,40}$")


def label(value: str | None) -> str:
    """A safe, bounded label value (labels come from code, but never trust them to stay small)."""
    if not value:
        return ""
    value = value.lower()
    return value if _LABEL.match(value) else "other"


def observe_search(*, surface: str, tool: str, result: RetrievalResult) -> None:
    surface, tool = label(surface), label(tool)
    SEARCHES.labels(surface, tool).inc()
    for key, ms in result.timings_ms.items():
        if not key.endswith("_ms") or not isinstance(ms, int | float):
            continue
        if key == "total_ms":
            SEARCH_LATENCY.labels(surface, tool).observe(ms / 1000)
        else:
            LANE_LATENCY.labels(surface, label(key[:-3])).observe(ms / 1000)
    if result.total == 0:
        ZERO_RESULTS.labels(surface, tool).inc()
    if result.partial_match:
        PARTIAL_MATCHES.labels(surface, tool).inc()
    for reason in result.degraded:
        DEGRADED.labels(surface, label(reason)).inc()


def observe_read(*, database: str) -> None:
    DATABASE_READS.labels(label(database)).inc()


def observe_replica(*, database: str, healthy: bool, lag_s: float | None) -> None:
    REPLICA_LAG.labels(label(database)).set(float("nan") if lag_s is None else lag_s)
    REPLICA_UP.labels(label(database)).set(1 if healthy else 0)


def observe_request(*, surface: str, operation: str, tool: str, status: int, seconds: float) -> None:
    REQUEST_LATENCY.labels(surface, operation, tool).observe(seconds)
    REQUESTS.labels(surface, operation, tool, f"{status // 100}xx").inc()


def metrics_payload() -> tuple[bytes, str]:
    """The exposition text: merged over every process's files in multiprocess mode, else this process's."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=path)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# --- who may read /metrics ---

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def allowed_networks() -> list[Network]:
    """``METRICS_ALLOWED_IPS`` parsed; a bad entry raises ``ImproperlyConfigured`` with the fix."""
    networks: list[Network] = []
    for entry in getattr(settings, "METRICS_ALLOWED_IPS", ["127.0.0.1", "::1"]):
        if str(entry).strip().lower() in ("", "none"):
            continue
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"METRICS_ALLOWED_IPS contains {entry!r}, which is not an IP address or network. "
                "Use addresses or CIDR networks separated by commas, e.g. 127.0.0.1,::1,10.0.0.0/8 "
                "(or 'none' and set METRICS_TOKEN)."
            ) from None
    return networks


def _address_allowed(remote_addr: str | None) -> bool:
    try:
        address = ipaddress.ip_address((remote_addr or "").strip())
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in allowed_networks())


def metrics_access(
    *, remote_addr: str | None, authorization: str | None
) -> Literal["ok", "unauthorized", "forbidden"]:
    """May this caller read /metrics?

    A ``Bearer`` token, when sent and ``METRICS_TOKEN`` is set, decides alone (a wrong token is refused
    even from an allowed address). Otherwise the caller's address must be in ``METRICS_ALLOWED_IPS``.
    """
    token = getattr(settings, "METRICS_TOKEN", "")
    if token and authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return "ok"
        return "unauthorized"
    if _address_allowed(remote_addr):
        return "ok"
    return "unauthorized" if token else "forbidden"


def multiprocess_dir_prepare(home: Path) -> str:
    """Empty (or create) the folder the web workers share their metric files in; returns its path.

    Called by the process that starts the web workers, before starting them (``manage.py up``). Uses
    ``PROMETHEUS_MULTIPROC_DIR`` when set, else ``<KB_HOME>/metrics``. Only metric files (``*.db``) are
    removed: values from a previous run must not be added to this run's.
    """
    folder = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or home / "metrics")
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)
    return str(folder)
