"""Query expansion from the corpus: synonyms (managed in the admin) and typo tolerance / "did you mean".

Both are read in the same search, before the lane's single scoring query, and both weigh less than
the word as written: a synonym counts at ``SYNONYM_WEIGHT``, a one-edit correction at ``TYPO_WEIGHT``,
and neither ever matches a title (titles match the word as written only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.core.cache import cache
from django.db import connection

from search import analysis
from search.query_parser import ParsedQuery

logger = logging.getLogger(__name__)

SYNONYM_WEIGHT = 0.8
TYPO_WEIGHT = 0.6
TYPO_MIN_CHARS = 5  # typo-tolerant matching only for words this long (one edit)
SUGGEST_MIN_CHARS = 3
# PostgreSQL's levenshtein() refuses longer strings; no one mistypes a word this long anyway.
SUGGEST_MAX_CHARS = 255
SYNONYM_CACHE_KEY = "kb:synonyms:v1"
SYNONYM_CACHE_S = 300


@dataclass(frozen=True)
class Expansion:
    term_index: int
    form: str  # folded written form
    stems: tuple[str, ...]
    weight: float
    kind: str  # "synonym" | "typo"


def _synonym_table() -> dict[str, list[tuple[str, str]]]:
    """folded word → [(folded synonym, language)], from the admin-managed synonym sets (cached)."""
    try:
        table = cache.get(SYNONYM_CACHE_KEY)
    except Exception:  # noqa: BLE001 - no cache: read the table
        table = None
    if table is not None:
        return table
    table = {}
    try:
        model = apps.get_model("analytics", "Synonym")
    except LookupError:
        return table
    for row in model.objects.all().only("terms", "one_way", "language"):
        words = [analysis.fold(w.strip()) for w in row.terms if w and w.strip()]
        words = [w for w in words if w]
        if len(words) < 2:
            continue
        sources = words[:1] if row.one_way else words
        for source in sources:
            for target in words:
                if target != source:
                    table.setdefault(source, []).append((target, row.language or ""))
    try:
        cache.set(SYNONYM_CACHE_KEY, table, SYNONYM_CACHE_S)
    except Exception:  # noqa: BLE001
        pass
    return table


def synonyms_invalidate() -> None:
    try:
        cache.delete(SYNONYM_CACHE_KEY)
    except Exception:  # noqa: BLE001
        logger.warning("could not invalidate the synonym cache; it expires in %s s", SYNONYM_CACHE_S)


def _stems_of(folded: str) -> tuple[str, ...]:
    return tuple(sorted({analysis.stem(folded, lang) for lang in analysis.STEM_LANGUAGES} | {folded}))


def synonym_expansions(parsed: ParsedQuery) -> list[Expansion]:
    table = _synonym_table()
    if not table:
        return []
    out = []
    written = {t.folded for t in parsed.terms}
    for i, term in enumerate(parsed.terms):
        for target, _language in table.get(term.folded, []):
            for word in target.split():
                if word not in written and word not in analysis.all_stop_words():
                    out.append(Expansion(i, word, _stems_of(word), SYNONYM_WEIGHT, "synonym"))
    return out


@dataclass(frozen=True)
class Correction:
    word: str
    term: str
    distance: int
    df: int


def corrections(words: list[str], *, max_distance: int = 2) -> dict[str, list[Correction]]:
    """Corpus words close to each given word (trigram candidates, then edit distance), best first."""
    words = [w for w in words if len(w) <= SUGGEST_MAX_CHARS]
    if not words:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT q.word, ts.term, ts.df, levenshtein(ts.term, q.word) AS distance
            FROM unnest(%s::text[]) AS q(word)
            CROSS JOIN LATERAL (
                SELECT term, df FROM search_term_stats
                WHERE field = 'surface' AND term %% q.word AND length(term) <= %s
                ORDER BY similarity(term, q.word) DESC LIMIT 20
            ) ts
            WHERE levenshtein(ts.term, q.word) <= %s
            """,
            [words, SUGGEST_MAX_CHARS, max_distance],
        )
        rows = cursor.fetchall()
    found: dict[str, list[Correction]] = {}
    for word, term, df, _levenshtein in rows:
        # Rank by optimal-string-alignment distance: a swapped pair of letters is one typo, not two.
        distance = osa_distance(word, term)
        if distance <= max_distance:
            found.setdefault(word, []).append(Correction(word, term, distance, int(df)))
    for items in found.values():
        items.sort(key=lambda c: (c.distance, -c.df, c.term))
    return found


