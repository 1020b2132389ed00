"""XSS: documents whose titles and bodies carry markup never reach a page, a JSON highlight or GraphQL as
markup. Every highlight parses (html5lib) to text and bare ``<mark>`` elements; MCP output is plain text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import html5lib
import pytest
from django.test import Client

from tests.factories import build, make_item
from tests.reliability.figures import record

PAYLOADS = (
    "<script>alert('x1')</script>",
    "<img src=x onerror=alert('x2')>",
    "</mark><script>alert('x3')</script><mark>",
    "&lt;script&gt;alert('x4')&lt;/script&gt;",
    "&#60;img src=x onerror=alert('x5')&#62;",
    "<svg/onload=alert('x6')>",
    "\"><script>alert('x7')</script>",
    "<mark onclick=alert('x8')>marked</mark>",
    "[click](javascript:alert('x9'))",
    "<a href=\"javascript:alert('x10')\">link</a>",
    "<iframe srcdoc=\"<script>alert('x11')</script>\">",
    "`<script>alert('x12')</script>`",
)
QUERIES = (
    "xsstoken",
    "script alert",
    "onerror img",
    "mark marked",
    "lt script gt",
    "javascript click",
    "iframe",
)
STATIC = Path(__file__).resolve().parents[2] / "static"


def only_text_and_bare_marks(fragment: str, context: str) -> int:
    """Assert the fragment is text plus attribute-free ``<mark>`` elements holding text; count the marks."""
    root = html5lib.parseFragment(fragment, namespaceHTMLElements=False)
    marks = 0
    for element in root:
        assert element.tag == "mark", f"{context}: <{element.tag}> in {fragment!r:.300}"
        assert not element.attrib, f"{context}: <mark {element.attrib}> in {fragment!r:.300}"
        assert len(element) == 0, f"{context}: an element inside <mark> in {fragment!r:.300}"
        marks += 1
    return marks


def page_is_inert(html: bytes, context: str) -> None:
    """No script from a payload, no event handler attribute, no javascript: URL anywhere on the page."""
    tree = html5lib.parse(html, namespaceHTMLElements=False)
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        if element.tag in ("script", "iframe", "svg", "object", "embed"):
            text = "".join(element.itertext())
            assert element.tag == "script" and "alert(" not in text, (
                f"{context}: <{element.tag}> {text[:200]!r}"
            )
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on"), f"{context}: <{element.tag} {name}={value!r}>"
            assert "javascript:" not in value.lower().replace(" ", ""), f"{context}: {name}={value!r}"
            assert "alert(" not in value or element.tag == "meta", (
                f"{context}: <{element.tag} {name}={value!r}>"
            )


def _class_elements(tree: Any, tag: str, css_class: str) -> list[Any]:
    return [e for e in tree.iter(tag) if css_class in (e.get("class") or "").split()]


def _inner_html(element: Any) -> str:
    """The element's content re-serialised (text and child elements), for the fragment check."""
    from html5lib import serializer, treewalkers

    walker = treewalkers.getTreeWalker("etree")
    out = serializer.HTMLSerializer(omit_optional_tags=False, quote_attr_values="always")
    wrapper = html5lib.parseFragment("", namespaceHTMLElements=False)
    wrapper.text = element.text
    for child in element:
        wrapper.append(child)
    return out.render(walker(wrapper))


@pytest.fixture
def hostile_items(db: Any) -> list[Any]:
    items = [
        make_item(
            title=f"xsstoken {payload}",
            body=f"## xsstoken {payload}\n\nThe xsstoken body {payload} ends here.",
            summary=f"{payload} summary",
            allow_closed_placeholder=True,
        )
        for payload in PAYLOADS
    ]
    items.append(
        make_item(
            title=f"xsstoken restricted {PAYLOADS[1]}",
            body="hidden",
            visibility="staff",
            allow_closed_placeholder=True,
        )
    )
    build()
    return items


