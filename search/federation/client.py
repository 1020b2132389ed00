"""Asking one peer: ``POST {base_url}/api/federation/search`` with the key it issued us, and reading its answer
as untrusted input (size-limited, schema-validated, within a wall-clock deadline).

Nothing here touches the database: the caller decrypts the key first, so peers are asked from plain threads.
Peer URLs come only from admin configuration (``FederationPeer.base_url``); no URL from a request is fetched.
The key is sent to that one peer only, never forwarded. Each peer's connections are kept open between searches
(one client per peer address and process, no cookies kept).
"""

from __future__ import annotations

import functools
import http.cookiejar
import os
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import ValidationError

from search.federation.protocol import PeerAnswer, PeerInfo

SourceStatus = Literal["ok", "timeout", "error", "refused"]
USER_AGENT = "kb-search-federation/1"


@dataclass(frozen=True)
class PeerCall:
    """Everything needed to ask one peer, read from the database before any thread starts."""

    name: str
    base_url: str
    api_key: str = field(repr=False)  # never in a traceback's locals or a log line
    timeout_s: float = 0.8
    max_bytes: int = 512 * 1024


@dataclass(frozen=True)
class PeerOutcome:
    status: SourceStatus
    ms: int
    answer: PeerAnswer | None = None
    detail: str = ""


class _Failed(Exception):
    def __init__(self, status: SourceStatus, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def _read_body(response: httpx.Response, *, max_bytes: int, deadline: float) -> bytes:
    if response.status_code in (401, 403):
        raise _Failed("refused", f"the peer refused our key (HTTP {response.status_code})")
    if response.status_code == 429:
        raise _Failed("error", "the peer rate-limited us (HTTP 429)")
    if response.status_code != 200:
        raise _Failed("error", f"HTTP {response.status_code}")
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise _Failed("error", f"the answer is {content_type or 'untyped'}, not JSON")
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _Failed("error", f"the answer is larger than {max_bytes} bytes")
    body = bytearray()
    for chunk in response.iter_raw():  # as sent (we asked for no compression): no decompression bomb
        body += chunk
        if len(body) > max_bytes:
            raise _Failed("error", f"the answer is larger than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise _Failed("timeout", "the answer came too slowly")
    return bytes(body)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if error["type"] == "json_invalid":
        return "the answer is not valid JSON"
    where = ".".join(str(p) for p in error["loc"]) or "answer"
    return f"invalid answer: {where}: {error['msg']}"[:300]


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every peer call (building one loads the CA bundle: tens of milliseconds)."""
    return httpx.create_ssl_context()


# One client per peer address, kept by the process: its connections stay open between searches (keep-alive), so a
# search does not pay a TCP connect (and, over https, a TLS handshake) per peer. Bounded: addresses come only from
# admin configuration, but an address that changed must not keep its client forever.
MAX_CLIENTS = 64
CONNECTIONS_PER_PEER = 32  # as many as the threads that ask peers (search.federation.federated.PEER_THREADS)
KEEPALIVE_S = 5.0  # below uvicorn's keep-alive (config.runtime), so we never reuse a connection it is closing
_clients: dict[str, httpx.Client] = {}
_clients_lock = threading.Lock()


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A peer's answer never sets state that a later search (another user's) would send back."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


def _client(base_url: str) -> httpx.Client:
    with _clients_lock:
        client = _clients.pop(base_url, None)
        if client is not None:
            _clients[base_url] = client  # the most recently used last
        else:
            while len(_clients) >= MAX_CLIENTS:
                # the least recently used goes; not closed here, a search may still be reading from it: its
                # connections close when it is collected
                _clients.pop(next(iter(_clients)))
            client = _clients[base_url] = httpx.Client(
                follow_redirects=False,
                trust_env=False,
                verify=_tls(),
                cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
                limits=httpx.Limits(max_connections=CONNECTIONS_PER_PEER,
                                    max_keepalive_connections=CONNECTIONS_PER_PEER, keepalive_expiry=KEEPALIVE_S),
            )
        return client


def clients_close() -> None:
    """Close every kept connection (tests; a forked child must not share its parent's sockets)."""
    with _clients_lock:
        while _clients:
            _clients.popitem()[1].close()


def _forget_after_fork() -> None:
    global _clients_lock
    _clients_lock = threading.Lock()
    _clients.clear()  # the parent's sockets: never closed or used from here


os.register_at_fork(after_in_child=_forget_after_fork)


def _exchange(call: PeerCall, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str],
              deadline: float) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Failed("timeout", f"no answer within {call.timeout_s * 1000:.0f} ms")
    with _client(call.base_url).stream(method, call.base_url.rstrip("/") + path, json=body, headers=headers,
                                       timeout=httpx.Timeout(remaining)) as response:
        return _read_body(response, max_bytes=call.max_bytes, deadline=deadline)


def _call(call: PeerCall, method: str, path: str, body: dict[str, Any] | None) -> tuple[bytes, int]:
    """The answer's bytes (parsed and validated by the caller, in one step: pydantic's JSON parser) and ms."""
    started = time.monotonic()
    deadline = started + call.timeout_s
    headers = {
        "Authorization": f"Bearer {call.api_key}",
        "Accept": "application/json",
        "Accept-Encoding": "identity",
        "User-Agent": USER_AGENT,
    }
    try:
        try:
            data = _exchange(call, method, path, body, headers, deadline)
        except httpx.RemoteProtocolError:
            # a kept connection the peer closed while idle (its keep-alive shorter than ours; the broken connection
            # is dropped): ask once more (a search changes nothing on the peer), within the same deadline
            data = _exchange(call, method, path, body, headers, deadline)
    except httpx.TimeoutException as exc:
        raise _Failed("timeout", f"no answer within {call.timeout_s * 1000:.0f} ms") from exc
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        raise _Failed("error", f"cannot reach the peer ({exc.__class__.__name__})") from exc
    return data, int((time.monotonic() - started) * 1000)


def peer_search(call: PeerCall, request: dict[str, Any]) -> PeerOutcome:
    """One peer's answer to ``request`` (the federation endpoint's body), or why there is none. Never raises."""
    started = time.monotonic()
    try:
        data, ms = _call(call, "POST", "/api/federation/search", request)
        return PeerOutcome("ok", ms, answer=PeerAnswer.model_validate_json(data))
    except _Failed as failed:
        return PeerOutcome(failed.status, int((time.monotonic() - started) * 1000), detail=failed.detail)
    except ValidationError as exc:
        return PeerOutcome("error", int((time.monotonic() - started) * 1000), detail=_first_error(exc))
    except Exception as exc:  # noqa: BLE001 - a peer must never fail the search; the class name only (no key)
        return PeerOutcome("error", int((time.monotonic() - started) * 1000),
                           detail=f"unexpected failure ({exc.__class__.__name__})")


def peer_info(call: PeerCall) -> tuple[SourceStatus, int, PeerInfo | None, str]:
    """``GET /api/federation/info``: whether the peer answers our key, and what it runs."""
    started = time.monotonic()
    try:
        data, ms = _call(call, "GET", "/api/federation/info", None)
        return "ok", ms, PeerInfo.model_validate_json(data), ""
    except _Failed as failed:
        return failed.status, int((time.monotonic() - started) * 1000), None, failed.detail
    except ValidationError as exc:
        return "error", int((time.monotonic() - started) * 1000), None, _first_error(exc)
    except Exception as exc:  # noqa: BLE001
        return "error", int((time.monotonic() - started) * 1000), None, f"unexpected failure ({exc.__class__.__name__})"
