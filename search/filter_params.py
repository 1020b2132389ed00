"""URL parameters ⇄ the engine's ``SearchFilters``, in one place.

Every surface that speaks in URL parameters (the browse page, ``/search``, ``POST /api/search``'s
``filters`` object, presets) parses them here, so a parameter means the same thing everywhere. This module
only reads URL text (lists, booleans, numbers, dates); the limits, the normalisation and the words of a
refusal belong to ``search.filters.SearchFilters``, which GraphQL and MCP build too.

Parameters (all optional; repeat a list parameter or separate values with commas):

=========================  ==========================================================================
``domain``, ``subtopic``,  list of values; an item matches any of them (case-insensitive)
``content_type``,
``platform``, ``author``,
``layer``, ``source``
``language``               ISO code (``en``, ``fr``, ``ar``)
``include_qa``             boolean, default true; ``0`` hides Q&A items
``date_from``, ``date_to`` ``YYYY-MM-DD``, on the item's last update
``freshness``              updated within this many days (1–3650; ``freshness_days`` in the engine)
``overdue_review``         boolean: only items whose review is overdue (``0``: only those that are not)
``review_due_within_days`` next review due within this many days (1–365)
``unread_only``            boolean: hide items the signed-in user has opened
``include_superseded``     boolean: also show items replaced by a newer one
=========================  ==========================================================================

Booleans accept ``1/0``, ``true/false``, ``on/off``, ``yes/no``; when a URL repeats a boolean, the last
value wins (a hidden ``include_qa=0`` followed by a checked ``include_qa=1`` checkbox means true).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from search.errors import InvalidQuery
from search.filters import LIST_FILTERS, InvalidFilter, SearchFilters

LIST_PARAMS = LIST_FILTERS
SCALAR_PARAMS = (
    "language", "include_qa", "date_from", "date_to", "freshness", "overdue_review",
    "review_due_within_days", "unread_only", "include_superseded",
)
FILTER_PARAMS: tuple[str, ...] = LIST_PARAMS + SCALAR_PARAMS
# Parameters that are part of a browse URL's state but are not filters.
STATE_PARAMS = ("q", "sort", "cursor", "from_bid")
# Engine filter name -> URL parameter, where they differ (a refusal names the parameter the URL used).
_PARAM_NAMES = {"freshness_days": "freshness"}


class FilterParams(BaseModel):
    """The filter parameters, typed. ``extra="forbid"``: an unknown key is an error naming it.

    Types only: ``to_filters`` builds ``SearchFilters``, which holds the limits and refuses a bad value.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    domain: list[str] = Field(default_factory=list, description="primary domain(s)")
    subtopic: list[str] = Field(default_factory=list)
    content_type: list[str] = Field(default_factory=list)
    platform: list[str] = Field(default_factory=list)
    author: list[str] = Field(default_factory=list)
    layer: list[str] = Field(default_factory=list)
    source: list[str] = Field(default_factory=list)
    language: str | None = None
    include_qa: bool = True
    date_from: date | None = None
    date_to: date | None = None
    freshness: int | None = Field(default=None, description="updated within N days")
    overdue_review: bool | None = None
    review_due_within_days: int | None = None
    unread_only: bool = False
    include_superseded: bool = False

    @field_validator(*LIST_PARAMS, mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> list[str]:
        """Repeated values and comma-separated ones, as one list (``SearchFilters`` strips and bounds them)."""
        if value is None:
            return []
        if not isinstance(value, str | list | tuple):
            raise ValueError("must be a string or a list of strings")
        raw = [value] if isinstance(value, str) else list(value)
        if not all(isinstance(entry, str) for entry in raw):
            raise ValueError("each value must be a string")
        return [part for entry in raw for part in entry.split(",")]

    def to_filters(self) -> SearchFilters:
        return SearchFilters(
            domain=tuple(self.domain), subtopic=tuple(self.subtopic), content_type=tuple(self.content_type),
            platform=tuple(self.platform), author=tuple(self.author), layer=tuple(self.layer),
            source=tuple(self.source), language=self.language, include_qa=self.include_qa,
            date_from=self.date_from, date_to=self.date_to, freshness_days=self.freshness,
            overdue_review=self.overdue_review, review_due_within_days=self.review_due_within_days,
            unread_only=self.unread_only, include_superseded=self.include_superseded,
        )


def _raw_values(params: Mapping[str, Any], *, known_only: bool) -> dict[str, Any]:
    """A plain dict for the model: lists kept for list params, the last value for scalars, blanks dropped."""
    getlist = getattr(params, "getlist", None)
    data: dict[str, Any] = {}
    for key in params:
        if known_only and key not in FILTER_PARAMS:
            continue
        value: Any = getlist(key) if getlist else params[key]
        if key in LIST_PARAMS or key not in FILTER_PARAMS:
            data[key] = value
            continue
        if isinstance(value, list | tuple):
            value = value[-1] if value else None
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        data[key] = value
    return data


def _first_error(exc: ValidationError) -> InvalidQuery:
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else "filters"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = f"unknown filter; use one of: {', '.join(FILTER_PARAMS)}"
    return InvalidQuery(f"{field}: {message}.", field=field)


class ParamLists(dict[str, list[Any]]):
    """A dict of lists (filter name → its values) with the ``QueryDict`` face ``filters_from_params`` reads:
    ``getlist`` gives every value, ``[key]`` the last. For callers whose parameters are stored JSON, not a URL
    (presets, follows)."""

    def getlist(self, key: str) -> list[Any]:
        return list(self.get(key, []))

    def __getitem__(self, key: str) -> Any:
        values = dict.__getitem__(self, key)
        return values[-1] if values else None


def filters_from_params(params: Mapping[str, Any], *, strict: bool = False) -> SearchFilters:
    """Parse filter parameters (a ``QueryDict`` or a JSON object) into ``SearchFilters``.

    Keys that are not filters (``q``, ``sort``…) are ignored unless ``strict`` (then they are an
    error naming the key, as for ``POST /api/search``'s ``filters`` object). A bad value raises
    ``InvalidQuery`` whose ``field`` is the parameter's name: ``freshness`` where the engine says
    ``freshness_days``, in the engine's words otherwise.
    """
    try:
        parsed = FilterParams(**_raw_values(params, known_only=not strict))
    except ValidationError as exc:
        raise _first_error(exc) from None
    try:
        return parsed.to_filters()
    except InvalidFilter as exc:
        raise exc.at(_PARAM_NAMES.get(exc.field or "", exc.field or "filters")) from None


def params_from_filters(filters: SearchFilters) -> dict[str, list[str]]:
    """The shortest URL parameters for ``filters`` (defaults left out), each as a list of strings."""
    out: dict[str, list[str]] = {}
    for name in LIST_PARAMS:
        values = getattr(filters, name)
        if values:
            out[name] = list(values)
    if filters.language:
        out["language"] = [filters.language]
    if not filters.include_qa:
        out["include_qa"] = ["0"]
    if filters.date_from:
        out["date_from"] = [filters.date_from.isoformat()]
    if filters.date_to:
        out["date_to"] = [filters.date_to.isoformat()]
    if filters.freshness_days:
        out["freshness"] = [str(filters.freshness_days)]
    if filters.overdue_review is not None:
        out["overdue_review"] = ["1" if filters.overdue_review else "0"]
    if filters.review_due_within_days:
        out["review_due_within_days"] = [str(filters.review_due_within_days)]
    if filters.unread_only:
        out["unread_only"] = ["1"]
    if filters.include_superseded:
        out["include_superseded"] = ["1"]
    return out


def has_filters(filters: SearchFilters) -> bool:
    """True when any filter differs from its default."""
    return filters != SearchFilters()


def json_param_values(value: Any) -> list[Any]:
    """One parameter's values as a JSON body gives them (a list or a single value) in their URL form: ``None``
    left out, booleans as ``"1"``/``"0"``, numbers as written; anything else as is, for validation to judge."""
    values = list(value) if isinstance(value, list | tuple) else [value]
    out: list[Any] = []
    for single in values:
        if single is None:
            continue
        if isinstance(single, bool):
            single = "1" if single else "0"
        elif isinstance(single, int | float):
            single = str(single)
        out.append(single)
    return out


def param_lists_of(
    raw: Mapping[str, Any] | Iterable[tuple[str, Any]], *, invalid: Callable[[str], Exception]
) -> dict[str, list[Any]]:
    """Any parameter shape (a ``QueryDict``, a JSON object, ``(name, value)`` pairs) as name -> list of values
    in their URL form (``json_param_values``); a name given without a value keeps an empty list. A name that
    is not text raises ``invalid(message)`` (the caller's own error, with its field)."""
    multi: dict[str, list[Any]] = {}
    if hasattr(raw, "getlist") and hasattr(raw, "keys"):
        for key in raw.keys():
            multi.setdefault(str(key), []).extend(raw.getlist(key))
        return multi
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    for key, value in pairs:
        if not isinstance(key, str):
            raise invalid("Parameter names must be text.")
        multi.setdefault(key, []).extend(json_param_values(value))
    return multi


def unique_list_values(values: list[str]) -> list[str]:
    """A list filter's values de-duplicated ignoring case (the engine matches them so; the first spelling is
    kept) and sorted: two saved searches with the same effect store the same values."""
    unique: dict[str, str] = {}
    for value in values:
        unique.setdefault(value.casefold(), value)
    return [unique[k] for k in sorted(unique)]
