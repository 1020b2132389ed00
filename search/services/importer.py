"""Import content from BEIR, JSONL or Markdown. Idempotent by external id; each batch is all-or-nothing.

Every record of a batch is validated before anything of the batch is written, and the batch is
written in one transaction, so a malformed record leaves nothing of its batch behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from search.errors import ImportFailed
from search.models import ContentItem, Visibility
from search.services import content
from search.text import language

Format = Literal["beir", "jsonl", "markdown"]
BATCH_SIZE = 200
VISIBILITY_ALIASES = {"signed-in": "signed_in", "signedin": "signed_in", "group": "groups", "private": "staff"}
# Model fields a JSONL record may set by name (beyond the documented ones).
EXTRA_ITEM_FIELDS = {"subtopic", "platform", "archived_at", "allow_closed_placeholder", "governance_review_status",
                     "last_reviewed_at", "quality_score"}


class ImportRecord(BaseModel):
    """One JSONL object. Unknown keys are refused (a typo must not be dropped silently)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(min_length=1, max_length=200)
    title: str = Field(min_length=1, max_length=500)
    body: str
    summary: str = ""
    language: str | None = Field(default=None, max_length=8)
    content_type: str | None = Field(default=None, max_length=40)
    primary_domain: str | None = Field(default=None, max_length=80)
    subtopic: str | None = Field(default=None, max_length=80)
    platform: str | None = Field(default=None, max_length=80)
    layer: str | None = Field(default=None, max_length=80)
    source: str | None = Field(default=None, max_length=80)
    visibility: str | None = None
    groups: list[str] = Field(default_factory=list)
    author_name: str | None = Field(default=None, max_length=200)
    ai_keywords: list[str] = Field(default_factory=list)
    published_at: datetime | None = None
    updated_at: datetime | None = None
    next_review_date: date | None = None
    review_cadence_days: int | None = Field(default=None, ge=1, le=3650)
    superseded_by: str | None = None
    archived_at: datetime | None = None
    allow_closed_placeholder: bool | None = None
    governance_review_status: str | None = None
    last_reviewed_at: datetime | None = None
    quality_score: float | None = None

    @field_validator("visibility")
    @classmethod
    def _visibility(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = VISIBILITY_ALIASES.get(value.lower(), value.lower())
        if value not in Visibility.values:
            raise ValueError(f"must be one of {', '.join(Visibility.values)}")
        return value

    @field_validator("published_at", "updated_at", "archived_at", "last_reviewed_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and timezone.is_naive(value):
            return value.replace(tzinfo=UTC)
        return value


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    records: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RawRecord:
    source: str
    line: int
    data: dict[str, Any]


def _error(raw: RawRecord, message: str) -> ImportFailed:
    return ImportFailed(f"{raw.source}:{raw.line}: {message}")


def read_records(path: Path, fmt: Format) -> Iterator[RawRecord]:
    if fmt in ("beir", "jsonl"):
        if path.is_dir():
            path = path / "corpus.jsonl"
        if not path.exists():
            raise ImportFailed(f"{path}: no such file. Give the path of a .jsonl file (or a BEIR folder).")
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                raw = RawRecord(str(path), number, {})
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _error(raw, f"not valid JSON ({exc.msg} at column {exc.colno}).") from None
                if not isinstance(data, dict):
                    raise _error(raw, "each line must be one JSON object.")
                if fmt == "beir":
                    data = _from_beir(raw, data)
                yield RawRecord(str(path), number, data)
    elif fmt == "markdown":
        files = sorted(path.rglob("*.md")) if path.is_dir() else [path]
        if not files or not files[0].exists():
            raise ImportFailed(f"{path}: no Markdown files found.")
        for file in files:
            ident = str(file.relative_to(path if path.is_dir() else file.parent).with_suffix(""))
            yield RawRecord(str(file), 1, _from_markdown(file.read_text(encoding="utf-8"), ident))
    else:
        raise ImportFailed(f"Unknown format {fmt!r}: use beir, jsonl or markdown.")


def _from_beir(raw: RawRecord, data: dict[str, Any]) -> dict[str, Any]:
    if "_id" not in data:
        raise _error(raw, "BEIR records need an _id.")
    title = (data.get("title") or "").strip()
    text = data.get("text") or ""
    return {"id": str(data["_id"]), "title": title or text[:80].strip() or str(data["_id"]), "body": text}


FRONT_MATTER_RE = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def _from_markdown(text: str, ident: str) -> dict[str, Any]:
    data: dict[str, Any] = {"id": ident}
    match = FRONT_MATTER_RE.match(text)
    if match:
        for line in match.group(1).splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                value = value.strip()
                listed = value.startswith("[")
                data[key.strip()] = [v.strip() for v in value.strip("[]").split(",")] if listed else value
        text = text[match.end() :]
    heading = re.search(r"^#\s+(.+)$", text, re.M)
    data.setdefault("title", heading.group(1).strip() if heading else ident)
    data["body"] = text.strip()
    return data


def _batched(records: Iterable[RawRecord], size: int) -> Iterator[list[RawRecord]]:
    batch: list[RawRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _validate(raw: RawRecord) -> ImportRecord:
    try:
        return ImportRecord.model_validate(raw.data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error["loc"]) or "record"
            message = (
                "unknown field (check the spelling; see the README's import format)"
                if error["type"] == "extra_forbidden"
                else error["msg"]
            )
            problems.append(f"{where}: {message}")
        raise _error(raw, "; ".join(problems)) from None


def _apply(record: ImportRecord, defaults: dict[str, Any], publish: bool) -> str:
    values: dict[str, Any] = {}
    for name in ("language", "content_type", "primary_domain", "subtopic", "platform", "layer", "source",
                 "visibility", "author_name", "next_review_date", "review_cadence_days", "archived_at",
                 "allow_closed_placeholder", "governance_review_status", "last_reviewed_at", "quality_score"):
        value = getattr(record, name)
        if value is None:
            value = defaults.get(name)
        if value is not None:
            values[name] = value
    if record.ai_keywords:
        values["ai_keywords"] = [k.strip().lower() for k in record.ai_keywords if k.strip()]
    item = ContentItem.objects.select_related("latest_revision").filter(external_id=record.id).first()
    if item is None and "language" not in values:
        # Neither the record nor the command says: the text does (an existing item keeps its language).
        values["language"] = language.detect_language(f"{record.title}\n{record.body}") or "en"
    status = "unchanged"
    when = record.updated_at or record.published_at
    if item is None:
        item = ContentItem(
            external_id=record.id,
            slug=content.unique_slug(record.title, record.id),
            updated_at=when or timezone.now(),
            published_at=record.published_at,
            **values,
        )
        item.save()
        status = "created"
    else:
        changed = [k for k, v in values.items() if getattr(item, k) != v]
        if changed:
            for key in changed:
                setattr(item, key, values[key])
            item.save(update_fields=changed)
            content.item_metadata_changed(item_ids=[item.pk])
            status = "updated"
    if record.groups:
        groups = [Group.objects.get_or_create(name=name)[0] for name in record.groups]
        if set(item.groups.values_list("pk", flat=True)) != {g.pk for g in groups}:
            item.groups.set(groups)
            status = "updated" if status == "unchanged" else status
    _, revised = content.item_save_revision(
        item=item, title=record.title, body=record.body, summary=record.summary, publish=publish, created_at=when
    )
    if revised and status == "unchanged":
        status = "updated"
    return status


def import_records(
    records: Iterable[RawRecord],
    *,
    publish: bool = False,
    defaults: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    batch_size: int = BATCH_SIZE,
) -> ImportReport:
    """Validate and write records batch by batch; a bad record raises ImportFailed and its batch is rolled back."""
    defaults = {k: v for k, v in (defaults or {}).items() if v is not None}
    if "visibility" in defaults:
        defaults["visibility"] = ImportRecord._visibility(defaults["visibility"])  # type: ignore[call-arg]
    report = ImportReport()
    pending_supersede: list[tuple[RawRecord, str, str]] = []
    for batch in _batched(records, batch_size):
        validated = [(raw, _validate(raw)) for raw in batch]
        with transaction.atomic():
            for raw, record in validated:
                status = _apply(record, defaults, publish)
                setattr(report, status, getattr(report, status) + 1)
                if record.superseded_by:
                    pending_supersede.append((raw, record.id, record.superseded_by))
        report.records += len(batch)
        if progress:
            progress(len(batch))
    _link_superseded(pending_supersede)
    return report


@transaction.atomic
def _link_superseded(links: list[tuple[RawRecord, str, str]]) -> None:
    ids = {x for _, a, b in links for x in (a, b)}
    items = {i.external_id: i for i in ContentItem.objects.filter(external_id__in=ids)}
    for raw, source_id, target_id in links:
        target = items.get(target_id)
        if target is None:
            raise _error(raw, f"superseded_by: no item with id {target_id!r} (import it first or fix the id).")
        item = items[source_id]
        if item.superseded_by_id != target.pk:
            content.item_mark_superseded(item=item, by=target)


def import_path(
    path: Path, *, fmt: Format, publish: bool = False, defaults: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    return import_records(read_records(path, fmt), publish=publish, defaults=defaults, progress=progress)


def count_records(path: Path, fmt: Format) -> int | None:
    if fmt in ("beir", "jsonl"):
        target = path / "corpus.jsonl" if path.is_dir() else path
        if target.exists():
            with target.open(encoding="utf-8") as handle:
                return sum(1 for line in handle if line.strip())
    return None
