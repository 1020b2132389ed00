"""Followed searches: a user's query and filters, what the follow has already shown, and what is new since.

A ``Follow`` keeps its filters in the URL vocabulary of ``search.filter_params`` (canonical, as
``params_from_filters`` writes them), so they round-trip: the run parses them back with the same codec, and a
follow whose filters no longer parse is paused with the reason, never dropped. ``shown`` maps item id to the
revision number the follow has already shown; a ``FollowItem`` is one entry of the feed: an item new to the
follow, or one whose revision number went up since it was shown.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

LABEL_MAX_CHARS = 80
PAUSED_REASON_MAX_CHARS = 500


class Follow(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="follows")
    query = models.CharField(max_length=2000, blank=True, help_text="Normalised search text; may be empty.")
    filters = models.JSONField(
        default=dict, blank=True, help_text="Canonical URL parameters (search.filter_params), lists of strings."
    )
    label = models.CharField(max_length=LABEL_MAX_CHARS)
    created_at = models.DateTimeField(default=timezone.now)
    last_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Empty until the baseline (what was there when followed) is taken."
    )
    shown = models.JSONField(
        default=dict, blank=True, help_text="Item id -> revision number already shown by this follow."
    )
    paused_reason = models.CharField(max_length=PAUSED_REASON_MAX_CHARS, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "query", "filters"], name="follows_one_per_search"),
        ]
        indexes = [models.Index(fields=["owner", "created_at"], name="follows_owner_created")]

    def __str__(self) -> str:
        return f"{self.label} ({self.owner_id})"

    @property
    def paused(self) -> bool:
        return bool(self.paused_reason)


class FollowItem(models.Model):
    """One feed entry. At most one unseen entry per (follow, item): a newer revision updates it."""

    class Kind(models.TextChoices):
        NEW = "new", "New"
        CHANGED = "changed", "Changed"

    follow = models.ForeignKey(Follow, on_delete=models.CASCADE, related_name="entries")
    item = models.ForeignKey("search.ContentItem", on_delete=models.CASCADE, related_name="+")
    revision_number = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=Kind.choices)
    rank = models.PositiveIntegerField(help_text="1-based rank in the run that found it.")
    found_at = models.DateTimeField()
    seen_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True, help_text="Sent in an e-mail digest.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["follow", "item"], condition=Q(seen_at__isnull=True), name="follows_one_unseen_per_item"
            ),
        ]
        indexes = [
            # The header's count: unseen entries of one owner's follows.
            models.Index(fields=["follow"], condition=Q(seen_at__isnull=True), name="follows_unseen"),
            models.Index(fields=["follow", "-found_at"], name="follows_entry_found"),
        ]

    def __str__(self) -> str:
        return f"{self.follow_id}: item {self.item_id} r{self.revision_number} ({self.kind})"


class FollowPreference(models.Model):
    """Per-user choice of the e-mail digest (only offered when ``FOLLOWS_DIGEST`` is on)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    email_digest = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.user_id}: digest {'on' if self.email_digest else 'off'}"
