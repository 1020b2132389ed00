"""The knowledge base: items, their revisions, the chunks the engine searches, and what feeds ranking."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from search.choices import ContentType as ContentType
from search.choices import ReviewStatus as ReviewStatus
from search.choices import Visibility as Visibility
from search.managers import ChunkQuerySet, ContentItemQuerySet


def item_path(slug: str) -> str:
    """Where an item is read in the browse app (also used for hits read without a model instance)."""
    return f"/items/{slug}"


class ContentItem(models.Model):
    external_id = models.CharField(
        max_length=200, unique=True, help_text="Stable id from the import source; re-imports update in place."
    )
    slug = models.SlugField(max_length=220, unique=True)
    content_type = models.CharField(max_length=40, default=ContentType.ARTICLE, db_index=True)
    primary_domain = models.CharField(max_length=80, blank=True, db_index=True)
    subtopic = models.CharField(max_length=80, blank=True)
    platform = models.CharField(max_length=80, blank=True)
    layer = models.CharField(max_length=80, blank=True)
    source = models.CharField(max_length=80, blank=True)
    language = models.CharField(max_length=8, default="en", help_text="ISO code: en, fr, ar, …")
    author_name = models.CharField(max_length=200, blank=True)
    ai_keywords = ArrayField(models.CharField(max_length=80), default=list, blank=True)
    thumbnail = models.ImageField(upload_to="thumbnails/", blank=True)
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC)
    groups = models.ManyToManyField(Group, blank=True, related_name="content_items")
    allow_closed_placeholder = models.BooleanField(
        default=False,
        help_text="Visitors who cannot read this item may see its title as 'closed material' when it matches.",
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    archived_at = models.DateTimeField(null=True, blank=True, help_text="Archived items never appear in search.")
    verified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="verified_items"
    )
    # Governance
    review_cadence_days = models.PositiveIntegerField(null=True, blank=True)
    next_review_date = models.DateField(null=True, blank=True)
    governance_review_status = models.CharField(
        max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.OK, db_index=True
    )
    last_reviewed_at = models.DateTimeField(null=True, blank=True)
    quality_score = models.FloatField(default=0.0)
    quality_breakdown = models.JSONField(default=dict, blank=True)
    # Revisions
    live_revision = models.ForeignKey(
        "Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    latest_revision = models.ForeignKey(
        "Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(db_index=True)
    index_dirty = models.BooleanField(default=True, db_index=True)

    objects = ContentItemQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "id"]
        indexes = [models.Index(fields=["next_review_date"])]

    def __str__(self) -> str:
        return self.title or self.external_id

    @property
    def title(self) -> str:
        revision = self.latest_revision or self.live_revision
        return revision.title if revision else ""

    def get_absolute_url(self) -> str:
        return item_path(self.slug)


class Revision(models.Model):
    item = models.ForeignKey(ContentItem, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=500)
    body = models.TextField(help_text="Markdown")
    summary = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    content_hash = models.CharField(max_length=64)
    # Lower-cased, accent-folded title.
    title_folded = models.CharField(max_length=500, blank=True)
    # What the live preview matches typed words against (analysis.revision_preview_columns, written with the
    # revision): the words of the title, the forms of its first word, and every word of title and body.
    title_words = SearchVectorField(null=True)
    title_lead = SearchVectorField(null=True)
    preview_words = SearchVectorField(null=True)
    created_at = models.DateTimeField()
    # Set while the chunker has not yet run for this revision.
    chunked = models.BooleanField(default=False)

    class Meta:
        ordering = ["item", "-number"]
        constraints = [models.UniqueConstraint(fields=["item", "number"], name="revision_number_unique")]
        indexes = [
            GinIndex(fields=["title_words"], name="revision_title_words_gin"),
            GinIndex(fields=["title_lead"], name="revision_title_lead_gin"),
            GinIndex(fields=["preview_words"], name="revision_preview_words_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.title} (r{self.number})"


class Chunk(models.Model):
    """A searchable piece of a revision. Search columns are written by the build, never by save()."""

    revision = models.ForeignKey(Revision, on_delete=models.CASCADE, related_name="chunks")
    item = models.ForeignKey(ContentItem, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    toc_path = models.CharField(max_length=1000, blank=True)
    text = models.TextField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    # Corpus membership, kept in step with the item's live/latest pointers.
    in_live = models.BooleanField(default=False)
    in_latest = models.BooleanField(default=False)
    # Prepared search columns (search.services.indexing writes them).
    # Term-frequency maps (term → count) of the body: stems in the item's language, and folded written forms.
    tf_stem = models.JSONField(null=True)
    tf_surface = models.JSONField(null=True)
    lex_title = SearchVectorField(null=True)
    lex_meta = SearchVectorField(null=True)
    body_len = models.PositiveIntegerField(default=0)
    title_len = models.PositiveIntegerField(default=0)
    folded_text = models.TextField(blank=True, help_text="Lower-cased, accent-folded text for substring preview.")
    # The chunk's own language (search.text.language.chunk_language): its text's when that is clear, else the
    # item's. The build stems the chunk in it; fusion weighs the vector lane by it. Empty until built.
    language = models.CharField(max_length=8, blank=True, default="")
    indexed = models.BooleanField(default=False)
    # The vector column has no fixed dimension: each model gets a partial HNSW index cast to its own
    # dimension (search.engine.vector), so vectors of different models are never compared.
    embedding = VectorField(null=True)
    embedding_model = models.CharField(max_length=120, blank=True, db_index=True)
    # The next space's vectors while a model switch builds (search.services.reembed): filled and indexed beside
    # the searched pair, then the flip swaps the two pairs by renaming columns, so it rewrites no row. The
    # pairs are declared alike (type, null, index) because they trade names; empty outside a switch.
    embedding_next = VectorField(null=True)
    embedding_next_model = models.CharField(max_length=120, blank=True, default="", db_index=True)
    # sha256 of the chunk's embedding text (vector_index.chunk_embedding_text), written when the chunk is embedded
    # or staged for a new model: the EmbeddingCache key of its vector in every model, so a model switch counts
    # its progress and flips with joins instead of re-reading and hashing every text. Chunks never change
    # text (a new revision gets new chunks), so the hash stays right. Null: not computed yet.
    embedding_hash = models.CharField(max_length=64, null=True, blank=True)

    objects = ChunkQuerySet.as_manager()

    class Meta:
        ordering = ["revision", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["revision", "ordinal"], name="chunk_ordinal_unique")]
        indexes = [
            GinIndex(fields=["tf_stem"], name="chunk_tf_stem_gin"),
            GinIndex(fields=["tf_surface"], name="chunk_tf_surface_gin"),
            GinIndex(fields=["lex_title"], name="chunk_lex_title_gin"),
            GinIndex(fields=["lex_meta"], name="chunk_lex_meta_gin"),
            models.Index(fields=["item", "in_live"], name="chunk_item_live"),
            models.Index(fields=["item", "in_latest"], name="chunk_item_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.revision_id}#{self.ordinal}"


class EmbeddingCache(models.Model):
    """Embeddings by (model, text hash): unchanged text is never embedded twice."""

    model = models.CharField(max_length=120)
    text_hash = models.CharField(max_length=64)
    embedding = VectorField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "text_hash"], name="embedding_cache_key")]


class EmbeddingSpace(models.Model):
    """One embedding model's vectors. The ``active`` row is what the vector lane searches (at most one);
    a ``building`` row is a model switch in progress (search.services.reembed), whose vectors are staged in
    the EmbeddingCache until the flip makes it active in one transaction; ``retired`` rows are past models.
    """

    class State(models.TextChoices):
        ACTIVE = "active", "active"
        BUILDING = "building", "building"
        RETIRED = "retired", "retired"

    class Step(models.TextChoices):
        """Where a switch to this space stands (search.services.reembed); "" once nothing is left to do."""

        NONE = "", "done"
        STAGING = "staging", "embedding the chunks"
        FILLING = "filling", "putting its vectors beside the searched ones"
        INDEXING = "indexing", "building its index"
        CLEARING = "clearing", "emptying the previous model's vectors"

    model = models.CharField(max_length=120, unique=True)
    dimensions = models.PositiveIntegerField()
    active = models.BooleanField(default=False)
    state = models.CharField(max_length=10, choices=State.choices, default=State.BUILDING)
    # Progress of a build (current chunks with a vector of this model / current chunks), for the admin;
    # for the active space they are the figures of its flip.
    chunks_done = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    # The switch's current step and, for the steps that go through the table in id ranges (filling,
    # clearing), the ranges done of all.
    step = models.CharField(max_length=10, choices=Step.choices, default=Step.NONE, blank=True)
    step_done = models.PositiveIntegerField(default=0)
    step_total = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When it became the active space.")
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["active"], condition=models.Q(active=True), name="embedding_space_one_active"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.state})"


class IndexState(models.Model):
    """One row: whether the term statistics are stale, and when they were last built."""

    dirty = models.BooleanField(default=True)
    dirty_since = models.DateTimeField(null=True, blank=True)
    built_at = models.DateTimeField(null=True, blank=True)
    build_seconds = models.FloatField(null=True, blank=True)


class Citation(models.Model):
    class Outcome(models.TextChoices):
        WON = "won", "Won"
        LOST = "lost", "Lost"
        PENDING = "pending", "Pending"

    item = models.ForeignKey(ContentItem, on_delete=models.CASCADE, related_name="citations")
    bid_reference = models.CharField(max_length=120)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.PENDING)
    cited_at = models.DateField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "bid_reference"], name="citation_unique")]

    def __str__(self) -> str:
        return f"{self.bid_reference} ({self.outcome})"


class ItemRead(models.Model):
    """An item a signed-in user has opened (feeds the unread-only filter)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="item_reads")
    item = models.ForeignKey(ContentItem, on_delete=models.CASCADE, related_name="reads")
    read_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "item"], name="item_read_unique")]


