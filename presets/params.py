"""Preset parameters: browse URL parameters, normalised against the engine's filters.

A preset stores only filters, in the URL vocabulary of ``search.filter_params`` (the one place that turns URL
parameters into ``search.types.SearchFilters``; ``freshness`` there is ``freshness_days`` in the engine).
Normalising a set of parameters means:

* ``sort``, ``order``, ``cursor`` and ``q`` are removed (a preset is not a query or a page), and so is
  ``from_bid``, the bid a visitor came from, which stays sticky in the URL when a preset is applied;
* every other key must be a filter and every value valid (``search.filter_params.filters_from_params`` in strict
  mode, within the limits of ``search.filters``, the same on every surface); an unknown key or a bad value raises
  ``PresetParamsInvalid`` with ``field="params.<key>"`` and the engine's words;
* the filters are written back in canonical form (``search.filter_params.params_from_filters``): values equal
  to the engine's default (``include_qa=1``, ``unread_only=0``, ...) and empty values are dropped,
  booleans are ``"1"``/``"0"``, dates ``YYYY-MM-DD``;
* list filters (``domain``, ``content_type``, ...) stay lists, de-duplicated ignoring case (the engine
  matches them so) and sorted; scalar filters are single strings; keys come out sorted.

So two presets with the same effect have the same parameters. In a URL a list filter repeats its key
(``content_type=guide&content_type=policy``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any, Literal

from presets.errors import PresetParamsInvalid
from search.errors import SearchError
from search.filter_params import (
    LIST_PARAMS,
    FilterParams,
    ParamLists,
    param_lists_of,
    params_from_filters,
    unique_list_values,
)
from search.filter_params import filters_from_params as browse_filters_from_params
from search.types import SearchFilters

ParamValue = str | list[str]
PresetParams = dict[str, ParamValue]
FilterKind = Literal["multi", "bool", "int", "date", "str"]

# Removed from every preset: the first four by the issue, ``from_bid`` because it is context, not a filter.
DROPPED_KEYS: frozenset[str] = frozenset({"sort", "order", "cursor", "q", "from_bid"})
# URL parameters that survive applying (or clearing) a preset; everything else is replaced.
STICKY_KEYS: tuple[str, ...] = ("q", "from_bid", "sort", "order")


def _kind_of(annotation: Any) -> FilterKind:
    """``list[str]`` -> multi, ``bool | None`` -> bool, ``int | None`` -> int, ..."""
    if typing.get_origin(annotation) in (list, tuple):
        return "multi"
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _kind_of(args[0])
    for kind, python_type in (("bool", bool), ("int", int), ("date", date), ("str", str)):
        if annotation is python_type:
            return kind  # type: ignore[return-value]
    raise TypeError(f"search.filter_params.FilterParams has a field of unsupported type {annotation!r}")


FILTER_KINDS: dict[str, FilterKind] = {
    name: _kind_of(info.annotation) for name, info in FilterParams.model_fields.items()
}
FILTER_NAMES: tuple[str, ...] = tuple(sorted(FILTER_KINDS))
_DEFAULT_PARAMS: dict[str, list[str]] = params_from_filters(SearchFilters())


def filter_schema() -> dict[str, dict[str, Any]]:
    """Filter names, kinds and defaults (URL form), for clients that compare or edit parameters."""
    schema: dict[str, dict[str, Any]] = {}
    for name in FILTER_NAMES:
        default = FilterParams.model_fields[name].get_default(call_default_factory=True)
        if isinstance(default, bool):
            default = "1" if default else "0"
        elif isinstance(default, list):
            default = None
        schema[name] = {"kind": FILTER_KINDS[name], "default": default}
    return schema


def to_multi(raw: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """Any parameter shape (``QueryDict``, JSON object, ``(key, value)`` pairs) -> key -> list of values.

    JSON booleans and numbers become their URL text (``true`` -> ``"1"``, ``30`` -> ``"30"``).
    """
    multi = param_lists_of(raw, invalid=lambda message: PresetParamsInvalid(message, field="params"))
    return {key: values for key, values in multi.items() if values}


def filters_from_params(raw: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> SearchFilters:
    """Validate parameters and build the engine's filters (``sort``, ``q``, ... ignored).

    A repeated scalar filter keeps its last value, as on the browse page.

    Raises ``PresetParamsInvalid`` (``field="params.<key>"``) for an unknown key or a bad value.
    """
    multi = {key: values for key, values in to_multi(raw).items() if key not in DROPPED_KEYS}
    # A repeated scalar filter: the last value wins, as on the browse page (hidden 0 + checked 1 = 1).
    try:
        return browse_filters_from_params(ParamLists(multi), strict=True)
    except SearchError as exc:
        key = exc.field or ""
        message = exc.message
        if key in multi and key not in FILTER_KINDS:
            message = f"'{key}' is not a filter. Presets hold filters only: {', '.join(FILTER_NAMES)}."
        field = f"params.{key}" if key in multi else "params"  # e.g. date_from after date_to
        raise PresetParamsInvalid(message, field=field) from None


def _canonical(filters: SearchFilters) -> PresetParams:
    params: PresetParams = {}
    for key, values in params_from_filters(filters).items():
        if key in LIST_PARAMS:
            if unique := unique_list_values(values):
                params[key] = unique
        elif values and values != _DEFAULT_PARAMS.get(key):
            params[key] = values[-1]
    return {key: params[key] for key in sorted(params)}


def normalize_params(raw: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> PresetParams:
    """Validate and canonicalise parameters (see the module docstring). Raises ``PresetParamsInvalid``."""
    return _canonical(filters_from_params(raw))


def sorted_params(params: Mapping[str, ParamValue]) -> PresetParams:
    """Stored parameters with their keys sorted (PostgreSQL's jsonb does not keep key order)."""
    return {key: params[key] for key in sorted(params)}


def params_identity(params: Mapping[str, ParamValue]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What makes two presets' filters the same: the engine matches list values ignoring case."""
    identity = []
    for key in sorted(params):
        value = params[key]
        values = value if isinstance(value, list | tuple) else [value]
        identity.append((key, tuple(sorted(str(v).casefold() for v in values))))
    return tuple(identity)


def query_items(params: Mapping[str, ParamValue | list[str]]) -> list[tuple[str, str]]:
    """``(key, value)`` pairs for ``urlencode``; a list value repeats its key."""
    items: list[tuple[str, str]] = []
    for key in sorted(params):
        value = params[key]
        for single in value if isinstance(value, list | tuple) else [value]:
            items.append((key, str(single)))
    return items


def apply_params(
    preset_params: Mapping[str, ParamValue], current: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """The URL parameters after applying a preset to the current ones.

    The preset's filters replace every filter; ``q``, ``from_bid``, ``sort`` and ``order`` are kept
    (``from_bid`` is sticky); ``cursor`` and anything else is dropped, since the result set changed.
    Pass empty ``preset_params`` to clear the filters (what clicking the active chip does).
    """
    result: dict[str, list[str]] = {}
    for key, values in to_multi(current or {}).items():
        if key in STICKY_KEYS:
            kept = [str(v) for v in values if str(v) != ""]
            if kept:
                result[key] = kept
    for key, value in sorted_params(preset_params).items():
        result[key] = [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]
    return {key: result[key] for key in sorted(result)}
