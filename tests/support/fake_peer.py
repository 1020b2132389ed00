"""A fake peer knowledge base for federation tests: one local HTTP server, a behaviour per path prefix.

``/ok`` answers a valid (if HTML-laden) hit; ``/html``, ``/fail``, ``/refuse``, ``/garbage``, ``/big``,
``/chunked``, ``/spans``, ``/badproto``, ``/redirect`` and ``/slow`` misbehave as their names say; ``/dropfirst``
closes the first connection it is asked on without answering, then answers as ``/ok``.
``server.seen_keys``, ``server.seen_encodings``, ``server.seen_cookies`` and ``server.seen_ports`` list the
Authorization, Accept-Encoding and Cookie headers received and the client port of each request. ``/ok`` also sets a
cookie. ``serving(keep_alive=True)`` speaks HTTP/1.1 and keeps connections open, as the product's server does.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOSTILE_HIT = {"title": "<script>alert(1)</script> Pricing elsewhere", "url": "https://evil.example/p",
               "snippet": "Pricing <b>bold</b>", "snippet_spans": [[0, 7]], "title_spans": [[26, 33]],
               "confidence": 0.99, "lanes": ["lexical"]}


class PeerHandler(BaseHTTPRequestHandler):
    """A peer per path prefix: /ok answers a valid (if HTML-laden) hit, the others misbehave."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", *, cookie: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if cookie:
            self.send_header("Set-Cookie", "tracker=someone; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # we gave up on it first (the slow peer)
            pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        kind = self.path.split("/")[1]
        self.server.seen_keys.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        self.server.seen_encodings.append(self.headers.get("Accept-Encoding"))  # type: ignore[attr-defined]
        self.server.seen_cookies.append(self.headers.get("Cookie"))  # type: ignore[attr-defined]
        self.server.seen_ports.append(self.client_address[1])  # type: ignore[attr-defined]
        if kind == "dropfirst" and not self.server.dropped:  # type: ignore[attr-defined]
            self.server.dropped = True  # type: ignore[attr-defined]
            self.close_connection = True  # as a server closing an idle kept connection: no answer at all
            return
        if kind in ("ok", "dropfirst"):
            body = {"instance": "friendly", "version": "9", "count": 1, "hits": [HOSTILE_HIT]}
            self._send(200, json.dumps(body).encode(), cookie=True)
        elif kind == "html":
            self._send(200, b"<html>hello</html>", "text/html")
        elif kind == "fail":
            self._send(500, b'{"error": "boom"}')
        elif kind == "refuse":
            self._send(401, b'{"error": "who are you"}')
        elif kind == "garbage":
            self._send(200, b"{not json")
        elif kind == "big":
            self._send(200, b'{"pad": "' + b"x" * 600_000 + b'"}')
        elif kind == "spans":
            bad = {**HOSTILE_HIT, "title_spans": [[0, 999]]}
            self._send(200, json.dumps({"instance": "x", "count": 1, "hits": [bad]}).encode())
        elif kind == "redirect":  # to a valid answer: following it would send our key elsewhere
            self.send_response(302)
            self.send_header("Location", "/ok/api/federation/search")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "chunked":  # no declared length, more than the limit in pieces
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(80):
                    piece = b"x" * 8192
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif kind == "badproto":
            body = {"instance": "future", "protocol": 2, "count": 1, "hits": [HOSTILE_HIT]}
            self._send(200, json.dumps(body).encode())
        elif kind == "slow":
            time.sleep(3)
            self._send(200, b"{}")


class _Server(ThreadingHTTPServer):
    # every peer of a test is asked at once: the default backlog (5) would drop connections, and the client's
    # SYN retry (1 s) would look like a slow peer
    request_queue_size = 128


class KeepAliveHandler(PeerHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as uvicorn: no 40 ms delayed-ACK stall on a reused connection


@contextlib.contextmanager
def serving(*, keep_alive: bool = False) -> Iterator[ThreadingHTTPServer]:
    server = _Server(("127.0.0.1", 0), KeepAliveHandler if keep_alive else PeerHandler)
    server.seen_keys = []  # type: ignore[attr-defined]
    server.seen_encodings = []  # type: ignore[attr-defined]
    server.seen_cookies = []  # type: ignore[attr-defined]
    server.seen_ports = []  # type: ignore[attr-defined]
    server.dropped = False  # type: ignore[attr-defined]
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()


