"""The MCP tools: validated arguments and a principal in, Markdown plus a structured result out.

Each tool is an adapter: it turns its pydantic arguments into a ``RetrievalQuery`` or a selector call,
calls ``search`` and renders. The tool list (``TOOLS``) and every description are fixed here in code.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from accounts.api_keys import api_key_user_id
from analytics.services import querylog_mark_followup
from follows import selectors as follow_selectors
from mcp_api import render
from mcp_api.schemas import (
    FindArgs,
    FindHit,
    FindResult,
    FollowNewsArgs,
    FollowNewsEntry,
    FollowNewsResult,
    FollowSummary,
    ListPresetsArgs,
    ListPresetsResult,
    MatchOffset,
    NearestItem,
    PresetSummary,
    QualityArgs,
    QualityResult,
    ReadArgs,
    ReadResult,
    SourceReport,
    TocItem,
    ToolArgs,
)
from presets.services import preset_filters, preset_list, preset_resolve
from search.engine import corpus_for, cursor_decode, cursor_encode, retrieve
from search.errors import InvalidQuery, NotFound, PermissionDenied
from search.federation.federated import LOCAL, FederatedResult, federated_search, sources_parse
from search.filters import InvalidFilter
from search.principal import Principal
from search.selectors.items import item_get
from search.selectors.revisions import ReadView, item_quality, item_read, passage_read
from search.text.query_parser import validate_query_text
from search.types import MCP_THRESHOLD, Corpus, Hit, RetrievalQuery, RetrievalResult, SearchFilters, lanes_text

TOC_MARKDOWN_ENTRIES = 40


@dataclass(frozen=True)
class ToolOutput:
    markdown: str
    structured: BaseModel


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args_model: type[ToolArgs]
    result_model: type[BaseModel]
    handler: Callable[[Any, Principal], ToolOutput]
    # First words of the one-line message an unexpected failure returns ("Search failed: …").
    failure: str
    failure_hint: str


def corpus_of(principal: Principal) -> Corpus:
    """Anonymous callers search the live corpus; API keys (and staff) the latest, drafts included."""
    return corpus_for(principal, "latest")


# --- find ---


def match_id_of(hit: Hit, granularity: str) -> str:
    if granularity == "chunk" and hit.chunk_id is not None:
        return f"c{hit.chunk_id}"
    return f"i{hit.item_id}"


# FindArgs field -> how it sets a SearchFilters field.
_FILTER_ARGS: dict[str, Callable[[Any], tuple[str, Any]]] = {
    "type": lambda v: ("content_type", (v,) if v else ()),
    "scope": lambda v: ("domain", (v,) if v else ()),
    "language": lambda v: ("language", v),
    "overdue_review": lambda v: ("overdue_review", v),
    "review_due_within_days": lambda v: ("review_due_within_days", v),
    "content_item_id": lambda v: ("content_item_id", v),
    "include_superseded": lambda v: ("include_superseded", v),
    "changed_since": lambda v: ("changed_since", v),
}


def find_filters(args: FindArgs, principal: Principal) -> SearchFilters:
    """The preset's filters (if any), with every filter argument the caller gave explicitly on top."""
    base = (
        preset_filters(preset_resolve(principal, args.preset)) if args.preset is not None else SearchFilters()
    )
    given = dict(
        _FILTER_ARGS[name](getattr(args, name)) for name in args.model_fields_set if name in _FILTER_ARGS
    )
    return dataclasses.replace(base, **given)


# Engine filter name -> find's argument, where they differ (a refusal names the argument the agent sent).
_FIND_ARG_NAMES = {"domain": "scope", "content_type": "type"}


