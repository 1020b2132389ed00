"""Typed GraphQL errors, translated from the one ``search.errors.SearchError`` hierarchy.

Queries raise a ``GraphQLError`` whose ``extensions`` carry ``code`` (a ``SearchErrorCode`` name) and
``field``; mutations return the same shape in their payload's ``errors`` list (Saleor style).
"""

from __future__ import annotations

from typing import Any

import graphene
from graphql import GraphQLError

from search.errors import SearchError


class SearchErrorCode(graphene.Enum):
    """Stable machine-readable error codes. The message says how to fix the problem."""

    INVALID_QUERY = "invalid_query"
    INVALID_CURSOR = "invalid_cursor"
    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    SIGN_IN_REQUIRED = "sign_in_required"
    EMBEDDING_UNAVAILABLE = "embedding_unavailable"
    EMBEDDING_MODEL_MISMATCH = "embedding_model_mismatch"
    RATE_LIMITED = "rate_limited"
    PRESET_NAME_INVALID = "preset_name_invalid"
    PRESET_NAME_TAKEN = "preset_name_taken"
    PRESET_PARAMS_INVALID = "preset_params_invalid"
    PRESET_LIMIT_REACHED = "preset_limit_reached"
    PRESET_NOT_FOUND = "preset_not_found"
    PRESET_IMMUTABLE = "preset_immutable"
    FOLLOW_INVALID = "follow_invalid"
    FOLLOW_LIMIT_REACHED = "follow_limit_reached"
    FOLLOW_NOT_FOUND = "follow_not_found"
    QUERY_TOO_COMPLEX = "query_too_complex"
    BATCH_NOT_SUPPORTED = "batch_not_supported"
    REQUEST_TOO_LARGE = "request_too_large"
    CSRF_FAILED = "csrf_failed"
    INTERNAL_ERROR = "internal_error"


_CODES: dict[str, str] = {member.value: member.name for member in SearchErrorCode.__enum__}
# Engine codes with no GraphQL name of their own fall back to their nearest family.
_FALLBACKS: dict[str, str] = {
    "preset_sign_in_required": "SIGN_IN_REQUIRED",
    "preset_error": "INVALID_QUERY",
    "follow_sign_in_required": "SIGN_IN_REQUIRED",
    "follow_error": "INVALID_QUERY",
}


def error_code(exc: SearchError) -> str:
    """The ``SearchErrorCode`` name for an engine error (walks the class hierarchy for unknown codes)."""
    for klass in type(exc).__mro__:
        code = getattr(klass, "code", None)
        if code in _FALLBACKS:
            return _FALLBACKS[code]
        if code in _CODES:
            return _CODES[code]
    return "INVALID_QUERY"


def graphql_error(message: str, *, code: str, field: str | None = None, **extensions: Any) -> GraphQLError:
    """A ``GraphQLError`` with ``extensions.code`` (and ``extensions.field`` when one input is at fault)."""
    ext: dict[str, Any] = {"code": code, **extensions}
    if field:
        ext["field"] = field
    return GraphQLError(message, extensions=ext)


def from_search_error(exc: SearchError) -> GraphQLError:
    return graphql_error(exc.message, code=error_code(exc), field=exc.field)


class SearchErrorType(graphene.ObjectType):
    """One problem with a mutation's input, or why it could not be done."""

    code = graphene.Field(SearchErrorCode, required=True)
    message = graphene.String(required=True)
    field = graphene.String(description="The input field at fault (camelCase path), when one is.")

    class Meta:
        name = "SearchError"


def error_payload(exc: SearchError) -> dict[str, Any]:
    """A mutation payload's ``errors`` entry for an engine error."""
    return {"code": getattr(SearchErrorCode, error_code(exc)), "message": exc.message, "field": exc.field}