def osa_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein plus adjacent transpositions)."""
    if a == b:
        return 0
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def unknown_terms(parsed: ParsedQuery, df: dict[tuple[str, str], int]) -> list[str]:
    """Query words the corpus never has as written (candidates for "did you mean")."""
    unknown = []
    for term in parsed.terms:
        if len(term.folded) < SUGGEST_MIN_CHARS or term.folded.isdigit():
            continue
        if any(df.get(("surface", s)) for s in term.surfaces):
            continue
        unknown.append(term.folded)
    return unknown


def matched_by_stem(term_folded: str, parsed: ParsedQuery, df: dict[tuple[str, str], int]) -> bool:
    term = next((t for t in parsed.terms if t.folded == term_folded), None)
    return bool(term and any(df.get(("stem", s)) for s in term.stems))


def typo_expansions(
    parsed: ParsedQuery, found: dict[str, list[Correction]], df: dict[tuple[str, str], int]
) -> list[Expansion]:
    """One-edit corrections of words of 5+ letters that match nothing, not even by stem."""
    out = []
    for i, term in enumerate(parsed.terms):
        if len(term.folded) < TYPO_MIN_CHARS or matched_by_stem(term.folded, parsed, df):
            continue
        for correction in found.get(term.folded, []):
            if correction.distance == 1:
                out.append(Expansion(i, correction.term, (), TYPO_WEIGHT, "typo"))
    return out


def suggestion_text(parsed: ParsedQuery, found: dict[str, list[Correction]]) -> str | None:
    """The query with each unknown word replaced by its best correction, or None."""
    replaced = False
    words = []
    for token in analysis.tokens(parsed.text):
        best = found.get(token.folded)
        if best:
            words.append(best[0].term)
            replaced = True
        else:
            words.append(token.text)
    return " ".join(words) if replaced else None


def readable_forms(
    *,
    stems: list[str],
    surfaces: list[str],
    corpus: str,
    items_sql: tuple[str, list[Any]],
    written_since_build: bool = True,
) -> tuple[set[str], set[str]]:
    """Which ``stems`` and ``surfaces`` occur in a chunk of an item this search may return.

    The term statistics count every item, readable or not. "Did you mean" and typo tolerance must not
    depend on them alone: suggesting a word, or declining to correct one, would tell the caller that it
    exists in items they cannot read. ``items_sql`` is the search's own access-and-filters subquery;
    ``written_since_build``: chunks exist that the postings do not know yet.
    """
    stems, surfaces = sorted(set(stems)), sorted(set(surfaces))
    if not stems and not surfaces:
        return set(), set()
    items_query, items_params = items_sql
    column = "in_live" if corpus == "live" else "in_latest"
    kinds = ["stem"] * len(stems) + ["surface"] * len(surfaces)
    forms = [*stems, *surfaces]
    # First the postings: a form's best chunks, walked until one is readable (usually the first). A
    # complete list without a readable chunk settles it; a cut list, or chunks written since the build,
    # leave the form to the live GIN probe below.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT q.kind, q.f,
                   EXISTS (SELECT 1 FROM unnest(p.chunk_ids) AS u(id) JOIN search_chunk c ON c.id = u.id
                           WHERE c.{column} AND c.item_id IN ({items_query})) AS readable,
                   p.df > cardinality(p.chunk_ids) AS cut
            FROM unnest(%s::text[], %s::text[]) AS q(kind, f)
            JOIN search_postings p ON p.field = q.kind AND p.term = q.f
            """,
            [*items_params, kinds, forms],
        )
        rows = cursor.fetchall()
        readable = {(kind, form) for kind, form, is_readable, _ in rows if is_readable}
        settled = {(kind, form) for kind, form, is_readable, cut in rows if is_readable or not cut}
        unsettled = {
            pair for pair in zip(kinds, forms, strict=True)
            if pair not in readable and (pair not in settled or written_since_build)
        }
        unsettled_stems = sorted(f for k, f in unsettled if k == "stem")
        unsettled_surfaces = sorted(f for k, f in unsettled if k == "surface")
        if unsettled_stems or unsettled_surfaces:

            def probe(kind: str, field: str) -> str:
                return (
                    f"SELECT '{kind}'::text, q.f FROM unnest(%s::text[]) AS q(f) "
                    "WHERE EXISTS (SELECT 1 FROM search_chunk c "
                    f"WHERE c.{column} AND c.{field} ? q.f AND c.item_id IN ({items_query}))"
                )

            cursor.execute(
                probe("stem", "tf_stem") + " UNION ALL " + probe("surface", "tf_surface"),
                [unsettled_stems, *items_params, unsettled_surfaces, *items_params],
            )
            readable |= {(kind, form) for kind, form in cursor.fetchall()}
    return {f for k, f in readable if k == "stem"}, {f for k, f in readable if k == "surface"}


def visible_df(
    parsed: ParsedQuery,
    df: dict[tuple[str, str], int],
    *,
    corpus: str,
    items_sql: tuple[str, list[Any]],
    written_since_build: bool = True,
) -> dict[tuple[str, str], int]:
    """``df`` with the query's stems and surfaces that no readable chunk holds set to 0 (for expansion only:
    ranking keeps the corpus-wide statistics)."""
    candidates = [t for t in parsed.terms if len(t.folded) >= SUGGEST_MIN_CHARS]
    stems = [s for t in candidates for s in t.stems if df.get(("stem", s))]
    surfaces = [s for t in candidates for s in t.surfaces if df.get(("surface", s))]
    if not stems and not surfaces:
        return df
    readable_stems, readable_surfaces = readable_forms(
        stems=stems, surfaces=surfaces, corpus=corpus, items_sql=items_sql, written_since_build=written_since_build
    )
    visible = dict(df)
    for s in stems:
        if s not in readable_stems:
            visible[("stem", s)] = 0
    for s in surfaces:
        if s not in readable_surfaces:
            visible[("surface", s)] = 0
    return visible


def readable_corrections(
    found: dict[str, list[Correction]],
    *,
    corpus: str,
    items_sql: tuple[str, list[Any]],
    written_since_build: bool = True,
) -> dict[str, list[Correction]]:
    """``found`` without corrections to words that only unreadable items hold."""
    terms = [c.term for items in found.values() for c in items]
    if not terms:
        return found
    _, readable = readable_forms(
        stems=[], surfaces=terms, corpus=corpus, items_sql=items_sql, written_since_build=written_since_build
    )
    kept = {word: [c for c in items if c.term in readable] for word, items in found.items()}
    return {word: items for word, items in kept.items() if items}
