"""Review cadence: flagging overdue / due-soon items and recording reviews."""

from __future__ import annotations

from datetime import datetime, timedelta

from search.models import ContentItem, ReviewStatus

DUE_SOON_DAYS = 30


def review_status_for(next_review_date, today) -> str:  # type: ignore[no-untyped-def]
    if next_review_date is None:
        return ReviewStatus.OK
    if next_review_date < today:
        return ReviewStatus.OVERDUE
    if next_review_date <= today + timedelta(days=DUE_SOON_DAYS):
        return ReviewStatus.DUE_SOON
    return ReviewStatus.OK


def item_mark_reviewed(*, item: ContentItem, now: datetime) -> None:
    """Record a review: last_reviewed_at = now, next review moved by the cadence, flag cleared."""
    item.last_reviewed_at = now
    if item.review_cadence_days:
        item.next_review_date = now.date() + timedelta(days=item.review_cadence_days)
    item.governance_review_status = review_status_for(item.next_review_date, now.date())
    item.save(update_fields=["last_reviewed_at", "next_review_date", "governance_review_status"])


def review_flags_update(*, today) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Set every item's review status from its next_review_date (overdue: before today; due soon: ≤ 30 days)."""
    overdue = ContentItem.objects.filter(next_review_date__lt=today).exclude(
        governance_review_status=ReviewStatus.OVERDUE
    ).update(governance_review_status=ReviewStatus.OVERDUE)
    due_soon = ContentItem.objects.filter(
        next_review_date__gte=today, next_review_date__lte=today + timedelta(days=DUE_SOON_DAYS)
    ).exclude(governance_review_status=ReviewStatus.DUE_SOON).update(governance_review_status=ReviewStatus.DUE_SOON)
    cleared = ContentItem.objects.filter(
        models_q_ok(today)
    ).exclude(governance_review_status=ReviewStatus.OK).update(governance_review_status=ReviewStatus.OK)
    return {"overdue": overdue, "due_soon": due_soon, "ok": cleared}


def models_q_ok(today):  # type: ignore[no-untyped-def]
    from django.db.models import Q

    return Q(next_review_date__isnull=True) | Q(next_review_date__gt=today + timedelta(days=DUE_SOON_DAYS))
