"""``bench``'s federated latency: a search across this instance and 2 peers, against each peer alone.

Three web servers of this product on the bench's database (the same corpus): two serve as peers (each
``POST /api/federation/search`` with a key), the third asks them: ``POST /api/search`` with ``"sources":
"all"`` (its own engine and both peers in parallel, then the merge) and with both peers only. For each query
the four are timed in turn (the order rotating), one request in flight, so the figures share the machine's
state. The target compares the peers-only federated p50 (the fan-out, the HTTP hops and the merge) with the
slower peer's p50 (docs/benchmarks.md).

On one 2-core machine, with this instance's own search as well, three searches run at once on two cores, which
real peers on their own hosts would not: ``overhead_with_local_p50_ms`` is reported beside, as an upper bound.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from benchmarks import bench_http
from benchmarks.bench_stats import percentiles

PEERS = ("peer1", "peer2")
PEER_TIMEOUT_MS = 2000
# The bench's questions arrive far faster than a real peer's users would send them.
PEER_RATE_PER_MINUTE = 1_000_000


def _peer_request(key: str) -> Callable[[str], bench_http.Request]:
    def make(text: str) -> bench_http.Request:
        return bench_http.Request("POST", "/api/federation/search", {"query": text, "limit": 20},
                                  headers={"Authorization": f"Bearer {key}"})
    return make


def _federated_request(text: str) -> bench_http.Request:
    return bench_http.Request("POST", "/api/search", {"query": text, "limit": 20, "sources": "all"})


def _peers_only_request(text: str) -> bench_http.Request:
    return bench_http.Request("POST", "/api/search", {"query": text, "limit": 20, "sources": list(PEERS)})


def federated_latency(
    database_url: str, texts: list[str], *, warmup: int, budget_s: float,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Round trips of each peer alone and of the federated search (local + 2 peers), interleaved."""
    from accounts.api_keys import api_key_create
    from search.federation import peers

    key = api_key_create(name="bench federation", all_content=True).raw_key
    env = {"FEDERATION_RATE_PER_MINUTE": str(PEER_RATE_PER_MINUTE)}
    with contextlib.ExitStack() as stack:
        urls = {
            name: stack.enter_context(bench_http.web_server(
                database_url=database_url, workers=1,
                extra_env={**env, "SITE_URL": f"http://{name}.bench.invalid", "FEDERATION_INSTANCE_NAME": name},
            ))
            for name in PEERS
        }
        for name, url in urls.items():
            peers.peer_add(name=name, base_url=url, api_key=key, timeout_ms=PEER_TIMEOUT_MS, public=True)
        try:
            asking = stack.enter_context(bench_http.web_server(database_url=database_url, workers=1, extra_env=env))
            pools = {name: bench_http.ClientPool(url, addresses=4) for name, url in urls.items()}
            pools["federated"] = bench_http.ClientPool(asking, block=40)
            pools["federated_peers_only"] = bench_http.ClientPool(asking, block=50)
            for pool in pools.values():
                stack.callback(pool.close)
            makes: dict[str, Callable[[str], bench_http.Request]] = {
                **{name: _peer_request(key) for name in PEERS}, "federated": _federated_request,
                "federated_peers_only": _peers_only_request,
            }
            kinds = list(makes)
            for text in texts[:warmup]:
                for kind in kinds:
                    pools[kind].send(makes[kind](text))
            timed: dict[str, bench_http.Timed] = {kind: bench_http.Timed() for kind in kinds}
            started = time.monotonic()
            for n, text in enumerate(texts):
                for kind in kinds[n % len(kinds):] + kinds[: n % len(kinds)]:
                    elapsed, problem = pools[kind].send(makes[kind](text))
                    timed[kind].latencies_ms.append(elapsed)
                    if problem:
                        timed[kind].errors.append(problem)
                if progress:
                    progress(1)
                if n >= 20 and time.monotonic() - started > budget_s:
                    break
        finally:
            for name in PEERS:
                peers.peer_remove(name=name)
    out: dict[str, Any] = {
        kind: {**percentiles(t.latencies_ms), "n": len(t.latencies_ms), "errors": len(t.errors),
               "error_kinds": sorted(set(t.errors))[:5]}
        for kind, t in timed.items()
    }
    slowest = max(out[name]["p50_ms"] for name in PEERS)
    out["slowest_peer_p50"] = slowest
    # The fan-out's own cost: the two peers asked in parallel, against the slower alone. With this instance's
    # search as well, three searches share 2 cores (``overhead_with_local_p50_ms``).
    out["overhead_p50_ms"] = round(out["federated_peers_only"]["p50_ms"] - slowest, 2)
    out["overhead_with_local_p50_ms"] = round(out["federated"]["p50_ms"] - slowest, 2)
    out["target_met"] = out["overhead_p50_ms"] <= 15.0
    return out
