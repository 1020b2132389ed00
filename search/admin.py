"""Django admin for content staff: items with revisions, publishing, review fields, bulk index actions."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from search.admin_readonly import ReadOnlyAdmin, error_line
from search.errors import SearchError
from search.federation import peers
from search.models import (
    Chunk,
    Citation,
    ContentItem,
    EmbeddingSpace,
    FederationPeer,
    IndexState,
    JobRun,
    Revision,
    SystemFlag,
)
from search.services import content, indexing
from search.text import analysis


class ContentItemForm(forms.ModelForm):
    """The item's metadata plus the text of its latest revision; a changed text becomes a new revision."""

    title = forms.CharField(max_length=500)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 20}), required=False, help_text="Markdown")
    summary = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    publish_now = forms.BooleanField(required=False, help_text="Make this text live now (otherwise a draft).")

    class Meta:
        model = ContentItem
        exclude = ["live_revision", "latest_revision", "index_dirty", "quality_breakdown", "updated_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        revision = self.instance.latest_revision if self.instance.pk else None
        if revision:
            self.fields["title"].initial = revision.title
            self.fields["body"].initial = revision.body
            self.fields["summary"].initial = revision.summary
        self.fields["slug"].required = False
        self.fields["external_id"].required = False


class RevisionInline(admin.TabularInline):
    model = Revision
    fields = ["number", "title", "created_at", "author", "is_live", "is_latest"]
    readonly_fields = ("number", "title", "created_at", "author", "is_live", "is_latest")
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(boolean=True)
    def is_live(self, obj: Revision) -> bool:
        return obj.item.live_revision_id == obj.pk

    @admin.display(boolean=True)
    def is_latest(self, obj: Revision) -> bool:
        return obj.item.latest_revision_id == obj.pk

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CitationInline(admin.TabularInline):
    model = Citation
    extra = 0


@admin.register(ContentItem)
class ContentItemAdmin(admin.ModelAdmin):
    form = ContentItemForm
    list_display = ["item_title", "content_type", "primary_domain", "language", "visibility", "state",
                    "governance_review_status", "next_review_date", "quality_score", "index_status",
                    "embedding_status"]
    list_filter = ["content_type", "primary_domain", "language", "visibility", "governance_review_status",
                   ("live_revision", admin.EmptyFieldListFilter), ("superseded_by", admin.EmptyFieldListFilter),
                   ("archived_at", admin.EmptyFieldListFilter)]
    search_fields = ["external_id", "slug", "latest_revision__title", "author_name"]
    readonly_fields = ["live_revision", "latest_revision", "quality_score", "quality_breakdown", "created_at",
                       "updated_at", "published_at", "quality_breakdown_table"]
    autocomplete_fields = ["superseded_by", "verified_by"]
    filter_horizontal = ["groups"]
    inlines = [RevisionInline, CitationInline]
    actions = ["publish", "unpublish", "mark_reviewed", "rebuild_index", "reembed", "archive",
               "regenerate_summary"]
    list_select_related = ["latest_revision", "live_revision"]
    fieldsets = [
        (None, {"fields": ["title", "body", "summary", "publish_now"]}),
        ("Classification", {"fields": ["external_id", "slug", "content_type", "primary_domain", "subtopic",
                                       "platform", "layer", "source", "language", "author_name", "ai_keywords",
                                       "thumbnail", "verified_by"]}),
        ("Access", {"fields": ["visibility", "groups", "allow_closed_placeholder", "superseded_by", "archived_at"]}),
        ("Governance", {"fields": ["review_cadence_days", "next_review_date", "governance_review_status",
                                   "last_reviewed_at", "quality_score", "quality_breakdown_table"]}),
        ("Revisions", {"fields": ["live_revision", "latest_revision", "published_at", "created_at", "updated_at"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ContentItem]:
        return super().get_queryset(request).annotate(
            n_chunks=Count("chunks", filter=Q(chunks__in_live=True) | Q(chunks__in_latest=True)),
            n_unindexed=Count("chunks", filter=(Q(chunks__in_live=True) | Q(chunks__in_latest=True))
                              & Q(chunks__indexed=False)),
            n_embedded=Count("chunks", filter=(Q(chunks__in_live=True) | Q(chunks__in_latest=True))
                             & ~Q(chunks__embedding_model="")),
        )

    @admin.display(description="title", ordering="latest_revision__title")
    def item_title(self, obj: ContentItem) -> str:
        return obj.title

    @admin.display(description="state")
    def state(self, obj: ContentItem) -> str:
        if obj.archived_at:
            return "archived"
        if obj.live_revision_id is None:
            return "draft"
        if obj.live_revision_id != obj.latest_revision_id:
            return "live + newer draft"
        return "superseded" if obj.superseded_by_id else "live"

    @admin.display(description="index")
    def index_status(self, obj: ContentItem) -> str:
        if obj.index_dirty or getattr(obj, "n_unindexed", None):
            return format_html('<span title="waiting for the build">⏳ pending</span>')
        return f"✓ {getattr(obj, 'n_chunks', 0)} chunks"

    @admin.display(description="embeddings")
    def embedding_status(self, obj: ContentItem) -> str:
        return f"{getattr(obj, 'n_embedded', 0)}/{getattr(obj, 'n_chunks', 0)}"

    def save_model(self, request: HttpRequest, obj: ContentItem, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if not obj.external_id:
            obj.external_id = f"admin-{timezone.now():%Y%m%d%H%M%S%f}"
        if not obj.slug:
            obj.slug = content.unique_slug(data["title"], obj.external_id, exclude_pk=obj.pk)
        if obj.updated_at is None:
            obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)
        content.item_save_revision(
            item=obj, title=data["title"], body=data.get("body") or "", summary=data.get("summary") or "",
            author=request.user, publish=bool(data.get("publish_now")),
        )
        if change and form.changed_data:
            content.item_metadata_changed(item_ids=[obj.pk])

    @admin.action(description="Publish the latest revision")
    def publish(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        changed = sum(content.item_publish(item=item) for item in queryset)
        self.message_user(request, f"Published {changed} item(s).", messages.SUCCESS)

    @admin.action(description="Unpublish (take off the live site)")
    def unpublish(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        changed = sum(content.item_unpublish(item=item) for item in queryset)
        self.message_user(request, f"Unpublished {changed} item(s).", messages.SUCCESS)

    @admin.action(description="Mark reviewed (moves the next review by the cadence)")
    def mark_reviewed(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        from search.services.governance import item_mark_reviewed

        for item in queryset:
            item_mark_reviewed(item=item, now=timezone.now())
        self.message_user(request, f"Marked {queryset.count()} item(s) reviewed.", messages.SUCCESS)

    @admin.action(description="Archive (never shown in search)")
    def archive(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        queryset.update(archived_at=timezone.now())
        content.item_metadata_changed(item_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, "Archived.", messages.SUCCESS)

    @admin.action(description="Rebuild the search index (these items, then statistics)")
    def rebuild_index(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        content.item_metadata_changed(item_ids=list(queryset.values_list("pk", flat=True)))
        result = indexing.index_rebuild()
        self.message_user(request, f"Index rebuilt: {result}", messages.SUCCESS)

    @admin.display(description="quality breakdown")
    def quality_breakdown_table(self, obj: ContentItem) -> str:
        from django.utils.html import format_html_join

        from search.services.quality import breakdown_rows

        rows = breakdown_rows(obj.quality_breakdown or {})
        if not rows:
            return "not scored yet (daily at 04:00 UTC, or run `manage.py score_quality`)"
        body = format_html_join("", "<tr><td>{}</td><td style='text-align:right'>{}</td></tr>",
                                ((label, f"{points:+.1f}") for label, points in rows))
        return format_html(
            "<table>{}<tr><th>Score (as of {})</th><th style='text-align:right'>{}</th></tr></table>",
            body, obj.quality_breakdown.get("as_of", "?"), f"{obj.quality_score:.1f}",
        )

    @admin.action(description="Regenerate summary (OpenAI when configured, else extractive)")
    def regenerate_summary(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        from search.tasks import summaries_enqueue

        item_ids = list(queryset.values_list("pk", flat=True))
        summaries_enqueue(item_ids=item_ids)
        self.message_user(request, f"Queued summaries for {len(item_ids)} item(s); the worker writes them shortly "
                          "(Job runs lists the result).", messages.SUCCESS)

    @admin.action(description="Re-embed these items with the active model")
    def reembed(self, request: HttpRequest, queryset: QuerySet[ContentItem]) -> None:
        Chunk.objects.filter(item__in=queryset).update(embedding=None, embedding_model="", embedding_hash=None)
        result = indexing.index_rebuild()
        self.message_user(request, f"Re-embedded: {result}", messages.SUCCESS)


@admin.register(Revision)
class RevisionAdmin(admin.ModelAdmin):
    list_display = ["title", "item", "number", "created_at", "chunked"]
    search_fields = ["title", "item__external_id"]
    readonly_fields = ["item", "number", "content_hash", "created_at", "chunked"]
    # Derived from the title and body when saved (the live preview's words): never typed by hand.
    exclude = ["title_folded", "title_words", "title_lead", "preview_words"]

    def save_model(self, request: HttpRequest, obj: Revision, form: Any, change: bool) -> None:
        for column, value in analysis.revision_preview_columns(obj.title, obj.body).items():
            setattr(obj, column, value)
        super().save_model(request, obj, form, change)


@admin.register(Citation)
class CitationAdmin(admin.ModelAdmin):
    list_display = ["bid_reference", "item", "outcome", "cited_at"]
    list_filter = ["outcome"]
    search_fields = ["bid_reference", "item__external_id"]
    autocomplete_fields = ["item"]


@admin.register(IndexState)
class IndexStateAdmin(admin.ModelAdmin):
    list_display = ["id", "dirty", "dirty_since", "built_at", "build_seconds"]


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(ReadOnlyAdmin):
    """Embedding spaces, read-only: which one searches use, and the progress of a model switch (the worker
    builds it; ``manage.py reembed`` does it in the foreground)."""

    list_display = ["model", "dimensions", "space_state", "progress", "started_at", "progress_at",
                    "finished_at", "short_error"]
    readonly_fields = [f.name for f in EmbeddingSpace._meta.fields]
    ordering = ["-active", "state", "-created_at"]

    @admin.display(description="state")
    def space_state(self, obj: EmbeddingSpace) -> str:
        if obj.active:
            return "active (searched)" + self._step_text(obj, "; ")
        if obj.state == EmbeddingSpace.State.BUILDING:
            from search.services import jobs

            running = jobs.job_is_running(job=jobs.REEMBED)
            state = "building (running)" if running else "building (waiting for the worker)"
            return state + self._step_text(obj, ": ")
        return str(obj.state)

    @staticmethod
    def _step_text(obj: EmbeddingSpace, joiner: str) -> str:
        """The switch's step ("filling … 35 %"), or "" when none is under way."""
        if not obj.step:
            return ""
        text = joiner + EmbeddingSpace.Step(obj.step).label
        if obj.step_total:
            text += f" {100 * min(obj.step_done, obj.step_total) // obj.step_total} %"
        return text

    @admin.display(description="progress")
    def progress(self, obj: EmbeddingSpace) -> str:
        from search.services.reembed import embedding_space_progress

        done, total = embedding_space_progress(space=obj)
        percent = 100.0 * done / total if total else 100.0
        wave = ""
        if obj.active and done < total:
            from search.services.fanout import fanout_progress

            wave = fanout_progress().summary()  # the workers' batches: speed and ETA
        return format_html(
            '<progress value="{}" max="{}" style="width:8em"></progress> {}/{} ({}%) {}',
            done, max(total, 1), done, total, f"{percent:.0f}", wave,
        )

    @admin.display(description="last error")
    def short_error(self, obj: EmbeddingSpace) -> str:
        return error_line(obj.last_error, limit=160)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    """Background job runs (beat, tasks, commands): read-only history."""

    list_display = ["job", "period", "status", "started_at", "finished_at", "duration", "items_touched",
                    "attempts", "host", "short_error"]
    list_filter = ["job", "status"]
    search_fields = ["job", "period", "task_id", "error"]
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in JobRun._meta.fields]

    @admin.display(description="duration")
    def duration(self, obj: JobRun) -> str:
        if obj.finished_at is None:
            return "—"
        return f"{(obj.finished_at - obj.started_at).total_seconds():.1f} s"

    @admin.display(description="error")
    def short_error(self, obj: JobRun) -> str:
        return error_line(obj.error, limit=120)


admin.site.register(SystemFlag)
admin.site.site_header = "Knowledge base administration"


class FederationPeerForm(forms.ModelForm):
    """A peer's settings; its API key is write-only (stored encrypted, never shown again)."""

    base_url = forms.URLField(max_length=300, assume_scheme="https", help_text="the peer's address")
    api_key = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        help_text="The key the peer issued us (manage.py api_key create on the peer). Leave empty to keep the "
        "stored one.",
    )

    class Meta:
        model = FederationPeer
        fields = ["name", "base_url", "api_key", "timeout_ms", "groups", "public", "enabled"]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        try:
            return peers.name_clean(name)
        except SearchError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean_base_url(self) -> str:
        try:
            return peers.base_url_clean(self.cleaned_data["base_url"])
        except SearchError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean_timeout_ms(self) -> int:
        try:
            return peers.timeout_clean(self.cleaned_data["timeout_ms"])
        except SearchError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean_api_key(self) -> str:
        raw = self.cleaned_data.get("api_key", "").strip()
        if not raw and not self.instance.pk:
            raise forms.ValidationError("A new peer needs the key it issued us.")
        if raw:
            try:
                peers.peer_key_set(peer=self.instance, api_key=raw)
            except SearchError as exc:
                raise forms.ValidationError(exc.message) from exc
        return ""  # never kept in the form's data

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        new_url = data.get("base_url")
        moved = self.instance.pk and new_url and urlsplit(new_url).hostname != urlsplit(self.instance.base_url).hostname
        if moved and not self.data.get("api_key"):
            self.add_error("api_key", "The peer moved to another host: give its key again, so ours is never sent to "
                                      "an address it was not issued for.")
        return data


@admin.register(FederationPeer)
class FederationPeerAdmin(admin.ModelAdmin):
    form = FederationPeerForm
    list_display = ["name", "base_url", "api_key_prefix", "timeout_ms", "public", "enabled", "check_status",
                    "checked_at"]
    readonly_fields = ["api_key_prefix", "check_status", "check_detail", "checked_at", "created_at"]
    filter_horizontal = ["groups"]
    actions = ["check_peers"]

    @admin.action(description="Check: ask the selected peers who they are, with our key")
    def check_peers(self, request: HttpRequest, queryset: QuerySet[FederationPeer]) -> None:
        for peer in queryset:
            status, ms, detail = peers.peer_check(peer=peer)
            level = messages.SUCCESS if status == "ok" else messages.WARNING
            self.message_user(request, f"{peer.name}: {status} in {ms} ms — {detail}", level)
