"""Review cadence: flagging overdue / due-soon items and recording reviews.

The flag (``ContentItem.governance_review_status``) is what the ``overdue_review`` filter reads on
every surface. The daily flagger (beat, 03:45 UTC) sets it from ``next_review_date``:

- before today → ``review_overdue``;
- today up to 30 days ahead → ``due_soon``;
- no date, or further ahead → ``ok``.

(The quality score's cadence penalty counts "due today" as overdue; the flag calls it due soon, since
the item can still be reviewed on time today.)
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from search.models import ContentItem, ReviewStatus

DUE_SOON_DAYS = 30


def review_status_for(next_review_date: date | None, today: date) -> str:
    """The flag an item with this next review date should carry on ``today``."""
    if next_review_date is None:
        return ReviewStatus.OK
    if next_review_date < today:
        return ReviewStatus.OVERDUE
    if next_review_date <= today + timedelta(days=DUE_SOON_DAYS):
        return ReviewStatus.DUE_SOON
    return ReviewStatus.OK


def item_mark_reviewed(*, item: ContentItem, now: datetime) -> None:
    """Record a review: last_reviewed_at = now, next review moved by the cadence, flag recomputed.

    With a cadence the next review is ``today + review_cadence_days``, which clears the flag (a cadence
    of 30 days or less is, honestly, due soon again). Without a cadence the review date is cleared:
    nobody scheduled another review. The quality score is refreshed at once.
    """
    from search.services.quality import item_quality_update

    today = timezone.localdate(now)
    item.last_reviewed_at = now
    if item.review_cadence_days:
        item.next_review_date = today + timedelta(days=item.review_cadence_days)
    else:
        item.next_review_date = None
    item.governance_review_status = review_status_for(item.next_review_date, today)
    with transaction.atomic():
        item.save(update_fields=["last_reviewed_at", "next_review_date", "governance_review_status"])
        breakdown = item_quality_update(item_id=item.pk, now=now)
    item.quality_score = breakdown["score"]
    item.quality_breakdown = dict(breakdown)


def _q_ok(today: date) -> Q:
    return Q(next_review_date__isnull=True) | Q(next_review_date__gt=today + timedelta(days=DUE_SOON_DAYS))


def review_flags_update(*, today: date) -> dict[str, int]:
    """Set every item's flag from its next_review_date. Idempotent: only rows whose flag changes are written.

    Returns how many items moved to each flag.
    """
    with transaction.atomic():
        overdue = (
            ContentItem.objects.filter(next_review_date__lt=today)
            .exclude(governance_review_status=ReviewStatus.OVERDUE)
            .update(governance_review_status=ReviewStatus.OVERDUE)
        )
        due_soon = (
            ContentItem.objects.filter(
                next_review_date__gte=today, next_review_date__lte=today + timedelta(days=DUE_SOON_DAYS)
            )
            .exclude(governance_review_status=ReviewStatus.DUE_SOON)
            .update(governance_review_status=ReviewStatus.DUE_SOON)
        )
        cleared = (
            ContentItem.objects.filter(_q_ok(today))
            .exclude(governance_review_status=ReviewStatus.OK)
            .update(governance_review_status=ReviewStatus.OK)
        )
    return {"overdue": overdue, "due_soon": due_soon, "ok": cleared}


def review_counts(*, today: date) -> dict[str, int]:
    """How many items carry each flag (for the command's report)."""
    return {
        "overdue": ContentItem.objects.filter(governance_review_status=ReviewStatus.OVERDUE).count(),
        "due_soon": ContentItem.objects.filter(governance_review_status=ReviewStatus.DUE_SOON).count(),
        "next_30_days": ContentItem.objects.filter(
            next_review_date__gte=today, next_review_date__lte=today + timedelta(days=DUE_SOON_DAYS)
        ).count(),
    }