class SystemFlag(models.Model):
    """Small persistent facts about this installation (e.g. the demo knowledge base was loaded)."""

    key = models.CharField(max_length=100, unique=True)
    value = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)


class JobRun(models.Model):
    """One run of a background job (beat, task or command): when, what it touched, how it ended.

    A scheduled run claims its ``period`` (e.g. ``2025-01-02`` for a daily job): the unique
    (job, period) row is what makes a daily job take effect once even when two beat processes fire.
    Ad-hoc runs (commands, debounced builds) have no period.
    """

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        ABANDONED = "abandoned", "Abandoned (worker lost)"

    job = models.CharField(max_length=60, db_index=True)
    period = models.CharField(
        max_length=40, null=True, blank=True, help_text="The schedule slot this run claims; empty for ad-hoc runs."
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING, db_index=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    items_touched = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=1, help_text="Runs that worked on this claim (retries, takeovers).")
    error = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    host = models.CharField(max_length=200, blank=True, help_text="host:pid of the process that ran it last")

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "period"], condition=models.Q(period__isnull=False), name="jobrun_job_period_unique"
            )
        ]
        indexes = [models.Index(fields=["job", "-started_at"], name="jobrun_job_started")]

    def __str__(self) -> str:
        return f"{self.job} {self.period or 'ad hoc'} ({self.status})"


