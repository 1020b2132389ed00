"""Markdown-aware chunking: headings become the chunk's toc_path; bounded size with overlap.

Every chunk's text is exactly ``body[char_start:char_end]``, so offsets point into the revision body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE_RE = re.compile(r"^(```|~~~)")
# Preferred split points, best first: blank line, line end, sentence end, any space.
BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?؟。](\s)"), re.compile(r"\s"))


@dataclass(frozen=True)
class ChunkSpec:
    ordinal: int
    toc_path: str
    text: str
    char_start: int
    char_end: int


@dataclass(frozen=True)
class _Section:
    toc: tuple[str, ...]
    start: int
    end: int


def _sections(body: str) -> list[_Section]:
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    current_start = 0
    current_toc: tuple[str, ...] = ()
    in_fence = False
    offset = 0
    for line in body.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if FENCE_RE.match(stripped.lstrip()):
            in_fence = not in_fence
        match = None if in_fence else HEADING_RE.match(stripped)
        if match:
            if offset > current_start:
                sections.append(_Section(current_toc, current_start, offset))
            level = len(match.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, match.group(2).strip()))
            current_toc = tuple(title for _, title in stack)
            current_start = offset
        offset += len(line)
    if len(body) > current_start:
        sections.append(_Section(current_toc, current_start, len(body)))
    return sections


def _split_point(body: str, start: int, hard_end: int, min_end: int) -> int:
    window = body[min_end:hard_end]
    for pattern in BREAKS:
        matches = list(pattern.finditer(window))
        if matches:
            last = matches[-1]
            return min_end + (last.end(1) if pattern.groups else last.end())
    return hard_end


def chunk_markdown(body: str, *, max_chars: int = 1200, overlap: int = 150) -> list[ChunkSpec]:
    """Split ``body`` into chunks of at most ``max_chars`` that overlap by about ``overlap`` characters."""
    if max_chars < 50:
        raise ValueError("max_chars must be at least 50")
    overlap = max(0, min(overlap, max_chars // 3))
    specs: list[ChunkSpec] = []
    for section in _sections(body):
        start = section.start
        while start < section.end:
            # Skip leading whitespace so no chunk starts blank.
            while start < section.end and body[start].isspace():
                start += 1
            if start >= section.end:
                break
            hard_end = min(start + max_chars, section.end)
            end = hard_end
            if hard_end < section.end:
                end = _split_point(body, start, hard_end, start + max_chars // 2)
            text = body[start:end]
            trimmed_end = start + len(text.rstrip())
            if trimmed_end > start:
                specs.append(
                    ChunkSpec(len(specs), " > ".join(section.toc), body[start:trimmed_end], start, trimmed_end)
                )
            if end >= section.end:
                break
            next_start = end - overlap if overlap else end
            if overlap:
                # Start the overlap at a word boundary.
                space = body.find(" ", next_start, end)
                next_start = space + 1 if space != -1 else next_start
            start = max(next_start, start + 1)
    return specs
