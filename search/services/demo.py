"""The demo knowledge base loaded by the first ``up`` of an empty knowledge base: files in search/demo/, dates
relative to today."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from search.models import Citation, ContentItem, SystemFlag
from search.services.importer import ImportReport, RawRecord, import_records

DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"
FLAG = "demo_loaded"


def _records(path: Path) -> Iterator[RawRecord]:
    now = timezone.now()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            data: dict[str, Any] = json.loads(line)
            if "next_review_offset_days" in data:
                offset = timedelta(days=int(data.pop("next_review_offset_days")))
                data["next_review_date"] = (now + offset).date().isoformat()
            if "published_at_offset_days" in data:
                when = now + timedelta(days=int(data.pop("published_at_offset_days")))
                data["published_at"] = when.isoformat()
                data.setdefault("updated_at", when.isoformat())
            if data.pop("archived", False):
                data["archived_at"] = now.isoformat()
            yield RawRecord(str(path), number, data)


def demo_loaded() -> bool:
    return SystemFlag.objects.filter(key=FLAG).exists()


def demo_external_ids() -> set[str]:
    """The ids of every demo item (published and drafts)."""
    ids: set[str] = set()
    for name in ("kb_published.jsonl", "kb_drafts.jsonl"):
        with (DEMO_DIR / name).open(encoding="utf-8") as handle:
            ids.update(str(json.loads(line)["id"]) for line in handle if line.strip())
    return ids


@dataclass(frozen=True)
class DemoDecision:
    load: bool
    message: str = ""  # one line saying why it is not loaded ("" when loading, or loaded before)


def demo_load_decision() -> DemoDecision:
    """Whether ``up`` loads the demo: only into a knowledge base that holds no items, and only once.

    Items of the demo itself do not count (a first start stopped half-way through loading it finishes the
    load next time); any other item, published or not, means this knowledge base is someone's own content.
    """
    if demo_loaded():
        return DemoDecision(load=False)
    own = ContentItem.objects.exclude(external_id__in=demo_external_ids()).count()
    if own:
        noun = "item" if own == 1 else "items"
        message = f"Not loading the demo: this knowledge base already has {own} {noun}."
        return DemoDecision(load=False, message=message)
    return DemoDecision(load=True)


def demo_load(*, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Load the published items, then the newer drafts, then citations. Idempotent."""
    published = import_records(_records(DEMO_DIR / "kb_published.jsonl"), publish=True, progress=progress)
    drafts = import_records(_records(DEMO_DIR / "kb_drafts.jsonl"), publish=False, progress=progress)
    citations = citations_import(DEMO_DIR / "citations.jsonl")
    from search.services.governance import review_flags_update

    review_flags_update(today=timezone.now().date())
    SystemFlag.objects.update_or_create(key=FLAG, defaults={"value": {"loaded_at": timezone.now().isoformat()}})
    return {"published": _summary(published), "drafts": _summary(drafts), "citations": citations}


def _summary(report: ImportReport) -> dict[str, int]:
    return {"created": report.created, "updated": report.updated, "unchanged": report.unchanged}


@transaction.atomic
def citations_import(path: Path) -> int:
    now = timezone.now().date()
    count = 0
    items = {i.external_id: i.pk for i in ContentItem.objects.only("pk", "external_id")}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            data = json.loads(line)
            item_id = items.get(data["item_id"])
            if item_id is None:
                raise ValueError(f"{path}:{number}: item_id {data['item_id']!r} is not in the knowledge base.")
            cited_at = now + timedelta(days=int(data.get("cited_at_offset_days", 0)))
            Citation.objects.update_or_create(
                item_id=item_id,
                bid_reference=data["bid_reference"],
                defaults={"outcome": data["outcome"], "cited_at": cited_at},
            )
            count += 1
    return count
