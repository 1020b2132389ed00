"""adapters.http: the JSON error envelope, the SearchError -> status map, CSRF refusals, the 429 answer."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.test import RequestFactory

from adapters.http import (
    CSRF_MESSAGE,
    csrf_failure_response,
    csrf_rejected,
    error_response,
    rate_limited_response,
    search_error_response,
    status_for,
)
from config.middleware import MESSAGE, RETRY_AFTER_S, unavailable_response
from presets import errors as preset_errors
from search import errors

SIGNED_IN = SimpleNamespace(is_authenticated=True, pk=7)
TOKEN = "a" * 32  # an unmasked CSRF secret is a valid token for itself


def body(response: JsonResponse) -> Any:
    return json.loads(response.content)


def test_the_envelope_leaves_out_what_does_not_apply() -> None:
    # when
    response = error_response(400, "invalid_query", "query is empty: type a few words.")
    # then
    assert response.status_code == 400
    assert body(response) == {"error": {"code": "invalid_query", "message": "query is empty: type a few words."}}
    assert not response.has_header("Retry-After")


def test_the_envelope_names_the_field_and_when_to_retry() -> None:
    # when
    response = error_response(429, "rate_limited", "Too many.", field="query", retry_after=12)
    # then
    assert body(response) == {
        "error": {"code": "rate_limited", "message": "Too many.", "field": "query", "retry_after": 12}
    }
    assert response["Retry-After"] == "12"
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.SearchError, 400),
        (errors.InvalidQuery, 400),
        (errors.InvalidCursor, 400),
        (errors.NotFound, 404),
        (errors.PermissionDenied, 403),
        (errors.EmbeddingUnavailable, 400),
        (errors.EmbeddingModelMismatch, 400),
        (errors.ImportFailed, 400),
        (preset_errors.PresetError, 400),
        (preset_errors.PresetNameInvalid, 400),
        (preset_errors.PresetNameTaken, 409),
        (preset_errors.PresetParamsInvalid, 400),
        (preset_errors.PresetLimitReached, 400),
        (preset_errors.PresetNotFound, 404),
        (preset_errors.PresetImmutable, 403),
        (preset_errors.PresetSignInRequired, 403),
        (preset_errors.PresetRequestInvalid, 400),
    ],
)
def test_each_engine_error_has_its_status(error: type[errors.SearchError], status: int) -> None:
    assert status_for(error("How to fix it.")) == status


def test_every_engine_error_is_in_the_status_table() -> None:
    # A new SearchError subclass gets 400 unless STATUS_BY_CODE says otherwise: this test makes it a choice.
    covered = {
        errors.SearchError, errors.InvalidQuery, errors.InvalidCursor, errors.NotFound, errors.PermissionDenied,
        errors.EmbeddingUnavailable, errors.EmbeddingModelMismatch, errors.ImportFailed,
    }
    assert set(_subclasses(errors.SearchError, module="search.errors")) == covered


def _subclasses(klass: type, *, module: str) -> list[type]:
    found = [klass] if klass.__module__ == module else []
    for sub in klass.__subclasses__():
        found += _subclasses(sub, module=module)
    return found


def test_an_engine_error_answers_with_its_code_message_and_field() -> None:
    # when
    response = search_error_response(preset_errors.PresetNameTaken("Choose another name.", field="name"))
    # then
    assert response.status_code == 409
    assert body(response) == {
        "error": {"code": "preset_name_taken", "message": "Choose another name.", "field": "name"}
    }


def test_a_spent_budget_answers_429_with_retry_after() -> None:
    # when
    response = rate_limited_response(17, "searches")
    # then
    assert response.status_code == 429
    assert response["Retry-After"] == "17"
    assert body(response) == {
        "error": {"code": "rate_limited", "message": "Too many searches; try again in 17 s.", "retry_after": 17}
    }


def test_the_outage_answer_of_the_json_surfaces_is_the_same_envelope() -> None:
    # when
    response = unavailable_response(RequestFactory().get("/api/search/preview?q=x"))
    # then
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_S)
    assert json.loads(response.content) == {
        "error": {"code": "unavailable", "message": MESSAGE, "retry_after": RETRY_AFTER_S}
    }


def _post(*, user: Any, token: str | None) -> HttpRequest:
    factory = RequestFactory()
    if token:
        factory.cookies["csrftoken"] = TOKEN
    extra = {"HTTP_X_CSRFTOKEN": token} if token else {}
    request = factory.post("/api/x", "{}", content_type="application/json", **extra)
    request.user = user
    CsrfViewMiddleware(lambda _r: JsonResponse({})).process_request(request)  # reads the cookie, as in a request
    return request


def test_a_write_without_the_token_is_refused_in_json() -> None:
    # when
    response = csrf_failure_response(_post(user=SIGNED_IN, token=None))
    # then
    assert response is not None and response.status_code == 403
    assert body(response) == {"error": {"code": "csrf_failed", "message": CSRF_MESSAGE}}


def test_a_write_with_the_token_passes() -> None:
    request = _post(user=SIGNED_IN, token=TOKEN)
    assert not csrf_rejected(request)
    assert csrf_failure_response(request) is None


def test_reads_need_no_token() -> None:
    request = RequestFactory().get("/api/x")
    request.user = SIGNED_IN  # type: ignore[assignment]
    assert csrf_failure_response(request) is None


def test_signed_in_only_lets_signed_out_callers_through() -> None:
    # given: a write without a token
    anonymous, signed_in = _post(user=AnonymousUser(), token=None), _post(user=SIGNED_IN, token=None)
    # then: only the caller with a session is refused, and the surface's hint is added to the message
    assert csrf_failure_response(anonymous, signed_in_only=True) is None
    refused = csrf_failure_response(signed_in, signed_in_only=True, hint="Or call without a session cookie.")
    assert refused is not None and refused.status_code == 403
    assert body(refused)["error"]["message"] == f"{CSRF_MESSAGE} Or call without a session cookie."
