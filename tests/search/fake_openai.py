"""A local HTTP server speaking enough of the OpenAI protocol for the real ``openai`` client.

Answers ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models/<id>`` on 127.0.0.1.
Behaviour is set on the instance while it runs: ``delay_s`` (each request waits), ``hang`` (requests never
answer until the server stops), ``fail_status`` (answer every request with that HTTP error) or
``fail_times`` (fail only the next N POST requests). Embeddings are deterministic
(:func:`fake_vector`), so a test can predict every stored vector, unless ``embedder`` is set (a function from
the request's texts to their vectors: the server then runs a real model, as text-embeddings-inference does);
``mangle`` may rewrite each embeddings answer before it is sent (a server answering garbage).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fake_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic unit vector for ``text``."""
    raw = []
    for i in range(dimensions):
        digest = hashlib.blake2b(f"{i}:{text}".encode(), digest_size=4).digest()
        raw.append(int.from_bytes(digest, "little") / 2**32 - 0.5)
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


class FakeOpenAI:
    def __init__(self) -> None:
        self.delay_s = 0.0
        self.hang = False
        self.fail_status: int | None = None
        self.fail_times = 0  # fail only the next N requests (with fail_status, default 500)
        self.summary_text = "A short summary written by the fake model."
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.embedder: Callable[[list[str]], list[list[float]]] | None = None
        self.mangle: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): fine

            def do_GET(self) -> None:  # noqa: N802 - ``GET /v1/models/<id>`` (the readiness probe's ping)
                with fake._lock:
                    fake.requests.append((self.path, {}))
                if fake.hang:
                    fake._stop.wait(30)
                    return
                if fake.fail_status:
                    self._send(fake.fail_status, {"error": {"message": "fake failure", "type": "server_error"}})
                    return
                name = self.path.rsplit("/", 1)[-1]
                self._send(200, {"id": name, "object": "model", "created": 0, "owned_by": "fake"})

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append((self.path, request))
                if fake.hang:
                    fake._stop.wait(30)
                    return
                if fake.delay_s:
                    fake._stop.wait(fake.delay_s)
                with fake._lock:
                    failing = bool(fake.fail_status) and fake.fail_times == 0 or fake.fail_times > 0
                    if fake.fail_times > 0:
                        fake.fail_times -= 1
                if failing:
                    self._send(
                        fake.fail_status or 500,
                        {
                            "error": {
                                "message": "fake failure",
                                "type": "server_error",
                                "code": None,
                                "param": None,
                            }
                        },
                    )
                    return
                if self.path.endswith("/embeddings"):
                    inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
                    dims = int(request.get("dimensions") or 8)
                    if fake.embedder is not None:
                        vectors = fake.embedder(inputs)
                    else:
                        vectors = [fake_vector(t, dims) for t in inputs]
                    answer = {
                        "object": "list",
                        "model": request.get("model", "fake"),
                        "data": [
                            {"object": "embedding", "index": i, "embedding": vector}
                            for i, vector in enumerate(vectors)
                        ],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                    self._send(200, fake.mangle(answer) if fake.mangle else answer)
                elif self.path.endswith("/chat/completions"):
                    self._send(
                        200,
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion",
                            "created": 0,
                            "model": request.get("model", "fake"),
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": fake.summary_text},
                                }
                            ],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                        },
                    )
                else:
                    self._send(
                        404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}}
                    )

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def paths(self) -> list[str]:
        with self._lock:
            return [p for p, _ in self.requests]

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serving() -> Iterator[FakeOpenAI]:
    """A running fake server for the duration of the block (wrap it in a fixture named ``fake_openai``)."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
