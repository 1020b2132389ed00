"""Each hit's confidence: a calibrated estimate of the probability that it is relevant to the query.

Fusion orders the candidates; this says how sure the engine is of each, from what it knows at fusion time
(``FEATURES``): each lane's score and rank, which query words the hit holds (weighted by their idf), whether
its title holds one, and where its scores stand in this query's distributions (the lexical lane's best score,
the vector lane's background over the whole corpus: ``search.engine.background``). Raw cosines are useless for
this (a made-up word scores like a real question); how far a hit stands out is not.

The estimate has two stages per (embedding model, language, head), both logistic models: how likely the
knowledge base answers this query at all (``answerable``, from the query-level features and the first
``TOP_K`` candidates' own, ``QUERY_FEATURES``), times how likely this candidate is an answer to a query that
is answered (from its own features). The product goes through an isotonic calibration. All are fitted by
``manage.py evaluate --calibrate`` on judged dev sets (in-collection questions, and off-collection ones:
another dataset's questions, questions whose answers were taken out, made-up words; none of their hits is
relevant) and stored in ``confidence.json`` beside ``lane_weights.json``. Measured on the Arabic dev set, the
first stage is what tells "nothing here" apart: at the same share of questions answered it leaves 98 % of
another dataset's questions unanswered where one per-hit model left 87 %.

The hit stage sees nothing of a candidate's rank: two candidates with the same evidence get the same
confidence, so 23 items that hold the searched word in their titles alike are all kept or all left out, never
the first page of them. The head is the set of lanes the search ran:
``hybrid`` (both), ``lexical`` (the vector lane was left out, failed, or the search is lexical) or ``vector``
(similar_to, a vector search). A query's languages weigh the per-language models by the detector's posterior
(``search.text.language``), so an ambiguous query gets the mean of its languages' estimates. A model the table
does not know (OpenAI's) uses the table's ``default`` entry (documented in docs/engine.md).

Thresholds (site 0.35, MCP 0.3, CLI 0.25) apply to this number (``retrieve``): below it a hit is not an answer.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from django.conf import settings

from search.engine.background import QueryBackground
from search.text import language

TABLE_PATH = Path(__file__).resolve().parent / "confidence.json"
Head = Literal["hybrid", "lexical", "vector"]
HEADS: tuple[Head, ...] = ("hybrid", "lexical", "vector")
FloatArray = npt.NDArray[np.float64]

# What the engine knows of a candidate at fusion time, in this order (``features``). Query-level features
# (``q_*``) are the same for every candidate of a search; the rest are the candidate's own.
FEATURES: tuple[str, ...] = (
    "lex",  # the lexical lane returned it
    "lex_cov",  # idf-weighted share of the query's words it holds (0 when the lexical lane did not return it)
    "lex_all",  # it holds every query word
    "lex_norm",  # its BM25 score over the query's largest possible one, Σ idf · (k1 + 1)
    "lex_rel",  # its BM25 score over the query's best
    "lex_rr",  # 1 / its lexical rank (0: not returned)
    "title",  # its title holds a query word
    "vec",  # the vector lane returned it
    "vec_z",  # its cosine as a z-score of the query's cosines over the whole corpus
    "vec_gap",  # how far below the query's best cosine it is, in the same units
    "vec_lane_z",  # its cosine as a z-score of the lane's own hits for this query
    "vec_rr",  # 1 / its vector rank (0: not returned)
    "q_vec_top_z",  # how far the query's best cosine stands out of its corpus distribution
    "q_lex_top_norm",  # the best lexical hit's lex_norm
    "q_lex_all",  # some hit holds every query word
    "q_lex_all_count",  # log(1 + how many candidates hold every query word): one clear match, or many alike
    "q_lex_margin",  # how far the best lexical score is ahead of the second, over the best
    "q_vec_margin",  # how far the best cosine is ahead of the second, in background standard deviations
    "q_terms",  # log(1 + number of query words)
)
# Features each head may use: a lane that did not run says nothing.
_LEXICAL = {
    "lex", "lex_cov", "lex_all", "lex_norm", "lex_rel", "lex_rr", "title", "q_lex_top_norm", "q_lex_all",
    "q_lex_all_count", "q_lex_margin",
}
_VECTOR = {"vec", "vec_z", "vec_gap", "vec_lane_z", "vec_rr", "q_vec_top_z", "q_vec_margin"}
HEAD_FEATURES: dict[Head, tuple[str, ...]] = {
    "hybrid": FEATURES,
    "lexical": tuple(f for f in FEATURES if f not in _VECTOR),
    "vector": tuple(f for f in FEATURES if f not in _LEXICAL),
}
# What the hit stage may not use: ranks (where a candidate stands says nothing of it that its scores do not
# say, and would make equal candidates unequal), and the query-level features (the answerable stage's: how
# many candidates hold every word, or how far the first is ahead, says whether the query is answered, not
# which of several equal candidates answers it). The query's length stays: holding the one word typed makes
# a match, holding every word of a long question less surely its answer.
NOT_HIT_EVIDENCE = frozenset({"lex_rr", "vec_rr", *(n for n in FEATURES if n.startswith("q_") and n != "q_terms")})
# The answerable stage reads the query-level features and these first candidates' own features.
TOP_K = 1
QUERY_FEATURES: tuple[str, ...] = (
    *(f"top{i}_{name}" for i in range(1, TOP_K + 1) for name in FEATURES if not name.startswith("q_")),
    *(name for name in FEATURES if name.startswith("q_")),
)
# A vector hit that stands out of the corpus by more than this many standard deviations is capped (the
# fitted models saw nothing beyond it).
Z_CAP = 12.0


def hit_features(head: Head) -> tuple[str, ...]:
    """The features the hit stage of ``head`` reads."""
    return tuple(f for f in HEAD_FEATURES[head] if f not in NOT_HIT_EVIDENCE)


def answerable_features(head: Head) -> tuple[str, ...]:
    """The query features the answerable stage of ``head`` reads: those of its lanes."""
    allowed = set(HEAD_FEATURES[head])
    return tuple(q for q in QUERY_FEATURES if q.split("_", 1)[-1] in allowed or q in allowed)


def query_features(matrix: FloatArray) -> FloatArray:
    """The ``QUERY_FEATURES`` row of a search from its candidates' ``FEATURES`` matrix (best first): the first
    ``TOP_K`` candidates' own features (zeros where there are fewer) and the query-level ones."""
    own = [i for i, name in enumerate(FEATURES) if not name.startswith("q_")]
    shared = [i for i, name in enumerate(FEATURES) if name.startswith("q_")]
    top = np.zeros((TOP_K, len(own)))
    rows = min(TOP_K, matrix.shape[0])
    if rows:
        top[:rows] = matrix[:rows][:, own]
    head = matrix[0, shared] if matrix.shape[0] else np.zeros(len(shared))
    out: FloatArray = np.concatenate([top.ravel(), head])[None, :]
    return out