def find_query(args: FindArgs, principal: Principal) -> RetrievalQuery:
    """The engine query of a ``find`` call; its filters are built and bounded by ``SearchFilters``, as everywhere."""
    text = validate_query_text(args.query or "", field="query")
    if not text and args.similar_to is None:
        raise InvalidQuery(
            "query is required unless similar_to is given: say what to look for.", field="query"
        )
    corpus = corpus_of(principal)
    if args.similar_to is not None:
        try:
            item_get(principal=principal, item_id=args.similar_to, corpus=corpus)
        except NotFound:
            raise NotFound(
                f"similar_to: no readable item with id {args.similar_to}. Use an item_id from a find result.",
                field="similar_to",
            ) from None
    try:
        filters = find_filters(args, principal)
    except InvalidFilter as exc:
        raise exc.at(_FIND_ARG_NAMES.get(exc.field or "", exc.field or "filters")) from None
    return RetrievalQuery(
        text=text,
        principal=principal,
        corpus=corpus,
        filters=filters,
        granularity=args.granularity,
        limit=args.limit,
        cursor=args.cursor,
        similar_to=args.similar_to,
        threshold=args.threshold,
        surface="mcp",
        tool="find",
    )


def find_hit(hit: Hit, granularity: str) -> FindHit:
    snippet, offsets = render.clean_with_spans(hit.passage, ((s.start, s.end) for s in hit.passage_spans))
    return FindHit(
        match_id=match_id_of(hit, granularity),
        item_id=hit.item_id,
        title=render.clean_text(hit.title),
        url=hit.url,
        toc_path=render.clean_text(hit.toc_path),
        snippet=snippet,
        match_offsets=[MatchOffset(start=s, end=e) for s, e in offsets],
        lanes=list(hit.lanes),
        lane_ranks=dict(hit.lane_ranks),
        missing_words=list(hit.missing_words),
        score=hit.score,
        confidence=hit.confidence,
        updated_at=hit.updated_at.isoformat(),
        review_status=hit.review_status,
    )


def find_result(query: RetrievalQuery, result: RetrievalResult) -> FindResult:
    """The structured result; the echoed filters are the ones in effect (given or from the preset)."""
    return FindResult(
        query=query.text or None,
        count=result.total,
        results=[find_hit(hit, query.granularity) for hit in result.hits],
        content_item_id=query.filters.content_item_id,
        overdue_review_filter=query.filters.overdue_review,
        review_due_within_days_filter=query.filters.review_due_within_days,
        partial_match=result.partial_match,
        degraded=list(result.degraded),
        next_cursor=result.next_cursor,
        suggestion=result.suggestion,
        threshold=query.threshold,
        nearest=[
            NearestItem(
                item_id=h.item_id, title=render.clean_text(h.title), url=h.url, confidence=h.confidence,
                matches=False,
            )
            for h in result.nearest
        ],
    )


def _filter_summary(args: FindArgs) -> str:
    given = {
        "type": args.type,
        "scope": args.scope,
        "language": args.language,
        "granularity": args.granularity,
        "similar_to": args.similar_to,
        "content_item_id": args.content_item_id,
        "overdue_review": args.overdue_review,
        "review_due_within_days": args.review_due_within_days,
        "include_superseded": args.include_superseded or None,
        "changed_since": args.changed_since,
        "preset": args.preset,
        "threshold": args.threshold if args.threshold != MCP_THRESHOLD else None,
    }
    return "; ".join(f"{k}={render.one_line(str(v))}" for k, v in given.items() if v is not None)


