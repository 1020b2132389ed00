"""Root resolvers: turn GraphQL arguments into engine values, call a service or selector, hand back.

No retrieval, ranking or access logic lives here: ``search.engine.retrieve`` and
``search.selectors`` decide what a principal finds and reads.
"""

from __future__ import annotations

from typing import Any

from graphene.utils.str_converters import to_camel_case
from graphql import GraphQLError

from graphql_api.context import get_principal, get_user
from graphql_api.dataloaders import ContentItemByIdLoader
from graphql_api.errors import from_search_error, graphql_error
from graphql_api.types import ResultNode, enum_value
from search.engine import corpus_for, retrieve
from search.errors import InvalidQuery, NotFound, SearchError
from search.federation.federated import ALL, FederatedResult, federated_search, sources_parse
from search.filters import LIST_FILTERS, InvalidFilter
from search.selectors.closed import closed_hits
from search.selectors.items import ItemPage, item_get, items_list
from search.text.query_parser import validate_query_text
from search.types import MAX_LIMIT, SITE_THRESHOLD, Corpus, RetrievalQuery, SearchFilters

_FILTERS = (
    *LIST_FILTERS,
    "language",
    "include_qa",
    "date_from",
    "date_to",
    "freshness_days",
    "overdue_review",
    "review_due_within_days",
    "include_superseded",
    "unread_only",
    "changed_since",
)


def filters_from_input(data: Any) -> SearchFilters:
    """``SearchFilterInput`` (or a ``NotePathsFilterInput``) → the engine's ``SearchFilters``.

    ``SearchFilters`` strips, de-duplicates and bounds the values; its refusal is passed on under the input's
    path (``filter.contentType``), in the words every surface uses.
    """
    if not data:
        return SearchFilters()
    values = {name: data.get(name) for name in _FILTERS if data.get(name) is not None}
    try:
        return SearchFilters(**values)
    except InvalidFilter as exc:
        raise exc.at(f"filter.{to_camel_case(exc.field or '')}".rstrip(".")) from None


def _corpus(value: Any) -> Corpus:
    return "latest" if enum_value(value) == "latest" else "live"


def _raise(exc: SearchError) -> GraphQLError:
    return from_search_error(exc)


def resolve_search(info: Any, data: Any) -> ResultNode:
    """The ``search`` field: one call to ``retrieve``. Its rate-limit cost was paid before execution."""
    principal = get_principal(info.context)
    corpus = _corpus(data.get("corpus"))
    threshold = data.get("threshold")
    try:
        query = RetrievalQuery(
            text=validate_query_text(data.get("query") or "", field="query"),
            principal=principal,
            corpus=corpus,
            filters=filters_from_input(data.get("filter")),
            granularity=enum_value(data.get("granularity")) or "item",
            mode=enum_value(data.get("mode")) or "hybrid",
            limit=data.get("limit") if data.get("limit") is not None else 20,
            cursor=data.get("cursor") or None,
            threshold=SITE_THRESHOLD if threshold is None else threshold,
            with_facets=_selects(info, "facets"),
            surface="graphql",
        )
        result = retrieve(query=query)
        closed = (
            closed_hits(principal=principal, text=query.text, filters=query.filters)
            if data.get("include_closed") and not query.cursor
            else ()
        )
    except SearchError as exc:
        raise _raise(exc) from None
    return ResultNode(result, corpus_for(principal, corpus), closed)


def resolve_federated_search(info: Any, data: Any) -> FederatedResult:
    """The ``federatedSearch`` field: one call to ``federated_search`` (its rate-limit cost paid before)."""
    threshold = data.get("threshold")
    try:
        sources = data.get("sources")
        query = RetrievalQuery(
            text=validate_query_text(data.get("query") or "", field="query"),
            principal=get_principal(info.context),
            filters=filters_from_input(data.get("filter")),
            limit=data.get("limit") if data.get("limit") is not None else 20,
            threshold=SITE_THRESHOLD if threshold is None else threshold,
            surface="graphql",
        )
        return federated_search(query, sources=sources_parse(ALL if sources == [ALL] else sources))
    except SearchError as exc:
        raise _raise(exc) from None


