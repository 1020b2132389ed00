"""Answer 503 Service Unavailable, not 500, while PostgreSQL cannot be reached; bound request bodies.

A restart, failover or network cut surfaces as ``OperationalError`` (cannot connect, connection lost)
or ``InterfaceError`` (a connection closed under us). That is an outage, not a bug: the caller should
retry shortly, so each surface gets a 503 with ``Retry-After`` in its own error shape. The broken
connection is closed so the next request reconnects (``CONN_HEALTH_CHECKS`` checks reused ones).
A statement cancelled by ``STATEMENT_TIMEOUT_MS`` is a 503 too ("took too long"); any other database
error stays a 500: it is a bug to fix, not a condition to wait out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse

from adapters.http import error_response
from search import replicas

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 5
MESSAGE = "The knowledge base is briefly unavailable (database unreachable). Retry in a few seconds."
TIMEOUT_MESSAGE = "The request took too long and was stopped. Retry, or simplify the search."


# SQLSTATEs of a server going away: connection exceptions (class 08) and operator intervention
# (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now). Other OperationalErrors
# (a statement timeout, a program limit) are about the request, not an outage.
_OUTAGE_STATES = ("08", "57P01", "57P02", "57P03")


def unavailable_reason(exception: BaseException) -> str | None:
    """The 503 message for a database outage or a cancelled runaway statement; None for anything else."""
    if isinstance(exception, InterfaceError):
        return MESSAGE
    if not isinstance(exception, OperationalError):
        return None
    state = getattr(exception.__cause__, "sqlstate", None)
    if state is None or state.startswith(_OUTAGE_STATES):
        return MESSAGE
    if state == "57014":  # query_canceled: STATEMENT_TIMEOUT_MS ran out
        return TIMEOUT_MESSAGE
    return None


def is_outage(exception: BaseException) -> bool:
    """True for a database that cannot be reached: no connection, a connection lost or closed under us."""
    return unavailable_reason(exception) == MESSAGE


def unavailable_response(request: HttpRequest, message: str = MESSAGE) -> HttpResponse:
    """A 503 in the shape of the surface the request came to."""
    path = request.path
    body: dict[str, Any]
    if path.startswith("/graphql"):
        body = {"errors": [{"message": message, "extensions": {"code": "SERVICE_UNAVAILABLE"}}]}
    elif path.startswith("/mcp"):
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    elif path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        return error_response(503, "unavailable", message, retry_after=RETRY_AFTER_S)
    else:
        html = (
            "<!doctype html><html lang=en><meta charset=utf-8><title>Briefly unavailable</title>"
            f"<h1>Briefly unavailable</h1><p>{message}</p></html>"
        )
        response = HttpResponse(html, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    response = HttpResponse(json.dumps(body), status=503, content_type="application/json")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


class DatabaseUnavailableMiddleware:
    """Turns a view's outage or statement-timeout error into a 503 (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        message = unavailable_reason(exception)
        if message is None:
            return None
        logger.warning(
            "database unavailable on %s %s (%s): answering 503",
            request.method,
            request.path,
            str(exception).strip().splitlines()[0] if str(exception).strip() else type(exception).__name__,
        )
        for conn in connections.all(initialized_only=True):
            if not conn.in_atomic_block:  # never close a connection holding a transaction (tests)
                conn.close_if_unusable_or_obsolete()
        return unavailable_response(request, message)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a database outage raised outside a view (e.g. in a middleware) is a 503 too."""
    import sys

    from django.views.defaults import server_error as default_server_error

    exception = sys.exc_info()[1]
    message = unavailable_reason(exception) if exception is not None else None
    if message is not None:
        return unavailable_response(request, message)
    return default_server_error(request)


class _BodyTooLarge(Exception):
    pass


class BoundedRequestBody:
    """ASGI wrapper: refuse with 413 a request body larger than ``max_bytes``, with or without Content-Length.

    Django reads an ASGI request's whole body before the view runs, and ``DATA_UPLOAD_MAX_MEMORY_SIZE``
    only checks a declared Content-Length; a chunked upload would otherwise be spooled to disk whatever
    its size.
    """

    def __init__(self, app: Any, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def bounded_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": "too_large",
                    "message": f"The request body is larger than {self.max_bytes} bytes.",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class HealthEndpoints:
    """Answers ``GET``/``HEAD`` ``/healthz`` and ``/readyz`` (``config.views``) ahead of every other middleware.

    First in ``MIDDLEWARE``: a probe is not subject to ``ALLOWED_HOSTS`` (load balancers probe the instance's
    address), ``SECURE_SSL_REDIRECT`` (they probe over plain HTTP behind the TLS proxy), sessions, CSRF,
    rate limits or the request metrics. The answers hold no data and build no URL from the Host header.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        from config import views

        self.get_response = get_response
        self.views: dict[str, Callable[[HttpRequest], HttpResponse]] = {
            "/healthz": views.healthz,
            "/readyz": views.readyz,
        }

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = self.views.get(request.path_info)
        if view is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = HttpResponse(status=405)
            response["Allow"] = "GET, HEAD"
            return response
        response = view(request)
        if request.method == "HEAD":
            response.content = b""
        return response


# Models whose saves and deletes are content changes for read-your-writes (search.replicas): what a search,
# an item page or a preset listing shows. Bookkeeping written while reading (the items a user opened, recent
# searches, the query log, API keys' last use) is not: it would send every signed-in reader to the primary.
READ_YOUR_WRITES_MODELS = frozenset(
    {"search.ContentItem", "search.Revision", "search.Chunk", "search.Citation", "search.Synonym", "presets.Preset"}
)


def _label(model: Any) -> str:
    return str(getattr(getattr(model, "_meta", None), "label", ""))


def _content_written(sender: Any, **kwargs: Any) -> None:
    # m2m_changed is sent by the through model: the instance names the content (an item's groups).
    if _label(sender) in READ_YOUR_WRITES_MODELS or _label(type(kwargs.get("instance"))) in READ_YOUR_WRITES_MODELS:
        replicas.note_write()


def _request_user_keys(request: HttpRequest) -> list[str]:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return [replicas.user_key(user.pk)]
    return []


class ReadYourWritesMiddleware:
    """A request that changed content (a save or delete of ``READ_YOUR_WRITES_MODELS``, or a content service)
    marks its caller (the session user, and any principal its reads named, e.g. an API key) so their reads go
    to the primary for ``READ_YOUR_WRITES_S``. Only with replicas configured; otherwise it passes through."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        from django.db.models.signals import m2m_changed, post_delete, post_save

        self.get_response = get_response
        for name, signal in (("post_save", post_save), ("post_delete", post_delete), ("m2m", m2m_changed)):
            signal.connect(_content_written, dispatch_uid=f"config.read_your_writes.{name}", weak=False)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not replicas.replica_aliases():
            return self.get_response(request)
        with replicas.request_scope(lambda: _request_user_keys(request)) as scope:
            response = self.get_response(request)
            if scope.wrote:
                replicas.mark_written(keys=scope.keys())
        return response