@dataclass(frozen=True)
class LexicalEvidence:
    """A candidate's best lexical hit: rank (1-based), BM25 score, the query terms it holds (bit set) and
    whether its title holds one."""

    rank: int
    score: float
    mask: int
    title: bool


@dataclass(frozen=True)
class VectorEvidence:
    rank: int
    similarity: float


@dataclass(frozen=True)
class QueryEvidence:
    """What a search knows of its query: the query terms' idfs (in term order), the vector lane's cosine
    background (None: the lane did not run or the space is empty), and the lanes' own score spreads."""

    idfs: tuple[float, ...] = ()
    background: QueryBackground | None = None
    lex_top: float = 0.0
    lex_second: float = 0.0
    vec_top: float | None = None
    vec_second: float | None = None
    vec_low: float = 0.0
    vec_mean: float = 0.0
    vec_std: float = 0.0
    k1: float = 1.2


@dataclass(frozen=True)
class Candidate:
    lexical: LexicalEvidence | None = None
    vector: VectorEvidence | None = None
    # The query terms the candidate holds over all its lexical hits (an item holds what its chunks hold).
    mask: int = 0


def query_evidence(
    *,
    idfs: Sequence[float],
    background: QueryBackground | None,
    lexical_scores: Sequence[float],
    similarities: Sequence[float],
) -> QueryEvidence:
    """The query-level evidence from the lanes' outputs (their scores as returned, best first)."""
    sims = list(similarities)
    lex = sorted(lexical_scores, reverse=True)
    ranked_sims = sorted(sims, reverse=True)
    mean = sum(sims) / len(sims) if sims else 0.0
    std = (sum((s - mean) ** 2 for s in sims) / len(sims)) ** 0.5 if sims else 0.0
    return QueryEvidence(
        idfs=tuple(idfs),
        background=background,
        lex_top=lex[0] if lex else 0.0,
        lex_second=lex[1] if len(lex) > 1 else 0.0,
        vec_top=ranked_sims[0] if sims else None,
        vec_second=ranked_sims[1] if len(sims) > 1 else None,
        vec_low=min(sims) if sims else 0.0,
        vec_mean=mean,
        vec_std=std,
        k1=float(settings.SEARCH["BM25_K1"]),
    )


