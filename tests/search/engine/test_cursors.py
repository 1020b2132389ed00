"""The one page cursor codec (search/engine/cursors.py): search results, the items listing and MCP read all use it."""

from __future__ import annotations

import base64
import json

import pytest

from search.engine import retrieve
from search.engine.cursors import MAX_CURSOR_CHARS, MAX_OFFSET, cursor_decode, cursor_encode
from search.errors import InvalidCursor
from search.principal import ANONYMOUS
from search.selectors.items import items_list
from search.types import RetrievalQuery
from tests.factories import build, make_item

MESSAGE = "cursor is not valid here; start again without a cursor."


def raw_cursor(data: object) -> str:
    """A cursor built by hand, the way the code before search/engine/cursors.py built them."""
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode(cursor: str | None, fingerprint: str = "fp", **kwargs: int) -> int:
    return cursor_decode(cursor, fingerprint=fingerprint, message=MESSAGE, **kwargs)


@pytest.mark.parametrize("offset", [0, 1, 20, 99_999, MAX_OFFSET])
@pytest.mark.parametrize("fingerprint", ["0123456789abcdef", "newest", "c12:1", "i7", "é ü ☃", ""])
def test_a_cursor_decodes_to_its_offset_for_its_fingerprint(offset: int, fingerprint: str) -> None:
    # when
    cursor = cursor_encode(offset=offset, fingerprint=fingerprint)
    # then: URL-safe, unpadded, and back to the same offset
    assert cursor.replace("-", "").replace("_", "").isalnum()
    assert decode(cursor, fingerprint) == offset


def test_the_format_is_base64_of_offset_and_fingerprint() -> None:
    # then: byte for byte what search results handed out before the codec, so their cursors keep working
    assert cursor_encode(offset=10, fingerprint="abc") == raw_cursor({"o": 10, "f": "abc"})


@pytest.mark.parametrize("cursor", [None, ""])
def test_no_cursor_is_the_first_page(cursor: str | None) -> None:
    assert decode(cursor) == 0


def test_a_cursor_of_another_fingerprint_is_refused_with_the_callers_message_on_the_cursor_field() -> None:
    # given
    cursor = cursor_encode(offset=20, fingerprint="one query")
    # when
    with pytest.raises(InvalidCursor) as caught:
        decode(cursor, "another query")
    # then
    assert caught.value.message == MESSAGE and str(caught.value) == MESSAGE
    assert caught.value.field == "cursor" and caught.value.code == "invalid_cursor"


