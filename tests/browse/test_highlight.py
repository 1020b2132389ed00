"""search/text/highlight.py: spans → escaped HTML with bare <mark>, and passages read as prose."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from search.text.highlight import highlight_html, plain_passage
from search.types import Span


def test_marks_each_span_and_escapes_the_rest() -> None:
    # given
    text = "Fish & <chips> \"50%\""
    # when
    out = highlight_html(text, [Span(0, 4), Span(8, 13)])
    # then
    assert out == "<mark>Fish</mark> &amp; &lt;<mark>chips</mark>&gt; &quot;50%&quot;"


def test_a_title_that_is_markup_stays_text() -> None:
    # given
    title = "<img src=x onerror=alert(1)>"
    # when
    out = highlight_html(title, [Span(1, 4)])
    # then
    assert "<img" not in out
    assert out == "&lt;<mark>img</mark> src=x onerror=alert(1)&gt;"


def test_overlapping_touching_and_unsorted_spans_never_nest() -> None:
    # when
    out = highlight_html("abcdefgh", [Span(4, 6), Span(0, 2), Span(1, 3), Span(3, 4)])
    # then
    assert out == "<mark>abcdef</mark>gh"


def test_spans_outside_the_text_are_clamped_or_dropped() -> None:
    # when
    out = highlight_html("abc", [Span(-5, 1), Span(2, 99), Span(10, 12), Span(2, 2)])
    # then
    assert out == "<mark>a</mark>b<mark>c</mark>"


def test_no_spans_is_plain_escaped_text() -> None:
    assert highlight_html("a < b", []) == "a &lt; b"


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab <>&\"'é\n")), max_size=40),
    raw_spans=st.lists(st.tuples(st.integers(-3, 45), st.integers(-3, 45)), max_size=6),
)
def test_removing_marks_and_unescaping_gives_the_text_back(text: str, raw_spans: list[tuple[int, int]]) -> None:
    # given
    spans = [Span(a, b) for a, b in raw_spans]
    # when
    out = highlight_html(text, spans)
    # then: the only tags are bare <mark> pairs, never nested, and the text survives intact
    tags = re.findall(r"<[^>]*>", out)
    assert set(tags) <= {"<mark>", "</mark>"}
    assert "<mark><mark>" not in out and "<mark></mark>" not in out
    assert html.unescape(out.replace("<mark>", "").replace("</mark>", "")) == text


def test_plain_passage_drops_markdown_markers_and_moves_spans() -> None:
    # given
    text = "## Purpose\n\nThis **policy** replaces\n\n| a | b |\n|---|:-:|\n| x | `code` |"
    spans = [Span(text.index("policy"), text.index("policy") + 6), Span(text.index("code"), text.index("code") + 4)]
    # when
    cleaned, moved = plain_passage(text, spans)
    # then
    assert cleaned == "Purpose This policy replaces a b x code"
    assert [cleaned[s.start : s.end] for s in moved] == ["policy", "code"]


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.sampled_from(["## Head", "**bold**", "word", "|", "`x`", "\n", "> quote", "|---|"]),
                      max_size=12))
def test_plain_passage_spans_still_cover_the_same_words(words: list[str]) -> None:
    # given: spans on every alphabetic word
    text = " ".join(words)
    spans = [Span(m.start(), m.end()) for m in re.finditer(r"[A-Za-z]+", text)]
    # when
    cleaned, moved = plain_passage(text, spans)
    # then
    assert [cleaned[s.start : s.end] for s in moved] == [text[s.start : s.end] for s in spans]
