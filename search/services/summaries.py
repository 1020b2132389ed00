"""Item summaries: written by OpenAI when it is configured, otherwise extracted from the body locally.

- ``openai``: chat completions through the ``openai`` client (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
  ``OPENAI_SUMMARY_MODEL``), bounded by ``OPENAI_TIMEOUT_S`` and ``OPENAI_MAX_RETRIES``. A failure raises
  :class:`SummaryUnavailable` (a provider error: the Celery task retries it with back-off).
- ``local``: an extractive summary: the body's most representative sentences (word frequencies with
  stop words removed, a small bonus for leading sentences), in their original order, ≤ 400 characters.
- ``auto`` (the default): ``openai`` when ``OPENAI_API_KEY`` is set, else ``local``.

A regenerated summary is written onto the item's current revisions (live and latest) in place: it is
metadata about the text, not a new text, so it creates no draft and publishes nothing.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from search.errors import SearchError
from search.models import ContentItem, Revision
from search.text import analysis

logger = logging.getLogger(__name__)

Provider = Literal["auto", "openai", "local"]
SUMMARY_MAX_CHARS = 400
MAX_SENTENCES = 3
OPENAI_INPUT_MAX_CHARS = 12000
SYSTEM_PROMPT = (
    "You summarise knowledge-base articles for a search results page. Answer with the summary only: "
    "one to three plain sentences, at most 60 words, in the same language as the article, no Markdown."
)


class SummaryUnavailable(SearchError):
    """The summary provider failed (network, timeout, quota, empty answer). Retry later."""

    code = "summary_unavailable"


# --- local extractive summary -------------------------------------------------------------------

_FENCE_RE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_LINK_RE = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARK_RE = re.compile(r"(\*\*|__|\*|_|`)")
_LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_RE = re.compile(r"(?<=[.!?؟。])\s+")


def _plain_paragraphs(markdown: str) -> list[str]:
    """Prose paragraphs of a Markdown body: no headings, tables, code, quotes markers or link targets."""
    text = _FENCE_RE.sub("\n", markdown)
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "|", "<!--", "---", "===")):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        line = line.lstrip("> ").strip()
        if _LIST_RE.match(line):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            line = _LIST_RE.sub("", line)
        line = _MARK_RE.sub("", _LINK_RE.sub(r"\1", line))
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return [p for p in (re.sub(r"\s+", " ", p).strip() for p in paragraphs) if p]


def _sentences(markdown: str) -> list[str]:
    out = []
    for paragraph in _plain_paragraphs(markdown):
        for sentence in _SENTENCE_RE.split(paragraph):
            sentence = sentence.strip()
            if len(sentence) >= 20 and sum(1 for _ in analysis.tokens(sentence)) >= 4:
                out.append(sentence)
    return out


def _content_words(text: str) -> list[str]:
    stops = analysis.all_stop_words()
    return [t.folded for t in analysis.tokens(text) if t.folded not in stops and len(t.folded) > 1]


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def summary_extractive(
    body: str, *, max_sentences: int = MAX_SENTENCES, max_chars: int = SUMMARY_MAX_CHARS
) -> str:
    """The body's most representative sentences in their original order, at most ``max_chars``.

    Deterministic (same body → same summary). Empty when the body has no prose.
    """
    sentences = _sentences(body)
    if not sentences:
        return ""
    frequencies = Counter(w for s in sentences for w in set(_content_words(s)))
    top = max(frequencies.values(), default=1)

    def score(index: int, sentence: str) -> float:
        words = _content_words(sentence)
        if not words:
            return 0.0
        weight = sum(frequencies[w] / top for w in set(words)) / math.sqrt(len(words))
        return weight * (1.25 if index == 0 else 1.1 if index < 3 else 1.0)

    ranked = sorted(range(len(sentences)), key=lambda i: (-score(i, sentences[i]), i))
    chosen: list[int] = []
    length = 0
    for index in ranked:
        extra = len(sentences[index]) + (1 if chosen else 0)
        if chosen and length + extra > max_chars:
            continue
        chosen.append(index)
        length += extra
        if len(chosen) >= max_sentences:
            break
    return _truncate(" ".join(sentences[i] for i in sorted(chosen)), max_chars)


# --- OpenAI ---------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _client(api_key: str, base_url: str | None, timeout: float, max_retries: int) -> Any:
    from openai import OpenAI

    return OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)


def summary_openai(*, title: str, body: str) -> str:
    """A summary written by ``OPENAI_SUMMARY_MODEL``. Raises SummaryUnavailable on any provider failure."""
    import openai

    if not settings.OPENAI_API_KEY:
        raise SummaryUnavailable("OpenAI summaries need OPENAI_API_KEY; set it, or use the local provider.")
    client = _client(
        settings.OPENAI_API_KEY,
        settings.OPENAI_BASE_URL,
        settings.OPENAI_TIMEOUT_S,
        settings.OPENAI_MAX_RETRIES,
    )
    try:
        response = client.chat.completions.create(
            model=settings.OPENAI_SUMMARY_MODEL,
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Title: {title}\n\n{body[:OPENAI_INPUT_MAX_CHARS]}"},
            ],
            max_completion_tokens=200,
        )
    except openai.OpenAIError as exc:
        raise SummaryUnavailable(f"OpenAI summary failed: {exc.__class__.__name__}: {exc}"[:500]) from exc
    choices = getattr(response, "choices", None) or []
    text = (choices[0].message.content or "").strip() if choices else ""
    if not text:
        raise SummaryUnavailable("OpenAI returned an empty summary; try again or use the local provider.")
    return _truncate(re.sub(r"\s+", " ", text), SUMMARY_MAX_CHARS * 2)


def provider_resolve(provider: Provider = "auto") -> Literal["openai", "local"]:
    if provider == "auto":
        return "openai" if settings.OPENAI_API_KEY else "local"
    if provider not in ("openai", "local"):
        raise SearchError(
            f"Unknown summary provider {provider!r}: use auto, openai or local.", field="provider"
        )
    return provider


def summary_generate(*, title: str, body: str, provider: Provider = "auto") -> tuple[str, str]:
    """(summary, provider used) for a text."""
    chosen = provider_resolve(provider)
    if chosen == "openai":
        return summary_openai(title=title, body=body), "openai"
    return summary_extractive(body), "local"


# --- items ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryOutcome:
    item_id: int
    provider: str
    revisions_updated: int


def item_summary_regenerate(*, item_id: int, provider: Provider = "auto") -> SummaryOutcome:
    """Write a fresh summary onto the item's current revisions (live and latest), then refresh its score.

    Idempotent for the local provider (same body → same summary, unchanged rows are not written).
    """
    from search.services import content
    from search.services.quality import item_quality_update

    item = ContentItem.objects.select_related("live_revision", "latest_revision").get(pk=item_id)
    revisions: list[Revision] = []
    for revision in (item.live_revision, item.latest_revision):
        if revision is not None and all(r.pk != revision.pk for r in revisions):
            revisions.append(revision)
    generated = [(r, *summary_generate(title=r.title, body=r.body, provider=provider)) for r in revisions]
    updated = 0
    with transaction.atomic():
        for revision, text, _ in generated:
            if text and text != revision.summary:
                digest = content.revision_hash(title=revision.title, body=revision.body, summary=text)
                Revision.objects.filter(pk=revision.pk).update(summary=text, content_hash=digest)
                updated += 1
        if updated:
            item_quality_update(item_id=item.pk, now=timezone.now())
    if updated:
        content.item_metadata_changed(item_ids=[item.pk])
    used = generated[0][2] if generated else provider_resolve(provider)
    return SummaryOutcome(item_id=item.pk, provider=used, revisions_updated=updated)


def items_missing_summary() -> QuerySet[ContentItem]:
    """Items whose live (else latest) revision has no summary."""
    return ContentItem.objects.filter(
        Q(live_revision__isnull=False, live_revision__summary="")
        | Q(live_revision__isnull=True, latest_revision__isnull=False, latest_revision__summary="")
    )


@dataclass
class SummariesReport:
    done: list[int] = field(default_factory=list)
    updated: int = 0
    providers: Counter[str] = field(default_factory=Counter)


def summaries_regenerate(
    *,
    item_ids: Sequence[int],
    provider: Provider = "auto",
    progress: Callable[[int], None] | None = None,
    report: SummariesReport | None = None,
) -> SummariesReport:
    """Regenerate the summaries of ``item_ids`` in order. Each item commits on its own.

    On a provider failure the exception propagates; ``report.done`` then lists the items finished
    before it, so a retry can continue with the rest.
    """
    report = report if report is not None else SummariesReport()
    for item_id in item_ids:
        try:
            outcome = item_summary_regenerate(item_id=item_id, provider=provider)
        except ContentItem.DoesNotExist:
            logger.info("summary: item %s no longer exists; skipped", item_id)
            outcome = None
        report.done.append(item_id)
        if outcome is not None:
            report.updated += outcome.revisions_updated
            report.providers[outcome.provider] += 1
        if progress:
            progress(1)
    return report
