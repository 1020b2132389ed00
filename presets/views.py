"""JSON API for presets under ``/api/presets/``: parse (pydantic), call a service, answer JSON.

Session authentication; every write checks the CSRF token (``X-CSRFToken`` header) and answers JSON,
never an HTML error page. Anonymous callers read the system presets and get 403 on writes.

Errors: ``{"error": {"code", "message", "field"?}}`` (``adapters.http``) with 400 (bad input), 403 (sign in /
system preset / CSRF), 404 (no such preset), 409 (name taken), 413 (body too large).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, TypedDict
from urllib.parse import urlencode

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.http import csrf_failure_response, error_response, search_error_response
from presets import services
from presets.errors import PresetRequestInvalid, PresetSignInRequired
from presets.models import NAME_MAX_CHARS, Preset
from presets.params import DROPPED_KEYS, STICKY_KEYS, filter_schema, query_items
from search.errors import SearchError

ParamInput = dict[str, str | int | bool | list[str | int] | None]


class PresetDict(TypedDict):
    id: int
    name: str
    params: dict[str, Any]
    query: str
    is_system: bool
    created_at: str
    deleted_at: str | None


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="1–40 characters after trimming.")
    params: ParamInput = Field(description="URL parameters; normalised by the server.")


class RenameBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class ValidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    params: ParamInput = Field(default_factory=dict)


class ImportEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")  # browsers may keep their own ids and timestamps
    name: Any = None
    params: Any = None


class ImportBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    presets: list[ImportEntry] = Field(max_length=500)


def _query(params: dict[str, Any]) -> str:
    return urlencode(query_items(params))


def preset_as_dict(preset: Preset) -> PresetDict:
    params = preset.sorted_params()
    return {
        "id": preset.pk,
        "name": preset.name,
        "params": params,
        "query": _query(params),
        "is_system": preset.is_system,
        "created_at": preset.created_at.isoformat(),
        "deleted_at": preset.deleted_at.isoformat() if preset.deleted_at else None,
    }


View = Callable[..., HttpResponse]


def json_api(view: View) -> View:
    """CSRF for unsafe methods (answered in JSON), and ``SearchError`` -> JSON error response."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        failure = csrf_failure_response(request)  # safe methods (GET, HEAD, OPTIONS) pass
        if failure is not None:
            return failure
        try:
            return view(request, *args, **kwargs)
        except SearchError as exc:
            return search_error_response(exc)
        except RequestDataTooBig:
            return error_response(413, "too_large", "The request body is too large; send fewer presets at once.")

    return csrf_exempt(never_cache(wrapper))


def _body(request: HttpRequest, model: type[BaseModel]) -> Any:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise PresetRequestInvalid(
            'The body must be a JSON object, for example {"name": "My filters"}.'
        ) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ())) or None
        raise PresetRequestInvalid(
            f"{field or 'body'}: {first.get('msg', 'is not valid')}.", field=field
        ) from None


def _signed_in(request: HttpRequest) -> None:
    if not request.user.is_authenticated:
        raise PresetSignInRequired(services.SIGN_IN_MESSAGE)


@json_api
@require_http_methods(["GET", "POST"])
def presets_collection(request: HttpRequest) -> HttpResponse:
    """GET: the presets the caller may use. POST ``{name, params}``: save a preset (201)."""
    if request.method == "POST":
        _signed_in(request)
        body = _body(request, CreateBody)
        preset = services.preset_create(owner=request.user, name=body.name, params=body.params)
        return JsonResponse({"preset": preset_as_dict(preset)}, status=201)
    get_token(request)  # sets the csrftoken cookie the page's script sends back on writes
    presets = services.preset_list(owner=request.user)
    return JsonResponse(
        {
            "presets": [preset_as_dict(p) for p in presets],
            "authenticated": bool(request.user.is_authenticated),
            "filters": filter_schema(),
            "dropped_keys": sorted(DROPPED_KEYS),
            "sticky_keys": list(STICKY_KEYS),
            "limits": {"name_max_chars": NAME_MAX_CHARS, "max_presets": services.MAX_PRESETS_PER_USER},
        }
    )


@json_api
@require_http_methods(["GET", "PATCH", "DELETE"])
def preset_detail(request: HttpRequest, preset_id: int) -> HttpResponse:
    """GET one preset; PATCH ``{name}`` renames (last write wins); DELETE leaves a tombstone for undo."""
    if request.method == "GET":
        return JsonResponse(
            {"preset": preset_as_dict(services.preset_get(owner=request.user, preset_id=preset_id))}
        )
    _signed_in(request)
    if request.method == "PATCH":
        body = _body(request, RenameBody)
        preset = services.preset_rename(owner=request.user, preset_id=preset_id, name=body.name)
    else:
        preset = services.preset_delete(owner=request.user, preset_id=preset_id)
    return JsonResponse({"preset": preset_as_dict(preset)})


@json_api
@require_http_methods(["POST"])
def preset_restore(request: HttpRequest, preset_id: int) -> HttpResponse:
    """Undo a delete."""
    _signed_in(request)
    preset = services.preset_restore(owner=request.user, preset_id=preset_id)
    return JsonResponse({"preset": preset_as_dict(preset)})


@json_api
@require_http_methods(["GET"])
def preset_apply(request: HttpRequest, preset_id: int) -> HttpResponse:
    """The URL parameters after applying the preset to the current ones (sent as this request's query)."""
    params = services.preset_apply(owner=request.user, preset_id=preset_id, current=request.GET)
    return JsonResponse({"params": params, "query": _query(params)})


@json_api
@require_http_methods(["POST"])
def preset_validate(request: HttpRequest) -> HttpResponse:
    """Normalise parameters (and check a name) without saving: browsers of anonymous visitors use it."""
    body = _body(request, ValidateBody)
    name = services.clean_name(body.name) if body.name is not None else None
    params = services.normalize_preset_params(body.params)
    return JsonResponse({"name": name, "params": params, "query": _query(params)})


@json_api
@require_http_methods(["POST"])
def preset_import(request: HttpRequest) -> HttpResponse:
    """Merge presets kept in the browser into the account: ``{presets: [{name, params}, ...]}``."""
    _signed_in(request)
    body = _body(request, ImportBody)
    result = services.preset_import(
        owner=request.user, presets=[{"name": e.name, "params": e.params} for e in body.presets]
    )
    return JsonResponse(
        {
            "created": [preset_as_dict(p) for p in result.created],
            "skipped": [{"name": s.name, "reason": s.reason} for s in result.skipped],
            "presets": [preset_as_dict(p) for p in services.preset_list(owner=request.user)],
        }
    )
