"""Pages of the browse surface: /, /browse, /search, /items/<slug>, and the focus choice.

Adapters only: parse the URL (search.filter_params), call search.services / search.selectors, render.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from accounts.models import UserProfile
from adapters.limits import spend
from analytics.selectors import popular_topics as popular_queries
from browse import presenters, prompts
from browse import selectors as browse_selectors
from browse import services as browse_services
from browse.markdown import render_markdown
from follows import selectors as follow_selectors
from follows import services as follow_services
from presets import selectors as preset_selectors
from search.engine import retrieve
from search.errors import InvalidCursor, NotFound, SearchError
from search.federation.federated import ALL, SourceReport, federated_search
from search.federation.peers import peers_visible
from search.federation.protocol import MAX_HITS
from search.filter_params import FILTER_PARAMS, filters_from_params, has_filters, params_from_filters
from search.principal import Principal, principal_for_user
from search.selectors import items as selectors
from search.selectors.catalogue import filter_options, popular_topics
from search.selectors.closed import closed_placeholders
from search.services.item_reads import item_mark_read
from search.text.query_parser import validate_query_text
from search.types import DEFAULT_LIMIT, SITE_THRESHOLD, RetrievalQuery, SearchFilters

logger = logging.getLogger(__name__)

PAGE_SIZE = DEFAULT_LIMIT
SORTS = (("newest", "Newest"), ("title", "Title"), ("quality_score", "Quality score"))
FRESHNESS_CHOICES = ((7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"), (365, "Last year"))
TOPICS_SHOWN = 8  # popular topics in the search dropdown and on the home page
PARTIAL_HEADER = "X-KB-Partial"  # "results": the results region; "page": more cards + the next pager


@dataclass
class Listing:
    """What the results region shows, whichever mode produced it."""

    q: str
    sort: str
    cursor: str | None
    from_bid: str
    filters: SearchFilters
    cards: list[presenters.Card] = field(default_factory=list)
    closed: list[presenters.ClosedCard] = field(default_factory=list)
    total: int = 0
    next_cursor: str | None = None
    partial_match: bool = False
    degraded: tuple[str, ...] = ()
    suggestion: str | None = None
    error: str = ""
    error_field: str = ""
    failed: bool = False
    retry_after: int = 0
    status: int = 200
    path: str = "/browse"
    follow_id: int | None = None  # the signed-in user's follow of exactly this search, if any
    # ``nearest=1``: the visitor asked for the nearest items although none is a close match (threshold 0).
    show_nearest: bool = False
    nearest: list[presenters.Card] = field(default_factory=list)  # when nothing is a close match
    # ``sources=all``: this knowledge base and every peer the visitor may see (docs/federation.md).
    everywhere: bool = False
    can_federate: bool = False  # the visitor may see at least one peer: the page offers the toggle
    sources: list[SourceReport] = field(default_factory=list)  # per source: status, time, count

    @property
    def mode(self) -> str:
        return "search" if self.q else "browse"

    def url(self, path: str = "", **changes: Any) -> str:
        """This state's URL with ``changes`` (``None`` removes a parameter); filters in canonical form."""
        params: dict[str, Any] = {"q": self.q, "from_bid": self.from_bid, "nearest": "1" if self.show_nearest else None,
                                  "sources": ALL if self.everywhere else None}
        if not self.q and self.sort != "newest":
            params["sort"] = self.sort
        params.update(params_from_filters(self.filters))
        params.update(changes)
        clean = {k: v for k, v in params.items() if v not in (None, "", [])}
        path = path or self.path
        return path + ("?" + urlencode(clean, doseq=True) if clean else "")

    @property
    def url_params_without_q(self) -> list[tuple[str, list[str]]]:
        """Filters and ``from_bid`` as (name, values): hidden inputs that keep them when a form sets ``q``."""
        params = params_from_filters(self.filters)
        if self.from_bid:
            params["from_bid"] = [self.from_bid]
        if self.everywhere:
            params["sources"] = [ALL]
        return list(params.items())

    @property
    def clear_filters_url(self) -> str:
        """Filters cleared; the query, ``from_bid`` and the choice of knowledge bases kept."""
        kept = {k: v for k, v in (("q", self.q), ("from_bid", self.from_bid),
                                  ("sources", ALL if self.everywhere else "")) if v}
        return self.path + ("?" + urlencode(kept) if kept else "")

    @property
    def clear_query_url(self) -> str:
        """Back to browse mode with the filters kept."""
        return self.url(q=None)

    @property
    def suggestion_url(self) -> str:
        """The same search with the engine's "did you mean" correction, filters kept."""
        return self.url(q=self.suggestion, cursor=None) if self.suggestion else ""

    @property
    def nearest_url(self) -> str:
        """The same search showing every candidate, the ones below the confidence floor included."""
        return self.url(nearest="1", cursor=None)

    @property
    def close_matches_url(self) -> str:
        return self.url(nearest=None, cursor=None)

    @property
    def no_close_match(self) -> bool:
        """A search ran and nothing reached the site's confidence floor (``SITE_THRESHOLD``)."""
        return bool(self.q) and not self.show_nearest and self.total == 0 and not self.closed

    @property
    def federated(self) -> bool:
        """The results come from several knowledge bases (a search, with the toggle on, and a peer to ask)."""
        return bool(self.q) and self.everywhere and self.can_federate

    @property
    def unanswered_sources(self) -> list[SourceReport]:
        return [s for s in self.sources if s.status != "ok"]

    @property
    def next_url(self) -> str:
        return self.url(cursor=self.next_cursor) if self.next_cursor else ""

    @property
    def followable(self) -> bool:
        """A search or a filtered listing that ran without a refusal can be followed (this knowledge base's
        results only: a search across knowledge bases is not followed)."""
        return bool(self.q or has_filters(self.filters)) and not self.error and not self.failed and not self.federated

    @property
    def filter_params(self) -> list[tuple[str, list[str]]]:
        """The filters as (name, values): the hidden inputs of the "Follow this search" form."""
        return list(params_from_filters(self.filters).items())