def test_offsets_outside_zero_to_max_offset_are_refused() -> None:
    # when / then
    assert decode(cursor_encode(offset=100, fingerprint="fp"), max_offset=100) == 100
    for offset in (101, 10**30):
        with pytest.raises(InvalidCursor):
            decode(cursor_encode(offset=offset, fingerprint="fp"), max_offset=100)
    for offset in (-1, MAX_OFFSET + 1, 2**63):
        with pytest.raises(InvalidCursor):
            decode(cursor_encode(offset=offset, fingerprint="fp"))


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "é",  # not ASCII
        "A",  # impossible base64 length
        "AAAA",  # base64 of bytes that are not JSON
        base64.urlsafe_b64encode(b"\xff\xfe\xfd").decode(),  # not UTF-8
        "A" * (MAX_CURSOR_CHARS + 1),
        raw_cursor([20, "fp"]),  # JSON, not an object
        raw_cursor("fp"),
        raw_cursor(None),
        raw_cursor({"f": "fp"}),  # no offset
        raw_cursor({"o": 20}),  # no fingerprint
        raw_cursor({"o": None, "f": "fp"}),
        raw_cursor({"o": "twenty", "f": "fp"}),
        raw_cursor({"o": [20], "f": "fp"}),
        raw_cursor({"o": 20, "f": ["fp"]}),
        raw_cursor({"o": 20, "f": None}),
        base64.urlsafe_b64encode(b'{"o":Infinity,"f":"fp"}').decode(),
        base64.urlsafe_b64encode(b'{"o":1e400,"f":"fp"}').decode(),
        base64.urlsafe_b64encode(b'{"o":NaN,"f":"fp"}').decode(),
        base64.urlsafe_b64encode(b"[" * 300 + b"]" * 300).decode(),  # deep, and over the length limit
        base64.urlsafe_b64encode(b"[" * 100_000).decode()[:MAX_CURSOR_CHARS],
    ],
)
def test_anything_else_is_refused_as_invalid_cursor(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        decode(cursor)


def test_cursors_handed_out_before_the_codec_still_decode() -> None:
    # given: the items listing bound its cursors to the sort as "s", MCP read to its target as "t"
    listing = raw_cursor({"o": 40, "s": "newest"})
    read = raw_cursor({"t": "c12:1", "o": 3000})
    # when / then
    assert decode(listing, "newest") == 40
    assert decode(read, "c12:1") == 3000
    with pytest.raises(InvalidCursor):
        decode(listing, "title")
    with pytest.raises(InvalidCursor):
        decode(read, "i12")


# --- the three users of the codec ---


@pytest.mark.django_db
def test_search_pages_with_the_codec_and_refuses_another_searchs_cursor_past_its_depth() -> None:
    # given
    for i in range(5):
        make_item(title=f"Harbour {i}", body="harbour logistics")
    build()
    first = retrieve(query=RetrievalQuery(text="harbour", limit=2, mode="lexical"))
    assert first.next_cursor is not None
    fingerprint = json.loads(base64.urlsafe_b64decode(first.next_cursor + "==="))["f"]
    # when
    second = retrieve(query=RetrievalQuery(text="harbour", limit=2, mode="lexical", cursor=first.next_cursor))
    # then
    assert decode(first.next_cursor, fingerprint) == 2
    assert not {h.item_id for h in first.hits} & {h.item_id for h in second.hits}
    with pytest.raises(InvalidCursor, match="start again without a cursor") as caught:
        retrieve(query=RetrievalQuery(text="logistics", limit=2, mode="lexical", cursor=first.next_cursor))
    assert caught.value.field == "cursor"
    too_deep = cursor_encode(offset=100_001, fingerprint=fingerprint)
    with pytest.raises(InvalidCursor):
        retrieve(query=RetrievalQuery(text="harbour", limit=2, mode="lexical", cursor=too_deep))


@pytest.mark.django_db
def test_the_items_listing_pages_with_the_codec_and_keeps_old_cursors() -> None:
    # given
    for i in range(5):
        make_item(title=f"Item {i}")
    first = items_list(principal=ANONYMOUS, limit=2)
    assert first.next_cursor is not None
    # when
    second = items_list(principal=ANONYMOUS, limit=2, cursor=first.next_cursor)
    old = items_list(principal=ANONYMOUS, limit=2, cursor=raw_cursor({"o": 2, "s": "newest"}))
    # then
    assert [i.pk for i in second.items] == [i.pk for i in old.items]
    assert not {i.pk for i in first.items} & {i.pk for i in second.items}
    with pytest.raises(InvalidCursor, match="start again without it") as caught:
        items_list(principal=ANONYMOUS, limit=2, sort="title", cursor=first.next_cursor)
    assert caught.value.field == "cursor"
    # a forged offset is refused, not sent to PostgreSQL (where it would overflow OFFSET)
    with pytest.raises(InvalidCursor):
        items_list(principal=ANONYMOUS, limit=2, cursor=raw_cursor({"o": 10**30, "f": "newest"}))


@pytest.mark.django_db
def test_mcp_read_pages_with_the_codec_and_keeps_old_cursors() -> None:
    # given
    from mcp_api import tools
    from mcp_api.schemas import ReadArgs

    item = make_item(title="Long guide", body=" ".join(f"word{i}" for i in range(800)))
    other = make_item(title="Other")
    first = tools.read_tool(ReadArgs(item_id=item.pk, max_chars=500), ANONYMOUS).structured
    assert first.next_cursor is not None
    # when
    second = tools.read_tool(ReadArgs(item_id=item.pk, max_chars=500, cursor=first.next_cursor), ANONYMOUS)
    old_cursor = raw_cursor({"t": f"i{item.pk}", "o": second.structured.offset})
    old = tools.read_tool(ReadArgs(item_id=item.pk, max_chars=500, cursor=old_cursor), ANONYMOUS)
    # then
    assert second.structured.offset == len(first.text) and old.structured.text == second.structured.text
    with pytest.raises(InvalidCursor, match="call read again without a cursor"):
        tools.read_tool(ReadArgs(item_id=other.pk, cursor=first.next_cursor), ANONYMOUS)
