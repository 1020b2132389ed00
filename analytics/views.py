"""``GET /metrics`` (Prometheus, protected) and ``POST /api/analytics/click`` (browse result clicks)."""

from __future__ import annotations

import json
import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from django_ratelimit.core import get_usage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from accounts.limits import LimitResult
from adapters.http import csrf_failure_response, error_response, rate_limited_response
from adapters.limits import caller_key
from analytics import metrics, services
from search.errors import SearchError
from search.principal import principal_for_user
from search.text.query_parser import validate_query_text

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


def _click_limit(key: str) -> LimitResult:
    """The caller's click budget (its own counter: ``CLICK_RATE`` is not one of the engine's groups)."""
    try:
        usage = get_usage(None, group="kb:click", key=lambda _g, _r: key, rate=CLICK_RATE, increment=True)
    except Exception:  # noqa: BLE001 - a dead cache must not break clicks
        return LimitResult(False)
    if usage and usage["should_limit"]:
        return LimitResult(True, retry_after=max(1, int(usage.get("time_left") or 60)))
    return LimitResult(False)


@csrf_exempt
@require_POST
def click_view(request: HttpRequest) -> HttpResponse:
    """``POST /api/analytics/click`` ``{"query": "…", "item_id": 12}``: the caller opened a result.

    Credits the newest browse search of this caller and query that showed the item. Answers
    ``{"recorded": true|false}``; never an error for an unmatched click.
    """
    failure = csrf_failure_response(request, signed_in_only=True)
    if failure is not None:
        return failure
    if request.content_type != "application/json":
        return error_response(415, "unsupported_media_type", "Send JSON with Content-Type: application/json.")
    limit = _click_limit(caller_key(request))
    if limit.limited:
        return rate_limited_response(limit.retry_after, "clicks recorded")
    remote_addr = request.META.get("REMOTE_ADDR") or ""
    try:
        body = ClickRequest.model_validate(json.loads(request.body or b"null"))
        text = validate_query_text(body.query, field="query")
    except (ValueError, RecursionError, ValidationError, SearchError):  # RecursionError: nesting too deep
        return error_response(400, "invalid", 'Send {"query": "<the search text>", "item_id": <a result id>}.')
    log_id = services.querylog_mark_click(
        principal=principal_for_user(request.user),
        query_text=text,
        item_id=body.item_id,
        remote_addr=remote_addr,
    )
    return JsonResponse({"recorded": log_id is not None})