@dataclass(frozen=True)
class Columns:
    """A search's candidates as columns, best first: what ``features`` reads, without an object per candidate
    (a search scores a few hundred; building them was a third of its confidence time). Rank 0: the lane did
    not return the candidate (its score, title and similarity are then 0 and unread)."""

    lex_rank: npt.NDArray[np.int64]
    lex_score: FloatArray
    title: npt.NDArray[np.bool_]
    vec_rank: npt.NDArray[np.int64]
    similarity: FloatArray
    masks: Sequence[int]  # the query terms each candidate holds (bit i: term i), as ``Candidate.mask``

    @classmethod
    def of(cls, candidates: Sequence[Candidate]) -> Columns:
        return cls(
            np.array([c.lexical.rank if c.lexical else 0 for c in candidates], dtype=np.int64),
            np.array([c.lexical.score if c.lexical else 0.0 for c in candidates], dtype=np.float64),
            np.array([c.lexical.title if c.lexical else False for c in candidates], dtype=np.bool_),
            np.array([c.vector.rank if c.vector else 0 for c in candidates], dtype=np.int64),
            np.array([c.vector.similarity if c.vector else 0.0 for c in candidates], dtype=np.float64),
            [c.mask for c in candidates],
        )

    @classmethod
    def gather(
        cls,
        keys: Sequence[int],
        masks: Sequence[int],
        *,
        lexical: Sequence[tuple[int, float, bool]],
        vector: Sequence[tuple[int, float]],
    ) -> Columns:
        """The columns of the candidates ``keys`` (best first) holding ``masks``, from the lanes' hits in lane
        order: ``lexical`` (key, BM25 score, title holds a query word), ``vector`` (key, cosine); a key's rank
        in a lane is its place in that list (1-based)."""
        lex_at = {key: i for i, (key, _, _) in enumerate(lexical)}
        vec_at = {key: i for i, (key, _) in enumerate(vector)}
        li = np.array([lex_at.get(key, -1) for key in keys], dtype=np.int64)
        vi = np.array([vec_at.get(key, -1) for key in keys], dtype=np.int64)
        # index -1 reads the appended absent value
        lex_scores = np.array([score for _, score, _ in lexical] + [0.0], dtype=np.float64)
        titles = np.array([title for _, _, title in lexical] + [False], dtype=np.bool_)
        sims = np.array([sim for _, sim in vector] + [0.0], dtype=np.float64)
        return cls(li + 1, lex_scores[li], titles[li], vi + 1, sims[vi], masks)


