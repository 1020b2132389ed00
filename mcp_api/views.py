"""``/mcp``: guard the request (Origin, body size, credentials, rate limits), then hand it to the MCP server.

The guard answers before any MCP processing: 403 for a disallowed ``Origin``, 405 for anything but POST
(the server is stateless: no standalone SSE stream, no session to delete), 413 for an oversized body,
401 for a credential that cannot be accepted, 429 (with ``Retry-After``) when a budget is spent. An
accepted request carries its ``Principal`` as ``request.kb_principal`` into the tools.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from mcp_server.views import MCPServerStreamableHttpView
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer

from accounts.limits import client_key, rate_limit_hit
from mcp_api.auth import AuthenticationFailed, origin_allowed, request_principal
from mcp_api.server import mcp_server

# JSON-RPC "server error" range; the HTTP status carries the meaning, the message says what to do.
_ERROR_CODE = -32001


def _refuse(status: int, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": _ERROR_CODE, "message": message}}, status=status
    )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _too_many(retry_after: int) -> JsonResponse:
    return _refuse(
        429, f"Too many requests: wait {retry_after} s and try again.", Retry_After=str(retry_after)
    )


def _body_too_large(request: HttpRequest) -> bool:
    limit = settings.MCP_MAX_BODY_BYTES
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return True
        return len(request.body) > limit
    except (ValueError, RequestDataTooBig):
        return True


def _unparseable(request: HttpRequest) -> str | None:
    """Why the JSON body cannot be answered, for what the MCP server would crash on instead of answering:
    nesting past Python's recursion limit, or a lone surrogate escape ("\\ud800": valid JSON, but no Unicode
    text, so no reply quoting it can be written)."""
    try:
        message = json.loads(request.body)
    except RecursionError:
        return "the JSON body is nested too deeply. Send one JSON-RPC message."
    except ValueError:  # other malformed JSON gets the MCP server's own parse error
        return None
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "the JSON body holds a lone surrogate escape (\\ud800-\\udfff), which is no Unicode text."
    return None


def guard(request: HttpRequest) -> HttpResponse | None:
    """A refusal response, or None after setting ``request.kb_principal``."""
    if not origin_allowed(request.headers.get("Origin")):
        return _refuse(
            403,
            "Origin not allowed. Browser clients must be served from an origin listed in "
            "MCP_ALLOWED_ORIGINS.",
        )
    if request.method != "POST":
        # Stateless server: no standalone SSE stream (GET) and no session to end (DELETE).
        response = _refuse(405, "Send MCP messages with POST (streamable HTTP, stateless server).")
        response["Allow"] = "POST"
        return response
    if _body_too_large(request):
        return _refuse(413, f"Request body too large: at most {settings.MCP_MAX_BODY_BYTES} bytes.")
    problem = _unparseable(request)
    if problem:
        return _refuse(400, f"Parse error: {problem}")
    # A database outage answers 503 here (config.middleware), not as a tool error inside a 200 later.
    connection.cursor().close()
    remote_addr = request.META.get("REMOTE_ADDR")
    ip_key = client_key(user_id=None, remote_addr=remote_addr)
    try:
        principal = request_principal(request)
    except AuthenticationFailed as exc:
        # Failed attempts spend the caller's IP budget, so keys cannot be guessed at speed.
        limited = rate_limit_hit(group="mcp", key=ip_key)
        if limited.limited:
            return _too_many(limited.retry_after)
        return _refuse(401, exc.message, WWW_Authenticate='Bearer error="invalid_token"')
    key = client_key(user_id=None, remote_addr=remote_addr, api_key_id=principal.api_key_id)
    limited = rate_limit_hit(group="mcp", key=key)
    if limited.limited:
        return _too_many(limited.retry_after)
    request.kb_principal = principal  # type: ignore[attr-defined]
    return None


@method_decorator(csrf_exempt, name="dispatch")
class McpView(MCPServerStreamableHttpView):
    """django-mcp-server's streamable-HTTP view, with our guard in front and no DRF authentication."""

    mcp_server = mcp_server
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    # JSON only: DRF's browsable renderer (picked for ``Accept: text/html``) needs templates we do not ship.
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = guard(request)
        if refused is not None:
            return refused
        return super().dispatch(request, *args, **kwargs)
