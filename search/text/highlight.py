"""Match spans → HTML: the one place that turns ``Hit.title_spans`` / ``passage_spans`` into markup.

Used by the site (browse) and GraphQL's ``highlightedTitle`` / ``highlightedContent``: every character
of the text is HTML-escaped and each matched span is wrapped in a bare ``<mark>`` (no attributes), so
the output is safe to insert as HTML whatever the text holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from search.types import Span


def _merged(spans: Sequence[Span], length: int) -> list[tuple[int, int]]:
    """Spans clamped to the text, empty ones dropped, overlapping or touching ones merged, in order."""
    ranges = sorted(
        (max(0, s.start), min(length, s.end)) for s in spans if min(length, s.end) > max(0, s.start)
    )
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def highlight_html(text: str, spans: Sequence[Span]) -> str:
    """``text`` HTML-escaped, with ``<mark>…</mark>`` around each span (offsets are characters, end exclusive).

    Spans outside the text are clamped; overlapping spans are merged, so marks never nest.
    """
    parts: list[str] = []
    cursor = 0
    for start, end in _merged(spans, len(text)):
        parts.append(escape(text[cursor:start], quote=True))
        parts.append("<mark>" + escape(text[start:end], quote=True) + "</mark>")
        cursor = end
    parts.append(escape(text[cursor:], quote=True))
    return "".join(parts)


# Markdown markup that reads as noise in a one-paragraph passage: heading and quote markers at a line
# start, emphasis markers, code ticks and table rule rows. Pipes and line breaks become spaces.
_MARKUP_RE = re.compile(
    r"(?m)^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?)"  # heading / quote marker
    r"|\*\*|__|`+"  # emphasis and code ticks
    r"|^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$"  # table rule row |---|:-:|
)


def plain_passage(text: str, spans: Sequence[Span]) -> tuple[str, tuple[Span, ...]]:
    """A passage read as one paragraph: Markdown markers removed, whitespace collapsed, spans moved along.

    Use before ``highlight_html`` where a passage is shown as prose (the site's result cards).
    """
    drop = bytearray(len(text))
    for match in _MARKUP_RE.finditer(text):
        drop[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    out: list[str] = []
    new_pos = [0] * (len(text) + 1)
    after_space = True
    for i, ch in enumerate(text):
        new_pos[i] = len(out)
        if drop[i]:
            continue
        if ch.isspace() or ch == "|":
            if not after_space:
                out.append(" ")
                after_space = True
            continue
        out.append(ch)
        after_space = False
    new_pos[len(text)] = len(out)
    cleaned = "".join(out).rstrip()
    moved = []
    for span in spans:
        start = new_pos[max(0, min(span.start, len(text)))]
        end = min(new_pos[max(0, min(span.end, len(text)))], len(cleaned))
        if end > start:
            moved.append(Span(start, end))
    return cleaned, tuple(moved)