@pytest.mark.django_db
def test_pages_show_payloads_as_text_with_bare_marks(hostile_items: list[Any]) -> None:
    client = Client()
    marks = fragments = 0
    for query in QUERIES:
        for path in ("/search", "/browse"):
            # when
            response = client.get(path, {"q": query})
            # then
            assert response.status_code == 200
            context = f"{path}?q={query}"
            page_is_inert(response.content, context)
            tree = html5lib.parse(response.content, namespaceHTMLElements=False)
            for node in _class_elements(tree, "h3", "card__title") + _class_elements(
                tree, "p", "card__excerpt"
            ):
                inner = node.find("a") if node.tag == "h3" else node
                marks += only_text_and_bare_marks(_inner_html(inner), context)
                fragments += 1
            if query == "xsstoken" and path == "/search":
                closed = _class_elements(tree, "span", "closed__title")
                assert closed and all(len(c) == 0 for c in closed), "closed titles are text"
    for item in hostile_items[: len(PAYLOADS)]:
        response = client.get(f"/items/{item.slug}")
        assert response.status_code == 200
        page_is_inert(response.content, f"/items/{item.slug}")
        assert b"alert(" in response.content  # the payload is shown, as text
    assert marks > 0
    record(
        "xss.pages",
        {
            "payloads": len(PAYLOADS),
            "queries": len(QUERIES),
            "pages": len(QUERIES) * 2 + len(PAYLOADS),
            "highlight_fragments_checked": fragments,
            "marks": marks,
            "unsafe_elements_found": 0,
        },
    )


@pytest.mark.django_db
def test_json_and_graphql_highlights_are_text_with_bare_marks(hostile_items: list[Any]) -> None:
    client = Client()
    checked = marks = 0
    for query in QUERIES:
        # when
        api = client.post(
            "/api/search", data=json.dumps({"query": query, "limit": 50}), content_type="application/json"
        )
        graphql = client.post(
            "/graphql",
            content_type="application/json",
            data=json.dumps(
                {
                    "query": "query($q: String!) { search(input: {query: $q, limit: 50}) { hits { "
                    "highlightedTitle highlightedContent passage item { title } } } }",
                    "variables": {"q": query},
                }
            ),
        )
        preview = client.get("/api/search/preview", {"q": query.split()[0]})
        # then
        assert api["Content-Type"] == "application/json" and preview["Content-Type"] == "application/json"
        assert api["X-Content-Type-Options"] == "nosniff"
        for hit in api.json()["results"]:
            for field in ("title_html", "passage_html"):
                marks += only_text_and_bare_marks(hit[field], f"POST /api/search {query!r} {field}")
                checked += 1
        for hit in graphql.json()["data"]["search"]["hits"]:
            for field in ("highlightedTitle", "highlightedContent"):
                marks += only_text_and_bare_marks(hit[field], f"graphql {query!r} {field}")
                checked += 1
        for hit in preview.json()["results"]:  # plain text, for the page's textContent
            assert any(p in hit["title"] for p in PAYLOADS) or "xsstoken" in hit["title"]
    # the live preview inserts titles with textContent only, never as HTML
    searchbar = (STATIC / "browse" / "searchbar.js").read_text()
    assert "innerHTML" not in searchbar and "insertAdjacentHTML" not in searchbar
    assert marks > 0
    record(
        "xss.json_graphql",
        {
            "queries": len(QUERIES),
            "highlights_checked": checked,
            "marks": marks,
            "unsafe_elements_found": 0,
            "preview": "JSON text fields (application/json, nosniff); searchbar.js uses textContent",
        },
    )


@pytest.mark.django_db
def test_mcp_output_is_plain_text(hostile_items: list[Any]) -> None:
    client = Client()
    titles = {item.pk: item.title for item in hostile_items}
    bodies = {item.pk: " ".join(item.latest_revision.body.split()) for item in hostile_items}
    hits = 0
    for query in QUERIES:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "find", "arguments": {"query": query, "limit": 30, "granularity": "chunk"}},
        }
        # when
        response = client.post(
            "/mcp",
            data=json.dumps(body),
            content_type="application/json",
            headers={"Accept": "application/json, text/event-stream"},
        )
        # then: titles and snippets are the documents' own characters (nothing escaped, no <mark> added),
        # and matches are offsets into the snippet
        result = response.json()["result"]
        assert not result["isError"], result["content"][0]["text"]
        for hit in result["structuredContent"]["results"]:
            assert hit["title"] == titles[hit["item_id"]]
            snippet = " ".join(hit["snippet"].strip("… ").split())
            assert all(part in bodies[hit["item_id"]] for part in snippet.split("…")), (
                snippet,
                hit["item_id"],
            )
            for offset in hit["match_offsets"]:
                word = hit["snippet"][offset["start"] : offset["end"]].lower()
                assert word and any(word.startswith(w[:3]) for w in query.split()), (word, query)
            hits += 1
        text = result["content"][0]["text"]
        assert "&lt;" not in text.replace("&lt;script&gt;", "").replace("&lt;/script&gt;", ""), "HTML-escaped"
    assert hits > 0
    record(
        "xss.mcp",
        {
            "queries": len(QUERIES),
            "hits_checked": hits,
            "html_added": 0,
            "note": "titles and snippets are the documents' own text; matches are offsets, never <mark>",
        },
    )