def features(candidates: Sequence[Candidate] | Columns, query: QueryEvidence) -> FloatArray:
    """The ``FEATURES`` matrix, one row per candidate."""
    cols = candidates if isinstance(candidates, Columns) else Columns.of(candidates)
    n = len(cols.masks)
    out = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if not n:
        return out
    idf_total = sum(query.idfs)
    full = (1 << len(query.idfs)) - 1
    max_bm25 = idf_total * (query.k1 + 1.0) or 1.0
    bg = query.background
    top_z = _capped(bg.z(query.vec_top)) if bg is not None and query.vec_top is not None else 0.0
    # Candidates share a handful of masks: each one's idf held and completeness are worked out once.
    held_of = {m: sum(idf for i, idf in enumerate(query.idfs) if m & (1 << i)) for m in set(cols.masks)}
    lex = cols.lex_rank > 0
    complete = np.array([bool(full) and (m & full) == full for m in cols.masks], dtype=np.bool_) & lex
    all_count = int(np.count_nonzero(complete))
    col = _COLUMN
    if lex.any():
        held = np.array([held_of[m] for m in cols.masks], dtype=np.float64)[lex]
        scores = cols.lex_score[lex]
        out[lex, col["lex"]] = 1.0
        out[lex, col["lex_cov"]] = held / idf_total if idf_total > 0 else 0.0
        out[lex, col["lex_all"]] = complete[lex]
        out[lex, col["lex_norm"]] = np.minimum(scores / max_bm25, 2.0)
        out[lex, col["lex_rel"]] = scores / query.lex_top if query.lex_top > 0 else 0.0
        out[lex, col["lex_rr"]] = 1.0 / cols.lex_rank[lex]
        out[lex, col["title"]] = cols.title[lex]
    if bg is not None:
        vec = cols.vec_rank > 0
        if vec.any():
            sims = cols.similarity[vec]
            z = np.clip((sims - bg.mean) / bg.std, -Z_CAP, Z_CAP)
            out[vec, col["vec"]] = 1.0
            out[vec, col["vec_z"]] = z
            out[vec, col["vec_gap"]] = z - top_z
            out[vec, col["vec_lane_z"]] = (sims - query.vec_mean) / query.vec_std if query.vec_std > 0 else 0.0
            out[vec, col["vec_rr"]] = 1.0 / cols.vec_rank[vec]
        if query.vec_top is not None and not vec.all():
            # Not among the lane's nearest: at most as close as its last hit.
            floor = _capped(bg.z(query.vec_low))
            out[~vec, col["vec_z"]] = floor
            out[~vec, col["vec_gap"]] = floor - top_z
            out[~vec, col["vec_lane_z"]] = (
                (query.vec_low - query.vec_mean) / query.vec_std if query.vec_std > 0 else 0.0
            )
    out[:, col["q_vec_top_z"]] = top_z
    out[:, col["q_lex_top_norm"]] = min(query.lex_top / max_bm25, 2.0) if query.lex_top > 0 else 0.0
    out[:, col["q_lex_all"]] = float(all_count > 0)
    out[:, col["q_lex_all_count"]] = math.log1p(all_count)
    out[:, col["q_lex_margin"]] = (query.lex_top - query.lex_second) / query.lex_top if query.lex_top > 0 else 0.0
    out[:, col["q_vec_margin"]] = (
        _capped((query.vec_top - query.vec_second) / bg.std)
        if bg is not None and query.vec_top is not None and query.vec_second is not None else 0.0
    )
    out[:, col["q_terms"]] = math.log1p(len(query.idfs))
    return out


_COLUMN = {name: i for i, name in enumerate(FEATURES)}


def _capped(z: float) -> float:
    return max(-Z_CAP, min(Z_CAP, z))


# --- the fitted models ---