def _listing_state(request: HttpRequest) -> Listing:
    """The URL's state. A query past ``MAX_QUERY_CHARS`` or a bad filter is a 400 notice, as on every surface."""
    raw_q = request.GET.get("q", "")
    sort = request.GET.get("sort", "newest")
    if sort not in dict(SORTS):
        sort = "newest"
    listing = Listing(
        q="", sort=sort, cursor=request.GET.get("cursor") or None,
        from_bid=request.GET.get("from_bid", "").strip()[:120], filters=SearchFilters(),
        show_nearest=request.GET.get("nearest") == "1",
        everywhere=request.GET.get("sources") == ALL,
    )
    try:
        listing.q = validate_query_text(raw_q, field="q")
    except SearchError as exc:
        listing.q = " ".join(raw_q.split())  # kept whole in the search box, so it can be shortened there
        listing.error, listing.error_field, listing.status = exc.message, exc.field or "", 400
    try:
        listing.filters = filters_from_params(request.GET)
    except SearchError as exc:
        if not listing.error:
            listing.error, listing.error_field, listing.status = exc.message, exc.field or "", 400
    return listing


def _fill(listing: Listing, request: HttpRequest, principal: Principal, *, closed: bool) -> None:
    """Run the search (query set) or the listing (no query) for ``listing``; errors become notices."""
    if listing.error:
        return
    try:
        if listing.federated:
            limit = spend(request, "search")
            if limit.limited:
                listing.retry_after, listing.status = limit.retry_after, 429
                return
            _fill_federated(listing, principal, closed=closed)
        elif listing.q:
            limit = spend(request, "search")
            if limit.limited:
                listing.retry_after, listing.status = limit.retry_after, 429
                return
            result = retrieve(query=RetrievalQuery(
                text=listing.q, principal=principal, filters=listing.filters, limit=PAGE_SIZE,
                cursor=listing.cursor, surface="browse",
                threshold=0.0 if listing.show_nearest else SITE_THRESHOLD,
            ))
            listing.cards = presenters.cards_from_hits(result.hits)
            listing.nearest = presenters.cards_from_hits(result.nearest)
            listing.total, listing.next_cursor = result.total, result.next_cursor
            listing.partial_match, listing.degraded = result.partial_match, result.degraded
            listing.suggestion = result.suggestion
            if closed and not listing.cursor:
                listing.closed = presenters.closed_cards(
                    closed_placeholders(principal=principal, text=listing.q, filters=listing.filters)
                )
        else:
            page = selectors.items_list(
                principal=principal, filters=listing.filters, sort=listing.sort,  # type: ignore[arg-type]
                cursor=listing.cursor, limit=PAGE_SIZE,
            )
            listing.cards = presenters.cards_from_items(page.items, principal)
            listing.total, listing.next_cursor = page.total, page.next_cursor
    except InvalidCursor as exc:
        listing.error, listing.error_field, listing.status = exc.message, "cursor", 400
    except SearchError as exc:
        listing.error, listing.error_field, listing.status = exc.message, exc.field or "", 400
    except DatabaseError:
        logger.exception("browse search failed")
        listing.failed, listing.status = True, 503


