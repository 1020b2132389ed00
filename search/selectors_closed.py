"""Placeholders for "closed material" on the site: items a visitor may know exist but cannot read.

Only the site's ``/search`` and ``/browse`` pages call this; agent surfaces (GraphQL, MCP) never do.
An item qualifies when all of these hold:

- the principal cannot read it (``visible_to`` excludes it), it is live, not archived, not superseded;
- its ``allow_closed_placeholder`` policy is on;
- its live title matched the query by the engine's title rule (each query word as written, article
  stripped, or as the start of a title word; never by stem), every query word matching.

Only the title and coarse labels leave this module; never the body, summary or passages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.core.exceptions import EmptyResultSet
from django.db import connection

from search import query_parser
from search.models import ContentItem
from search.principal import Principal
from search.types import SearchFilters

MAX_PLACEHOLDERS = 10


@dataclass(frozen=True)
class ClosedItem:
    id: int
    title: str
    content_type: str
    primary_domain: str
    url: str


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def title_tsquery(parsed: query_parser.ParsedQuery) -> str:
    """Every term must match the title: ``(form1 | form2:*) & (…)``; prefix forms as the lexical lane builds them."""
    groups = []
    for term in parsed.terms:
        forms = sorted({_quote(f) + (":*" if term.prefix else "") for f in term.title_forms})
        if forms:
            groups.append("(" + " | ".join(forms) + ")")
    return " & ".join(groups)


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
    with connection.cursor() as cursor:
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
        )
        for pk in ids
    ]
