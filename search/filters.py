"""The engine's filters, declared once: names, types, limits, normalisation and the words of each refusal.

Every surface maps its own vocabulary onto ``SearchFilters`` (URL parameters in ``search.filter_params``,
GraphQL's ``SearchFilterInput``, MCP's ``find`` arguments) and bounds nothing itself: the filters check and
normalise themselves when built, so the same bad filter is refused in the same words everywhere. A surface
may name the filter its own way (``filter.contentType``, ``filters.domain``, ``type``) with
``InvalidFilter.at``; the words after the name do not change.

* List filters (``LIST_FILTERS``): at most ``MAX_VALUES`` values of at most ``MAX_VALUE_CHARS`` characters.
  Values are stripped, empty ones dropped and repeats dropped (the first kept, order kept).
* ``language``: a code of at most ``MAX_LANGUAGE_CHARS`` characters, stripped; empty means no filter.
* ``freshness_days`` (1–3650) and ``review_due_within_days`` (1–365): whole days.
* ``date_to`` on or after ``date_from``.
* ``changed_since``: an aware point in time (a ``datetime`` or ISO 8601 text with a time zone, e.g.
  ``2025-01-31T09:00:00Z``), kept in UTC; items updated at or after it match.
* No text holds a NUL or an unpaired surrogate: PostgreSQL cannot receive them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from search.errors import InvalidQuery

LIST_FILTERS = ("domain", "subtopic", "content_type", "platform", "author", "layer", "source")
# The ContentItem column each filter with values (and the language filter) reads: the one map the ORM filters
# (managers), the filter panel's options (selectors.catalogue) and the engine's facets use.
FILTER_COLUMNS = {
    "domain": "primary_domain",
    "subtopic": "subtopic",
    "content_type": "content_type",
    "platform": "platform",
    "author": "author_name",
    "layer": "layer",
    "source": "source",
    "language": "language",
}
MAX_VALUES = 20
MAX_VALUE_CHARS = 120
MAX_LANGUAGE_CHARS = 8
MAX_FRESHNESS_DAYS = 3650
MAX_REVIEW_DUE_DAYS = 365
DAY_RANGES: dict[str, tuple[int, int]] = {
    "freshness_days": (1, MAX_FRESHNESS_DAYS),
    "review_due_within_days": (1, MAX_REVIEW_DUE_DAYS),
}


class InvalidFilter(InvalidQuery):
    """A filter the engine refuses. ``message`` is ``"<name> <detail>"`` and ``field`` is ``<name>``.

    ``detail`` is worded here once; ``at(name)`` gives the same refusal under a surface's name for the filter.
    """

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name} {detail}", field=name)
        self.detail = detail

    def at(self, name: str) -> InvalidFilter:
        return InvalidFilter(name, self.detail)


def check_text(value: str, *, name: str) -> str:
    """``value`` unchanged, or refused when PostgreSQL cannot take it (a NUL, a lone surrogate)."""
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise InvalidFilter(name, "holds a NUL byte or an unpaired surrogate character; remove it and send plain text.")
    return value


def clean_values(name: str, values: Iterable[Any] | str | None) -> tuple[str, ...]:
    """A list filter's values stripped, without empty ones or repeats (order kept), within the limits."""
    if values is None:
        return ()
    kept: dict[str, None] = {}
    for value in (values,) if isinstance(values, str) else values:
        if not isinstance(value, str):
            raise InvalidFilter(name, "must hold text values only.")
        value = check_text(value.strip(), name=name)
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidFilter(
                name, f"has a value {len(value)} characters long; shorten it to {MAX_VALUE_CHARS} or fewer."
            )
        if value:
            kept[value] = None
    if len(kept) > MAX_VALUES:
        raise InvalidFilter(name, f"has {len(kept)} values; send at most {MAX_VALUES}.")
    return tuple(kept)


def clean_language(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidFilter("language", "must be text.")
    value = check_text(value.strip(), name="language")
    if len(value) > MAX_LANGUAGE_CHARS:
        raise InvalidFilter(
            "language",
            f"is {len(value)} characters long; send a language code of at most {MAX_LANGUAGE_CHARS} (en, fr, ar).",
        )
    return value or None


def check_days(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFilter(name, "must be a whole number of days.")
    low, high = DAY_RANGES[name]
    if not low <= value <= high:
        raise InvalidFilter(name, f"must be between {low} and {high} (got {value}).")


def check_dates(date_from: Any, date_to: Any) -> None:
    for name, value in (("date_from", date_from), ("date_to", date_to)):
        if value is not None and (isinstance(value, datetime) or not isinstance(value, date)):
            raise InvalidFilter(name, "must be a day (YYYY-MM-DD).")
    if date_from and date_to and date_to < date_from:
        raise InvalidFilter(
            "date_to", f"({date_to.isoformat()}) is before the start date ({date_from.isoformat()}); "
            "send an end date on or after it.",
        )


CHANGED_SINCE_EXAMPLE = "2025-01-31T09:00:00Z"
MAX_TIME_CHARS = 64


def clean_changed_since(value: Any) -> datetime | None:
    """``changed_since`` as an aware UTC datetime: a ``datetime`` or ISO 8601 text, always with a time zone."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_TIME_CHARS:
            raise InvalidFilter(
                "changed_since", f"is {len(text)} characters long; send an ISO 8601 time such as "
                f"{CHANGED_SINCE_EXAMPLE}."
            )
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
        except ValueError:
            raise InvalidFilter(
                "changed_since",
                f"must be an ISO 8601 time with a time zone, e.g. {CHANGED_SINCE_EXAMPLE} (got {text[:40]!r}).",
            ) from None
    if not isinstance(value, datetime):
        raise InvalidFilter(
            "changed_since", f"must be an ISO 8601 time with a time zone, e.g. {CHANGED_SINCE_EXAMPLE}."
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidFilter(
            "changed_since",
            f"has no time zone; add one, e.g. {CHANGED_SINCE_EXAMPLE} (Z for UTC) or 2025-01-31T10:00:00+01:00.",
        )
    return value.astimezone(UTC)


@dataclass(frozen=True)
class SearchFilters:
    """The engine's filters. Built normalised and checked (see the module docstring), or ``InvalidFilter``."""

    domain: tuple[str, ...] = ()
    subtopic: tuple[str, ...] = ()
    content_type: tuple[str, ...] = ()
    platform: tuple[str, ...] = ()
    author: tuple[str, ...] = ()
    layer: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    language: str | None = None
    include_qa: bool = True
    date_from: date | None = None
    date_to: date | None = None
    freshness_days: int | None = None
    overdue_review: bool | None = None
    review_due_within_days: int | None = None
    content_item_id: int | None = None
    include_superseded: bool = False
    unread_only: bool = False
    changed_since: datetime | None = None

    def __post_init__(self) -> None:
        # Frozen: the normalised values replace the given ones here, once, before anyone reads them.
        for name in LIST_FILTERS:
            object.__setattr__(self, name, clean_values(name, getattr(self, name)))
        object.__setattr__(self, "language", clean_language(self.language))
        object.__setattr__(self, "changed_since", clean_changed_since(self.changed_since))
        check_dates(self.date_from, self.date_to)
        for name in DAY_RANGES:
            check_days(name, getattr(self, name))
