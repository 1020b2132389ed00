"""The quality score: a pure function of an item's facts, with a breakdown for the item page and the admin.

    score = clamp(freshness + completeness − cadence penalty, 0, 100)

- **freshness** (0–40): full marks when the item was updated or reviewed within 90 days, falling
  linearly to 0 at two years.
- **completeness** (0–60): a summary (20), AI keywords (15, full from 3 keywords), a substantial body
  (15, full from 1,500 characters), an author (5), a primary domain (5).
- **cadence penalty** (0–40): :func:`cadence_compliance_penalty`, from the next review date.

Nothing but the penalty reads ``next_review_date``, so an item without a review date gets exactly the
score it would get without the penalty (``breakdown["score"] == breakdown["base"]``).

The daily beat job (04:00 UTC) stores the score and breakdown on every item
(:func:`quality_scores_update`); :func:`quality_compute` is the pure part and takes ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import F, IntegerField, TextField, Value
from django.db.models.functions import Coalesce, Length
from django.utils import timezone

from search.models import ContentItem

BATCH = 500

FRESHNESS_MAX = 40.0
FRESH_FULL_DAYS = 90
FRESH_ZERO_DAYS = 730
SUMMARY_POINTS = 20.0
KEYWORDS_POINTS = 15.0
KEYWORDS_FULL = 3
BODY_POINTS = 15.0
BODY_FULL_CHARS = 1500
AUTHOR_POINTS = 5.0
DOMAIN_POINTS = 5.0

# Cadence penalty tiers (days relative to the next review date).
DUE_SOON_WINDOW_DAYS = 30
DUE_SOON_MAX_PENALTY = 10.0
OVERDUE_PENALTY = 15.0  # 0–14 days overdue (due today counts as overdue)
LATE_PENALTY = 25.0  # 15–30 days overdue
VERY_LATE_PENALTY = 40.0  # more than 30 days overdue


def _today(now: datetime) -> date:
    if timezone.is_naive(now):
        raise ValueError("now must be an aware datetime: pass django.utils.timezone.now().")
    return timezone.localdate(now)


def cadence_compliance_penalty(next_review_date: date | None, now: datetime) -> float:
    """Points taken off the quality score for a review that is due or late.

    ``d`` = days from today (in the project's time zone, UTC) to ``next_review_date``:

    ======================  ====================================
    no date, or d > 30      0
    30 ≥ d ≥ 1              linear: 0 at d = 30 … 10 at d = 1
    0 to 14 days overdue    15 (due today, d = 0, is overdue)
    15 to 30 days overdue   25
    more than 30 overdue    40
    ======================  ====================================
    """
    if next_review_date is None:
        return 0.0
    days_until = (next_review_date - _today(now)).days
    if days_until > DUE_SOON_WINDOW_DAYS:
        return 0.0
    if days_until >= 1:
        return DUE_SOON_MAX_PENALTY * (DUE_SOON_WINDOW_DAYS - days_until) / (DUE_SOON_WINDOW_DAYS - 1)
    days_overdue = -days_until
    if days_overdue <= 14:
        return OVERDUE_PENALTY
    if days_overdue <= 30:
        return LATE_PENALTY
    return VERY_LATE_PENALTY


@dataclass(frozen=True)
class QualityInputs:
    """The facts the score depends on (read from the item and its live revision, else its latest)."""

    updated_at: datetime | None = None
    last_reviewed_at: datetime | None = None
    summary: str = ""
    keywords: Sequence[str] = ()
    body_chars: int = 0
    author_name: str = ""
    primary_domain: str = ""
    next_review_date: date | None = None


class QualityBreakdown(TypedDict):
    """The JSON in ``ContentItem.quality_breakdown``: flat, points first, so any surface can list it."""

    freshness: float  # 0–40
    summary: float  # completeness parts: summary 0/20, keywords 0–15, body 0–15, author 0/5, domain 0/5
    keywords: float
    body: float
    author: float
    domain: float
    cadence_penalty: float  # 0–40, subtracted
    base: float  # freshness + completeness: the score without the cadence penalty
    score: float
    days_to_review: int | None  # negative when overdue; None without a review date
    as_of: str  # the date (UTC) the score was computed for


COMPLETENESS_KEYS = ("summary", "keywords", "body", "author", "domain")


def freshness_points(inputs: QualityInputs, now: datetime) -> float:
    touched = [d for d in (inputs.updated_at, inputs.last_reviewed_at) if d is not None]
    if not touched:
        return 0.0
    age_days = max(0.0, (now - max(touched)).total_seconds() / 86400)
    if age_days <= FRESH_FULL_DAYS:
        return FRESHNESS_MAX
    if age_days >= FRESH_ZERO_DAYS:
        return 0.0
    return FRESHNESS_MAX * (FRESH_ZERO_DAYS - age_days) / (FRESH_ZERO_DAYS - FRESH_FULL_DAYS)


def completeness_points(inputs: QualityInputs) -> dict[str, float]:
    keywords = [k for k in inputs.keywords if k and k.strip()]
    return {
        "summary": SUMMARY_POINTS if inputs.summary.strip() else 0.0,
        "keywords": KEYWORDS_POINTS * min(len(keywords), KEYWORDS_FULL) / KEYWORDS_FULL,
        "body": BODY_POINTS * min(max(inputs.body_chars, 0), BODY_FULL_CHARS) / BODY_FULL_CHARS,
        "author": AUTHOR_POINTS if inputs.author_name.strip() else 0.0,
        "domain": DOMAIN_POINTS if inputs.primary_domain.strip() else 0.0,
    }


def quality_compute(inputs: QualityInputs, *, now: datetime) -> QualityBreakdown:
    """The score and its breakdown. Pure: same inputs and ``now`` give the same result."""
    today = _today(now)
    freshness = round(freshness_points(inputs, now), 2)
    completeness = {k: round(v, 2) for k, v in completeness_points(inputs).items()}
    base = round(min(100.0, max(0.0, freshness + sum(completeness.values()))), 2)
    penalty = round(cadence_compliance_penalty(inputs.next_review_date, now), 2)
    score = round(min(100.0, max(0.0, base - penalty)), 2)
    return {
        "freshness": freshness,
        "summary": completeness["summary"],
        "keywords": completeness["keywords"],
        "body": completeness["body"],
        "author": completeness["author"],
        "domain": completeness["domain"],
        "cadence_penalty": penalty,
        "base": base,
        "score": score,
        "days_to_review": (inputs.next_review_date - today).days if inputs.next_review_date else None,
        "as_of": today.isoformat(),
    }


BREAKDOWN_LABELS = {
    "freshness": "Freshness (updated or reviewed recently)",
    "summary": "Summary present",
    "keywords": "Keywords present",
    "body": "Substantial body",
    "author": "Author named",
    "domain": "Primary domain set",
    "cadence_penalty": "Review cadence penalty",
}


def breakdown_rows(breakdown: dict[str, Any]) -> list[tuple[str, float]]:
    """(label, points) rows for display; the penalty is negative. Empty for an item never scored."""
    if not breakdown or "score" not in breakdown:
        return []
    rows = [(BREAKDOWN_LABELS["freshness"], float(breakdown.get("freshness", 0)))]
    for key in COMPLETENESS_KEYS:
        rows.append((BREAKDOWN_LABELS[key], float(breakdown.get(key, 0))))
    rows.append((BREAKDOWN_LABELS["cadence_penalty"], -float(breakdown.get("cadence_penalty", 0))))
    return rows


def _inputs_rows(qs: Any) -> Any:
    return qs.annotate(
        q_summary=Coalesce(
            F("live_revision__summary"), F("latest_revision__summary"), Value(""), output_field=TextField()
        ),
        q_body_chars=Coalesce(
            Length("live_revision__body"),
            Length("latest_revision__body"),
            Value(0),
            output_field=IntegerField(),
        ),
    ).values(
        "pk",
        "updated_at",
        "last_reviewed_at",
        "ai_keywords",
        "author_name",
        "primary_domain",
        "next_review_date",
        "quality_score",
        "quality_breakdown",
        "q_summary",
        "q_body_chars",
    )


def _inputs_from_row(row: dict[str, Any]) -> QualityInputs:
    return QualityInputs(
        updated_at=row["updated_at"],
        last_reviewed_at=row["last_reviewed_at"],
        summary=row["q_summary"] or "",
        keywords=tuple(row["ai_keywords"] or ()),
        body_chars=int(row["q_body_chars"] or 0),
        author_name=row["author_name"] or "",
        primary_domain=row["primary_domain"] or "",
        next_review_date=row["next_review_date"],
    )


def item_quality_inputs(*, item_id: int) -> QualityInputs:
    return _inputs_from_row(_inputs_rows(ContentItem.objects.filter(pk=item_id)).get())


def quality_scores_update(
    *, now: datetime, item_ids: Sequence[int] | None = None, progress: Callable[[int], None] | None = None
) -> int:
    """Recompute and store the score and breakdown of every item (or of ``item_ids``).

    Idempotent and resumable: batches of 500 commit on their own, and only rows whose stored value
    differs are written. Returns the number of items written.
    """
    qs = ContentItem.objects.all()
    if item_ids is not None:
        qs = qs.filter(pk__in=list(item_ids))
    written = 0
    last = 0
    while True:
        rows = list(_inputs_rows(qs.filter(pk__gt=last).order_by("pk"))[:BATCH])
        if not rows:
            return written
        last = rows[-1]["pk"]
        changed = []
        for row in rows:
            breakdown = quality_compute(_inputs_from_row(row), now=now)
            if row["quality_score"] != breakdown["score"] or row["quality_breakdown"] != breakdown:
                changed.append(
                    ContentItem(
                        pk=row["pk"], quality_score=breakdown["score"], quality_breakdown=dict(breakdown)
                    )
                )
        if changed:
            with transaction.atomic():
                ContentItem.objects.bulk_update(changed, ["quality_score", "quality_breakdown"])
            written += len(changed)
        if progress:
            progress(len(rows))


def item_quality_update(*, item_id: int, now: datetime) -> QualityBreakdown:
    """Recompute one item's score now (after a review or a new summary) and return the breakdown."""
    breakdown = quality_compute(item_quality_inputs(item_id=item_id), now=now)
    ContentItem.objects.filter(pk=item_id).update(
        quality_score=breakdown["score"], quality_breakdown=dict(breakdown)
    )
    return breakdown
