"""One engine, every surface: the same principal, corpus and query give the same item ids in the same order.

Surfaces compared (each through its real entry point):

* GraphQL ``search`` (``POST /graphql``),
* ``POST /api/search`` (browse JSON API),
* MCP ``find`` over streamable HTTP (a uvicorn process on the test database),
* ``manage.py kb_search --json``,

and, for a bad filter or an overlong query, the HTML pages ``/browse`` and ``/search`` too: every surface
refuses it in the same words.

``kb_search`` always runs as an operator (staff, all content), so it is compared with a staff session on
the web surfaces (live corpus) and with staff GraphQL and an all-content API key on MCP (latest corpus).
Anonymous web surfaces are compared with anonymous MCP. Grow this file as surfaces land.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from io import StringIO
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from accounts.api_keys import api_key_create
from search.services import content
from search.types import SITE_THRESHOLD
from tests.factories import build, make_item
from tests.mcp_api.client import asgi_server, mcp_call, mcp_calls, mcp_find_ids

LIMIT = 10
QUERIES = (
    "tender pricing",
    "harbour safety checklist",
    "personal data protection",
    "onboarding new staff",
    "invoice deadline",
    "zebra crossing",  # only in drafts and a staff note: empty for anonymous callers
)

GRAPHQL_EXPLAINED = """query($q: String!, $limit: Int, $threshold: Float, $corpus: Corpus) {
  search(input: {query: $q, limit: $limit, threshold: $threshold, corpus: $corpus}) {
    partialMatch hits { itemId missingWords } } }"""

GRAPHQL_SEARCH = """query($q: String!, $limit: Int, $threshold: Float, $corpus: Corpus) {
  search(input: {query: $q, limit: $limit, threshold: $threshold, corpus: $corpus}) { hits { itemId } } }"""

# (title, body, extra fields); bodies differ word for word so no two items tie on the vector lane.
_PUBLIC = [
    ("Tender pricing guide", "How to price a tender: day rates, margins and the pricing model for bids.", {}),
    (
        "Pricing approval policy",
        "Every tender price above budget needs approval from the finance lead.",
        {"content_type": "policy"},
    ),
    (
        "Tender pricing checklist",
        "Checklist before pricing goes out: rates checked, discounts agreed, tender signed.",
        {"content_type": "checklist"},
    ),
    (
        "Discount rules for bids",
        "When a discount lowers tender pricing, record the reason and the approver.",
        {},
    ),
    (
        "Harbour safety checklist",
        "Harbour visitors wear vests; the safety checklist lists every harbour rule.",
        {"content_type": "checklist", "primary_domain": "safety"},
    ),
    (
        "Harbour crane operations",
        "Crane operators follow harbour safety signals and radio checks.",
        {"primary_domain": "safety"},
    ),
    (
        "Dock fire drill",
        "A fire drill at the dock every quarter; the safety officer keeps the checklist.",
        {"primary_domain": "safety"},
    ),
    (
        "Personal data protection basics",
        "Personal data is protected by consent, minimisation and retention limits.",
        {"primary_domain": "compliance"},
    ),
    (
        "Data breach response",
        "A data breach is reported to the protection officer within 72 hours.",
        {"primary_domain": "compliance"},
    ),
    (
        "Subject access requests",
        "People may ask for their personal data; answer within one month.",
        {"primary_domain": "compliance"},
    ),
    (
        "Onboarding new staff",
        "Onboarding for new staff: accounts, badge, buddy and first-week plan.",
        {"primary_domain": "people"},
    ),
    (
        "First week plan",
        "The first week of a new starter: meetings, reading list and a staff lunch.",
        {"primary_domain": "people"},
    ),
    (
        "Leaver checklist",
        "When staff leave: return the badge, close accounts, hand over files.",
        {"primary_domain": "people", "content_type": "checklist"},
    ),
    (
        "Invoice deadlines",
        "Send each invoice within five days; the deadline for disputes is thirty days.",
        {"primary_domain": "finance"},
    ),
    (
        "Late payment reminders",
        "Remind the client when an invoice is late, then escalate after two weeks.",
        {"primary_domain": "finance"},
    ),
    (
        "Expense claims",
        "Claim expenses monthly with receipts attached to the claim form.",
        {"primary_domain": "finance"},
    ),
    (
        "Bid writing style",
        "Write bids in plain language, short sentences and active verbs.",
        {"primary_domain": "bid_writing"},
    ),
    (
        "Case study: port authority",
        "How we won the port authority tender with a clear pricing story.",
        {"content_type": "case_study"},
    ),
    (
        "Case study: city council",
        "A council contract won on quality; pricing was second.",
        {"content_type": "case_study"},
    ),
    (
        "Security awareness",
        "Lock screens, report phishing and use the password manager.",
        {"primary_domain": "security"},
    ),
    (
        "Travel policy",
        "Book travel through the portal; economy class for trips under six hours.",
        {"content_type": "policy"},
    ),
    ("Meeting room booking", "Book rooms in the calendar and free them when plans change.", {}),
    (
        "Q&A: tender deadlines",
        "Q: when is a tender late? A: after the portal closes, no exceptions.",
        {"content_type": "qa"},
    ),
]


@pytest.fixture
def contract_corpus(transactional_db: Any) -> dict[str, Any]:
    """~30 items: public ones plus drafts, restricted, superseded and a published item with a newer draft."""
    items: dict[str, Any] = {}
    for title, body, extra in _PUBLIC:
        items[title] = make_item(title=title, body=body, **extra)
    items["draft"] = make_item(
        title="Zebra crossing draft", body="Draft: zebra crossing near the harbour gate.", publish=False
    )
    items["draft2"] = make_item(
        title="Tender pricing draft", body="Draft tender pricing for next year's bids.", publish=False
    )
    items["staff"] = make_item(
        title="Staff pricing margins",
        body="Confidential tender pricing margins; zebra code.",
        visibility="staff",
    )
    items["signed_in"] = make_item(
        title="Member onboarding notes",
        body="Onboarding notes for new staff members.",
        visibility="signed_in",
    )
    items["group"] = make_item(
        title="Bid team pricing notes",
        body="Tender pricing notes for the bid team.",
        visibility="groups",
        groups=["bid-team"],
    )
    old = make_item(
        title="Old harbour safety checklist",
        body="Outdated harbour safety checklist from 2019.",
        primary_domain="safety",
    )
    content.item_mark_superseded(item=old, by=items["Harbour safety checklist"])
    with_draft = items["Invoice deadlines"]
    content.item_save_revision(
        item=with_draft,
        title="Invoice deadlines",
        body="Send each invoice within three days; zebra deadline for disputes.",
        publish=False,
    )
    build()
    return items


@pytest.fixture(scope="module")
def mcp_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """The product's ASGI app (MCP included) under uvicorn, on the test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    with asgi_server(db_name=name) as base_url:
        yield base_url