def normalize_terms(terms: list[str]) -> list[str]:
    """Lower-case, collapse whitespace, drop blanks and duplicates (the first word keeps its place)."""
    seen: dict[str, None] = {}
    for term in terms:
        cleaned = " ".join(str(term).split()).casefold()
        if cleaned:
            seen.setdefault(cleaned, None)
    return list(seen)


class Synonym(models.Model):
    """A synonym set the engine applies at query time.

    Two-way (``one_way`` false): any word of ``terms`` also matches the others. One-way: the first word
    expands to the others only (``["cv", "curriculum vitae"]``: a search for "cv" also finds "curriculum
    vitae", not the reverse). ``language`` blank applies to every language. Terms are stored lower-case.
    """

    language = models.CharField(max_length=16, blank=True, help_text="language code (en, fr, …); blank = all")
    terms = ArrayField(
        models.CharField(max_length=200),
        help_text="comma-separated words or phrases; one-way: the first expands",
    )
    one_way = models.BooleanField(default=False, help_text="only the first word expands to the others")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["language", "id"]

    def __str__(self) -> str:
        arrow = " → " if self.one_way else " ↔ "
        if self.one_way and self.terms:
            text = self.terms[0] + arrow + ", ".join(self.terms[1:])
        else:
            text = arrow.join(self.terms or [])
        return f"{text} [{self.language or 'all'}]"

    def clean(self) -> None:
        self.terms = normalize_terms(list(self.terms or []))
        self.language = self.language.strip().lower()
        if len(self.terms) < 2:
            raise ValidationError(
                {"terms": "Give at least two different words: the word and what it also means."}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.terms = normalize_terms(list(self.terms or []))
        self.language = (self.language or "").strip().lower()
        super().save(*args, **kwargs)
        # The engine caches synonym sets: search.signals drops the cache on every save and delete.


class FederationPeer(models.Model):
    """Another instance of this product whose search a federated search also asks (docs/federation.md).

    ``api_key_encrypted`` is a key the peer issued (its scope on the peer decides what the peer returns),
    encrypted at rest with ``FEDERATION_SECRET_KEY`` (it must be sent, so it cannot be hashed); it is never
    shown again. ``groups`` limits which of our signed-in users see the peer's results (none: every signed-in
    user); staff always see them, anonymous visitors only when ``public``.
    """

    class CheckStatus(models.TextChoices):
        UNCHECKED = "unchecked"
        OK = "ok"
        TIMEOUT = "timeout"
        ERROR = "error"
        REFUSED = "refused"

    name = models.SlugField(max_length=50, unique=True, help_text="how results and `sources` name this peer")
    base_url = models.URLField(max_length=300, help_text="the peer's address, e.g. https://kb.emea.example.org")
    api_key_encrypted = models.TextField(editable=False)
    api_key_prefix = models.CharField(max_length=16, editable=False, help_text="the key's public part")
    timeout_ms = models.PositiveIntegerField(default=800)
    groups = models.ManyToManyField(Group, blank=True, help_text="our users who may see its results (none: all)")
    public = models.BooleanField(default=False, help_text="anonymous visitors see its results too")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    checked_at = models.DateTimeField(null=True, blank=True)
    check_status = models.CharField(max_length=12, choices=CheckStatus.choices, default=CheckStatus.UNCHECKED)
    check_detail = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.base_url})"
