"""Browse-only state: recent searches of signed-in users (anonymous visitors keep theirs in localStorage)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

RECENT_SEARCHES_KEPT = 10
RECENT_QUERY_MAX_CHARS = 200


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
