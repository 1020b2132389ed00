"""Fitting and measuring the engine's confidence (``search.engine.confidence``) on judged dev sets.

``evaluate --calibrate`` and ``evaluate --abstention`` run, inside the throwaway evaluation database:

1. **in-collection** questions: the dev set's own, judged by its qrels (a hit is relevant when judged so);
2. **off-collection** questions, none of whose hits is relevant:
   - ``other_language``: questions of the other dev sets (another language, another collection);
   - ``same_language``: the dev set's own questions whose judged documents are taken out of the corpus (a
     seeded fifth of them; for Wikipedia sets, every paragraph of their articles), asked again once those
     documents are archived: questions in the corpus's language, in its style, that it no longer answers;
   - ``nonsense``: made-up words (letter strings shaped like the language's words, and compounds of two
     words, in the corpus's script and in Latin script).

Every search runs through ``retrieve`` at threshold 0 with ``confidence.recording``, which hands back each
candidate's features exactly as the engine computed them, so the fit and the product can never disagree on a
feature. The models (one logistic regression per head, then an isotonic map fitted on out-of-fold predictions)
are fitted with scikit-learn here and stored as plain numbers in ``search/engine/confidence.json``.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evaluation import Dataset
from search.engine import confidence

# Off-collection questions asked per kind (in-collection: every judged question of the split).
OTHER_LANGUAGE_QUERIES = 300
TITLE_QUERIES = 300
KEYWORD_QUERIES = 200
RARE_WORD_QUERIES = 200
# Question kinds whose answers are in the corpus (the rest are off-collection: none of their hits is relevant).
ANSWERED_KINDS = ("in", "known_item", "keyword", "rare_word")
# Kinds a head's fit leaves out: a rare word is answered by holding it, evidence the vector head has not; by
# meaning alone a rare real word and a made-up one look alike (fitted on both, the vector head, the hybrid
# head's floor, lifted made-up Arabic words to 0.42).
NOT_FITTED = {"vector": ("rare_word",)}
# Every kind ``evaluate --kinds`` may record.
KINDS = (*ANSWERED_KINDS, "other_language", "nonsense", "same_language")
NONSENSE_QUERIES = 200
HELD_OUT_SHARE = 0.2
# Candidates per search that the fit sees (best first): where thresholds bite, with the deep tail's negatives.
FIT_DEPTH = 50
SEARCH_LIMIT = 100
# Off-collection questions weigh this much of the in-collection ones in the fit, per kind: the prior of a
# question the knowledge base cannot answer.
OFF_COLLECTION_WEIGHT = 0.15
THRESHOLDS = (0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
DEFAULT_THRESHOLD = 0.35
FOLDS = 5
# Reliability diagram bins.
BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)


@dataclass
class Searched:
    """One question's search as the engine saw it: its candidates' features (best first) and which of them
    are relevant."""

    qid: str
    kind: str
    head: str
    matrix: np.ndarray
    relevant: np.ndarray  # bool per candidate: its judged answers (known-item and keyword questions: by title)
    judged: int  # how many relevant documents the question has in the searched corpus
    # Dumps of earlier versions: ``relevant`` also counted paragraphs of the same article, and this held the
    # judged answers alone. The fit and the figures read ``answers``, the judged ones.
    strict: np.ndarray | None = None
    docs: tuple[str, ...] = ()  # the candidates' document ids

    @property
    def answers(self) -> np.ndarray:
        """The judged answers among the candidates: what the fit learns and "answered" is measured on (fitting
    on a Wikipedia article's other paragraphs as well made 0.9 mean 0.35 against the judgements in Arabic,
    and mean different things in English, whose titles are unique)."""
        return self.relevant if self.strict is None else self.strict


@dataclass
class Collected:
    searches: list[Searched] = field(default_factory=list)

    def of(self, *, head: str, kinds: Iterable[str] | None = None) -> list[Searched]:
        wanted = set(kinds) if kinds is not None else None
        return [s for s in self.searches if s.head == head and (wanted is None or s.kind in wanted)]


# --- the questions ---


def sibling_datasets(source: Path) -> list[Path]:
    """The other BEIR folders beside the dataset folder ``source`` (``../shared/datasets/*``)."""
    source = source.resolve()
    return sorted(
        p for p in source.parent.iterdir() if p.is_dir() and p != source and (p / "queries.jsonl").exists()
    )


def other_language_queries(source: Path, *, seed: int = 7, n: int = OTHER_LANGUAGE_QUERIES) -> dict[str, str]:
    """Questions of the other dev sets beside ``source``, ``n`` in all, evenly from each (seeded)."""
    others = sibling_datasets(source)
    if not others:
        return {}
    rng = random.Random(seed)
    out: dict[str, str] = {}
    for path in others:
        texts = []
        with (path / "queries.jsonl").open(encoding="utf-8") as handle:
            for line in handle:
                data = json.loads(line)
                texts.append((f"{path.name}:{data['_id']}", str(data["text"])))
        rng.shuffle(texts)
        out.update(texts[: n // len(others)])
    return out


_LATIN_C, _LATIN_V = "bcdfghjklmnprstvz", "aeiou"
_ARABIC = "ابتثجحخدذرزسشصضطظعغفقكلمنهوي"


def nonsense_queries(language: str, *, seed: int = 11, n: int = NONSENSE_QUERIES) -> dict[str, str]:
    """Made-up words: pronounceable letter strings and two-part compounds, in Latin script and (for Arabic)
    in Arabic script, one to three of them per question (seeded)."""
    rng = random.Random(seed)

    def latin_word() -> str:
        return "".join(rng.choice(_LATIN_C) + rng.choice(_LATIN_V) for _ in range(rng.randint(3, 6)))

    def arabic_word() -> str:
        return "".join(rng.choice(_ARABIC) for _ in range(rng.randint(4, 8)))

    out: dict[str, str] = {}
    for i in range(n):
        word = arabic_word if language == "ar" and i % 2 == 0 else latin_word
        shape = i % 3
        if shape == 0:
            text = word()
        elif shape == 1:
            text = word() + word()
        else:
            text = " ".join(word() for _ in range(rng.randint(2, 3)))
        out[f"nonsense:{i}"] = text
    return out


def title_queries(
    dataset: Dataset, *, seed: int = 9, n: int = TITLE_QUERIES
) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Known-item questions: ``n`` documents' titles (seeded), each answered by every document of that title
    (a Wikipedia article's paragraphs; a SciFact abstract). People search a knowledge base by a document's name
    as often as by a question, and the dev sets hold only questions."""
    by_title: dict[str, set[str]] = defaultdict(set)
    with dataset.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            title = " ".join(str(data.get("title") or "").split())
            if len(title) >= 3:
                by_title[title].add(str(data["_id"]))
    titles = sorted(by_title)
    random.Random(seed).shuffle(titles)
    queries = {f"title:{i}": t for i, t in enumerate(titles[:n])}
    return queries, {qid: by_title[t] for qid, t in queries.items()}


_TITLE_WORD = re.compile(r"[^\W\d_]{4,}")


def _word_questions(
    dataset: Dataset, *, kind: str, text_of: Callable[[dict[str, Any]], str], seed: int, n: int, most: int
) -> tuple[dict[str, str], dict[str, set[str]]]:
    """``n`` words (at least 4 letters, seeded) that at most ``most`` documents hold in ``text_of(document)``,
    each a question answered by every document that holds it."""
    holders: dict[str, set[str]] = defaultdict(set)
    with dataset.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            for word in {w.lower() for w in _TITLE_WORD.findall(text_of(data))}:
                holders[word].add(str(data["_id"]))
    rng = random.Random(seed)
    candidates = sorted(w for w, docs in holders.items() if len(docs) <= most)
    rng.shuffle(candidates)
    queries = {f"{kind}:{i}": w for i, w in enumerate(candidates[:n])}
    return queries, {qid: holders[w] for qid, w in queries.items()}


def keyword_queries(
    dataset: Dataset, *, seed: int = 21, n: int = KEYWORD_QUERIES, most: int = 50
) -> tuple[dict[str, str], dict[str, set[str]]]:
    """One-word questions: a word of ``n`` documents' titles (seeded; at least 4 letters), each answered by every
    document whose title holds that word (at most ``most`` of them: a word in more titles says too little to
    judge). Staff type single words into a search box as often as questions."""
    return _word_questions(dataset, kind="keyword", text_of=lambda d: str(d.get("title") or ""), seed=seed, n=n,
                           most=most)


def rare_word_queries(
    dataset: Dataset, *, seed: int = 23, n: int = RARE_WORD_QUERIES, most: int = 3
) -> tuple[dict[str, str], dict[str, set[str]]]:
    """One rare word as the question: a word (at least 4 letters) that at most ``most`` documents hold anywhere,
    title or text (seeded), answered by every document that holds it. Staff search for a name, a code or a
    term they saw in one document; the keyword questions hold title words only, so without these a word held
    in one body alone looked like noise to the fit (a unique word, its only holder, confidence 0.09)."""
    return _word_questions(dataset, kind="rare_word", text_of=lambda d: f"{d.get('title') or ''} {d.get('text') or ''}",
                           seed=seed, n=n, most=most)


def rare_words_as_the_engine_matches(collected: Collected, *, most: int = 3) -> Collected:
    """The rare-word questions answered by the documents the engine finds holding the word, the others unchanged.

    A word at most ``most`` documents hold as written can be held by many more as the engine matches words
    (Arabic clitics stripped, stems): those documents hold it too, and labelling them "not an answer" taught
    the fit that holding the searched word means little. So each rare-word question is answered by the
    candidates of its lexical search that hold every query word (``lex_all``), in every head (by document), and
    a question that more than ``most`` documents, or none, hold that way is left out."""
    column = confidence.FEATURES.index("lex_all")
    holders: dict[str, set[str]] = {}
    for s in collected.searches:
        if s.kind == "rare_word" and s.head == "lexical":
            holders[s.qid] = {d for d, row in zip(s.docs, s.matrix, strict=False) if row[column] > 0}
    out = Collected()
    for s in collected.searches:
        if s.kind != "rare_word":
            out.searches.append(s)
            continue
        docs = holders.get(s.qid, set())
        if not docs or len(docs) > most or len(s.docs) != len(s.matrix):
            continue
        labels = np.array([d in docs for d in s.docs], dtype=bool)
        out.searches.append(replace(s, relevant=labels, strict=labels, judged=len(docs)))
    return out


def held_out_split(dataset: Dataset, *, seed: int = 5, share: float = HELD_OUT_SHARE) -> tuple[set[str], set[str]]:
    """(question ids, document ids): a seeded ``share`` of the questions whose judged documents are taken out
    of the corpus for the ``same_language`` kind. Documents are taken out with every document of the same
    title (a Wikipedia article's other paragraphs would still answer); a question is held out only when all its
    judged documents are."""
    titles: dict[str, str] = {}
    with dataset.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            data = json.loads(line)
            titles[str(data["_id"])] = str(data.get("title") or data["_id"])
    by_title: dict[str, set[str]] = defaultdict(set)
    for doc, title in titles.items():
        by_title[title].add(doc)
    rng = random.Random(seed)
    qids = sorted(dataset.queries)
    rng.shuffle(qids)
    target = int(len(qids) * share)
    removed: set[str] = set()
    for qid in qids:
        if len(removed) >= len(titles) * share:
            break
        for doc in dataset.qrels.get(qid, {}):
            removed |= by_title.get(titles.get(doc, doc), {doc})
    held = {q for q in dataset.queries if dataset.qrels.get(q) and set(dataset.qrels[q]) <= removed}
    if len(held) > target * 2:
        held = set(sorted(held)[: target * 2])
    return held, removed


# --- running the searches ---


def run_recorded(
    queries: dict[str, str],
    *,
    kind: str,
    mode: str,
    relevant_of: Callable[[str], set[str]],
    judged_of: Callable[[str], set[str]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Searched]:
    """Each question through ``retrieve`` (threshold 0, the staff principal, ``mode``), its candidates'
    features as the engine recorded them, labelled relevant by ``relevant_of(qid)`` (document ids) for the fit,
    and by ``judged_of(qid)`` (the judged answers alone; default: the same) for "answered"."""
    from search.embeddings.providers import provider_warm
    from search.engine import retrieve
    from search.models import ContentItem
    from search.principal import Principal
    from search.types import RetrievalQuery

    staff = Principal(kind="staff", all_content=True)
    provider_warm()
    external = dict(ContentItem.objects.values_list("id", "external_id"))
    out: list[Searched] = []
    for qid, text in queries.items():
        with confidence.recording() as sink:
            retrieve(query=RetrievalQuery(text=text[:2000], principal=staff, mode=mode,  # type: ignore[arg-type]
                                          limit=SEARCH_LIMIT, threshold=0.0))
        if progress:
            progress(1)
        if not sink:
            continue
        rec = sink[-1]
        docs = tuple(str(external.get(i, "")) for i in rec.item_ids)
        wanted = relevant_of(qid)
        labels = np.array([d in wanted for d in docs], dtype=bool)
        judged = judged_of(qid) if judged_of is not None else wanted
        strict = None if judged_of is None else np.array([d in judged for d in docs], dtype=bool)
        out.append(Searched(qid, kind, rec.head, rec.matrix, labels, len(judged), strict, docs))
    return out


# --- the fit ---


@dataclass(frozen=True)
class FitReport:
    head: str
    rows: int
    positives: int
    folds: int
    log_loss: float
    brier: float
    reliability: list[dict[str, float]]  # against the fit's labels, every question that has answers
    # the dev questions alone, against their judged answers only (siblings count as not relevant)
    reliability_judged: list[dict[str, float]] = field(default_factory=list)


def fold_of(qid: str, folds: int = FOLDS) -> int:
    """The cross-validation fold of a question: the same in every head, so a question's searches in the
    lexical, vector and hybrid heads are always held out together."""
    return zlib.crc32(qid.encode()) % folds


def _logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit((x - mean) / scale, y, sample_weight=w)
    return model.coef_[0], float(model.intercept_[0]), mean, scale


def _isotonic(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[list[float], list[float]]:
    """An increasing map of raw probabilities to observed rates, as at most ~40 (x, y) points."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(p, y.astype(float), sample_weight=w)
    xs = np.asarray(iso.X_thresholds_, dtype=float)
    ys = np.asarray(iso.y_thresholds_, dtype=float)
    if len(xs) > 40:  # keep the shape, fewer points
        keep = np.unique(np.linspace(0, len(xs) - 1, 40).round().astype(int))
        xs, ys = xs[keep], ys[keep]
    return [float(v) for v in xs], [float(v) for v in ys]


def _interp(p: np.ndarray, xs: list[float], ys: list[float]) -> np.ndarray:
    return np.interp(p, xs, ys) if len(xs) >= 2 else p


def _logistic_model(names: tuple[str, ...], space: str, x: np.ndarray, y: np.ndarray,
                    w: np.ndarray) -> confidence.HeadModel:
    """A logistic model on the ``names`` columns of ``x`` (a matrix of ``space``'s features)."""
    known = confidence.FEATURES if space == "hit" else confidence.QUERY_FEATURES
    columns = [known.index(n) for n in names]
    coef, intercept, mean, scale = _logistic(x[:, columns], y, w)
    return confidence.HeadModel(
        features=names, coef=tuple(float(c) for c in coef), intercept=intercept,
        mean=tuple(float(m) for m in mean), scale=tuple(float(s) for s in scale), space=space,
    )


def _search_weights(searches: list[Searched]) -> np.ndarray:
    """Each search's weight in the fit: 1 for questions the corpus answers; off-collection kinds together weigh
    ``OFF_COLLECTION_WEIGHT`` of the in-collection questions each (the prior of an unanswerable question)."""
    in_count = max(1, sum(1 for s in searches if s.kind == "in"))
    per_kind: dict[str, int] = defaultdict(int)
    for s in searches:
        per_kind[s.kind] += 1
    return np.array([1.0 if s.kind in ANSWERED_KINDS else OFF_COLLECTION_WEIGHT * in_count / per_kind[s.kind]
                     for s in searches])


def _two_stage(searches: list[Searched], head: str, chosen: np.ndarray) -> confidence.HeadModel:
    """The head's two logistic stages fitted on the ``chosen`` searches (no isotonic map yet): answerable on
    every chosen search (does any of its first ``FIT_DEPTH`` candidates answer it), the hit stage on the
    candidates of the chosen searches that are answered."""
    weights = _search_weights(searches)
    picked = [i for i in np.flatnonzero(chosen).tolist() if searches[i].matrix.shape[0]]
    queries = np.vstack([confidence.query_features(searches[i].matrix) for i in picked])
    answered = np.array([bool(searches[i].answers[:FIT_DEPTH].any()) for i in picked])
    if answered.all() or not answered.any():
        raise ValueError(f"the {head} head needs answered and unanswered questions to fit")
    answerable = _logistic_model(confidence.answerable_features(head), "query", queries, answered,  # type: ignore[arg-type]
                                 weights[picked])
    rows = [searches[i].matrix[:FIT_DEPTH] for i, a in zip(picked, answered, strict=True) if a]
    labels = [searches[i].answers[:FIT_DEPTH] for i, a in zip(picked, answered, strict=True) if a]
    hits = _logistic_model(confidence.hit_features(head), "hit", np.vstack(rows), np.concatenate(labels),  # type: ignore[arg-type]
                           np.ones(sum(len(y) for y in labels)))
    return replace(hits, answerable=answerable)


def _flat(searches: list[Searched], values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                         np.ndarray]:
    """The first ``FIT_DEPTH`` candidates of every search: their values, labels, weights and search index."""
    weights = _search_weights(searches)
    ps, ys, ws, gs = [], [], [], []
    for g, (s, v) in enumerate(zip(searches, values, strict=True)):
        depth = min(FIT_DEPTH, s.matrix.shape[0])
        ps.append(v[:depth])
        ys.append(s.answers[:depth])
        ws.append(np.full(depth, weights[g]))
        gs.append(np.full(depth, g))
    return np.concatenate(ps), np.concatenate(ys), np.concatenate(ws), np.concatenate(gs)


@dataclass
class HeadFit:
    """A head's final model (every question), its per-fold models (each without its fold's questions), and a
    report of the cross-validated fit."""

    model: confidence.HeadModel
    folds: dict[int, confidence.HeadModel]
    report: FitReport


def head_fit(searches: list[Searched], head: str, *, folds: int = FOLDS) -> HeadFit:
    """Fit the head: per fold, both stages and an isotonic map of their product on the other folds; the final
    stages on every question, with an isotonic map fitted on the out-of-fold products (never on what they saw)."""
    searches = [s for s in searches if s.matrix.shape[0]]
    if not searches:
        raise ValueError(f"no searches recorded for the {head} head")
    fold = np.array([fold_of(s.qid, folds) for s in searches])
    per_fold: dict[int, confidence.HeadModel] = {}
    oof_raw: list[np.ndarray] = [np.zeros(s.matrix.shape[0]) for s in searches]
    for k in range(folds):
        train = fold != k
        if not (fold == k).any():
            continue
        stages = _two_stage(searches, head, train)
        in_fold = [stages.raw(s.matrix) for s in searches]
        p, y, w, g = _flat(searches, in_fold)
        trained = np.isin(g, np.flatnonzero(train))
        iso_x, iso_y = _isotonic(p[trained], y[trained], w[trained])
        per_fold[k] = replace(stages, xs=tuple(iso_x), ys=tuple(iso_y))
        for i in np.flatnonzero(~train).tolist():
            oof_raw[i] = in_fold[i]
    final = _two_stage(searches, head, np.ones(len(searches), dtype=bool))
    p, y, w, groups = _flat(searches, oof_raw)
    iso_x, iso_y = _isotonic(p, y, w)
    model = replace(final, xs=tuple(iso_x), ys=tuple(iso_y))
    honest = [per_fold[int(fold[i])].predict(s.matrix) if int(fold[i]) in per_fold else np.zeros(s.matrix.shape[0])
              for i, s in enumerate(searches)]
    hp, _, _, _ = _flat(searches, honest)
    return HeadFit(model, per_fold, _report(head, searches, groups, hp, y, w, folds))


def _report(head: str, searches: list[Searched], groups: np.ndarray, p: np.ndarray, y: np.ndarray,
            w: np.ndarray, folds: int) -> FitReport:
    clipped = np.clip(p, 1e-6, 1 - 1e-6)
    log_loss = float(-np.average(y * np.log(clipped) + (1 - y) * np.log(1 - clipped), weights=w))
    brier = float(np.average((p - y) ** 2, weights=w))
    in_rows = np.array([searches[g].kind in ANSWERED_KINDS for g in groups.tolist()])
    judged_rows = np.array([searches[g].kind == "in" for g in groups.tolist()])
    strict = np.concatenate([searches[g].answers[: int((groups == g).sum())] for g in np.unique(groups).tolist()])
    return FitReport(head=head, rows=len(y), positives=int(y.sum()), folds=folds, log_loss=round(log_loss, 4),
                     brier=round(brier, 4), reliability=reliability(p[in_rows], y[in_rows]),
                     reliability_judged=reliability(p[judged_rows], strict[judged_rows]))


def floor_fit(searches: list[Searched], hybrid: HeadFit, vector: HeadFit, *, folds: int = FOLDS) -> tuple[
    tuple[list[float], list[float]], FitReport, dict[int, np.ndarray]
]:
    """The hybrid head's floor: a hybrid search is at least as sure of a hit as the vector head alone would be
    (a question in another language than the text has no lexical evidence, and must not lose its answer for
    it); ``max(hybrid, vector)`` is then recalibrated by an isotonic map. Returns the map (fitted on
    out-of-fold probabilities), the cross-validated report, and each search's cross-validated confidences."""
    fold = np.array([fold_of(s.qid, folds) for s in searches])
    combined: list[np.ndarray] = []
    for i, s in enumerate(searches):
        k = int(fold[i])
        if k in hybrid.folds and k in vector.folds and s.matrix.shape[0]:
            combined.append(np.maximum(hybrid.folds[k].predict(s.matrix), vector.folds[k].predict(s.matrix)))
        else:
            combined.append(np.zeros(s.matrix.shape[0]))
    p, y, w, groups = _flat(searches, combined)
    iso = _isotonic(p, y, w)
    row_fold = fold[groups]
    honest = np.zeros(len(y))
    maps: dict[int, tuple[list[float], list[float]]] = {}
    for k in range(folds):
        train, test = row_fold != k, row_fold == k
        if test.any():
            maps[k] = _isotonic(p[train], y[train], w[train])
            honest[test] = _interp(p[test], *maps[k])
    per_search = {i: _interp(combined[i], *maps[int(fold[i])]) for i in range(len(searches)) if int(fold[i]) in maps}
    return iso, _report("hybrid", searches, groups, honest, y, w, folds), per_search


def reliability(p: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    """Reliability bins: per confidence bin, how many hits, their mean confidence and the share relevant."""
    out = []
    for low, high in zip(BINS[:-1], BINS[1:], strict=True):
        inside = (p >= low) & (p < high)
        n = int(inside.sum())
        if n == 0:
            continue
        out.append({"bin": f"{low:.1f}-{min(high, 1.0):.1f}", "hits": n,
                    "confidence": round(float(p[inside].mean()), 3), "relevant": round(float(y[inside].mean()), 3)})
    return out


def confidences_of(searches: list[Searched], *, model: str, language: str) -> list[np.ndarray]:
    """Each search's candidates' confidences under the stored table, as the engine computes them for a question
    in ``language``."""
    out = []
    for s in searches:
        values = confidence.language_confidences(s.matrix, model=model, code=language, head=s.head)  # type: ignore[arg-type]
        out.append(values if values is not None else np.ones(s.matrix.shape[0]))
    return out


# --- abstention ---


def abstention(
    collected: Collected,
    *,
    model: str,
    language: str,
    thresholds: Iterable[float] = THRESHOLDS,
    head: str = "hybrid",
    probabilities: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """Per threshold: (a) in-collection questions with a relevant hit at or above it in the top 10; (b) per
    off-collection kind, questions with no hit at or above it; and how many hits a question keeps on average.
    ``probabilities`` (one array per search of the head, in order): cross-validated confidences; by default the
    stored table's."""
    searches = collected.of(head=head)
    probs = probabilities if probabilities is not None else confidences_of(searches, model=model, language=language)
    kinds = sorted({s.kind for s in searches})
    table: dict[str, Any] = {}
    for threshold in thresholds:
        row: dict[str, Any] = {}
        for kind in kinds:
            pairs = [(s, p) for s, p in zip(searches, probs, strict=True) if s.kind == kind]
            if not pairs:
                continue
            if kind in ANSWERED_KINDS:
                answerable = [(s, p) for s, p in pairs if s.judged]
                row[f"{kind}_answered"] = round(
                    sum(bool(((p[:10] >= threshold) & s.answers[: len(p)][:10]).any()) for s, p in answerable)
                    / max(1, len(answerable)), 4
                )
                row[f"{kind}_kept_mean"] = round(float(np.mean([(p >= threshold).sum() for _, p in pairs])), 1)
            else:
                row[f"{kind}_abstained"] = round(
                    sum(not bool((p >= threshold).any()) for _, p in pairs) / len(pairs), 4
                )
        table[f"{threshold:g}"] = row
    counts = {kind: sum(1 for s in searches if s.kind == kind) for kind in kinds}
    ceiling = [bool(s.answers[:10].any()) for s in searches if s.kind == "in" and s.judged]
    return {"queries": counts, "in_success@10": round(float(np.mean(ceiling)), 4) if ceiling else None,
            "thresholds": table}


def describe_abstention(result: dict[str, Any]) -> str:
    kinds = list(next(iter(result["thresholds"].values())).keys()) if result["thresholds"] else []
    lines = ["threshold " + " ".join(f"{k:>22}" for k in kinds)]
    for threshold, row in result["thresholds"].items():
        lines.append(f"{threshold:>9} " + " ".join(f"{row.get(k, float('nan')):>22}" for k in kinds))
    lines.append("questions: " + ", ".join(f"{k} {n}" for k, n in result["queries"].items()))
    return "\n".join(lines)


_WORD = re.compile(r"\w+")


HEADS_RUN = ("hybrid", "lexical", "vector")


@contextmanager
def documents_archived(external_ids: set[str]) -> Iterator[None]:
    """Within the block, the items with these external ids are archived (no search returns them); restored
    after. Only ever used inside the throwaway evaluation database."""
    from django.utils import timezone

    from search.models import ContentItem

    ids = list(ContentItem.objects.filter(external_id__in=external_ids, archived_at__isnull=True)
               .values_list("id", flat=True))
    ContentItem.objects.filter(id__in=ids).update(archived_at=timezone.now())
    try:
        yield
    finally:
        ContentItem.objects.filter(id__in=ids).update(archived_at=None)


def collected_dump(collected: Collected, path: Path, *, model: str = "", language: str = "",
                   dataset: str = "") -> None:
    """Every recorded search as arrays in one .npz file (``evaluate --from-dump`` refits from it)."""
    arrays: dict[str, Any] = {"features": np.array(confidence.FEATURES),
                              "info": np.array(json.dumps({"model": model, "language": language,
                                                           "dataset": dataset}))}
    for i, s in enumerate(collected.searches):
        arrays[f"m{i}"] = s.matrix
        arrays[f"r{i}"] = s.relevant
        arrays[f"s{i}"] = s.answers
        arrays[f"d{i}"] = np.array(s.docs)
    arrays["meta"] = np.array([json.dumps({"qid": s.qid, "kind": s.kind, "head": s.head, "judged": s.judged})
                               for s in collected.searches])
    np.savez_compressed(path, **arrays)


def dump_info(path: Path) -> dict[str, str]:
    """What a dump was recorded with (model, language, dataset; empty for older dumps)."""
    data = np.load(path, allow_pickle=False)
    return json.loads(str(data["info"])) if "info" in data else {}


def collected_load(*paths: Path) -> Collected:
    """The searches of one or more dumps, in order (e.g. a full recording and one of a kind added later)."""
    out = Collected()
    for path in paths:
        out.searches += _collected_read(path)
    return out


def _collected_read(path: Path) -> list[Searched]:
    data = np.load(path, allow_pickle=False)
    if "features" in data and tuple(data["features"].tolist()) != confidence.FEATURES:
        raise ValueError(f"{path} was recorded with other features than the engine's; record it again")
    out = Collected()
    for i, meta in enumerate(data["meta"].tolist()):
        m = json.loads(meta)
        strict = data[f"s{i}"] if f"s{i}" in data else None
        docs = tuple(data[f"d{i}"].tolist()) if f"d{i}" in data else ()
        out.searches.append(
            Searched(m["qid"], m["kind"], m["head"], data[f"m{i}"], data[f"r{i}"], m["judged"], strict, docs)
        )
    return out.searches


def table_fit(collected: Collected, *, model: str, language: str, dataset: str) -> dict[str, Any]:
    """Fit every head (and the hybrid head's vector floor) on what was collected and store them for (model,
    language) in the confidence table; the lexical head also becomes the table default's for that language
    (it does not depend on the embedder). Returns the cross-validated reports and abstention."""
    from django.utils import timezone

    fits: dict[str, HeadFit] = {}
    for head in HEADS_RUN:
        searches = [s for s in collected.of(head=head) if s.kind not in NOT_FITTED.get(head, ())]
        if any(s.answers.any() for s in searches):
            fits[head] = head_fit(searches, head)
    reports: dict[str, Any] = {head: fit.report.__dict__ for head, fit in fits.items()}
    heads = {head: fit.model for head, fit in fits.items()}
    cross_validated = None
    hybrid = collected.of(head="hybrid")
    if "hybrid" in fits and "vector" in fits:
        (xs, ys), report, per_search = floor_fit(hybrid, fits["hybrid"], fits["vector"])
        heads["hybrid"] = replace(heads["hybrid"], floor="vector", floor_xs=tuple(xs), floor_ys=tuple(ys))
        reports["hybrid_with_vector_floor"] = report.__dict__
        cross_validated = [per_search.get(i, np.zeros(0)) for i in range(len(hybrid))]
    kinds: dict[str, int] = defaultdict(int)
    for s in hybrid:
        kinds[s.kind] += 1
    measured = {"dataset": dataset, "measured_on": timezone.now().date().isoformat(), "questions": dict(kinds),
                "fit": reports}
    stored = {head: m.to_json() for head, m in heads.items()}
    confidence.table_update(model=model, code=language, heads=stored, measured=measured)
    if "lexical" in stored:
        confidence.table_update(model="*", code=language, heads={"lexical": stored["lexical"]}, measured=measured)
    out: dict[str, Any] = {"fit": reports}
    if cross_validated is not None:
        out["abstention_cross_validated"] = abstention(
            collected, model=model, language=language, probabilities=cross_validated
        )
    return out
