"""``evaluate --federated N``: the merge's quality, measured on real instances.

The dataset's corpus is split into N shards by a stable hash of each document's id. Each shard is imported and
indexed into a scratch database of its own (the embedding cache copied in, so nothing is embedded twice);
shards 1..N-1 are served by real web servers of this product (uvicorn, the configured embedder, their own
``SITE_URL`` so their pages never look like each other's), each holding an API key the first instance keeps
as a peer. The first instance (shard 0, in this process) then answers every question with
``federated_search(sources="all")``: its own engine plus every peer over HTTP, merged. Each
result is mapped back to the dataset's document id (ours by ``external_id``, a peer's by the slug in its URL)
and scored like any run; the command compares it with one instance holding the whole corpus.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.test import override_settings

from benchmarks import bench_http, scratch_db

# Timeouts here are about correctness, not latency: a peer busy on the same 2 cores still answers.
PEER_TIMEOUT_MS = 10_000
# The questions arrive as fast as the instances answer: far above a real peer's budget.
PEER_RATE_PER_MINUTE = 1_000_000


def shard_of(doc_id: str, parts: int) -> int:
    """Stable across runs and machines (not Python's salted ``hash``)."""
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") % parts


def corpus_split(corpus: Path, parts: int, directory: Path) -> list[Path]:
    """``corpus`` (BEIR ``corpus.jsonl``) as ``parts`` BEIR corpora under ``directory``, each document in one."""
    if parts < 2:
        raise ValueError("--federated needs at least 2 instances.")
    paths = [directory / f"shard{i}" / "corpus.jsonl" for i in range(parts)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(path.open("w", encoding="utf-8")) for path in paths]
        with corpus.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    outs[shard_of(str(json.loads(line)["_id"]), parts)].write(line)
    return paths


@dataclass
class Shard:
    index: int
    corpus: Path
    database: str
    api_key: str = ""
    slugs: dict[str, str] = field(default_factory=dict)  # slug -> the dataset's document id
    documents: int = 0

    @property
    def name(self) -> str:
        return f"shard{self.index}"

    @property
    def site_url(self) -> str:
        return f"http://{self.name}.evaluate.invalid"


def shards_build(
    paths: list[Path], *, build: Callable[[Path], None], run_id: str
) -> list[Shard]:
    """Each shard in its own scratch database (kept until ``shards_drop``), indexed by ``build``, with an
    all-content API key for the instance that will ask it."""
    from accounts.api_keys import api_key_create
    from search.models import ContentItem

    shards = [Shard(i, path, f"kb_eval_fed{i}_{run_id}") for i, path in enumerate(paths)]
    for shard in shards:
        scratch_db.scratch_database_drop(shard.database)  # a run interrupted before its clean-up
        with scratch_db.scratch_database(name=shard.database, copy_embedding_cache=True, keep=True):
            build(shard.corpus)
            shard.slugs = dict(ContentItem.objects.values_list("slug", "external_id"))
            shard.documents = len(shard.slugs)
            shard.api_key = api_key_create(name="evaluate --federated", all_content=True).raw_key
    return shards


def shards_drop(shards: list[Shard]) -> None:
    for shard in shards:
        scratch_db.scratch_database_drop(shard.database)


@contextlib.contextmanager
def peers_serving(shards: list[Shard]) -> Iterator[dict[str, str]]:
    """A web server of this product per shard, on the configured embedder; yields {shard name: base URL}."""
    urls: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for shard in shards:
            urls[shard.name] = stack.enter_context(bench_http.web_server(
                database_url=scratch_db.database_url(shard.database), workers=1,
                extra_env={
                    "EMBEDDING_PROVIDER": settings.EMBEDDING_PROVIDER,
                    "E5_ENGINE": settings.E5_ENGINE,
                    "SITE_URL": shard.site_url,
                    "FEDERATION_INSTANCE_NAME": shard.name,
                    "FEDERATION_RATE_PER_MINUTE": str(PEER_RATE_PER_MINUTE),
                },
            ))
        yield urls


@dataclass
class FederatedRun:
    """What the asking instance saw: the search function, every source's failures so far, and for each question
    asked the same answers merged by the previous rule (by confidence, each source's order kept: ``merge``
    without the sources' fusion evidence), so both rules are scored on exactly the same answers."""

    search: Callable[[str], list[str]]
    failures: dict[str, int]
    unmapped: list[str]
    by_confidence: dict[str, list[str]] = field(default_factory=dict)


def federated_searcher(
    first: Shard, peers_of: list[tuple[Shard, str]], *, mode: str, limit: int = 100
) -> FederatedRun:
    """Inside ``first``'s database: register each (shard, base URL) of ``peers_of`` as a peer, and return a
    search that asks this instance and every peer."""
    from search.federation import federated as federated_module
    from search.federation import peers
    from search.federation.federated import federated_search
    from search.principal import Principal
    from search.types import RetrievalQuery

    for shard, url in peers_of:
        peers.peer_add(name=shard.name, base_url=url, api_key=shard.api_key, timeout_ms=PEER_TIMEOUT_MS)
    by_name = {shard.name: shard for shard, _ in peers_of}
    staff = Principal(kind="staff", all_content=True)
    failures: dict[str, int] = {}
    unmapped: list[str] = []
    by_confidence: dict[str, list[str]] = {}
    shipped_merge = federated_module.merge

    def document_ids(hits: Any, *, record: bool) -> list[str]:
        ids = []
        for hit in hits:
            if hit.local is not None:
                ids.append(hit.local.external_id)
                continue
            slug = unquote(urlsplit(hit.url).path.rstrip("/").rsplit("/", 1)[-1])
            doc = by_name[hit.source].slugs.get(slug) if hit.source in by_name else None
            if doc is None:
                if record:
                    unmapped.append(hit.url)
            else:
                ids.append(doc)
        return ids

    def search(text: str) -> list[str]:
        seen: list[Any] = []

        def merge_both(groups: Any, fusions: Any = None) -> Any:
            seen.append(shipped_merge(groups).hits[:limit])  # the same answers, merged by confidence
            return shipped_merge(groups, fusions)

        with override_settings(SITE_URL=first.site_url), \
                mock.patch.object(federated_module, "merge", merge_both):
            result = federated_search(RetrievalQuery(
                text=text[:2000], principal=staff, mode=mode, limit=limit, threshold=0.0,  # type: ignore[arg-type]
            ), sources="all")
        for report in result.sources:
            if report.status != "ok":
                failures[report.name] = failures.get(report.name, 0) + 1
        by_confidence[text] = document_ids(seen[0], record=False) if seen else []
        return document_ids(result.hits, record=True)

    return FederatedRun(search, failures, unmapped, by_confidence)
