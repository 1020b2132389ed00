"""How much the vector lane counts in fusion, per embedding model and query language.

An embedder that knows English only (all-MiniLM-L6-v2) ranks Arabic text close to randomly: fused in at full
weight it pours noise into every Arabic page. So the vector lane's RRF weight is looked up per (model,
language) in ``search/lane_weights.json``, a small table that ``manage.py evaluate --calibrate`` writes from
what it measured on a dev set (the weight that gave the best hybrid nDCG@10, with the figures beside it).

A query's weight is the table's weight for each language, weighed by how sure the detector is that the query
is in it (``search.text.language.language_probabilities``): "cancer" (half English, half French) gets the mean of
the two. A language or model the table does not know counts at the configured ``SEARCH_VECTOR_WEIGHT``.
A weight of 0 leaves the lane out (the search then does not run it at all).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from search.text import language

TABLE_PATH = Path(__file__).resolve().parent / "lane_weights.json"
# Under this the lane cannot move a page; the search skips it rather than pay for it.
NEGLIGIBLE = 0.02

_lock = threading.Lock()
_cache: dict[str, Any] = {}
# (model, language) → weight, set only by ``weight_override`` (evaluate --calibrate sweeps with it).
_overrides: dict[tuple[str, str], float] = {}


def table(path: Path | None = None) -> dict[str, Any]:
    """The table as stored (``{"models": {model: {language: {"vector_weight": w, ...}}}}``), cached per file
    modification time so a recalibration is seen without a restart."""
    path = path or TABLE_PATH
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return {"models": {}}
    key = f"{path}:{mtime}"
    with _lock:
        if key not in _cache:
            _cache.clear()
            _cache[key] = json.loads(path.read_text(encoding="utf-8"))
        return _cache[key]  # type: ignore[no-any-return]


def language_weight(model: str, code: str, *, path: Path | None = None, default: float | None = None) -> float:
    """The vector lane's weight for ``model`` on text in ``code`` (``default``, else the configured weight, when
    unmeasured)."""
    if (model, code) in _overrides:
        return _overrides[(model, code)]
    entry = table(path).get("models", {}).get(model, {}).get(code)
    if entry is None:
        return float(settings.SEARCH["VECTOR_WEIGHT"]) if default is None else default
    return float(entry["vector_weight"])


def vector_weight(
    model: str,
    query_text: str,
    *,
    corpus_languages: Sequence[tuple[str, float]] = (),
    path: Path | None = None,
    default: float | None = None,
) -> float:
    """The vector lane's fusion weight for this query: the table's weights under the detector's posterior.

    ``corpus_languages``, the languages of the text searched with their shares (a language filter's, else the
    knowledge base's: ``corpus_language_shares``), count too: a question in one language about text in another
    is only as well served as the weaker of the two lets the embedder (English MiniLM on Arabic text: not at
    all), so each (query language, text language) pair weighs ``min`` of their weights. Without them, the
    query's languages alone decide. ``default``: the weight of a language the table does not know (else the
    configured ``SEARCH_VECTOR_WEIGHT``)."""
    fallback = float(settings.SEARCH["VECTOR_WEIGHT"]) if default is None else default
    ranked = language.language_probabilities(query_text)
    if not ranked:
        return fallback
    total = sum(p for _, p in ranked) or 1.0
    shares = [(code, share) for code, share in corpus_languages if share > 0]
    share_total = sum(share for _, share in shares)
    weight = 0.0
    for code, p in ranked:
        mine = language_weight(model, code, path=path, default=default)
        if share_total > 0:
            mine = sum(
                share * min(mine, language_weight(model, c, path=path, default=default)) for c, share in shares
            ) / share_total
        weight += p * mine
    weight /= total
    return 0.0 if weight < NEGLIGIBLE else weight


# How long a process keeps the knowledge base's language shares (they move with imports, slowly).
SHARES_MAX_AGE_S = 300.0
_shares: dict[tuple[str, str], tuple[tuple[tuple[str, float], ...], float]] = {}


def corpus_language_shares(language_filter: str | None = None) -> tuple[tuple[str, float], ...]:
    """What the searched text is written in: the language filter's language, else the share of each language
    among the knowledge base's items (read at most every ``SHARES_MAX_AGE_S`` per process and database)."""
    if language_filter:
        return ((language_filter, 1.0),)
    from search.engine.sql import execute
    from search.replicas import read_connection

    reader = read_connection()
    key = (reader.alias, str(reader.settings_dict.get("NAME")))
    known = _shares.get(key)
    if known is not None and time.monotonic() - known[1] <= SHARES_MAX_AGE_S:
        return known[0]
    with reader.cursor() as cursor:
        execute(cursor, "SELECT language, count(*) FROM search_contentitem GROUP BY language")
        counts = [(str(code or ""), int(n)) for code, n in cursor.fetchall()]
    total = sum(n for _, n in counts) or 1
    shares = tuple((code, n / total) for code, n in sorted(counts, key=lambda c: -c[1]) if code)
    _shares[key] = (shares, time.monotonic())
    return shares


def corpus_language_shares_forget() -> None:
    """Read the knowledge base's language shares again at the next search (tests; a replaced corpus)."""
    _shares.clear()


@contextmanager
def weight_override(*, model: str, code: str, weight: float) -> Iterator[None]:
    """Within the block, searches weigh the lane at ``weight`` for (model, language) (for calibration)."""
    _overrides[(model, code)] = weight
    try:
        yield
    finally:
        _overrides.pop((model, code), None)


def table_update(
    *, model: str, code: str, weight: float, measured: dict[str, Any], path: Path | None = None
) -> None:
    """Record ``weight`` for (model, language) with the figures it was chosen on; other rows stay."""
    path = path or TABLE_PATH
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"models": {}}
    data.setdefault("models", {}).setdefault(model, {})[code] = {"vector_weight": weight, **measured}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a search never reads half a table
