"""What instances say to each other: the federation endpoint's request and answer (``POST
/api/federation/search``), as pydantic models.

A peer's answer is untrusted input: it is read only up to ``FEDERATION_MAX_ANSWER_BYTES``, must be JSON of
exactly this shape (unknown fields ignored, every string and list bounded), spans must lie inside their text,
URLs must be absolute http(s) ones, and confidence a number in [0, 1]. Text is plain text, never HTML: the
site escapes it and builds ``<mark>`` from the offsets itself.

An answer may also say how its engine ordered its candidates (``fusion``: each lane's weight and raw scores)
and give each hit's raw lane scores and rerank factor, so that the asking instance orders every source's hits
as one instance holding all the corpora would (``search.engine.fusion.federated_scores``). Both are optional:
an answer without them is merged by confidence.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PROTOCOL_VERSION = 1
MAX_HITS = 50
# A lane's scores in ``PeerFusion``: the English lane scores every candidate of the other two, each at most
# 2,000 deep (SEARCH_LANE_DEPTH's and SEARCH_VECTOR_DEPTH's maxima).
MAX_LANE_SCORES = 4000
# A cosine, with room for rounding.
MAX_COSINE = 1.01
LaneName = Literal["lexical", "vector", "english"]
# A raw lane score: BM25 (>= 0) or a cosine ([-1, 1], with room for rounding).
Score = Annotated[float, Field(ge=-2.0, le=1e6, allow_inf_nan=False)]

Span = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]
Spans = Annotated[list[Span], Field(max_length=64)]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\s]")  # \s: what str.isspace() calls space


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
    # Each lane's raw score of this hit, and its rerank factor (the merge caps it at this instance's maximum).
    lane_scores: Annotated[dict[LaneName, Score], Field(max_length=3)] = {}
    rerank: Annotated[float, Field(ge=1.0, le=100.0, allow_inf_nan=False)] = 1.0

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
        if _CONTROL_OR_SPACE.search(value):
            raise ValueError("url must not hold spaces or control characters")
        return value

    @model_validator(mode="after")
    def _spans(self) -> PeerHit:
        _spans_inside(self.title_spans, self.title, "title")
        _spans_inside(self.snippet_spans, self.snippet, "snippet")
        return self


class PeerLane(BaseModel):
    """One lane of a peer's fusion: its weight, the raw scores of every candidate it returned (in the lane's
    order), and what a candidate it did not return counts as (null: its lowest)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: LaneName
    weight: Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)]
    scores: Annotated[list[Score], Field(max_length=MAX_LANE_SCORES)]
    absent: Score | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PeerLane:
        low, high = (min(self.scores), max(self.scores)) if self.scores else (0.0, 0.0)
        if self.name != "lexical" and not -MAX_COSINE <= low <= high <= MAX_COSINE:
            raise ValueError(f"the {self.name} lane's scores are cosines: between -1 and 1")
        if self.absent is not None and (self.name != "lexical" or (self.scores and self.absent > low)):
            raise ValueError("absent is the lexical lane's score of a candidate it did not return: at most its lowest")
        return self


class PeerFusion(BaseModel):
    """How a peer's engine ordered its candidates (``search.types.FusionEvidence``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    method: Literal["zscore", "rrf", "lexical", "vector"]
    lanes: Annotated[list[PeerLane], Field(min_length=1, max_length=3)]
    model: Annotated[str, Field(max_length=200)] = ""
    english: Annotated[str, Field(max_length=200)] = ""
    candidates: Annotated[int, Field(ge=0, le=1_000_000)]
    depth: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    lexical_hits: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    vector_lexical: Annotated[list[bool], Field(max_length=MAX_LANE_SCORES)] = []
    granularity: Literal["item", "chunk"] = "item"
    worst: Annotated[dict[LaneName, Score], Field(max_length=3)] = {}

    @model_validator(mode="after")
    def _lanes_of_its_method(self) -> PeerFusion:
        names = [lane.name for lane in self.lanes]
        expected = {"lexical": [["lexical"]], "vector": [["vector"]]}.get(
            self.method, [["lexical", "vector"], ["lexical", "vector", "english"]]
        )
        if names not in expected:
            raise ValueError(f"a {self.method} fusion has the lanes {' or '.join(map(str, expected))}, not {names}")
        vector = [lane for lane in self.lanes if lane.name == "vector"]
        flags_needed = self.method in ("zscore", "rrf") and vector and vector[0].scores
        if (self.vector_lexical or flags_needed) and (not vector or len(vector[0].scores) != len(self.vector_lexical)):
            raise ValueError("fusion's vector_lexical must have one flag per score of its vector lane")
        stray = sorted(set(self.worst) - set(names))
        if stray:
            raise ValueError(f"fusion's worst has scores of lanes it does not name: {stray}")
        return self


class PeerAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    instance: Annotated[str, Field(min_length=1, max_length=100)]
    version: Annotated[str, Field(max_length=40)] = ""
    protocol: Annotated[int, Field(ge=1)] = PROTOCOL_VERSION
    count: Annotated[int, Field(ge=0, le=1_000_000_000)]
    hits: Annotated[list[PeerHit], Field(max_length=MAX_HITS)]
    fusion: PeerFusion | None = None

    @model_validator(mode="after")
    def _scores_of_its_lanes(self) -> PeerAnswer:
        if self.fusion is None:
            return self
        lanes = {lane.name: frozenset(lane.scores) for lane in self.fusion.lanes}
        for n, hit in enumerate(self.hits):
            stray = set(hit.lane_scores) - set(lanes)
            if stray:
                raise ValueError(f"hit {n} has scores of lanes its fusion does not name: {sorted(stray)}")
            unlisted = [name for name, score in hit.lane_scores.items() if score not in lanes[name]]
            if unlisted:
                raise ValueError(f"hit {n}'s {unlisted[0]} score is not among that lane's scores")
        return self

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
