"""Request models of the browse JSON API (pydantic). A bad field answers 400 naming the field."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from search.errors import InvalidQuery
from search.text.query_parser import validate_query_text
from search.types import MAX_LIMIT, MAX_QUERY_CHARS, PREVIEW_MAX_LIMIT, SITE_THRESHOLD, THRESHOLD

PREVIEW_DEFAULT_LIMIT = 8
SEARCH_DEFAULT_LIMIT = 20


def query_text(value: Any, *, field: str = "query", empty: str = "must not be empty") -> str:
    """``value`` as query text (trimmed, checked by the engine's rule); ``empty`` says what an empty one is."""
    if not isinstance(value, str):
        raise ValueError("must be a string")
    text = validate_query_text(value, field=field)
    if not text:
        raise ValueError(f"{empty}: type at least one character")
    return text


class _QueryBody(BaseModel):
    """What ``POST /api/search`` and ``POST /api/federation/search`` share: the query, its floor, filters."""

    model_config = ConfigDict(extra="forbid")
    max_limit: ClassVar[int] = MAX_LIMIT

    query: str = Field(description=f"1–{MAX_QUERY_CHARS} characters after trimming")
    threshold: float = Field(default=SITE_THRESHOLD, ge=0.0, le=1.0, description=THRESHOLD)
    limit: int = Field(default=SEARCH_DEFAULT_LIMIT, description=f"clamped to 1–{MAX_LIMIT}")
    filters: dict[str, Any] = Field(default_factory=dict, description="filter parameters (search/filter_params.py)")

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        return query_text(value)

    @field_validator("limit", mode="after")
    @classmethod
    def _clamp_limit(cls, value: int) -> int:
        return max(1, min(value, cls.max_limit))


class SearchRequest(_QueryBody):
    """Body of ``POST /api/search``."""

    cursor: str | None = Field(default=None, max_length=500, description="next_cursor of the previous page")
    sources: Any = Field(
        default=None, description='"all" or a list of source names ("local" and peers); default: local only'
    )


class PreviewRequest(BaseModel):
    """Query string of ``GET /api/search/preview``."""

    model_config = ConfigDict(extra="ignore")

    q: str = Field(description="text to look for, trimmed, required")
    limit: int = Field(default=PREVIEW_DEFAULT_LIMIT, description=f"positive integer, clamped to {PREVIEW_MAX_LIMIT}")

    @field_validator("q", mode="before")
    @classmethod
    def _q(cls, value: Any) -> str:
        return query_text(value, field="q", empty="is required")

    @field_validator("limit", mode="after")
    @classmethod
    def _limit(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be a positive integer")
        return min(value, PREVIEW_MAX_LIMIT)


def parse_model(model: type[BaseModel], data: Any) -> Any:
    """Validate ``data`` into ``model`` or raise ``InvalidQuery`` naming the first bad field."""
    try:
        return model.model_validate(data)
    except InvalidQuery:
        raise
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "body"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        elif error["type"] == "extra_forbidden":
            message = f"is not a known field; send only {', '.join(model.model_fields)}"
        raise InvalidQuery(f"{field} {message}.", field=field) from None


class FederationSearchRequest(_QueryBody):
    """Body of ``POST /api/federation/search`` (a peer's key): ``POST /api/search`` without cursors or sources."""

    max_limit: ClassVar[int] = 50

    changed_since: str | None = Field(default=None, max_length=64, description="ISO 8601 time with a time zone")