def find_markdown(args: FindArgs, found: FindResult) -> str:
    subject = (
        f'"{render.one_line(found.query)}"' if found.query else f"items similar to item {args.similar_to}"
    )
    head = [
        f"## find: {subject} — {found.count} match{'es' if found.count != 1 else ''}, "
        f"{len(found.results)} on this page"
    ]
    head.append(f"Arguments: {_filter_summary(args)}")
    if found.partial_match:
        head.append("Partial match: no result holds every query word; each result lists the words it lacks.")
    if found.suggestion:
        head.append(f'Did you mean: "{render.one_line(found.suggestion)}"? (call find again with that query)')
    if "embedding_unavailable" in found.degraded:
        head.append("Degraded: semantic search is unavailable right now; these are keyword matches only.")
    elif found.degraded:
        head.append(f"Degraded: {', '.join(found.degraded)}.")
    if not found.results:
        if args.cursor:
            head.append("No more results on this page.")
            return "\n\n".join(head)
        head.append(
            f"No item in the knowledge base matches this query (no result reached confidence {found.threshold:g}). "
            "Do not answer from the knowledge base as if it held the answer."
        )
        if found.nearest:
            head.append("The nearest items, which do NOT match the query:\n" + "\n".join(
                f"- {render.one_line(n.title)} (item_id: {n.item_id}, confidence {n.confidence:.2f}, not a match)"
                for n in found.nearest
            ))
        head.append("Try other words, another language, fewer filters, or granularity='chunk'; a lower threshold "
                    "shows weaker matches.")
        return "\n\n".join(head)
    head.append(render.UNTRUSTED_NOTE)
    blocks = []
    if found.sources:
        head.append("Knowledge bases asked: " + "; ".join(
            f"{s.name} {s.status}" + (f" ({s.count} found)" if s.status == "ok" else f" ({render.one_line(s.detail)})")
            for s in found.sources
        ))
    for rank, hit in enumerate(found.results, start=1):
        if hit.item_id is None:  # a peer's result: nothing to read here, its url is where it lives
            meta = [f"source: {render.one_line(hit.source)}", f"url: {render.one_line(hit.url)}"]
        else:
            meta = [f"match_id: {hit.match_id}", f"item_id: {hit.item_id}", f"url: {hit.url}"]
            if hit.sources and hit.sources != ["local"]:
                meta.append(f"also in: {render.one_line(', '.join(s for s in hit.sources if s != 'local'))}")
        if hit.toc_path:
            meta.append(f"section: {render.one_line(hit.toc_path)}")
        meta += [
            f"updated: {(hit.updated_at or '')[:10] or 'unknown'}",
            f"review: {hit.review_status or 'unknown'}",
            f"confidence: {hit.confidence:.2f}",
            f"lanes: {lanes_text(hit.lanes, hit.lane_ranks)}",
        ]
        if hit.missing_words:
            meta.append(f"missing: {render.one_line(', '.join(hit.missing_words))}")
        block = render.document_block(hit.snippet, match_id=hit.match_id, item_id=hit.item_id,
                                      source=None if hit.source == "local" else render.one_line(hit.source))
        blocks.append(f"### {rank}. {render.one_line(hit.title)}\n{' · '.join(meta)}\n{block}")
    tail = []
    if found.next_cursor:
        tail.append(
            f'More results: call find again with the same arguments and cursor="{found.next_cursor}".'
        )
    if args.granularity == "chunk":
        tail.append(
            'Read more: read(match_id="c…") for a passage with its neighbouring chunks, or read(item_id=…) '
            "for the whole item."
        )
    else:
        tail.append(
            'Read more: read(item_id=…) for an item\'s text; find with granularity="chunk" gives '
            "passage-level matches."
        )
    note = (
        "[Shortened to stay under 10,000 characters: {kept} of {total} results on this page are shown as "
        "text; all {total} are in the structured result. To read the rest as text, call find again with "
        "limit={kept} and follow next_cursor.]"
    )
    markdown, _ = render.fit(head, blocks, tail, omitted_note=note)
    return markdown


def find_tool(args: FindArgs, principal: Principal) -> ToolOutput:
    query = find_query(args, principal)
    sources = sources_parse(args.sources)
    if sources != (LOCAL,):
        if args.similar_to is not None:
            raise InvalidQuery("similar_to searches this knowledge base only: leave sources out.", field="sources")
        found = federated_find_result(query, federated_search(query, sources=sources))
    else:
        found = find_result(query, retrieve(query=query))
    return ToolOutput(find_markdown(args, found), found)