@dataclass(frozen=True)
class HeadModel:
    """A logistic model over named candidate features, times the ``answerable`` stage's probability for the
    search (a logistic model over named ``QUERY_FEATURES``) when there is one, then an isotonic map of the
    product (``xs`` → ``ys``, increasing; linear between the points)."""

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    xs: tuple[float, ...] = ()
    ys: tuple[float, ...] = ()
    # The hybrid head's floor: another head of the same entry (``vector``) whose estimate bounds this one from
    # below, and the isotonic map that recalibrates ``max(this, floor)``.
    floor: str = ""
    floor_xs: tuple[float, ...] = ()
    floor_ys: tuple[float, ...] = ()
    answerable: HeadModel | None = None
    # "hit": the features are FEATURES (one row per candidate); "query": QUERY_FEATURES (one row per search).
    space: str = "hit"
    _columns: tuple[int, ...] = field(default=(), compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], *, space: str = "hit") -> HeadModel:
        names = tuple(str(n) for n in data["features"])
        known = FEATURES if space == "hit" else QUERY_FEATURES
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"confidence table names unknown features {unknown}; refit with evaluate --calibrate")
        answerable = data.get("answerable")
        return cls(
            features=names,
            coef=tuple(float(c) for c in data["coef"]),
            intercept=float(data["intercept"]),
            mean=tuple(float(c) for c in data["mean"]),
            scale=tuple(float(c) for c in data["scale"]),
            xs=tuple(float(x) for x in data.get("isotonic", {}).get("x", ())),
            ys=tuple(float(y) for y in data.get("isotonic", {}).get("y", ())),
            floor=str(data.get("floor", {}).get("head", "")),
            floor_xs=tuple(float(x) for x in data.get("floor", {}).get("x", ())),
            floor_ys=tuple(float(y) for y in data.get("floor", {}).get("y", ())),
            answerable=cls.from_json(answerable, space="query") if answerable else None,
            space=space,
            _columns=tuple(known.index(n) for n in names),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "features": list(self.features),
            "coef": [round(c, 6) for c in self.coef],
            "intercept": round(self.intercept, 6),
            "mean": [round(m, 6) for m in self.mean],
            "scale": [round(s, 6) for s in self.scale],
            "isotonic": {"x": [round(x, 6) for x in self.xs], "y": [round(y, 6) for y in self.ys]},
        }
        if self.floor:
            data["floor"] = {"head": self.floor, "x": [round(x, 6) for x in self.floor_xs],
                             "y": [round(y, 6) for y in self.floor_ys]}
        if self.answerable is not None:
            data["answerable"] = self.answerable.to_json()
            del data["answerable"]["isotonic"]
        return data

    def logistic(self, matrix: FloatArray) -> FloatArray:
        """This model's own logistic probability for each row of a matrix of its space."""
        known = FEATURES if self.space == "hit" else QUERY_FEATURES
        columns = self._columns or tuple(known.index(n) for n in self.features)
        x = (matrix[:, columns] - np.asarray(self.mean)) / np.asarray(self.scale)
        logits = x @ np.asarray(self.coef) + self.intercept
        result: FloatArray = 1.0 / (1.0 + np.exp(-np.clip(logits, -40.0, 40.0)))
        return result

    def raw(self, matrix: FloatArray) -> FloatArray:
        """Before the isotonic map: each candidate's probability (rows of a ``FEATURES`` matrix, best first: the
        whole search, since the answerable stage reads its first candidates) times the search's answerable
        probability."""
        p = self.logistic(matrix)
        if self.answerable is not None and matrix.shape[0]:
            p = p * float(self.answerable.logistic(query_features(matrix))[0])
        return p

    def predict(self, matrix: FloatArray) -> FloatArray:
        p = self.raw(matrix)
        if len(self.xs) >= 2:
            p = np.interp(p, np.asarray(self.xs), np.asarray(self.ys))
        result: FloatArray = np.clip(p, 0.0, 1.0)
        return result

    def floored(self, mine: FloatArray, floor: FloatArray) -> FloatArray:
        """``max(mine, floor)`` through the floor's isotonic map."""
        p = np.maximum(mine, floor)
        if len(self.floor_xs) >= 2:
            p = np.interp(p, np.asarray(self.floor_xs), np.asarray(self.floor_ys))
        result: FloatArray = np.clip(p, 0.0, 1.0)
        return result


_lock = threading.Lock()
_cache: dict[str, dict[str, Any]] = {}


def table_path() -> Path:
    configured = settings.SEARCH.get("CONFIDENCE_TABLE")
    return Path(configured) if configured else TABLE_PATH


def table(path: Path | None = None) -> dict[str, Any]:
    """The fitted models (``{"models": {model: {language: {"heads": {head: …}, …}}}, "default": {…}}``), parsed
    and cached per file modification time, so a refit is seen without a restart."""
    path = path or table_path()
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return {"models": {}, "parsed": {}}
    key = f"{path}:{mtime}"
    with _lock:
        if key not in _cache:
            _cache.clear()
            data = json.loads(path.read_text(encoding="utf-8"))
            data["parsed"] = _parse(data)
            _cache[key] = data
        return _cache[key]


def _parse(data: dict[str, Any]) -> dict[tuple[str, str, str], HeadModel]:
    parsed: dict[tuple[str, str, str], HeadModel] = {}
    entries = [(model, langs) for model, langs in data.get("models", {}).items()]
    entries.append(("*", data.get("default", {})))
    for model, langs in entries:
        for code, entry in langs.items():
            for head, head_data in entry.get("heads", {}).items():
                parsed[(model, code, head)] = HeadModel.from_json(head_data)
    return parsed