def resolve_note_paths(info: Any, data: Any) -> list[str]:
    """Paths (URLs) of matching items: the search's order with ``search``, newest first without."""
    principal = get_principal(info.context)
    data = data or {}
    corpus = _corpus(data.get("corpus"))
    first = data.get("first") if data.get("first") is not None else MAX_LIMIT
    try:
        if not 1 <= first <= MAX_LIMIT:
            raise InvalidQuery(f"filter.first must be between 1 and {MAX_LIMIT}.", field="filter.first")
        filters = filters_from_input(data)
        text = validate_query_text(data.get("search") or "", field="filter.search")
        if text:
            result = retrieve(
                query=RetrievalQuery(
                    text=text,
                    principal=principal,
                    corpus=corpus,
                    filters=filters,
                    limit=first,
                    surface="graphql",
                )
            )
            return [hit.url for hit in result.hits if not hit.closed]
        page = items_list(principal=principal, filters=filters, limit=first, corpus=corpus)
    except SearchError as exc:
        raise _raise(exc) from None
    return [item.get_absolute_url() for item in page.items]


def resolve_item(info: Any, *, id: str | None = None, slug: str | None = None, corpus: Any = "live") -> Any:
    """One readable item by id or slug; null when it does not exist or may not be read."""
    if (id is None) == (slug is None):
        raise graphql_error("Pass exactly one of id or slug.", code="INVALID_QUERY", field="id")
    principal = get_principal(info.context)
    corpus = _corpus(corpus)
    try:
        item_id = int(id) if id is not None else None
    except ValueError:
        raise graphql_error(f"id must be a number, got {id!r}.", code="INVALID_QUERY", field="id") from None
    try:
        item = item_get(principal=principal, item_id=item_id, slug=slug, corpus=corpus)
    except NotFound:
        return None
    except SearchError as exc:
        raise _raise(exc) from None
    ContentItemByIdLoader(info.context, corpus).adopt([item])
    return item


def resolve_items(
    info: Any,
    *,
    filter: Any = None,
    sort: Any = "newest",
    first: int = 20,
    after: str | None = None,
    corpus: Any = "live",
) -> ItemPage:
    """Browse mode: readable items by filters, sorted, ``first`` per page from cursor ``after``."""
    principal = get_principal(info.context)
    corpus = _corpus(corpus)
    try:
        page = items_list(
            principal=principal,
            filters=filters_from_input(filter),
            sort=enum_value(sort) or "newest",
            cursor=after or None,
            limit=first if first is not None else 20,  # an explicit null means the default
            corpus=corpus,
        )
    except SearchError as exc:
        raise _raise(exc) from None
    ContentItemByIdLoader(info.context, corpus).adopt(page.items)
    return page


def _selects(info: Any, name: str) -> bool:
    """Whether the current field's selection asks for ``name`` (directly or through fragments)."""
    from graphql.language import FieldNode, FragmentSpreadNode, InlineFragmentNode

    def walk(selection_set: Any) -> bool:
        if selection_set is None:
            return False
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode) and selection.name.value == name:
                return True
            if isinstance(selection, InlineFragmentNode) and walk(selection.selection_set):
                return True
            if isinstance(selection, FragmentSpreadNode):
                fragment = info.fragments.get(selection.name.value)
                if fragment is not None and walk(fragment.selection_set):
                    return True
        return False

    return any(walk(node.selection_set) for node in info.field_nodes)


def resolve_presets(info: Any) -> list[Any]:
    """System presets, then the signed-in caller's own (anonymous callers get the system ones)."""
    from presets import services as preset_services

    return preset_services.preset_list(owner=get_user(info.context))


def resolve_recent_searches(info: Any) -> list[str]:
    """The signed-in caller's recent queries, newest first; empty for anonymous callers."""
    from presets import selectors as preset_selectors

    user = get_user(info.context)
    return preset_selectors.recent_searches_list(user_id=user.pk) if user is not None else []


def resolve_follow_digest(info: Any) -> Any:
    """Whether the server sends e-mail digests and whether the caller asked for them."""
    from follows import selectors as follow_selectors

    user = get_user(info.context)
    return follow_selectors.digest_state(user_id=user.pk if user is not None else None)


def resolve_follows(info: Any) -> list[Any]:
    """The signed-in caller's follows, newest first; empty for anonymous callers."""
    from follows import selectors as follow_selectors

    return follow_selectors.follows_list(user=get_user(info.context))
