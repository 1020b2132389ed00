"""``GET /metrics`` (Prometheus, protected) and ``POST /api/analytics/click`` (browse result clicks)."""

from __future__ import annotations

import json
import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from django_ratelimit.core import get_usage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analytics import metrics, services
from search.errors import SearchError
from search.principal import principal_for_user
from search.query_parser import validate_query_text
from search.services.limits import client_key

logger = logging.getLogger(__name__)

CLICK_RATE = "120/m"


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition, for ``METRICS_ALLOWED_IPS`` or ``Authorization: Bearer <METRICS_TOKEN>``."""
    access = metrics.metrics_access(
        remote_addr=request.META.get("REMOTE_ADDR"), authorization=request.headers.get("Authorization")
    )
    if access == "unauthorized":
        response = HttpResponse(
            "Send Authorization: Bearer <METRICS_TOKEN> to read /metrics.\n",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if access == "forbidden":
        return HttpResponse(
            "/metrics is readable only from the addresses in METRICS_ALLOWED_IPS (or with METRICS_TOKEN).\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    body, content_type = metrics.metrics_payload()
    return HttpResponse(body, content_type=content_type)


class ClickRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, description="the query whose results were shown")
    item_id: int = Field(ge=1, description="the id of the opened result (data-item-id of the card)")


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _csrf_failed(request: HttpRequest) -> bool:
    """Signed-in callers must send the CSRF header; signed-out callers have nothing to forge."""
    if not request.user.is_authenticated:
        return False

    def _view(_request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    return CsrfViewMiddleware(_view).process_view(request, _view, (), {}) is not None


def _limited(key: str) -> bool:
    try:
        usage = get_usage(None, group="kb:click", key=lambda _g, _r: key, rate=CLICK_RATE, increment=True)
    except Exception:  # noqa: BLE001 - a dead cache must not break clicks
        return False
    return bool(usage and usage["should_limit"])


@csrf_exempt
@require_POST
def click_view(request: HttpRequest) -> HttpResponse:
    """``POST /api/analytics/click`` ``{"query": "…", "item_id": 12}``: the caller opened a result.

    Credits the newest browse search of this caller and query that showed the item. Answers
    ``{"recorded": true|false}``; never an error for an unmatched click.
    """
    if _csrf_failed(request):
        return _error(403, "csrf_failed", "Signed-in requests must send the X-CSRFToken header.")
    if request.content_type != "application/json":
        return _error(415, "unsupported_media_type", "Send JSON with Content-Type: application/json.")
    user_id = request.user.pk if request.user.is_authenticated else None
    remote_addr = request.META.get("REMOTE_ADDR") or ""
    if _limited(client_key(user_id=user_id, remote_addr=remote_addr)):
        return _error(429, "rate_limited", "Too many clicks recorded; try again in a minute.")
    try:
        body = ClickRequest.model_validate(json.loads(request.body or b"null"))
        text = validate_query_text(body.query, field="query")
    except (ValueError, RecursionError, ValidationError, SearchError):  # RecursionError: nesting too deep
        return _error(400, "invalid", 'Send {"query": "<the search text>", "item_id": <a result id>}.')
    log_id = services.querylog_mark_click(
        principal=principal_for_user(request.user),
        query_text=text,
        item_id=body.item_id,
        remote_addr=remote_addr,
    )
    return JsonResponse({"recorded": log_id is not None})
