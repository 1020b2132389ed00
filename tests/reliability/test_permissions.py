"""The permission matrix: personas x 241 items in every state x browse, GraphQL and MCP x query kinds.

Each answer is compared with an oracle written from the items' states (``tests/reliability/matrix.py``),
first with a cold cache (cleared before each persona), then warm (every persona again, in reverse order,
on the cache the others filled). A word found only in restricted items must answer exactly like a word
that exists nowhere: same totals, facets, hits, suggestion and preview.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import html5lib
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client

from accounts.api_keys import api_key_authenticate
from accounts.models import ApiKey
from search.engine import retrieve
from search.models import ContentItem
from search.principal import principal_for_user
from search.types import RetrievalQuery
from tests.reliability import matrix as m
from tests.reliability.figures import record

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("unlimited")]

GRAPHQL_SEARCH = """query($q: String!, $cursor: String) {
  search(input: {query: $q, limit: 100, cursor: $cursor, corpus: LATEST}) {
    totalCount nextCursor suggestion facets { name values { value count } } hits { itemId } } }"""
MCP_ACCEPT = "application/json, text/event-stream"
BROWSE_PERSONAS = ("anonymous", "signed_in", "group_member", "staff")
MCP_PERSONAS = ("anonymous", "api_key", "api_key_group", "revoked_key", "expired_key")
SEARCH_WORDS = (m.TITLE_WORD, m.BODY_WORD, m.RESTRICTED_WORD, m.NOWHERE_WORD, m.DRAFT_WORD, m.READABLE_NEAR)
# (word found only in restricted items, its counterpart found nowhere): answers must not differ.
EQUIVALENT = (
    (m.RESTRICTED_WORD, m.NOWHERE_WORD),
    (m.RESTRICTED_TYPO, m.NOWHERE_TYPO),
    (m.RESTRICTED_NEAR, m.NOWHERE_NEAR),
)


@pytest.fixture(scope="module")
def corpus(django_db_setup: Any, django_db_blocker: Any) -> Iterator[m.Matrix]:
    """Built once for the module (committed), removed afterwards."""
    with django_db_blocker.unblock():
        built = m.build_matrix()
    yield built
    with django_db_blocker.unblock():
        ContentItem.objects.filter(external_id__startswith="pm-").delete()
        get_user_model().objects.filter(username__startswith="pm-").delete()
        ApiKey.objects.filter(name__startswith="pm ").delete()
        Group.objects.filter(name__in=["alpha", "beta"]).delete()


class Caller:
    """One persona's view of every surface, through the real HTTP entry points (Django's test client)."""

    def __init__(self, persona: m.Persona) -> None:
        self.persona = persona
        self.client = Client()
        if persona.username:
            self.client.force_login(get_user_model().objects.get(username=persona.username))

    # --- browse ---
    def browse_search(self, word: str) -> dict[str, Any]:
        ids: list[int] = []
        cursor = None
        first: dict[str, Any] = {}
        while True:
            body = {"query": word, "limit": 100, **({"cursor": cursor} if cursor else {})}
            response = self.client.post("/api/search", data=json.dumps(body), content_type="application/json")
            assert response.status_code == 200, response.content[:300]
            data = response.json()
            first = first or data
            ids += [hit["id"] for hit in data["results"]]
            cursor = data["next_cursor"]
            if not cursor:
                break
        return {
            "ids": ids,
            "total": first["count"],
            "facets": first["facets"],
            "suggestion": first.get("suggestion"),
        }

    def browse_page(self, word: str) -> tuple[list[int], list[str]]:
        response = self.client.get("/search", {"q": word})
        assert response.status_code == 200
        tree = html5lib.parse(response.content, namespaceHTMLElements=False)
        cards = [
            int(li.get("data-item-id")) for li in tree.iter("li") if "card" in (li.get("class") or "").split()
        ]
        closed = [
            "".join(span.itertext()) for span in tree.iter("span") if span.get("class") == "closed__title"
        ]
        return cards, closed

    def preview(self, word: str) -> list[int]:
        response = self.client.get("/api/search/preview", {"q": word, "limit": 20})
        assert response.status_code == 200
        return [hit["id"] for hit in response.json()["results"]]

    def browse_lookup(self, item: m.ItemState) -> bool:
        status = self.client.get(f"/items/{item.slug}").status_code
        assert status in (200, 404), status
        return status == 200

    # --- GraphQL ---
    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.client.post(
            "/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content[:300]
        data = response.json()
        assert not data.get("errors"), data["errors"]
        return data["data"]

    def graphql_search(self, word: str) -> dict[str, Any]:
        ids: list[int] = []
        cursor = None
        first: dict[str, Any] = {}
        while True:
            result = self.graphql(GRAPHQL_SEARCH, {"q": word, "cursor": cursor})["search"]
            first = first or result
            ids += [int(hit["itemId"]) for hit in result["hits"]]
            cursor = result["nextCursor"]
            if not cursor:
                break
        return {
            "ids": ids,
            "total": first["totalCount"],
            "facets": first["facets"],
            "suggestion": first["suggestion"],
        }

    def graphql_lookups(self, items: list[m.ItemState]) -> dict[int, bool]:
        found: dict[int, bool] = {}
        for start in range(0, len(items), 20):  # 20 aliases per operation (the API's limit)
            chunk = items[start : start + 20]
            fields = " ".join(f'i{i.pk}: item(id: "{i.pk}", corpus: LATEST) {{ id }}' for i in chunk)
            data = self.graphql("query { " + fields + " }")
            found.update({i.pk: data[f"i{i.pk}"] is not None for i in chunk})
        return found

    # --- MCP ---
    def mcp(self, tool: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        headers = {"Accept": MCP_ACCEPT}
        if self.persona.api_key:
            headers["Authorization"] = f"Bearer {self.persona.api_key}"
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = self.client.post(
            "/mcp", data=json.dumps(body), content_type="application/json", headers=headers
        )
        return response.status_code, response.json()

    def mcp_search(self, word: str) -> dict[str, Any] | int:
        ids: list[int] = []
        cursor = None
        first: dict[str, Any] = {}
        while True:
            status, data = self.mcp(
                "find", {"query": word, "limit": 30, **({"cursor": cursor} if cursor else {})}
            )
            if status != 200:
                return status
            result = data["result"]
            assert not result["isError"], result["content"][0]["text"]
            found = result["structuredContent"]
            first = first or found
            ids += [hit["item_id"] for hit in found["results"]]
            cursor = found["next_cursor"]
            if not cursor:
                break
        return {"ids": ids, "total": first["count"], "suggestion": first.get("suggestion")}

    def mcp_lookup(self, item: m.ItemState) -> bool | int:
        status, data = self.mcp("read", {"item_id": item.pk, "max_chars": 500})
        return status if status != 200 else not data["result"]["isError"]

    def mcp_similar(self, item_id: int) -> tuple[bool, list[int] | str] | int:
        status, data = self.mcp("find", {"similar_to": item_id, "limit": 30})
        if status != 200:
            return status
        result = data["result"]
        if result["isError"]:
            return False, result["content"][0]["text"].replace(str(item_id), "<id>")
        return True, [hit["item_id"] for hit in result["structuredContent"]["results"]]


class Audit:
    """Counts every comparison and keeps every mismatch (a leak or a missing result)."""

    def __init__(self) -> None:
        self.checks: Counter[str] = Counter()
        self.mismatches: list[str] = []

    def same(self, kind: str, got: Any, want: Any, context: str) -> None:
        self.checks[kind] += 1
        if got != want:
            detail = ""
            if isinstance(got, set) and isinstance(want, set):
                detail = f" leaked={sorted(got - want)[:10]} missing={sorted(want - got)[:10]}"
            self.mismatches.append(f"{kind} {context}:{detail or f' got {got!r:.200} want {want!r:.200}'}")

    def assert_clean(self) -> None:
        assert not self.mismatches, f"{len(self.mismatches)} mismatches:\n" + "\n".join(self.mismatches[:40])


def _passes(personas: list[str]) -> Iterator[tuple[str, str]]:
    """Cold pass (cache cleared before each persona), then a warm pass in reverse order."""
    for name in personas:
        cache.clear()
        yield "cold", name
    for name in reversed(personas):
        yield "warm", name


def _stratified(items: list[m.ItemState], per_state: int) -> list[m.ItemState]:
    seen: Counter[tuple[str, str]] = Counter()
    chosen = []
    for item in items:
        if seen[(item.visibility, item.lifecycle)] < per_state:
            seen[(item.visibility, item.lifecycle)] += 1
            chosen.append(item)
    return chosen


def test_browse_answers_equal_the_oracle(corpus: m.Matrix) -> None:
    audit = Audit()
    lookups = _stratified(corpus.items, 3)
    for temperature, name in _passes(list(BROWSE_PERSONAS)):
        persona = corpus.personas[name]
        caller = Caller(persona)
        for word in SEARCH_WORDS:
            # when
            answer = caller.browse_search(word)
            want = m.expected_search(persona, "browse", corpus.items, word)
            # then
            context = f"[{temperature}] {name} POST /api/search {word!r}"
            audit.same("search ids", set(answer["ids"]), want, context)
            audit.same("search total", answer["total"], len(want), context)
            audit.same("no duplicates", len(answer["ids"]), len(set(answer["ids"])), context)
        for word in (m.TITLE_WORD, m.RESTRICTED_WORD):
            cards, closed = caller.browse_page(word)
            want = m.expected_search(persona, "browse", corpus.items, word)
            context = f"[{temperature}] {name} /search?q={word}"
            audit.same("page ids", set(cards) <= want and len(cards) == min(20, len(want)), True, context)
            closed_want = {
                i.title for i in corpus.items if i.pk in m.expected_closed(persona, corpus.items, word)
            }
            audit.same(
                "closed placeholders",
                set(closed) <= closed_want and len(closed) == min(10, len(closed_want)),
                True,
                context,
            )
        for item in lookups:
            audit.same(
                "item page",
                caller.browse_lookup(item),
                m.expected_lookup(persona, "browse", item),
                f"[{temperature}] {name} /items/{item.slug} ({item.visibility}, {item.lifecycle})",
            )
    audit.assert_clean()
    record(
        "permissions.browse",
        {
            "items": corpus.counts["items"],
            "personas": list(BROWSE_PERSONAS),
            "checks": dict(audit.checks),
            "comparisons": sum(audit.checks.values()),
            "leaks_found": 0,
            "lookup_items": len(lookups),
            "query_kinds": [
                "title word",
                "body-only word",
                "restricted-only word",
                "nowhere word",
                "draft-only word",
                "lookup by slug (/items/<slug>)",
            ],
        },
    )


def test_graphql_answers_equal_the_oracle(corpus: m.Matrix) -> None:
    audit = Audit()
    for temperature, name in _passes(list(BROWSE_PERSONAS)):
        persona = corpus.personas[name]
        caller = Caller(persona)
        for word in SEARCH_WORDS:
            answer = caller.graphql_search(word)
            want = m.expected_search(persona, "graphql", corpus.items, word)
            context = f"[{temperature}] {name} graphql search(corpus: LATEST) {word!r}"
            audit.same("search ids", set(answer["ids"]), want, context)
            audit.same("search total", answer["total"], len(want), context)
        found = caller.graphql_lookups(corpus.items)
        for item in corpus.items:
            audit.same(
                "item(id)",
                found[item.pk],
                m.expected_lookup(persona, "graphql", item),
                f"[{temperature}] {name} item({item.pk}) ({item.visibility}, {item.lifecycle})",
            )
    audit.assert_clean()
    record(
        "permissions.graphql",
        {
            "items": corpus.counts["items"],
            "personas": list(BROWSE_PERSONAS),
            "checks": dict(audit.checks),
            "comparisons": sum(audit.checks.values()),
            "leaks_found": 0,
            "lookup_items": len(corpus.items),
            "query_kinds": [
                "title word",
                "body-only word",
                "restricted-only word",
                "nowhere word",
                "draft-only word",
                "item(id) for every item, corpus LATEST",
            ],
        },
    )


def test_mcp_answers_equal_the_oracle(corpus: m.Matrix) -> None:
    audit = Audit()
    lookups = _stratified(corpus.items, 3)
    similar = _stratified(corpus.items, 1)
    missing_id = max(i.pk for i in corpus.items) + 10_000
    for temperature, name in _passes(list(MCP_PERSONAS)):
        persona = corpus.personas[name]
        caller = Caller(persona)
        if persona.refused:
            for word in (m.TITLE_WORD, m.RESTRICTED_WORD):
                audit.same(
                    "refused key", caller.mcp_search(word), 401, f"[{temperature}] {name} find {word!r}"
                )
            audit.same("refused key", caller.mcp_lookup(corpus.items[1]), 401, f"[{temperature}] {name} read")
            audit.same(
                "refused key", caller.mcp_similar(corpus.successor.pk), 401, f"[{temperature}] {name} similar"
            )
            continue
        for word in SEARCH_WORDS:
            answer = caller.mcp_search(word)
            assert isinstance(answer, dict), answer
            want = m.expected_search(persona, "mcp", corpus.items, word)
            context = f"[{temperature}] {name} find {word!r}"
            audit.same("search ids", set(answer["ids"]), want, context)
            audit.same("search total", answer["total"], len(want), context)
        for item in lookups:
            audit.same(
                "read(item_id)",
                caller.mcp_lookup(item),
                m.expected_lookup(persona, "mcp", item),
                f"[{temperature}] {name} read({item.pk}) ({item.visibility}, {item.lifecycle})",
            )
        nowhere = caller.mcp_similar(missing_id)
        for item in similar:
            answer = caller.mcp_similar(item.pk)
            assert isinstance(answer, tuple)
            context = (
                f"[{temperature}] {name} find(similar_to={item.pk}) ({item.visibility}, {item.lifecycle})"
            )
            readable = m.expected_lookup(persona, "mcp", item)
            audit.same("similar_to allowed", answer[0], readable, context)
            if readable:
                allowed = {
                    i.pk for i in corpus.items if m.expected_lookup(persona, "mcp", i) and not i.superseded
                }
                audit.same("similar_to results", set(answer[1]) <= allowed - {item.pk}, True, context)
            else:  # the same refusal as for an id that does not exist: nothing to learn from it
                audit.same("similar_to refusal", answer, nowhere, context)
    audit.assert_clean()
    record(
        "permissions.mcp",
        {
            "items": corpus.counts["items"],
            "personas": list(MCP_PERSONAS),
            "checks": dict(audit.checks),
            "comparisons": sum(audit.checks.values()),
            "leaks_found": 0,
            "lookup_items": len(lookups),
            "similar_to_items": len(similar),
            "query_kinds": [
                "title word",
                "body-only word",
                "restricted-only word",
                "nowhere word",
                "draft-only word",
                "read(item_id)",
                "find(similar_to)",
            ],
        },
    )


def test_similar_to_in_the_engine_never_crosses_access(corpus: m.Matrix) -> None:
    """Browse and GraphQL have no similar_to; the engine they share must still refuse unreadable seeds."""
    audit = Audit()
    users = get_user_model().objects
    principals = {
        name: principal_for_user(users.get(username=corpus.personas[name].username))
        for name in BROWSE_PERSONAS
        if corpus.personas[name].username
    }
    principals["anonymous"] = principal_for_user(None)
    principals["api_key_group"] = api_key_authenticate(raw=corpus.personas["api_key_group"].api_key or "")
    for name, principal in principals.items():
        persona = corpus.personas[name]
        surface: m.Surface = "mcp" if persona.kind == "api_key" else "browse"
        for item in _stratified(corpus.items, 1):
            result = retrieve(
                query=RetrievalQuery(
                    principal=principal, similar_to=item.pk, corpus=m.corpus_of(persona, surface), limit=100
                )
            )
            ids = {hit.item_id for hit in result.hits}
            context = f"{name} similar_to={item.pk} ({item.visibility}, {item.lifecycle})"
            if not m.expected_lookup(persona, surface, item):
                audit.same("unreadable seed gives nothing", ids, set(), context)
            else:
                allowed = {
                    i.pk for i in corpus.items if m.expected_lookup(persona, surface, i) and not i.superseded
                }
                audit.same("similar results readable", ids <= allowed - {item.pk}, True, context)
    audit.assert_clean()
    record(
        "permissions.similar_to_engine",
        {"checks": dict(audit.checks), "leaks_found": 0, "personas": sorted(principals)},
    )


def test_a_word_only_in_restricted_items_answers_like_a_word_that_exists_nowhere(corpus: m.Matrix) -> None:
    audit = Audit()
    outsiders = [
        n
        for n in ("anonymous", "signed_in", "group_member", "api_key_group")
        if not m.expected_search(
            corpus.personas[n], "mcp" if n.startswith("api") else "browse", corpus.items, m.RESTRICTED_WORD
        )
    ]
    assert outsiders == ["anonymous", "signed_in", "group_member", "api_key_group"]
    def same_items(answer: Any) -> Any:
        # The order of the same items may differ: the vector lane ranks them by each query's own vector (the
        # two words differ by a letter), which depends on the query text and the readable items only.
        if isinstance(answer, dict):
            return {**answer, "ids": sorted(answer["ids"])}
        return sorted(answer) if isinstance(answer, list) else answer

    for temperature, name in _passes(outsiders):
        caller = Caller(corpus.personas[name])
        for restricted, nowhere in EQUIVALENT:
            context = f"[{temperature}] {name} {restricted!r} vs {nowhere!r}"
            if name.startswith("api_key"):
                audit.same("mcp find", same_items(caller.mcp_search(restricted)),
                           same_items(caller.mcp_search(nowhere)), context)
                continue
            audit.same("api search", same_items(caller.browse_search(restricted)),
                       same_items(caller.browse_search(nowhere)), context)
            audit.same("preview", caller.preview(restricted), caller.preview(nowhere), context)
            audit.same(
                "page cards",
                same_items(caller.browse_page(restricted)[0]),
                same_items(caller.browse_page(nowhere)[0]),
                context,
            )
            audit.same(
                "graphql search", same_items(caller.graphql_search(restricted)),
                same_items(caller.graphql_search(nowhere)), context,
            )
            # /mcp ignores the session cookie: a signed-in browser calling it is anonymous there.
            audit.same("mcp find", same_items(caller.mcp_search(restricted)),
                       same_items(caller.mcp_search(nowhere)), context)
    audit.assert_clean()
    record(
        "permissions.restricted_word",
        {
            "pairs": [list(pair) for pair in EQUIVALENT],
            "personas": outsiders,
            "checks": dict(audit.checks),
            "comparisons": sum(audit.checks.values()),
            "differences_found": 0,
            "compared": "totals, facets, ids, suggestions, preview, /search cards, MCP count",
        },
    )