def federated_find_result(query: RetrievalQuery, result: FederatedResult) -> FindResult:
    """``find`` across knowledge bases: local hits as ``find_hit`` says them, a peer's from its plain text."""
    hits = []
    for hit in result.hits:
        if hit.local is not None:
            found = find_hit(hit.local, query.granularity)
        else:
            snippet, offsets = render.clean_with_spans(hit.snippet, ((s.start, s.end) for s in hit.snippet_spans))
            found = FindHit(
                match_id=None, item_id=None, title=render.clean_text(hit.title), url=hit.url, toc_path="",
                snippet=snippet, match_offsets=[MatchOffset(start=s, end=e) for s, e in offsets],
                lanes=list(hit.lanes), score=hit.confidence, confidence=hit.confidence,
                updated_at=hit.updated_at.isoformat() if hit.updated_at else None, review_status="",
            )
        hits.append(found.model_copy(update={"url": hit.url, "source": hit.source, "sources": list(hit.sources)}))
    local = result.local
    return FindResult(
        query=query.text or None,
        count=result.total,
        results=hits,
        content_item_id=query.filters.content_item_id,
        overdue_review_filter=query.filters.overdue_review,
        review_due_within_days_filter=query.filters.review_due_within_days,
        partial_match=bool(local and local.partial_match),
        degraded=list(local.degraded) if local else [],
        next_cursor=None,
        suggestion=local.suggestion if local else None,
        threshold=query.threshold,
        sources=[SourceReport(name=s.name, status=s.status, ms=s.ms, count=s.count, detail=s.detail)
                 for s in result.sources],
    )


# --- read ---


INVALID_READ_CURSOR = "cursor does not belong to this item or match; call read again without a cursor."


def _page(text: str, offset: int, max_chars: int) -> tuple[str, int | None]:
    """``text[offset:]`` up to ``max_chars``, cut at a line or word break; the next offset, if any."""
    end = offset + max_chars
    if end >= len(text):
        return text[offset:], None
    window = text[offset:end]
    floor = max_chars * 3 // 4
    cut = window.rfind("\n", floor)
    if cut == -1:
        cut = window.rfind(" ", floor)
    end = offset + (cut + 1 if cut != -1 else max_chars)
    return text[offset:end], end


