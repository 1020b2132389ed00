"""The browse JSON API: live preview, full search, recent searches.

CSRF policy (see docs/browse.md): ``POST /api/search`` reads nothing private that an anonymous
caller could not, so it is open to API clients without a session (no CSRF token needed; the body
must be ``application/json``, which a cross-site form cannot send). A caller with a session cookie
(the site's own JavaScript, a signed-in user) must send the ``X-CSRFToken`` header. Recent-search
writes always require a session and the header (Django's middleware).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from adapters.http import (
    csrf_failure_response,
    error_response,
    filters_error_response,
    json_object_body,
    rate_limited_response,
    search_error_response,
)
from adapters.limits import spend
from browse.presenters import federated_hit_json, hit_json, nearest_json, preview_json, source_json
from browse.schemas import PreviewRequest, SearchRequest, parse_model
from presets import selectors as preset_selectors
from presets import services as preset_services
from search.engine import preview_search, retrieve
from search.errors import SearchError
from search.federation.federated import LOCAL, federated_search, sources_parse
from search.filter_params import filters_from_params
from search.principal import principal_for_user
from search.types import RetrievalQuery, SearchFilters

logger = logging.getLogger(__name__)


@require_GET
def search_preview(request: HttpRequest) -> JsonResponse:
    """``GET /api/search/preview?q=&limit=8``: search-as-you-type, title matches first (60/min)."""
    try:
        params = parse_model(PreviewRequest, {k: request.GET.get(k) for k in ("q", "limit") if k in request.GET})
    except SearchError as exc:
        return search_error_response(exc)
    limit = spend(request, "preview")
    if limit.limited:
        return rate_limited_response(limit.retry_after, "previews")
    principal = principal_for_user(request.user)
    try:
        hits = preview_search(principal=principal, text=params.q, limit=params.limit)
    except SearchError as exc:
        return search_error_response(exc)
    results = [preview_json(h) for h in hits]
    return JsonResponse({"results": results, "count": len(results)})


def search_body(request: HttpRequest, model: type[Any]) -> tuple[Any, SearchFilters] | JsonResponse:
    """A search body (``model``) and its filters, or the error answer naming the field to fix."""
    data = json_object_body(request)
    if isinstance(data, JsonResponse):
        return data
    try:
        body = parse_model(model, data)
    except SearchError as exc:
        return search_error_response(exc)
    try:
        return body, filters_from_params(body.filters, strict=True)
    except SearchError as exc:
        return filters_error_response(exc)


@csrf_exempt
@require_http_methods(["POST"])
def search_api(request: HttpRequest) -> HttpResponse:
    """``POST /api/search`` with ``{query, threshold, limit, cursor, filters}`` (30/min, shared with GraphQL)."""
    failure = csrf_failure_response(  # see the module docstring
        request, signed_in_only=True, hint="Or call without a session cookie: this endpoint needs no token then."
    )
    if failure is not None:
        return failure
    parsed = search_body(request, SearchRequest)
    if isinstance(parsed, JsonResponse):
        return parsed
    body, filters = parsed
    try:
        sources = sources_parse(body.sources)
    except SearchError as exc:
        return search_error_response(exc)
    limit = spend(request, "search")
    if limit.limited:
        return rate_limited_response(limit.retry_after, "searches")
    if sources != (LOCAL,):
        return _federated(request, body, filters, sources)
    try:
        result = retrieve(query=RetrievalQuery(
            text=body.query, principal=principal_for_user(request.user), filters=filters, limit=body.limit,
            cursor=body.cursor, threshold=body.threshold, with_facets=True, surface="browse",
        ))
    except SearchError as exc:
        return search_error_response(exc)
    return JsonResponse({
        "results": [hit_json(h) for h in result.hits],
        "count": result.total,
        "facets": result.facets,
        "partial_match": result.partial_match,
        "degraded": list(result.degraded),
        "next_cursor": result.next_cursor,
        "suggestion": result.suggestion,
        "threshold": body.threshold,
        # Not answers: only when nothing reached the threshold (types.NEAREST).
        "nearest": [nearest_json(h) for h in result.nearest],
    })


def _federated(request: HttpRequest, body: SearchRequest, filters: Any, sources: Any) -> JsonResponse:
    """``POST /api/search`` with ``sources``: this knowledge base and its peers, merged (``federated.merge``)."""
    try:
        result = federated_search(RetrievalQuery(
            text=body.query, principal=principal_for_user(request.user), filters=filters, limit=body.limit,
            cursor=body.cursor, threshold=body.threshold, surface="browse",
        ), sources=sources)
    except SearchError as exc:
        return search_error_response(exc)
    local = result.local
    return JsonResponse({
        "results": [federated_hit_json(h) for h in result.hits],
        "count": result.total,
        "sources": [source_json(s) for s in result.sources],
        "partial_match": bool(local and local.partial_match),
        "degraded": list(local.degraded) if local else [],
        "next_cursor": None,
        "suggestion": local.suggestion if local else None,
        "threshold": body.threshold,
    })


@require_http_methods(["GET", "POST", "DELETE"])
def recent_searches(request: HttpRequest) -> JsonResponse:
    """Signed-in users' recent searches: GET lists, POST ``{query}`` records, DELETE clears."""
    if not request.user.is_authenticated:
        return error_response(
            403, "sign_in_required",
            "Recent searches are kept on the server for signed-in users; anonymous visitors keep them in the browser.",
        )
    user_id = request.user.pk
    if request.method == "POST":
        try:
            data = json.loads(request.body or b"{}")
            query = data.get("query") if isinstance(data, dict) else None
            if not isinstance(query, str):
                raise SearchError("query is required: send {\"query\": \"…\"}.", field="query")
            preset_services.recent_search_record(user_id=user_id, query=query)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep
            return error_response(400, "invalid_json", "The body is not valid JSON.", field="body")
        except SearchError as exc:
            return search_error_response(exc)
    elif request.method == "DELETE":
        preset_services.recent_search_clear(user_id=user_id)
    return JsonResponse({"results": preset_selectors.recent_searches_list(user_id=user_id)})
