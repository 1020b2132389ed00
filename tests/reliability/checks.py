"""What every answer to hostile input must look like, and the small corpus the fuzz tests search."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from search.models import ContentItem
from search.services import content
from tests.factories import build, make_item

# Text that only a stack trace, a debug page or a leaked driver error would put in an answer.
LEAK_MARKERS = (
    "Traceback (most recent call last)",
    'File "/',
    "site-packages",
    "django.db.utils",
    "psycopg.",
    "ProgrammingError",
    "OperationalError",
    "Internal Server Error",
    "Server Error (500)",
)


def body_text(response: HttpResponse) -> str:
    raw = b"".join(response.streaming_content) if getattr(response, "streaming", False) else response.content
    return raw.decode("utf-8", "replace")


def assert_no_leak(text: str, context: str = "") -> None:
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{context}: the answer leaks {marker!r}: {text[:800]}"


def assert_clear_answer(response: HttpResponse, *, context: str = "", json_errors: bool = True) -> int:
    """A 2xx, or a 4xx that says what is wrong: never a 5xx, never a stack trace. Returns the status."""
    status = response.status_code
    text = body_text(response)
    assert status < 500, f"{context}: HTTP {status}: {text[:800]}"
    assert_no_leak(text, context)
    if status == 405:
        assert response.get("Allow"), f"{context}: 405 without an Allow header"
    elif status >= 400 and json_errors:
        data = json.loads(text)
        message = _error_message(data)
        assert message and len(message) > 10, (
            f"{context}: HTTP {status} without a clear message: {text[:300]}"
        )
    return status


def _error_message(data: Any) -> str:
    """The message of the browse API (``{"error": {...}}``), GraphQL (``{"errors": [...]}``) or MCP shapes."""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or "")
    errors = data.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return str(errors[0].get("message") or "")
    return ""


FUZZ_ITEMS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("Tender pricing guide", "## Day rates\n\nHow to price a tender: day rates, margins and approval.", {}),
    (
        "Pricing approval policy",
        "Every pricing decision over budget needs approval.",
        {"content_type": "policy"},
    ),
    (
        "Harbour safety checklist",
        "Harbour visitors wear vests; the safety checklist.",
        {"content_type": "checklist"},
    ),
    ("Invoice checklist", "Send the invoice on time; 50% discount_rate \\ escape %_ chars.", {}),
    ("Protection des données", "La protection des données personnelles des offres.", {"language": "fr"}),
    ("سياسة تسعير العطاء", "تسعير العطاء والهوامش والموافقة.", {"language": "ar"}),
    ("<script>alert(1)</script> script guide", "</mark><script>alert(2)</script> onerror mark", {}),
    ("Zebra crossing pricing", "A zebra \u202ebidi\u202c text\u200b with invisible characters.", {}),
    ("Staff pricing margins", "Confidential margin notes.", {"visibility": "staff"}),
    (
        "Bid team pricing notes",
        "Pricing notes for the bid team.",
        {"visibility": "groups", "groups": ["bid-team"]},
    ),
    ("Draft pricing memo", "A pricing memo still in draft.", {"publish": False}),
)


def fuzz_corpus() -> list[ContentItem]:
    """A dozen items in several languages, states and visibilities, built and searchable."""
    items = [
        make_item(title=title, body=body, primary_domain="pricing", **fields)
        for title, body, fields in FUZZ_ITEMS
    ]
    content.item_mark_superseded(
        item=make_item(title="Old pricing guide", body="Outdated pricing advice.", primary_domain="pricing"),
        by=items[0],
    )
    build()
    return items
