"""The federation endpoints a peer calls with a key we issued (docs/federation.md).

``POST /api/federation/search``: this knowledge base's answer (search.federation.answer), never federated
further. ``GET /api/federation/info``: who we are (``federation_peer check``). Both need an API key; its scope
decides what the peer sees. Each key has its own search budget (``FEDERATION_RATE_PER_MINUTE``): a peer asks for
all of its users.
"""

from __future__ import annotations

import dataclasses

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from accounts.limits import rate_limit_hit
from adapters.auth import AuthenticationFailed, bearer_principal
from adapters.http import (
    error_response,
    rate_limited_response,
    search_error_response,
)
from browse.api import search_body
from browse.schemas import FederationSearchRequest
from search.errors import SearchError
from search.federation.answer import federation_answer, federation_info
from search.principal import Principal
from search.types import RetrievalQuery


def _key_principal(request: HttpRequest) -> Principal | JsonResponse:
    try:
        return bearer_principal(request, required=True)
    except AuthenticationFailed as exc:
        response = error_response(401, "invalid_api_key", exc.message)
        response["WWW-Authenticate"] = 'Bearer realm="kb-search federation"'
        return response


@csrf_exempt  # API keys only: no session, no cookie
@require_POST
def federation_search(request: HttpRequest) -> JsonResponse:
    principal = _key_principal(request)
    if isinstance(principal, JsonResponse):
        return principal
    parsed = search_body(request, FederationSearchRequest)
    if isinstance(parsed, JsonResponse):
        return parsed
    body, filters = parsed
    if filters.unread_only:
        return error_response(400, "invalid_query", "filters.unread_only means nothing to a key.",
                              field="filters.unread_only")
    try:
        filters = dataclasses.replace(filters, changed_since=body.changed_since)
    except SearchError as exc:
        return search_error_response(exc)
    # A peer serves many users: its key has a budget of its own, not its server's address's.
    limit = rate_limit_hit(group="federation", key=f"api-key:{principal.api_key_id}")
    if limit.limited:
        return rate_limited_response(limit.retry_after, "searches")
    try:
        answer = federation_answer(RetrievalQuery(
            text=body.query, principal=principal, filters=filters, limit=body.limit, threshold=body.threshold,
        ))
    except SearchError as exc:
        return search_error_response(exc)
    return JsonResponse(answer)


@require_GET
def federation_info_view(request: HttpRequest) -> JsonResponse:
    principal = _key_principal(request)
    if isinstance(principal, JsonResponse):
        return principal
    return JsonResponse(federation_info())
