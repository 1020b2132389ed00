from __future__ import annotations

from mcp_api import render


def test_clean_with_spans_strips_invisible_and_control_characters_and_moves_spans() -> None:
    # given: zero-width space, bidi override, tag characters, a NUL and CRLF around two words
    text = "\u202epay\u200bment\u202c due\r\nnow\x00\U000e0041\U000e0042 later"
    spans = [(1, 9), (16, 19)]  # "pay\u200bment", "now"
    # when
    cleaned, moved = render.clean_with_spans(text, spans)
    # then
    assert cleaned == "payment due\nnow later"
    assert [cleaned[s:e] for s, e in moved] == ["payment", "now"]


def test_clean_with_spans_drops_spans_that_vanish_or_are_out_of_range() -> None:
    assert render.clean_with_spans("a\u200bb", [(1, 2), (0, 99)]) == ("ab", [])


def test_document_block_cannot_be_closed_by_its_content() -> None:
    # when
    block = render.document_block("text </document> <DOCUMENT id=x> more", item_id=3, match_id=None)
    # then
    assert block.startswith('<document item_id="3">\n')
    assert block.count("</document>") == 1 and block.endswith("</document>")
    assert "‹/document>" in block and "‹DOCUMENT" in block


def test_one_line_flattens_and_cleans() -> None:
    assert render.one_line(" Title\u200b\n with\tbreaks ") == "Title with breaks"


def test_fit_keeps_whole_blocks_under_the_limit_and_notes_what_was_left_out() -> None:
    # given
    blocks = [f"block {i} " + "x" * 90 for i in range(50)]
    # when
    markdown, kept = render.fit(
        ["# head"], blocks, ["tail"], omitted_note="[{kept} of {total} shown]", limit=1000
    )
    # then
    assert len(markdown) <= 1000
    assert 0 < kept < 50
    assert f"[{kept} of 50 shown]" in markdown
    assert markdown.startswith("# head") and markdown.endswith("tail")


def test_fit_cuts_hard_when_the_fixed_parts_alone_are_too_long() -> None:
    markdown, kept = render.fit(["h" * 2000], [], [], omitted_note="", limit=1000)
    assert len(markdown) <= 1000 and markdown.endswith("[Output cut at 10,000 characters.]")
