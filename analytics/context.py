"""What the current HTTP request is, for code that runs inside it without the request object.

``analytics.middleware.RequestMetricsMiddleware`` sets it; the search receiver reads it (a fallback
surface for searches whose adapter did not name one, and the caller's address for the pseudonymous key
of signed-out callers). Context variables follow the request through asgiref's thread hops, so the MCP
tools (run in a worker thread) see the same value.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestInfo:
    surface: str
    operation: str = ""
    tool: str = ""
    remote_addr: str = ""


current_request: ContextVar[RequestInfo | None] = ContextVar("kb_analytics_request", default=None)


def request_info() -> RequestInfo | None:
    return current_request.get()
