"""Page cursors: one opaque format for every paged read (search results, the items listing, MCP ``read``).

A cursor is URL-safe base64 (padding stripped) of ``{"o": offset, "f": fingerprint}``. The fingerprint binds
it to what it pages (a search's query and filters, a listing's sort, a read's item or match); a cursor shown to
anything else, or tampered with, is refused with ``InvalidCursor`` and a message saying how to go on.
"""

from __future__ import annotations

import base64
import json

from search.errors import InvalidCursor

# Every cursor handed out is far shorter; a longer one is refused before it is decoded.
MAX_CURSOR_CHARS = 512
# No page starts further in. A forged offset past PostgreSQL's bigint would otherwise fail the listing's query.
MAX_OFFSET = 2**31 - 1
# Cursors handed out before this module named the fingerprint ``s`` (the items listing: its sort) or ``t``
# (MCP read: its item or match); they still decode.
_LEGACY_FINGERPRINT_KEYS = ("s", "t")


def cursor_encode(*, offset: int, fingerprint: str) -> str:
    """The cursor of the page starting at ``offset`` (0 or more) of what ``fingerprint`` names."""
    raw = json.dumps({"o": offset, "f": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(cursor: str | None, *, fingerprint: str, message: str, max_offset: int = MAX_OFFSET) -> int:
    """The offset ``cursor`` carries: 0 without a cursor.

    Raises ``InvalidCursor(message, field="cursor")`` when the cursor is not one of ours, belongs to another
    fingerprint, or its offset is negative or above ``max_offset``. ``message`` tells the caller what to do
    (usually: start again without a cursor).
    """
    if not cursor:
        return 0
    try:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError
        data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii") + b"=" * (-len(cursor) % 4)))
        if not isinstance(data, dict):
            raise ValueError
        key = next((k for k in ("f", *_LEGACY_FINGERPRINT_KEYS) if k in data), "f")
        offset = int(data["o"])
        if data[key] != fingerprint or not 0 <= offset <= max_offset:
            raise ValueError
    except (ValueError, KeyError, TypeError, OverflowError):
        raise InvalidCursor(message, field="cursor") from None
    return offset