@pytest.fixture
def staff_client(transactional_db: Any) -> Client:
    user = get_user_model().objects.create_user("operator", "op@example.com", "pw-operator-1", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


def graphql_ids(client: Client, query: str, *, corpus: str = "LIVE") -> list[int]:
    variables = {"q": query, "limit": LIMIT, "threshold": SITE_THRESHOLD, "corpus": corpus}
    response = client.post(
        "/graphql",
        data=json.dumps({"query": GRAPHQL_SEARCH, "variables": variables}),
        content_type="application/json",
    )
    body = response.json()
    assert response.status_code == 200 and "errors" not in body, body
    return [int(hit["itemId"]) for hit in body["data"]["search"]["hits"]]


def rest_ids(client: Client, query: str) -> list[int]:
    response = client.post(
        "/api/search", data=json.dumps({"query": query, "limit": LIMIT}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return [hit["id"] for hit in response.json()["results"]]


def kb_search_ids(query: str, *, corpus: str) -> list[int]:
    out = StringIO()
    call_command(
        "kb_search",
        query,
        "--json",
        "--corpus",
        corpus,
        "--limit",
        str(LIMIT),
        "--threshold",
        str(SITE_THRESHOLD),
        "--exclude-superseded",
        stdout=out,
    )
    return [hit["item_id"] for hit in json.loads(out.getvalue())["results"]]


@pytest.mark.django_db(transaction=True)
def test_anonymous_graphql_rest_and_mcp_agree(contract_corpus: dict[str, Any], mcp_url: str) -> None:
    # given an anonymous caller on every surface
    client = Client()
    hidden = {contract_corpus[k].pk for k in ("draft", "draft2", "staff", "signed_in", "group")}
    non_empty = 0
    for query in QUERIES:
        # when the same query runs through each surface
        graphql = graphql_ids(client, query)
        rest = rest_ids(client, query)
        mcp = mcp_find_ids(mcp_url, query, limit=LIMIT, threshold=SITE_THRESHOLD)
        # then the ids and their order are identical, and nothing restricted shows
        assert graphql == rest == mcp, query
        assert not hidden & set(graphql), query
        non_empty += bool(graphql)
    assert non_empty >= len(QUERIES) - 1
    assert graphql_ids(client, "zebra crossing") == []


@pytest.mark.django_db(transaction=True)
def test_staff_graphql_rest_and_kb_search_agree_on_live(
    contract_corpus: dict[str, Any], staff_client: Client
) -> None:
    # given a staff session and the operator CLI, both on the live corpus
    anonymous = Client()
    differs = False
    for query in QUERIES:
        # when the same query runs through each surface
        graphql = graphql_ids(staff_client, query, corpus="LIVE")
        rest = rest_ids(staff_client, query)
        cli = kb_search_ids(query, corpus="live")
        # then the ids and order are identical
        assert graphql == rest == cli, query
        assert contract_corpus["draft"].pk not in graphql
        differs = differs or graphql != graphql_ids(anonymous, query)
    # and staff really see more than anonymous callers (the principal reached the engine)
    assert differs


@pytest.mark.django_db(transaction=True)
def test_latest_corpus_graphql_mcp_key_and_kb_search_agree(
    contract_corpus: dict[str, Any], staff_client: Client, mcp_url: str
) -> None:
    # given staff on GraphQL, an all-content API key on MCP and the CLI, all reading drafts
    key = api_key_create(name="contract agent").raw_key
    for query in QUERIES:
        # when the same query runs through each surface
        graphql = graphql_ids(staff_client, query, corpus="LATEST")
        cli = kb_search_ids(query, corpus="latest")
        mcp = mcp_find_ids(mcp_url, query, limit=LIMIT, threshold=SITE_THRESHOLD, api_key=key)
        # then the ids and order are identical
        assert graphql == cli == mcp, query
    # and drafts are part of that corpus
    assert contract_corpus["draft"].pk in graphql_ids(staff_client, "zebra crossing", corpus="LATEST")


# Queries whose hits lack words: a complete first hit (not partial), and no complete hit at all (partial).
EXPLAINED_QUERIES = ("tender pricing approval", "harbour quokka", "invoice deadline")
Explained = tuple[list[tuple[int, tuple[str, ...]]], bool]
# The full ranking: these compare the words hits lack, and partial matches sit below the confidence floors.
EXPLAINED_THRESHOLD = 0.0


def _explained(pairs: list[tuple[Any, list[str]]], partial: bool) -> Explained:
    return [(int(i), tuple(m)) for i, m in pairs], bool(partial)


def graphql_explained(client: Client, query: str, *, corpus: str) -> Explained:
    variables = {"q": query, "limit": LIMIT, "threshold": EXPLAINED_THRESHOLD, "corpus": corpus}
    body = client.post(
        "/graphql", data=json.dumps({"query": GRAPHQL_EXPLAINED, "variables": variables}),
        content_type="application/json",
    ).json()["data"]["search"]
    return _explained([(h["itemId"], h["missingWords"]) for h in body["hits"]], body["partialMatch"])


def rest_explained(client: Client, query: str) -> Explained:
    data = client.post(
        "/api/search", data=json.dumps({"query": query, "limit": LIMIT, "threshold": EXPLAINED_THRESHOLD}),
        content_type="application/json",
    ).json()
    return _explained([(h["id"], h["missing_words"]) for h in data["results"]], data["partial_match"])


def kb_search_explained(query: str, *, corpus: str) -> Explained:
    out = StringIO()
    call_command("kb_search", query, "--json", "--corpus", corpus, "--limit", str(LIMIT),
                 "--threshold", str(EXPLAINED_THRESHOLD), "--exclude-superseded", stdout=out)
    data = json.loads(out.getvalue())
    return _explained([(h["item_id"], h["missing_words"]) for h in data["results"]], data["partial_match"])


@pytest.mark.django_db(transaction=True)
def test_missing_words_and_partial_match_agree_on_every_surface(
    contract_corpus: dict[str, Any], staff_client: Client, mcp_url: str
) -> None:
    key = api_key_create(name="contract agent").raw_key
    partials = set()
    for query in EXPLAINED_QUERIES:
        # when the same query runs through each surface: staff web and CLI on the live corpus, then
        # staff GraphQL, CLI and an all-content agent key on the latest one
        live = graphql_explained(staff_client, query, corpus="LIVE")
        assert live == rest_explained(staff_client, query) == kb_search_explained(query, corpus="live"), query
        latest = graphql_explained(staff_client, query, corpus="LATEST")
        found = mcp_call(mcp_url, "find", {"query": query, "limit": LIMIT, "threshold": EXPLAINED_THRESHOLD},
                         api_key=key)
        assert found.structuredContent is not None
        mcp = _explained(
            [(h["item_id"], h["missing_words"]) for h in found.structuredContent["results"]],
            found.structuredContent["partial_match"],
        )
        # then every surface names the same missing words for the same hits, and says partial_match alike
        assert latest == kb_search_explained(query, corpus="latest") == mcp, query
        for hits, partial in (live, latest):
            assert hits, query
            # and partial_match means exactly "no hit holds every word"
            assert partial == all(missing for _, missing in hits), query
            partials.add(partial)
        # and the agent reads each hit's missing words in the text too
        text = found.content[0].text
        for _, missing in mcp[0]:
            if missing:
                assert f"missing: {', '.join(missing)}" in text
    # and the queries cover both answers
    assert partials == {True, False}


# --- Filters declared once: the same bad filter is refused in the same words on every surface -------------

BAD_FILTER_QUERY = """query($f: SearchFilterInput) {
  search(input: {query: "tender pricing", filter: $f}) { totalCount } }"""
_MANY = [f"d{i}" for i in range(21)]
_LONG = "x" * 121
# (URL/JSON parameters, GraphQL filter, MCP find arguments where MCP has the filter, the words every surface
# says after naming the filter: each surface names it its own way, e.g. filters.freshness, filter.freshnessDays)
BAD_FILTERS: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, str]] = [
    ({"domain": _MANY}, {"domain": _MANY}, None, "has 21 values; send at most 20."),
    ({"domain": [_LONG]}, {"domain": [_LONG]}, {"scope": _LONG},
     "has a value 121 characters long; shorten it to 120 or fewer."),
    ({"content_type": ["guide", _LONG]}, {"contentType": ["guide", _LONG]}, {"type": _LONG},
     "has a value 121 characters long; shorten it to 120 or fewer."),
    ({"date_from": "2025-02-01", "date_to": "2025-01-01"}, {"dateFrom": "2025-02-01", "dateTo": "2025-01-01"},
     None, "(2025-01-01) is before the start date (2025-02-01); send an end date on or after it."),
    ({"freshness": "0"}, {"freshnessDays": 0}, None, "must be between 1 and 3650 (got 0)."),
    ({"freshness": "4000"}, {"freshnessDays": 4000}, None, "must be between 1 and 3650 (got 4000)."),
    ({"review_due_within_days": "400"}, {"reviewDueWithinDays": 400}, {"review_due_within_days": 400},
     "must be between 1 and 365 (got 400)."),
    ({"language": "english-uk"}, {"language": "english-uk"}, {"language": "english-uk"},
     "is 10 characters long; send a language code of at most 8 (en, fr, ar)."),
]


def _named(names: dict[str, Any]) -> str:
    """The filter a case is about: its last key (``date_to`` after ``date_from``)."""
    return list(names)[-1]


def _html_notice(client: Client, path: str, params: dict[str, Any]) -> tuple[int, str]:
    """The page's status and the text of its error notice (tags removed, whitespace collapsed)."""
    response = client.get(f"{path}?{urlencode({'q': 'tender pricing', **params}, doseq=True)}")
    notice = re.search(r'<div class="notice notice--error" role="alert"[^>]*>(.*?)</div>', response.content.decode(),
                       re.S)
    return response.status_code, " ".join(re.sub(r"<[^>]+>", " ", notice.group(1)).split()) if notice else ""


@pytest.mark.django_db(transaction=True)
def test_the_same_bad_filter_gets_the_same_words_on_every_surface(mcp_url: str) -> None:
    client = Client()
    mcp_cases = [(params, mcp, words) for params, _, mcp, words in BAD_FILTERS if mcp is not None]
    # when every surface is sent the same bad filters (MCP where its vocabulary has the filter)
    found = mcp_calls(mcp_url, [("find", {"query": "tender pricing", **mcp}) for _, mcp, _ in mcp_cases])
    for params, graphql, _, words in BAD_FILTERS:
        url_name, graphql_name = _named(params), _named(graphql)
        gql = client.post(
            "/graphql", data=json.dumps({"query": BAD_FILTER_QUERY, "variables": {"f": graphql}}),
            content_type="application/json",
        ).json()["errors"][0]
        rest = client.post(
            "/api/search", data=json.dumps({"query": "tender pricing", "filters": params}),
            content_type="application/json",
        )
        browse = _html_notice(client, "/browse", params)
        search = _html_notice(client, "/search", params)
        # then each names the filter its own way and says the same words after the name
        assert gql["message"] == f"filter.{graphql_name} {words}", gql
        assert gql["extensions"] == {"code": "INVALID_QUERY", "field": f"filter.{graphql_name}"}
        assert rest.status_code == 400
        assert rest.json()["error"]["message"] == f"filters.{url_name} {words}"
        assert rest.json()["error"]["field"] == f"filters.{url_name}"
        for status, notice in (browse, search):
            assert status == 400
            assert notice == f"That filter could not be applied. {url_name} {words} Clear the filters", notice
    for (_, mcp, words), result in zip(mcp_cases, found, strict=True):
        assert result.isError
        assert result.content[0].text == f"find: {_named(mcp)} {words}"  # type: ignore[union-attr]


@pytest.mark.django_db
def test_an_overlong_query_is_refused_on_the_html_pages_not_cut() -> None:
    client = Client()
    for path in ("/search", "/browse"):
        # when the query is one character over the limit every surface shares
        refused = client.get(path, {"q": "a" * 2001})
        fine = client.get(path, {"q": "a" * 2000})
        # then the page answers 400 with a notice that says how to fix it (the text stays in the box to edit)
        html = refused.content.decode()
        assert refused.status_code == 400, path
        assert "That search could not be run." in html
        assert "q is 2001 characters long; shorten it to 2000 or fewer." in html
        assert 'value="' + "a" * 2001 + '"' in html
        # and the limit itself is fine
        assert fine.status_code == 200, path
        assert "That search could not be run." not in fine.content.decode()
