"""The searches a user keeps on the server: saved filter presets (five immutable system presets plus each
user's own) and the recent searches of signed-in users (anonymous visitors keep theirs in localStorage)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Lower
from django.utils import timezone

NAME_MAX_CHARS = 40
RECENT_SEARCHES_KEPT = 10
RECENT_QUERY_MAX_CHARS = 200


class PresetQuerySet(models.QuerySet):
    def alive(self) -> PresetQuerySet:
        """Not deleted (a deleted preset is a tombstone kept for undo)."""
        return self.filter(deleted_at__isnull=True)

    def system(self) -> PresetQuerySet:
        return self.filter(is_system=True)

    def owned_by(self, user_id: int) -> PresetQuerySet:
        return self.filter(owner_id=user_id, is_system=False)

    def visible_to(self, user_id: int | None) -> PresetQuerySet:
        """System presets, plus the user's own."""
        if user_id is None:
            return self.system()
        return self.filter(Q(is_system=True) | Q(owner_id=user_id))

    def in_list_order(self) -> PresetQuerySet:
        """System presets first (in their fixed order), then the user's by creation, oldest first."""
        return self.order_by("-is_system", "position", "created_at", "id")


class Preset(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="presets",
        help_text="Empty for system presets.",
    )
    name = models.CharField(max_length=NAME_MAX_CHARS, help_text="1–40 characters, unique per owner.")
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="Normalised filter parameters (see presets/params.py); never sort, order, cursor or q.",
    )
    is_system = models.BooleanField(default=False, help_text="System presets are immutable.")
    system_key = models.SlugField(
        max_length=40, null=True, blank=True, unique=True, help_text="Stable name of a system preset."
    )
    position = models.PositiveSmallIntegerField(default=0, help_text="Order of system presets in the bar.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Set on delete; cleared by undo.")

    objects = PresetQuerySet.as_manager()

    class Meta:
        constraints = [
            # Case-insensitive, among live presets; NULLS NOT DISTINCT makes system names unique too.
            models.UniqueConstraint(
                Lower("name"),
                F("owner"),
                condition=Q(deleted_at__isnull=True),
                nulls_distinct=False,
                name="presets_live_name_unique_per_owner",
                violation_error_message="A preset with this name already exists.",
            ),
            models.CheckConstraint(
                condition=Q(is_system=True, owner__isnull=True) | Q(is_system=False, owner__isnull=False),
                name="presets_system_xor_owner",
            ),
            models.CheckConstraint(condition=~Q(name=""), name="presets_name_not_empty"),
        ]
        indexes = [models.Index(fields=["owner", "created_at"], name="presets_owner_created_idx")]

    def __str__(self) -> str:
        return f"{self.name} (system)" if self.is_system else self.name

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def sorted_params(self) -> dict[str, Any]:
        """Parameters with keys sorted (jsonb keeps its own key order)."""
        return {key: self.params[key] for key in sorted(self.params)}


class RecentSearch(models.Model):
    """A query a signed-in user ran; one row per (user, query), ``used_at`` refreshed on reuse."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="recent_searches")
    query = models.CharField(max_length=RECENT_QUERY_MAX_CHARS)
    used_at = models.DateTimeField()

    class Meta:
        ordering = ["-used_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["user", "query"], name="recent_search_unique")]
        indexes = [models.Index(fields=["user", "-used_at"], name="recent_search_user_used")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.query}"
