"""``bench``'s federated latency: a search across this instance and 2 peers, against each peer alone.

Three web servers of this product on the bench's database (the same corpus): two serve as peers (each
``POST /api/federation/search`` with a key), the third asks them: ``POST /api/search`` with ``"sources":
["local", "peer1", "peer2"]`` (its own engine and both peers in parallel, then the merge) and with both peers
only. For each query every kind is timed in turn (the order rotating), one request in flight, so the figures
share the machine's state. The target compares the peers-only federated p50 (the fan-out, the HTTP hops and the
merge) with the slower peer's p50 (docs/benchmarks.md).

On one 2-core machine, with this instance's own search as well, three searches run at once on two cores, which
real peers on their own hosts would not: ``overhead_with_local_p50_ms`` is reported beside, as an upper bound.
Even across the peers only, both peers' searches run at once on the 2 cores. So the same questions are also
asked across two replay peers (``ReplayPeer``): stand-ins that answer, without using CPU, exactly what each real
peer answered, after exactly the time it took. There the peers' work no longer competes with the asking side's,
as on separate hosts, and what is left is the fan-out's own cost (``replay``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from benchmarks import bench_http
from benchmarks.bench_stats import percentiles

PEERS = ("peer1", "peer2")
REPLAYS = {"replay1": "peer1", "replay2": "peer2"}  # each replays that real peer
PEER_TIMEOUT_MS = 2000
# The bench's questions arrive far faster than a real peer's users would send them.
PEER_RATE_PER_MINUTE = 1_000_000


def _peer_body(text: str) -> dict[str, Any]:
    return {"query": text, "limit": 20}


def _peer_request(key: str) -> Callable[[str], bench_http.Request]:
    def make(text: str) -> bench_http.Request:
        return bench_http.Request("POST", "/api/federation/search", _peer_body(text),
                                  headers={"Authorization": f"Bearer {key}"})
    return make


class Replay:
    """What a real peer answered to each question, and how long it took (as its direct client saw it)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[float, bytes]] = {}

    def record(self, base_url: str, key: str, texts: list[str], *, warmup: int) -> None:
        """Ask the real peer every question once, after ``warmup`` untimed ones (as its timed row is)."""
        with httpx.Client(base_url=base_url, timeout=60.0, headers={"Authorization": f"Bearer {key}"}) as http:
            for text in texts[:max(1, warmup)]:
                http.post("/api/federation/search", json=_peer_body(text))
            for text in texts:
                started = time.perf_counter()
                response = http.post("/api/federation/search", json=_peer_body(text))
                elapsed = time.perf_counter() - started
                if response.status_code == 200:
                    self.answers[text] = (elapsed, response.content)

    def delay_ms(self, text: str) -> float | None:
        answer = self.answers.get(text)
        return answer[0] * 1000 if answer else None


@contextlib.contextmanager
def replay_peer(replay: Replay) -> Iterator[str]:
    """A stand-in peer on a free port that spends no CPU: ``POST /api/federation/search`` sleeps as long as the
    real peer took for that question, then sends its recorded answer; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn
        # and TCP_NODELAY, as uvicorn (asyncio): else the answer, written after its headers, waits for their
        # delayed ACK (40 ms) on every reused connection
        disable_nagle_algorithm = True

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            answer = replay.answers.get(body.get("query", "")) if self.path == "/api/federation/search" else None
            if answer is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            delay_s, content = answer
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="replay-peer", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _federated_request(text: str) -> bench_http.Request:
    return bench_http.Request("POST", "/api/search", {"query": text, "limit": 20, "sources": ["local", *PEERS]})


def _peers_only_request(text: str) -> bench_http.Request:
    return bench_http.Request("POST", "/api/search", {"query": text, "limit": 20, "sources": list(PEERS)})


def _replays_request(text: str) -> bench_http.Request:
    return bench_http.Request("POST", "/api/search", {"query": text, "limit": 20, "sources": list(REPLAYS)})


def federated_latency(
    database_url: str, texts: list[str], *, warmup: int, budget_s: float,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Round trips of each peer alone and of the federated search (local + 2 peers, the 2 peers only, the 2
    replay peers only), interleaved."""
    from accounts.api_keys import api_key_create
    from search.federation import peers

    key = api_key_create(name="bench federation", all_content=True).raw_key
    env = {"FEDERATION_RATE_PER_MINUTE": str(PEER_RATE_PER_MINUTE)}
    per_text: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        urls = {
            name: stack.enter_context(bench_http.web_server(
                database_url=database_url, workers=1,
                extra_env={**env, "SITE_URL": f"http://{name}.bench.invalid", "FEDERATION_INSTANCE_NAME": name},
            ))
            for name in PEERS
        }
        replays = {name: Replay() for name in REPLAYS}
        for name, replay in replays.items():
            replay.record(urls[REPLAYS[name]], key, texts, warmup=warmup)
            urls[name] = stack.enter_context(replay_peer(replay))
        for name, url in urls.items():
            peers.peer_add(name=name, base_url=url, api_key=key, timeout_ms=PEER_TIMEOUT_MS, public=True)
        try:
            asking = stack.enter_context(bench_http.web_server(database_url=database_url, workers=1, extra_env=env))
            pools = {name: bench_http.ClientPool(url, addresses=4) for name, url in urls.items()}
            pools["federated"] = bench_http.ClientPool(asking, block=40)
            pools["federated_peers_only"] = bench_http.ClientPool(asking, block=50)
            pools["federated_replays"] = bench_http.ClientPool(asking, block=60)
            for pool in pools.values():
                stack.callback(pool.close)
            makes: dict[str, Callable[[str], bench_http.Request]] = {
                **{name: _peer_request(key) for name in urls}, "federated": _federated_request,
                "federated_peers_only": _peers_only_request, "federated_replays": _replays_request,
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
                    per_text.setdefault(text, {})[kind] = elapsed
                    if problem:
                        timed[kind].errors.append(problem)
                if progress:
                    progress(1)
                if n >= 20 and time.monotonic() - started > budget_s:
                    break
        finally:
            for name in urls:
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
    out["replay"] = _replay_figures(out, replays, per_text)
    return out


def _replay_figures(out: dict[str, Any], replays: dict[str, Replay], per_text: dict[str, dict[str, float]]) -> dict:
    """The fan-out's cost with peers that use no CPU: the target's figure (p50 across both against the slower
    replay peer's p50 alone) and, per question, the federated time past the slower of the two delays."""
    slowest = max(out[name]["p50_ms"] for name in REPLAYS)
    past_delay = []
    for text, kinds in per_text.items():
        delays = [replay.delay_ms(text) for replay in replays.values()]
        if "federated_replays" in kinds and all(d is not None for d in delays):
            past_delay.append(kinds["federated_replays"] - max(d for d in delays if d is not None))
    overhead = round(out["federated_replays"]["p50_ms"] - slowest, 2)
    return {
        "slowest_peer_p50": slowest,
        "federated_p50": out["federated_replays"]["p50_ms"],
        "overhead_p50_ms": overhead,
        "past_slower_delay_p50_ms": round(statistics.median(past_delay), 2) if past_delay else None,
        "recorded": min(len(replay.answers) for replay in replays.values()),
        "target_met": overhead <= 15.0,
    }