def _iso(value: date | datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _metadata(view: ReadView) -> dict[str, Any]:
    item = view.item
    return {
        "content_type": item.content_type,
        "domain": item.primary_domain,
        "subtopic": render.clean_text(item.subtopic),
        "language": item.language,
        "author": render.clean_text(item.author_name),
        "updated_at": _iso(item.updated_at),
        "published_at": _iso(item.published_at),
        "review_status": item.governance_review_status,
        "next_review_date": _iso(item.next_review_date),
        "superseded_by_item_id": item.superseded_by_id,
        "revision": view.revision.number,
        "is_draft": view.revision.pk != item.live_revision_id,
    }


def read_tool(args: ReadArgs, principal: Principal) -> ToolOutput:
    corpus = corpus_of(principal)
    if args.match_id and args.match_id.startswith("c"):
        target = f"{args.match_id}:{args.neighbours}"
        view = passage_read(
            principal=principal, chunk_id=int(args.match_id[1:]), neighbours=args.neighbours, corpus=corpus
        )
    else:
        item_id = args.item_id if args.item_id is not None else int((args.match_id or "i0")[1:])
        target = f"i{item_id}"
        try:
            view = item_read(principal=principal, item_id=item_id, corpus=corpus)
        except NotFound as exc:
            raise NotFound(exc.message, field="item_id" if args.item_id is not None else "match_id") from None
    offset = cursor_decode(args.cursor, fingerprint=target, message=INVALID_READ_CURSOR)
    if offset == 0:
        querylog_mark_followup(principal, view.item.pk)  # the query log credits the find that led here
    page, next_offset = _page(view.text, offset, args.max_chars)
    result = ReadResult(
        item_id=view.item.pk,
        match_id=args.match_id,
        scope="passage" if view.scope == "passage" else "item",
        title=render.clean_text(view.revision.title),
        url=view.item.get_absolute_url(),
        metadata=_metadata(view),
        toc=[
            TocItem(path=render.clean_text(t.path), level=t.level, char_start=t.char_start) for t in view.toc
        ],
        passage_chunk_ids=list(view.chunk_ids),
        text=render.clean_text(page),
        offset=offset,
        total_chars=len(view.text),
        next_cursor=cursor_encode(offset=next_offset, fingerprint=target) if next_offset is not None else None,
    )
    return ToolOutput(read_markdown(result, offset + len(page)), result)


def read_markdown(result: ReadResult, end: int) -> str:
    """Metadata, as much of the table of contents as fits, then the text page (always whole)."""
    meta = result.metadata
    facts = [
        f"item_id: {result.item_id}",
        f"url: {result.url}",
        f"type: {meta['content_type']}",
        f"domain: {meta['domain'] or '-'}",
        f"language: {meta['language']}",
        f"updated: {(meta['updated_at'] or '')[:10]}",
        f"review: {meta['review_status']}",
    ]
    if meta["is_draft"]:
        facts.append(f"draft (revision {meta['revision']}, not published)")
    if meta["superseded_by_item_id"]:
        facts.append(f"superseded by item {meta['superseded_by_item_id']}")
    if result.scope == "passage":
        where = (
            f"Passage around {result.match_id} ({len(result.passage_chunk_ids)} chunks), "
            f"characters {result.offset}–{end} of {result.total_chars}."
        )
    else:
        where = f"Item text, characters {result.offset}–{end} of {result.total_chars}."
    block = render.document_block(result.text, item_id=result.item_id, match_id=result.match_id)
    tail = []
    if result.next_cursor:
        target = f'match_id="{result.match_id}"' if result.match_id else f"item_id={result.item_id}"
        tail.append(f'More text: call read({target}, cursor="{result.next_cursor}").')
    head = [f"## {render.one_line(result.title)[:300]}", " · ".join(facts)]
    fixed = len("\n\n".join([*head, where, render.UNTRUSTED_NOTE, block, *tail]))
    toc_budget = render.MAX_MARKDOWN_CHARS - fixed - 200
    entries: list[str] = []
    for entry in result.toc[:TOC_MARKDOWN_ENTRIES]:
        line = f"{'  ' * (min(entry.level, 6) - 1)}- {render.one_line(entry.path.split(' > ')[-1])[:100]}"
        if sum(len(e) + 1 for e in entries) + len(line) > toc_budget:
            break
        entries.append(line)
    if entries:
        if len(entries) < len(result.toc):
            entries.append(
                f"- … {len(result.toc) - len(entries)} more sections (toc in the structured result)"
            )
        head.append("Contents:\n" + "\n".join(entries))
    markdown, _ = render.fit(
        [*head, where, render.UNTRUSTED_NOTE],
        [block],
        tail,
        omitted_note="[Text omitted to stay under 10,000 characters: call read with a smaller max_chars.]",
    )
    return markdown


# --- quality ---


def quality_tool(args: QualityArgs, principal: Principal) -> ToolOutput:
    try:
        view = item_quality(principal=principal, item_id=args.item_id, corpus=corpus_of(principal))
    except NotFound as exc:
        raise NotFound(exc.message, field="item_id") from None
    item = view.item
    result = QualityResult(
        item_id=item.pk,
        title=render.clean_text(view.title),
        url=item.get_absolute_url(),
        quality_score=round(view.quality_score, 4),
        quality_breakdown=view.quality_breakdown,
        review_status=view.review_status,
        review_cadence_days=item.review_cadence_days,
        next_review_date=_iso(item.next_review_date),
        last_reviewed_at=_iso(item.last_reviewed_at),
    )
    lines = [
        f"## Quality: {render.one_line(result.title)}",
        f"item_id: {result.item_id} · url: {result.url}",
        f"Quality score: {result.quality_score:.1f} (0 to 100, computed nightly)",
    ]
    if result.quality_breakdown:
        lines.append(
            "Breakdown:\n"
            + "\n".join(
                f"- {render.one_line(str(k))}: {render.one_line(json.dumps(v, default=str))[:200]}"
                for k, v in result.quality_breakdown.items()
            )
        )
    else:
        lines.append("Breakdown: not computed yet.")
    review = [f"status {result.review_status}"]
    if result.review_cadence_days:
        review.append(f"every {result.review_cadence_days} days")
    if result.next_review_date:
        review.append(f"next review {result.next_review_date}")
    if result.last_reviewed_at:
        review.append(f"last reviewed {result.last_reviewed_at[:10]}")
    lines.append("Review: " + ", ".join(review))
    markdown, _ = render.fit(lines, [], [], omitted_note="")
    return ToolOutput(markdown, result)


# --- presets ---


def list_presets_tool(args: ListPresetsArgs, principal: Principal) -> ToolOutput:
    presets = preset_list(owner=principal)
    result = ListPresetsResult(
        presets=[
            PresetSummary(id=p.pk, name=render.clean_text(p.name), system=p.is_system, params=dict(p.params))
            for p in presets
        ]
    )
    lines = [
        f"## Filter presets ({len(result.presets)})",
        'Apply one with find(query="…", preset="<name or id>"); filters you also pass override the preset.',
    ]
    for preset in result.presets:
        params = "; ".join(
            f"{k}={v if not isinstance(v, list) else ','.join(map(str, v))}" for k, v in preset.params.items()
        )
        kind = "system" if preset.system else "yours"
        lines.append(
            f"- id {preset.id} · {render.one_line(preset.name)} ({kind}): {render.one_line(params)[:300]}"
        )
    markdown, _ = render.fit(lines, [], [], omitted_note="")
    return ToolOutput(markdown, result)


# --- follows ---


NO_KEY_USER = (
    "this API key belongs to no user, so it has no followed searches. Ask an administrator to set the key's "
    "user (Admin → API keys), then call follow_news again."
)


def follow_news_user(principal: Principal) -> Any:
    """The active user an API key acts for; ``PermissionDenied`` saying what to do otherwise."""
    if principal.kind != "api_key":
        raise PermissionDenied(
            "follow_news needs an API key that belongs to a user: send 'Authorization: Bearer <key>'. "
            "Follow searches on the site (/follows) or through GraphQL."
        )
    user_id = api_key_user_id(api_key_id=principal.api_key_id)
    if user_id is None:
        raise PermissionDenied(NO_KEY_USER)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        raise PermissionDenied("the user this API key belongs to is inactive; ask an administrator.")
    return user


def follow_news_tool(args: FollowNewsArgs, principal: Principal) -> ToolOutput:
    """The key's user's follows; with ``follow_id``, that follow's unseen entries. Entries are what the owner
    may read now *and* what the key may read (a group-scoped key never learns more than its scope)."""
    user = follow_news_user(principal)
    views = follow_selectors.follows_list(user=user, also_readable_by=principal)
    chosen = None
    if args.follow_id is not None:
        chosen = next((v for v in views if v.id == args.follow_id), None)
        if chosen is None:
            raise NotFound(
                f"follow_id: the key's user follows no search with id {args.follow_id}. Call follow_news "
                "without follow_id to list the follows.",
                field="follow_id",
            )
    result = FollowNewsResult(
        follows=[
            FollowSummary(
                id=v.id, label=render.clean_text(v.follow.label), query=render.clean_text(v.follow.query),
                filters=dict(v.follow.filters or {}), paused=v.paused,
                paused_reason=render.clean_text(v.follow.paused_reason) or None, new_count=v.new_count,
                last_run_at=_iso(v.follow.last_run_at),
            )
            for v in views
        ],
        follow_id=chosen.id if chosen else None,
        items=[
            FollowNewsEntry(
                item_id=e.item_id, title=render.clean_text(e.title), url=e.url, kind=e.kind,  # type: ignore[arg-type]
                revision_number=e.revision_number, rank=e.rank, found_at=e.found_at.isoformat(),
            )
            for e in (chosen.unseen if chosen else ())
        ],
    )
    return ToolOutput(follow_news_markdown(result), result)


def follow_news_markdown(result: FollowNewsResult) -> str:
    if result.follow_id is None:
        lines = [f"## Followed searches ({len(result.follows)})"]
        if not result.follows:
            lines.append("The key's user follows no searches (follow them on the site, /follows, or in GraphQL).")
        for f in result.follows:
            state = f" · paused: {render.one_line(f.paused_reason or '')}" if f.paused else ""
            lines.append(f"- follow_id {f.id} · {render.one_line(f.label)} · {f.new_count} new{state}")
        lines.append("Call follow_news(follow_id=…) for a follow's new and changed items.")
        markdown, _ = render.fit(lines, [], [], omitted_note="")
        return markdown
    follow = next(f for f in result.follows if f.id == result.follow_id)
    head = [f"## What is new for “{render.one_line(follow.label)}” — {len(result.items)} item(s)"]
    if follow.paused:
        head.append(f"Paused: {render.one_line(follow.paused_reason or '')}")
    if not result.items:
        head.append("Nothing new or changed since its owner last marked it seen.")
    lines = [
        f"- [{e.kind}] {render.one_line(e.title)} · item_id: {e.item_id} · revision {e.revision_number} · "
        f"rank {e.rank} · found {e.found_at[:16]}"
        for e in result.items
    ]
    tail = ["Read one with read(item_id=…)."] if result.items else []
    markdown, _ = render.fit(head, lines, tail, omitted_note="[More items in the structured result.]")
    return markdown


# --- the fixed tool list ---

FIND_DESCRIPTION = (
    "Search the knowledge base (guides, policies, templates, case studies, Q&A, checklists) with hybrid "
    "keyword + semantic retrieval. Returns ranked results with plain-text snippets, match offsets, ids and "
    "review status. Use granularity='chunk' for passages, similar_to for related items, the review filters "
    "to find content due for review, and next_cursor to page. Follow up with read(...) for more text."
)
READ_DESCRIPTION = (
    "Read an item found by find: its text (item_id, or an item-level match_id) or the matched passage with "
    "neighbouring chunks (a chunk match_id), plus its table of contents and metadata. Long text comes in "
    "pages: pass next_cursor to continue."
)
LIST_PRESETS_DESCRIPTION = (
    "List the saved filter presets (e.g. 'Overdue for review', 'Policies') with their ids and filters. Pass "
    "a name or id as find(preset=…)."
)
FOLLOW_NEWS_DESCRIPTION = (
    "List the searches followed by the API key's user (their ids, labels and how many new items each has), or "
    "with follow_id what is new or changed for one of them since it was last marked seen: items the user may "
    "read, each marked new or changed with its revision number. Read-only; needs an API key with a user."
)
QUALITY_DESCRIPTION = (
    "Show an item's stored quality score (0-100) with its breakdown, and its review status: cadence, next "
    "review date, last review. Read-only."
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "find",
        "Search the knowledge base",
        FIND_DESCRIPTION,
        FindArgs,
        FindResult,
        find_tool,
        "Search failed",
        "Try simplifying your query.",
    ),
    ToolSpec(
        "read",
        "Read an item or passage",
        READ_DESCRIPTION,
        ReadArgs,
        ReadResult,
        read_tool,
        "Read failed",
        "Try again, or read by item_id with a smaller max_chars.",
    ),
    ToolSpec(
        "quality",
        "Quality and review status",
        QUALITY_DESCRIPTION,
        QualityArgs,
        QualityResult,
        quality_tool,
        "Quality lookup failed",
        "Try again with an item_id from a find result.",
    ),
    ToolSpec(
        "list_presets",
        "List filter presets",
        LIST_PRESETS_DESCRIPTION,
        ListPresetsArgs,
        ListPresetsResult,
        list_presets_tool,
        "Listing presets failed",
        "Try again, or call find without a preset.",
    ),
    ToolSpec(
        "follow_news",
        "What is new for followed searches",
        FOLLOW_NEWS_DESCRIPTION,
        FollowNewsArgs,
        FollowNewsResult,
        follow_news_tool,
        "Follow news failed",
        "Try again, or call follow_news without follow_id.",
    ),
)