def head_model(model: str, code: str, head: Head, *, path: Path | None = None) -> HeadModel | None:
    """The fitted model of (embedding model, language, head): the model's own for that language, else the
    model's pooled one (``*``), else the table's default for that language, else its pooled default; for a
    hybrid or vector search that none of these knows, the lexical head found the same way."""
    parsed: dict[tuple[str, str, str], HeadModel] = table(path)["parsed"]
    for key in ((model, code, head), (model, "*", head), ("*", code, head), ("*", "*", head)):
        if key in parsed:
            return parsed[key]
    # A model nobody could fit (OpenAI's): its hits are judged by their words, the lexical head's.
    return head_model(model, code, "lexical", path=path) if head != "lexical" else None


def known_languages(model: str, *, path: Path | None = None) -> tuple[str, ...]:
    parsed: dict[tuple[str, str, str], HeadModel] = table(path)["parsed"]
    return tuple(sorted({code for m, code, _ in parsed if m == model and code != "*"}))


def language_confidences(
    matrix: FloatArray, *, model: str, code: str, head: Head, path: Path | None = None
) -> FloatArray | None:
    """Each row's confidence under the (model, language) entry's head, its floor applied (None: no model)."""
    fitted = head_model(model, code, head, path=path)
    if fitted is None:
        return None
    values = fitted.predict(matrix)
    if fitted.floor:
        floor = head_model(model, code, fitted.floor, path=path)  # type: ignore[arg-type]
        if floor is not None:
            values = fitted.floored(values, floor.predict(matrix))
    return values


def confidences(
    matrix: FloatArray, *, model: str, head: Head, query_text: str, path: Path | None = None
) -> FloatArray:
    """Each row's confidence: the per-language models' estimates weighed by the query's language posterior
    (equal weights for a query without words, e.g. similar_to). With no fitted model at all, every
    candidate counts as certain (1.0): a table-less install behaves as before thresholds had a meaning."""
    if matrix.shape[0] == 0:
        return np.zeros(0)
    posterior = list(language.language_probabilities(query_text)) if query_text.strip() else []
    if not posterior:
        codes = known_languages(model, path=path) or ("*",)
        posterior = [(code, 1.0 / len(codes)) for code in codes]
    total = 0.0
    result = np.zeros(matrix.shape[0])
    for code, weight in posterior:
        values = language_confidences(matrix, model=model, code=code, head=head, path=path)
        if values is None:
            continue
        result += weight * values
        total += weight
    if total == 0.0:
        return np.ones(matrix.shape[0])
    out: FloatArray = result / total
    return out


# --- recording, for the fit ---

_recording = threading.local()


@dataclass
class Recorded:
    """One search's candidates as fusion saw them, best first: their features, keys and head."""

    query_text: str
    head: Head
    keys: list[int]
    item_ids: list[int]
    matrix: FloatArray


@contextmanager
def recording() -> Iterator[list[Recorded]]:
    """Within the block, every search on this thread appends its candidates' features to the yielded list
    (``evaluate --calibrate`` fits the models on them; ``evaluate --abstention`` reads the confidences)."""
    sink: list[Recorded] = []
    previous = getattr(_recording, "sink", None)
    _recording.sink = sink
    try:
        yield sink
    finally:
        _recording.sink = previous


def record(entry: Recorded) -> None:
    sink: list[Recorded] | None = getattr(_recording, "sink", None)
    if sink is not None:
        sink.append(entry)


def table_update(
    *, model: str, code: str, heads: dict[str, Any], measured: dict[str, Any], path: Path | None = None
) -> None:
    """Record the fitted ``heads`` of (model, language) with the figures they were fitted on; other rows stay.
    ``model="*"`` writes the table's default (used for models the table does not know)."""
    path = path or table_path()
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"models": {}, "default": {}}
    section = data.setdefault("default", {}) if model == "*" else data.setdefault("models", {}).setdefault(model, {})
    entry = section.setdefault(code, {})
    entry.setdefault("heads", {}).update(heads)
    entry["measured"] = measured
    data["features"] = list(FEATURES)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a search never reads half a table
