"""JSON answers shared by the HTTP surfaces: the error envelope, its status map, 429 and CSRF refusals.

Every JSON error is ``{"error": {"code", "message", "field"?, "retry_after"?}}``: ``field`` names the
input at fault and ``retry_after`` (seconds, also sent as ``Retry-After``) says when to try again;
each is left out when it does not apply.
"""

from __future__ import annotations

import json
from typing import Any, NotRequired, TypedDict

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware

from search.errors import SearchError

# HTTP status by ``SearchError.code``, looked up along the error's class hierarchy (so ``PresetNotFound``
# answers as ``NotFound``); any other code is bad input, 400. Keyed by code, not class, so that the
# layers above (``presets.errors.PresetNameTaken``) are named without being imported.
STATUS_BY_CODE: dict[str, int] = {
    "permission_denied": 403,
    "not_found": 404,
    "preset_name_taken": 409,
}

CSRF_MESSAGE = (
    "The security token is missing or expired. Reload the page and try again "
    "(API clients send the csrftoken cookie's value in an X-CSRFToken header)."
)


class ErrorBody(TypedDict):
    code: str
    message: str
    field: NotRequired[str]
    retry_after: NotRequired[int]


def error_response(
    status: int, code: str, message: str, *, field: str | None = None, retry_after: int | None = None
) -> JsonResponse:
    """The error envelope; a ``retry_after`` (seconds) is also sent as the ``Retry-After`` header."""
    body: ErrorBody = {"code": code, "message": message}
    if field:
        body["field"] = field
    if retry_after:
        body["retry_after"] = retry_after
    response = JsonResponse({"error": body}, status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def status_for(exc: SearchError) -> int:
    """The HTTP status of an engine error (``STATUS_BY_CODE``, else 400)."""
    for klass in type(exc).__mro__:
        status = STATUS_BY_CODE.get(getattr(klass, "code", ""))
        if status is not None:
            return status
    return 400


def search_error_response(exc: SearchError) -> JsonResponse:
    return error_response(status_for(exc), exc.code, exc.message, field=exc.field)


def rate_limited_response(retry_after: int, what: str) -> JsonResponse:
    """429 for a spent budget: ``what`` is the plural the caller sent too many of ("searches")."""
    return error_response(
        429, "rate_limited", f"Too many {what}; try again in {retry_after} s.", retry_after=retry_after
    )


def _csrf_callback(_request: HttpRequest, *_args: Any, **_kwargs: Any) -> HttpResponse:
    return HttpResponse()  # a view not marked csrf_exempt, so the middleware checks


def csrf_rejected(request: HttpRequest) -> bool:
    """Django's ``CsrfViewMiddleware`` check, run by hand for a ``csrf_exempt`` view (safe methods pass).

    For views whose refusal must be JSON (or GraphQL), not Django's HTML 403 page.
    """
    return CsrfViewMiddleware(_csrf_callback).process_view(request, _csrf_callback, (), {}) is not None


def csrf_failure_response(request: HttpRequest, *, signed_in_only: bool = False, hint: str = "") -> JsonResponse | None:
    """403 ``csrf_failed`` when the CSRF check fails, else None.

    ``signed_in_only``: check only signed-in callers, for endpoints open to API clients without a session
    (a signed-out caller has no authority a forged request could borrow). ``hint`` adds the surface's own
    way out to the message.
    """
    if signed_in_only and not request.user.is_authenticated:
        return None
    if not csrf_rejected(request):
        return None
    return error_response(403, "csrf_failed", f"{CSRF_MESSAGE} {hint}".strip())


def json_object_body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The request's JSON object, or the error answer saying what to fix (415, 413 or 400)."""
    if request.content_type != "application/json":
        return error_response(415, "unsupported_media_type",
                              "Send a JSON object with the header Content-Type: application/json.", field="body")
    try:
        data = json.loads(request.body or b"null")
    except RequestDataTooBig:
        return error_response(413, "too_large", "The request body is too large.", field="body")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep
        return error_response(400, "invalid_json", "The body is not valid JSON.", field="body")
    if not isinstance(data, dict):
        return error_response(400, "invalid_json", "The body must be a JSON object.", field="body")
    return data


def filters_error_response(exc: SearchError) -> JsonResponse:
    """A bad value in a body's ``filters`` object, named under it (``filters.domain``)."""
    return error_response(
        status_for(exc), exc.code, f"filters.{exc.message}", field=f"filters.{exc.field or ''}".rstrip(".")
    )
