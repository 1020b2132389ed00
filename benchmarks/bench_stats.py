"""Summaries the bench reports: percentiles of latencies, and a load run as the report shows it."""

from __future__ import annotations

from typing import Any

from benchmarks import bench_http


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 in ms (linear interpolation between closest ranks)."""
    ordered = sorted(values)
    if not ordered:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}

    def at(q: float) -> float:
        pos = (len(ordered) - 1) * q
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return {"p50_ms": round(at(0.50), 2), "p95_ms": round(at(0.95), 2), "p99_ms": round(at(0.99), 2)}


def load_summary(result: bench_http.LoadResult, *, users: int, items: int) -> dict[str, Any]:
    """A load run as the report shows it: counts, throughput, and percentiles overall and per request kind."""
    return {
        "requests": result.requests,
        "errors": result.errors,
        "rps": round(result.rps, 1),
        "seconds": round(result.seconds, 1),
        "users": users,
        "items": items,
        **percentiles([v for values in result.by_kind.values() for v in values]),
        "by_kind": {k: {**percentiles(v), "n": len(v)} for k, v in sorted(result.by_kind.items())},
        "error_kinds": result.error_kinds,
    }