def _fill_federated(listing: Listing, principal: Principal, *, closed: bool) -> None:
    """This knowledge base and the peers the visitor may see, merged (``federated.merge``): one page, no cursor
    (the first ``MAX_HITS``), every source's status shown above the cards."""
    result = federated_search(RetrievalQuery(
        text=listing.q, principal=principal, filters=listing.filters, limit=MAX_HITS, surface="browse",
        threshold=0.0 if listing.show_nearest else SITE_THRESHOLD,
    ), sources=ALL)
    listing.cards = presenters.cards_from_federated(result.hits)
    listing.total, listing.sources = result.total, list(result.sources)
    if result.local is not None:
        listing.nearest = presenters.cards_from_hits(result.local.nearest)
        listing.partial_match, listing.degraded = result.local.partial_match, result.local.degraded
        listing.suggestion = result.local.suggestion
    if closed:
        listing.closed = presenters.closed_cards(
            closed_placeholders(principal=principal, text=listing.q, filters=listing.filters)
        )


def _find_follow(listing: Listing, request: HttpRequest) -> None:
    """Whether the signed-in user already follows this exact search (one indexed lookup)."""
    if request.user.is_authenticated and listing.followable:
        params = follow_services.follow_params(params_from_filters(listing.filters))
        listing.follow_id = follow_selectors.follow_find(user_id=request.user.pk, query=listing.q, filters=params)


def _show_prompt_cards(listing: Listing) -> bool:
    return (
        not listing.q and not has_filters(listing.filters) and not listing.filters.unread_only
        and not listing.cursor and not listing.error and listing.total > 0
    )


def _with_retry_after(response: HttpResponse, listing: Listing, *, partial: str = "") -> HttpResponse:
    if listing.retry_after:
        response["Retry-After"] = str(listing.retry_after)
    if partial:
        response["X-KB-Rendered"] = partial  # tells the page's script this is our fragment, not an error page
    response["Vary"] = PARTIAL_HEADER
    return response


def _popular_topics() -> list[str]:
    """Real top queries (search analytics, cached) first, topped up with the most used keywords."""
    queries = popular_queries(limit=TOPICS_SHOWN)
    seen = {q.casefold() for q in queries}
    keywords = [k for k in popular_topics(limit=TOPICS_SHOWN) if k.casefold() not in seen]
    return (queries + keywords)[:TOPICS_SHOWN]


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "browse/home.html", {"topics": _popular_topics()})


