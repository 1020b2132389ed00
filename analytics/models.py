"""Search analytics: the query log and content-gap notes (synonyms, a ranking input, are ``search.models``).

Privacy: ``QueryLog.query_text`` is empty for signed-out callers unless ``QUERY_LOG_ANONYMOUS_TEXT`` is
on; ``query_hash`` (a keyed hash of the normalized text) still groups their searches. ``principal_key``
is a keyed hash of the user / API key (or, for signed-out callers, of the IP address and the day), never
the raw id. Rows older than ``QUERY_LOG_RETENTION_DAYS`` are purged daily.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class QueryLog(models.Model):
    """One search as a surface asked it, with its outcome and timings (written by ``analytics.receivers``)."""

    created_at = models.DateTimeField(default=timezone.now)
    surface = models.CharField(max_length=16, help_text="browse, graphql, mcp, cli, …")
    tool = models.CharField(max_length=32, blank=True, help_text="MCP tool (find, …); blank elsewhere")
    principal_kind = models.CharField(max_length=16, help_text="anonymous, user, staff or api_key")
    principal_key = models.CharField(
        max_length=32,
        blank=True,
        help_text="keyed hash of the user / API key (signed-out: of the IP and the day); never the raw id",
    )
    query_text = models.TextField(
        blank=True, help_text="empty for signed-out callers unless QUERY_LOG_ANONYMOUS_TEXT"
    )
    query_hash = models.CharField(
        max_length=64, blank=True, help_text="keyed hash of the normalized query text"
    )
    corpus = models.CharField(max_length=8, default="live")
    mode = models.CharField(max_length=8, default="hybrid")
    granularity = models.CharField(max_length=8, default="item")
    threshold = models.FloatField(null=True, blank=True)
    similar_to = models.BigIntegerField(null=True, blank=True)
    paged = models.BooleanField(default=False, help_text="a later page of a search (a cursor was sent)")
    filters = models.JSONField(default=dict, blank=True, help_text="filters that differ from the defaults")
    result_count = models.IntegerField(default=0)
    result_item_ids = models.JSONField(default=list, blank=True, help_text="item ids of the returned page")
    partial_match = models.BooleanField(default=False)
    degraded = models.JSONField(default=list, blank=True)
    suggestion = models.CharField(max_length=500, blank=True)
    total_ms = models.FloatField(default=0.0)
    lexical_ms = models.FloatField(null=True, blank=True)
    vector_ms = models.FloatField(null=True, blank=True)
    timings_ms = models.JSONField(default=dict, blank=True, help_text="every timing the engine reported")
    clicked_item_id = models.BigIntegerField(
        null=True, blank=True, help_text="first result opened: a browse click or an MCP read after the search"
    )
    clicked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "query log entry"
        verbose_name_plural = "query log"
        indexes = [
            models.Index(fields=["created_at"], name="querylog_created"),
            models.Index(fields=["principal_key", "created_at"], name="querylog_principal"),
            models.Index(fields=["query_hash", "created_at"], name="querylog_query"),
        ]

    def __str__(self) -> str:
        return f"{self.surface}{'/' + self.tool if self.tool else ''}: {self.display_text}"

    @property
    def display_text(self) -> str:
        return self.query_text or f"(hidden #{self.query_hash[:8]})"


class ContentGap(models.Model):
    """People search for something the knowledge base does not cover (from a zero-result query)."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        PLANNED = "planned", "Content planned"
        RESOLVED = "resolved", "Resolved"
        DISMISSED = "dismissed", "Dismissed"

    query_text = models.TextField(help_text="what people searched for")
    query_hash = models.CharField(max_length=64, blank=True, db_index=True)
    searches = models.IntegerField(default=0, help_text="zero-result searches counted when the note was made")
    note = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.query_text[:80]
