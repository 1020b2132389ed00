"""Placeholders for "closed material" on the site: items a visitor may know exist but cannot read.

The site's ``/search`` and ``/browse`` pages call this, and GraphQL ``search`` when the caller asks with
``includeClosed`` (the frontend that renders search through GraphQL); MCP, the agents' surface, never does.
An item qualifies when all of these hold:

- the principal cannot read it (``visible_to`` excludes it), it is live, not archived, not superseded;
- its ``allow_closed_placeholder`` policy is on;
- its live title matched the query by the engine's title rule (each query word as written, article
  stripped, or as the start of a title word; never by stem), every query word matching.

Only the title and coarse labels leave this module; never the body, summary or passages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from django.core.exceptions import EmptyResultSet

from search import replicas
from search.engine import passages
from search.models import ContentItem
from search.principal import Principal
from search.text import query_parser
from search.text.analysis import tsquery_any
from search.types import Hit, SearchFilters

MAX_PLACEHOLDERS = 10


@dataclass(frozen=True)
class ClosedItem:
    id: int
    title: str
    content_type: str
    primary_domain: str
    url: str
    updated_at: datetime


def title_tsquery(parsed: query_parser.ParsedQuery) -> str:
    """Every term must match the title: ``(form1 | form2:*) & (…)``; prefix forms as the lexical lane builds them."""
    groups = (tsquery_any(term.title_forms, prefix=term.prefix) for term in parsed.terms if term.title_forms)
    return " & ".join(f"({group})" for group in groups)


@replicas.replica_reads
def closed_placeholders(
    *, principal: Principal, text: str, filters: SearchFilters | None = None, limit: int = MAX_PLACEHOLDERS
) -> list[ClosedItem]:
    """Unreadable, placeholder-allowed live items whose title matched ``text`` (see module docstring)."""
    if principal.all_content:
        return []
    parsed = query_parser.parse(text)
    tsquery = title_tsquery(parsed)
    if not tsquery:
        return []
    filters = filters or SearchFilters()
    readable = ContentItem.objects.visible_to(principal).values("pk")
    # unread_only concerns items one has read, which a closed item never is: ignore it here.
    candidates = (
        ContentItem.objects.not_archived().live()
        .filter(allow_closed_placeholder=True, superseded_by__isnull=True)
        .exclude(pk__in=readable)
        .apply_filters(replace(filters, unread_only=False))
        .order_by()
        .values("id")
    )
    try:
        items_sql, items_params = candidates.query.sql_with_params()
    except EmptyResultSet:  # the filters can match nothing (e.g. an id past the column's range)
        return []
    with replicas.read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            SELECT DISTINCT i.id, i.updated_at FROM search_chunk c
            JOIN search_contentitem i ON i.id = c.item_id AND c.revision_id = i.live_revision_id
            WHERE c.in_live AND c.lex_title @@ %s::tsquery AND c.item_id IN ({items_sql})
            ORDER BY i.updated_at DESC, i.id LIMIT %s
            """,
            [tsquery, *items_params, max(1, min(limit, MAX_PLACEHOLDERS))],
        )
        ids = [row[0] for row in cursor.fetchall()]
    items = {i.pk: i for i in ContentItem.objects.filter(pk__in=ids).select_related("live_revision")}
    return [
        ClosedItem(
            id=items[pk].pk,
            title=items[pk].live_revision.title if items[pk].live_revision else "",
            content_type=items[pk].content_type,
            primary_domain=items[pk].primary_domain,
            url=items[pk].get_absolute_url(),
            updated_at=items[pk].updated_at,
        )
        for pk in ids
    ]


def closed_hits(*, principal: Principal, text: str, filters: SearchFilters | None = None) -> tuple[Hit, ...]:
    """The placeholders of ``closed_placeholders`` as hits marked ``closed``: the title (its matches marked)
    and coarse labels only; no passage, summary, keywords, slug or score."""
    parsed = query_parser.parse(text)
    return tuple(
        Hit(
            item_id=item.id, external_id="", slug="", title=item.title, url=item.url,
            content_type=item.content_type, primary_domain=item.primary_domain, language="",
            updated_at=item.updated_at, review_status="", score=0.0, lanes=(), lane_ranks={}, chunk_id=None,
            toc_path="", passage="", passage_spans=(), title_spans=tuple(passages.title_spans(item.title, parsed)),
            closed=True,
        )
        for item in closed_placeholders(principal=principal, text=text, filters=filters)
    )