@require_GET
def browse(request: HttpRequest) -> HttpResponse:
    """/browse: browse mode (no ``q``) or search mode; with ``X-KB-Partial`` only the results region."""
    principal = principal_for_user(request.user)
    listing = _listing_state(request)
    listing.can_federate = bool(peers_visible(principal))
    _fill(listing, request, principal, closed=True)
    _find_follow(listing, request)
    user_id = request.user.pk if request.user.is_authenticated else None
    focus = browse_selectors.primary_focus(user_id=user_id)
    context: dict[str, Any] = {
        "listing": listing,
        "prompt_cards": prompts.prompt_cards(primary_focus=focus) if _show_prompt_cards(listing) else [],
        "offer_focus_choice": bool(user_id) and not focus,
        "focus_choices": UserProfile.Focus.choices,
    }
    partial = request.headers.get(PARTIAL_HEADER, "")
    if partial == "page":
        return _with_retry_after(render(request, "browse/_page.html", context, status=listing.status), listing,
                                 partial=partial)
    if partial == "results":
        return _with_retry_after(render(request, "browse/_results.html", context, status=listing.status), listing,
                                 partial=partial)
    context.update({
        "options": filter_options(principal=principal),
        "topics": _popular_topics(),
        "sorts": SORTS,
        "freshness_choices": FRESHNESS_CHOICES,
        "filter_params": FILTER_PARAMS,
        "active_filter_count": len(params_from_filters(listing.filters)),
        "recent_searches": preset_selectors.recent_searches_list(user_id=user_id) if user_id else [],
        "signed_in": bool(user_id),
    })
    return _with_retry_after(render(request, "browse/browse.html", context, status=listing.status), listing)


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    """/search?q=: the server-rendered results page; works without JavaScript, paged by cursor."""
    principal = principal_for_user(request.user)
    listing = _listing_state(request)
    listing.path = "/search"
    listing.can_federate = bool(peers_visible(principal))
    if listing.q:
        _fill(listing, request, principal, closed=True)
        _find_follow(listing, request)
    context = {
        "listing": listing,
        "options": filter_options(principal=principal),
        "first_page_url": listing.url("/search", cursor=None),
    }
    return _with_retry_after(render(request, "browse/search.html", context, status=listing.status), listing)


@require_GET
def item_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """/items/<slug>: the body as sanitized HTML, metadata sidebar; marks the item read when signed in."""
    principal = principal_for_user(request.user)
    try:
        item = selectors.item_get(principal=principal, slug=slug)
    except NotFound:
        return render(request, "browse/item_missing.html", {"slug": slug}, status=404)
    revision = selectors.item_revision(item, principal)
    newer = None
    if item.superseded_by_id:
        try:
            newer_item = selectors.item_get(principal=principal, item_id=item.superseded_by_id)
            newer_revision = selectors.item_revision(newer_item, principal)
            newer = {"url": newer_item.get_absolute_url(), "title": newer_revision.title if newer_revision else ""}
        except NotFound:
            newer = {"url": "", "title": ""}
    if request.user.is_authenticated:
        item_mark_read(user_id=request.user.pk, item_id=item.pk)
    quality, tier = presenters.quality_badge(item.quality_score)
    breakdown = item.quality_breakdown if isinstance(item.quality_breakdown, dict) else {}
    context = {
        "item": item,
        "revision": revision,
        "body_html": render_markdown(revision.body if revision else ""),
        "newer": newer,
        "content_type_label": presenters.content_type_label(item.content_type),
        "domain_label": presenters.label(item.primary_domain),
        "review_label": presenters.review_label(item.governance_review_status),
        "quality": quality,
        "quality_tier": tier,
        "quality_breakdown": [
            (presenters.label(str(k)), round(v, 1) if isinstance(v, float) else v) for k, v in breakdown.items()
        ],
        "verified_by": (item.verified_by.get_full_name() or item.verified_by.get_username())
        if item.verified_by else "",
        "is_draft_view": revision is not None and revision.pk != item.live_revision_id,
    }
    return render(request, "browse/item.html", context)


@require_POST
def focus_set(request: HttpRequest) -> HttpResponse:
    """One-click choice of primary focus (cold-start cards); a form POST, works without JavaScript."""
    target = request.POST.get("next") or "/browse"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/browse"
    if not request.user.is_authenticated:
        return HttpResponseRedirect("/admin/login/?" + urlencode({"next": target}))
    try:
        browse_services.profile_set_focus(user_id=request.user.pk, focus=request.POST.get("focus", ""))
    except SearchError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    return HttpResponseRedirect(target)
