"""Time every request and label it by surface (from the path) and, for ``/mcp``, by JSON-RPC method and tool.

Put it first in ``MIDDLEWARE`` so the time includes the other middleware. It also publishes the request's
surface and address in ``analytics.context`` for the search receiver. It never changes the request or the
response, and a failure to record a metric is logged, never raised.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from analytics import metrics
from analytics.context import RequestInfo, current_request

logger = logging.getLogger(__name__)

# JSON-RPC methods an MCP client sends; anything else is labelled "other" (bounded label values).
MCP_METHODS = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "notifications/cancelled",
        "logging/setLevel",
        "completion/complete",
    }
)
# Paths not measured: static files, the metrics endpoint itself, and load-balancer probes (answered before
# this middleware runs; listed in case it is moved).
SKIPPED_PREFIXES = ("/static/", "/media/", "/metrics", "/favicon.ico", "/healthz", "/readyz")
# (exact path or prefix ending in "/", surface, operation), first match wins.
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("/api/search/preview", "browse", "api_preview"),
    ("/api/search", "browse", "api_search"),
    ("/api/recent-searches", "browse", "api_recent_searches"),
    ("/api/analytics/", "browse", "api_click"),
    ("/api/presets/", "presets", "api_presets"),
    ("/graphql", "graphql", "graphql"),
    ("/mcp", "mcp", ""),
    ("/browse", "browse", "browse"),
    ("/search", "browse", "search_page"),
    ("/items/", "browse", "item"),
    ("/profile/", "browse", "profile"),
    ("/admin/", "admin", "admin"),
)


def classify(path: str) -> tuple[str, str] | None:
    """(surface, operation) of a path, or None for paths that are not measured."""
    if path.startswith(SKIPPED_PREFIXES):
        return None
    if path == "/":
        return "browse", "home"
    for route, surface, operation in ROUTES:
        if (
            path == route
            or path.startswith(route if route.endswith("/") else route + "/")
            or (route.endswith("/") and path == route.rstrip("/"))
        ):
            return surface, operation
    return "other", "other"


# The MCP tool names a metric label may take (bounded): the MCP app registers them when it loads
# (``register_tool_names``), so this app never imports a surface. Any other name is counted as "other".
_TOOL_NAMES: set[str] = set()


def register_tool_names(names: Iterable[str]) -> None:
    _TOOL_NAMES.update(names)


def _tool_names() -> frozenset[str]:
    return frozenset(_TOOL_NAMES)


def mcp_operation(request: HttpRequest) -> tuple[str, str]:
    """(JSON-RPC method, tool name) of an MCP request; bounded values ("other", "invalid", "batch")."""
    if request.method != "POST":
        return request.method.lower() if request.method else "other", ""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > getattr(settings, "MCP_MAX_BODY_BYTES", 64 * 1024):
            return "invalid", ""
        data: Any = json.loads(request.body or b"null")
    except Exception:  # noqa: BLE001 - unreadable or not JSON: the view answers it
        return "invalid", ""
    if isinstance(data, list):
        return "batch", ""
    if not isinstance(data, dict):
        return "invalid", ""
    method = data.get("method")
    if not isinstance(method, str):
        return ("response", "") if "result" in data or "error" in data else ("invalid", "")
    if method not in MCP_METHODS:
        return "other", ""
    tool = ""
    if method == "tools/call":
        params = data.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        tool = name if isinstance(name, str) and name in _tool_names() else "other"
    return method, tool


def request_info(request: HttpRequest) -> RequestInfo | None:
    route = classify(request.path)
    if route is None:
        return None
    surface, operation = route
    tool = ""
    if surface == "mcp":
        operation, tool = mcp_operation(request)
    return RequestInfo(
        surface=surface, operation=operation, tool=tool, remote_addr=request.META.get("REMOTE_ADDR") or ""
    )


def _record(info: RequestInfo, started: float, status: int) -> None:
    try:
        metrics.observe_request(
            surface=info.surface,
            operation=info.operation,
            tool=info.tool,
            status=status,
            seconds=time.perf_counter() - started,
        )
    except Exception:  # noqa: BLE001 - metrics must never break a response
        logger.exception("could not record request metrics")


class RequestMetricsMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _start(self, request: HttpRequest) -> RequestInfo | None:
        try:
            return request_info(request)
        except Exception:  # noqa: BLE001
            logger.exception("could not classify the request for metrics")
            return None

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        info = self._start(request)
        if info is None:
            return self.get_response(request)
        token = current_request.set(info)
        started, status = time.perf_counter(), 500
        try:
            response: HttpResponseBase = self.get_response(request)
            status = response.status_code
            return response
        finally:
            current_request.reset(token)
            _record(info, started, status)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        info = self._start(request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        if info is None:
            return await get_response(request)
        token = current_request.set(info)
        started, status = time.perf_counter(), 500
        try:
            response = await get_response(request)
            status = response.status_code
            return response
        finally:
            current_request.reset(token)
            _record(info, started, status)
