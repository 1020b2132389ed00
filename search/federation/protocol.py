"""What instances say to each other: the federation endpoint's request and answer (``POST
/api/federation/search``), as pydantic models.

A peer's answer is untrusted input: it is read only up to ``FEDERATION_MAX_ANSWER_BYTES``, must be JSON of
exactly this shape (unknown fields ignored, every string and list bounded), spans must lie inside their text,
URLs must be absolute http(s) ones, and confidence a number in [0, 1]. Text is plain text, never HTML: the
site escapes it and builds ``<mark>`` from the offsets itself.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PROTOCOL_VERSION = 1
MAX_HITS = 50

Span = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]
Spans = Annotated[list[Span], Field(max_length=64)]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _no_controls(value: str) -> str:
    """Control characters (terminal escapes and the like) become spaces: the offsets stay valid."""
    return _CONTROL.sub(" ", value)


def _spans_inside(spans: list[Span], text: str, what: str) -> None:
    for start, end in spans:
        if not start < end <= len(text):
            raise ValueError(f"{what} span [{start}, {end}) is not inside the text ({len(text)} characters)")


class PeerHit(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    title: Annotated[str, Field(min_length=1, max_length=500)]
    url: Annotated[str, Field(max_length=2000)]
    snippet: Annotated[str, Field(max_length=4000)] = ""
    snippet_spans: Spans = []
    title_spans: Spans = []
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    lanes: Annotated[list[Literal["lexical", "vector"]], Field(max_length=2)] = []
    language: Annotated[str, Field(max_length=12)] = ""
    updated_at: datetime | None = None
    content_hash: Annotated[str, Field(max_length=64, pattern=r"^[0-9a-f]*$")] = ""

    @field_validator("title", "snippet", "language")
    @classmethod
    def _plain(cls, value: str) -> str:
        return _no_controls(value)

    @field_validator("url")
    @classmethod
    def _absolute_http(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise ValueError("url must be an absolute http(s) URL without credentials")
        if _CONTROL.search(value) or any(c.isspace() for c in value):
            raise ValueError("url must not hold spaces or control characters")
        return value

    @model_validator(mode="after")
    def _spans(self) -> PeerHit:
        _spans_inside(self.title_spans, self.title, "title")
        _spans_inside(self.snippet_spans, self.snippet, "snippet")
        return self


class PeerAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    instance: Annotated[str, Field(min_length=1, max_length=100)]
    version: Annotated[str, Field(max_length=40)] = ""
    protocol: Annotated[int, Field(ge=1)] = PROTOCOL_VERSION
    count: Annotated[int, Field(ge=0, le=1_000_000_000)]
    hits: Annotated[list[PeerHit], Field(max_length=MAX_HITS)]

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: int) -> int:
        if value != PROTOCOL_VERSION:
            raise ValueError(f"protocol {value} is not one this instance speaks ({PROTOCOL_VERSION})")
        return value


class PeerInfo(BaseModel):
    """``GET /api/federation/info``: who answers, and what it runs (``federation_peer check``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    instance: Annotated[str, Field(min_length=1, max_length=100)]
    version: Annotated[str, Field(max_length=40)]
    protocol: Annotated[int, Field(ge=1)]
    embedding_model: Annotated[str, Field(max_length=200)] = ""
