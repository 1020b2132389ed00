"""Chainable filters only: corpus, access and the engine's filters. Ranking lives in search.engine."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from search.choices import Visibility
from search.filters import FILTER_COLUMNS, LIST_FILTERS

if TYPE_CHECKING:
    from search.principal import Principal
    from search.types import SearchFilters


class ContentItemQuerySet(models.QuerySet):
    def not_archived(self) -> ContentItemQuerySet:
        return self.filter(archived_at__isnull=True)

    def live(self) -> ContentItemQuerySet:
        """Items with a published revision."""
        return self.filter(live_revision__isnull=False)

    def in_corpus(self, corpus: str) -> ContentItemQuerySet:
        return self.live() if corpus == "live" else self.filter(latest_revision__isnull=False)

    def visible_to(self, principal: Principal) -> ContentItemQuerySet:
        """Items the principal may read (visibility and groups; corpus is separate)."""
        if principal.all_content:
            return self
        if principal.is_anonymous:
            return self.filter(visibility=Visibility.PUBLIC)
        through = self.model.groups.through
        in_group = Exists(through.objects.filter(contentitem_id=OuterRef("pk"), group_id__in=principal.group_ids))
        readable: Any = Q(visibility__in=[Visibility.PUBLIC, Visibility.SIGNED_IN])
        if principal.group_ids:
            readable |= Q(visibility=Visibility.GROUPS) & in_group
        return self.filter(readable)

    def searchable(self, principal: Principal, corpus: str) -> ContentItemQuerySet:
        """What a search may return to this principal: not archived, in the corpus, readable."""
        return self.not_archived().in_corpus(corpus).visible_to(principal)

    def apply_filters(self, filters: SearchFilters, *, user_id: int | None = None) -> ContentItemQuerySet:
        """The engine's filters; ``InvalidQuery`` for a text value PostgreSQL cannot receive (NUL, surrogate)."""
        from search.text.query_parser import check_filter_text

        qs = self
        for name in LIST_FILTERS:
            field_name, values = FILTER_COLUMNS[name], getattr(filters, name)
            if values:
                lookups = Q()
                for value in values:
                    lookups |= Q(**{f"{field_name}__iexact": check_filter_text(value)})
                qs = qs.filter(lookups)
        if filters.language:
            qs = qs.filter(language=check_filter_text(filters.language, field="language"))
        if not filters.include_qa:
            qs = qs.exclude(content_type="qa")
        if filters.date_from:
            qs = qs.filter(updated_at__date__gte=filters.date_from)
        if filters.date_to:
            qs = qs.filter(updated_at__date__lte=filters.date_to)
        if filters.changed_since:
            qs = qs.filter(updated_at__gte=filters.changed_since)
        if filters.freshness_days:
            qs = qs.filter(updated_at__gte=timezone.now() - timedelta(days=filters.freshness_days))
        if filters.overdue_review is True:
            qs = qs.filter(governance_review_status="review_overdue")
        elif filters.overdue_review is False:
            qs = qs.exclude(governance_review_status="review_overdue")
        if filters.review_due_within_days:
            horizon = timezone.now().date() + timedelta(days=filters.review_due_within_days)
            qs = qs.filter(next_review_date__lte=horizon)
        if filters.content_item_id:
            qs = qs.filter(pk=filters.content_item_id)
        if not filters.include_superseded:
            qs = qs.filter(superseded_by__isnull=True)
        if filters.unread_only and user_id:
            item_read = self.model._meta.get_field("reads").related_model  # search.models.ItemRead
            qs = qs.exclude(Exists(item_read.objects.filter(user_id=user_id, item_id=OuterRef("pk"))))
        return qs


class ChunkQuerySet(models.QuerySet):
    def in_corpus(self, corpus: str) -> ChunkQuerySet:
        return self.filter(in_live=True) if corpus == "live" else self.filter(in_latest=True)

    def current(self) -> ChunkQuerySet:
        """Chunks of a live or latest revision (what the term statistics count)."""
        return self.filter(Q(in_live=True) | Q(in_latest=True))
