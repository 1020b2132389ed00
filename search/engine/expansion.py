"""Query expansion from the corpus: synonyms (managed in the admin) and typo tolerance / "did you mean".

Both are read in the same search, before the lane's single scoring query, and both weigh less than
the word as written: a synonym counts at ``SYNONYM_WEIGHT``, a one-edit correction at ``TYPO_WEIGHT``,
and neither ever matches a title (titles match the word as written only).

"Did you mean" draws on every vocabulary the lane matches a word in as written (body words, title words,
keyword and content-type words), and only on what the caller may read: a suggestion never names a word that
only items they cannot read hold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.core.cache import cache
from rapidfuzz.distance import OSA

from search.engine.scope import chunk_column
from search.engine.sql import Fragment, compose, execute, join, param
from search.models import Synonym
from search.replicas import read_connection
from search.text import analysis
from search.text.query_parser import ParsedQuery

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
        return dict(table)
    table = {}
    for row in Synonym.objects.all().only("terms", "one_way", "language"):
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


# The vocabularies "did you mean" draws on (fields of search_term_stats): every one the lexical lane matches a
# word in as written, namely body words, title words (article stripped), keyword and content-type words.
SUGGEST_FIELDS = ("surface", "title", "keyword")
# Vocabulary rows read per query word, best trigram similarity first (a word in three vocabularies is three).
SUGGEST_CANDIDATES = 60


@dataclass(frozen=True)
class Correction:
    """A corpus word close to a query word.

    ``forms``: where the corpus has it, as (field, vocabulary word, document frequency). A title word is
    held without its article (``الغابات`` → ``غابات``): ``term`` is the query word's article put back on it.
    ``df`` is the largest of the forms' frequencies.
    """

    word: str
    term: str
    distance: int
    df: int
    forms: tuple[tuple[str, str, int], ...] = ()

    @property
    def body_df(self) -> int:
        """Chunks holding the word in their body (0: only titles or keywords have it)."""
        return max((df for field, _, df in self.forms if field == "surface"), default=0)


def corrections(words: list[str], *, max_distance: int = 2) -> dict[str, list[Correction]]:
    """Corpus words close to each given word, best first: trigram candidates from every vocabulary in
    ``SUGGEST_FIELDS``, kept within ``max_distance`` edits. Stop words are never offered (a query drops
    them)."""
    words = [w for w in words if len(w) <= SUGGEST_MAX_CHARS]
    if not words:
        return {}
    # Each word is looked up as written in every vocabulary, and its title form (article stripped) among
    # title words, which are stored that way.
    lookups = [(w, w, "") for w in words]
    for word in words:
        form = analysis.title_form(word)
        if form != word and word.endswith(form):
            lookups.append((word, form, word[: len(word) - len(form)]))
    with read_connection().cursor() as cursor:
        execute(cursor, Fragment(
            """
            SELECT q.word, q.article, v.field, v.term, v.df
            FROM unnest(%s::text[], %s::text[], %s::text[]) AS q(word, lookup, article)
            CROSS JOIN LATERAL (
                SELECT field, term, df FROM search_term_stats
                WHERE field = ANY(%s::text[]) AND term %% q.lookup AND length(term) <= %s
                  AND (q.article = '' OR field = 'title')
                ORDER BY similarity(term, q.lookup) DESC, term, field LIMIT %s
            ) v
            WHERE levenshtein(v.term, q.lookup) <= %s
            """,
            (
                [w for w, _, _ in lookups], [f for _, f, _ in lookups], [a for _, _, a in lookups],
                list(SUGGEST_FIELDS), SUGGEST_MAX_CHARS, SUGGEST_CANDIDATES, max_distance,
            ),
        ))
        rows = cursor.fetchall()
    stops = analysis.all_stop_words()
    forms: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for word, article, field, vocabulary_word, df in rows:
        term = article + vocabulary_word
        if term != word and term not in stops:
            forms.setdefault((word, term), []).append((field, vocabulary_word, int(df)))
    found: dict[str, list[Correction]] = {}
    for (word, term), held in forms.items():
        # Rank by optimal-string-alignment distance: a swapped pair of letters is one typo, not two.
        distance = osa_distance(word, term)
        if distance <= max_distance:
            found.setdefault(word, []).append(
                Correction(word, term, distance, max(df for *_, df in held), tuple(sorted(held)))
            )
    for items in found.values():
        items.sort(key=lambda c: (c.distance, -c.df, c.term))
    return found


def osa_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein plus adjacent transpositions), computed by RapidFuzz."""
    return int(OSA.distance(a, b))


def unknown_terms(parsed: ParsedQuery, df: dict[tuple[str, str], int]) -> list[str]:
    """Query words no body has as written (``df`` as ``visible_df`` left it)."""
    unknown = []
    for term in parsed.terms:
        if len(term.folded) < SUGGEST_MIN_CHARS or term.folded.isdigit():
            continue
        if any(df.get(("surface", s)) for s in term.surfaces):
            continue
        unknown.append(term.folded)
    return unknown


def unknown_words(
    parsed: ParsedQuery,
    df: dict[tuple[str, str], int],
    visible: dict[tuple[str, str], int],
    *,
    corpus: str,
    items_sql: Fragment,
    written_since_build: bool = True,
) -> list[str]:
    """Query words no readable item has as written: not in a body (``visible``, from ``visible_df``), nor as a
    title word or a keyword word. These are the words "did you mean" corrects; a word only titles or keywords
    hold is no typo. ``df`` must hold the ``title`` and ``keyword`` frequencies of the query's forms.

    Only words some title or keyword has at all cost a query (to check that a readable item has them)."""
    unknown = unknown_terms(parsed, visible)
    held: dict[tuple[str, str], set[str]] = {}
    for term in parsed.terms:
        if term.folded not in unknown:
            continue
        for kind, forms in (("title", term.title_forms), ("keyword", term.surfaces)):
            for form in forms:
                if df.get((kind, form)):
                    held.setdefault((kind, form), set()).add(term.folded)
    if not held:
        return unknown
    readable = readable_vocabulary(
        forms=held, corpus=corpus, items_sql=items_sql, written_since_build=written_since_build
    )
    known = {word for pair in readable for word in held[pair]}
    return [w for w in unknown if w not in known]


def matched_by_stem(term_folded: str, parsed: ParsedQuery, df: dict[tuple[str, str], int]) -> bool:
    term = next((t for t in parsed.terms if t.folded == term_folded), None)
    return bool(term and any(df.get(("stem", s)) for s in term.stems))


def typo_expansions(
    parsed: ParsedQuery, found: dict[str, list[Correction]], df: dict[tuple[str, str], int]
) -> list[Expansion]:
    """One-edit corrections of words of 5+ letters that match nothing, not even by stem. Only body words
    are expanded to: titles match the word as written, and keywords by stem."""
    out = []
    for i, term in enumerate(parsed.terms):
        if len(term.folded) < TYPO_MIN_CHARS or matched_by_stem(term.folded, parsed, df):
            continue
        for correction in found.get(term.folded, []):
            if correction.distance == 1 and correction.body_df:
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


# How a chunk is asked whether it holds a form of each kind that has postings (``c`` the chunk, ``q.f`` the
# form, ``q.tq`` the form as a tsquery).
_CHUNK_PROBES = {
    "stem": "c.tf_stem ? q.f",
    "surface": "c.tf_surface ? q.f",
    "title": "c.lex_title @@ q.tq::tsquery",
}


def readable_vocabulary(
    *,
    forms: Iterable[tuple[str, str]],
    corpus: str,
    items_sql: Fragment,
    written_since_build: bool = True,
) -> set[tuple[str, str]]:
    """Which ``(kind, form)`` pairs occur in an item this search may return: ``stem``, ``surface`` (body) and
    ``title`` forms in one of its chunks of the corpus, ``keyword`` words among its keywords and type
    (``search_keyword_words``, migration 0013).

    The term statistics count every item, readable or not. "Did you mean" and typo tolerance must not
    depend on them alone: suggesting a word, or declining to correct one, would tell the caller that it
    exists in items they cannot read. ``items_sql`` is the search's own access-and-filters subquery;
    ``written_since_build``: chunks exist that the postings do not know yet.
    """
    pairs = sorted(set(forms))
    if not pairs:
        return set()
    column = chunk_column(corpus)
    listed = [pair for pair in pairs if pair[0] in _CHUNK_PROBES]
    readable: set[tuple[str, str]] = set()
    settled: set[tuple[str, str]] = set()
    with read_connection().cursor() as cursor:
        # First the postings: a form's best chunks, walked until one is readable (usually the first). A
        # complete list without a readable chunk settles it; a cut list, or chunks written since the build,
        # leave the form to the live probes below.
        if listed:
            execute(cursor, compose(
                """
                SELECT q.kind, q.f,
                       EXISTS (SELECT 1 FROM unnest(p.chunk_ids) AS u(id) JOIN search_chunk c ON c.id = u.id
                               WHERE c.{column} AND c.item_id IN ({items})) AS readable,
                       p.df > cardinality(p.chunk_ids) AS cut
                FROM unnest({kinds}, {forms}) AS q(kind, f)
                JOIN search_postings p ON p.field = q.kind AND p.term = q.f
                """,
                column=column,
                items=items_sql,
                kinds=param([k for k, _ in listed], "text[]"),
                forms=param([f for _, f in listed], "text[]"),
            ))
            rows = cursor.fetchall()
            readable = {(kind, form) for kind, form, is_readable, _ in rows if is_readable}
            settled = {(kind, form) for kind, form, is_readable, cut in rows if is_readable or not cut}
        unsettled = [
            pair for pair in listed if pair not in readable and (pair not in settled or written_since_build)
        ]
        parts: list[Fragment] = []
        for kind, probe in _CHUNK_PROBES.items():
            these = [f for k, f in unsettled if k == kind]
            if these:
                parts.append(compose(
                    "SELECT '{kind}'::text, q.f FROM unnest({forms}, {lexemes}) AS q(f, tq) "
                    "WHERE EXISTS (SELECT 1 FROM search_chunk c "
                    "WHERE c.{column} AND {probe} AND c.item_id IN ({items}))",
                    kind=kind,
                    forms=param(these, "text[]"),
                    lexemes=param([analysis.quote_lexeme(f) for f in these], "text[]"),
                    column=column,
                    probe=probe,
                    items=items_sql,
                ))
        keywords = [f for k, f in pairs if k == "keyword"]
        if keywords:
            # The GIN index on search_keyword_words() finds the items; the reader's subquery and the corpus
            # (an item with a chunk in it) decide.
            parts.append(compose(
                "SELECT 'keyword'::text, q.f FROM unnest({keywords}) AS q(f) "
                "WHERE EXISTS (SELECT 1 FROM search_contentitem i "
                "WHERE search_keyword_words(i.ai_keywords::text[], i.content_type) @> ARRAY[q.f] "
                "AND i.id IN ({items}) "
                "AND EXISTS (SELECT 1 FROM search_chunk c WHERE c.item_id = i.id AND c.{column}))",
                keywords=param(keywords, "text[]"),
                items=items_sql,
                column=column,
            ))
        if parts:
            execute(cursor, join(parts, " UNION ALL "))
            readable |= {(kind, form) for kind, form in cursor.fetchall()}
    return readable


def visible_df(
    parsed: ParsedQuery,
    df: dict[tuple[str, str], int],
    *,
    corpus: str,
    items_sql: Fragment,
    written_since_build: bool = True,
) -> dict[tuple[str, str], int]:
    """``df`` with the query's stems and surfaces that no readable chunk holds set to 0 (for expansion only:
    ranking keeps the corpus-wide statistics)."""
    candidates = [t for t in parsed.terms if len(t.folded) >= SUGGEST_MIN_CHARS]
    forms = {("stem", s) for t in candidates for s in t.stems if df.get(("stem", s))}
    forms |= {("surface", s) for t in candidates for s in t.surfaces if df.get(("surface", s))}
    if not forms:
        return df
    readable = readable_vocabulary(
        forms=forms, corpus=corpus, items_sql=items_sql, written_since_build=written_since_build
    )
    visible = dict(df)
    for pair in forms - readable:
        visible[pair] = 0
    return visible


def readable_corrections(
    found: dict[str, list[Correction]],
    *,
    corpus: str,
    items_sql: Fragment,
    written_since_build: bool = True,
) -> dict[str, list[Correction]]:
    """``found`` with only the forms a readable item holds: a correction no readable item holds is dropped,
    one held by a readable title and an unreadable body keeps the title (and counts as no body word)."""
    forms = {(field, word) for items in found.values() for c in items for field, word, _ in c.forms}
    if not forms:
        return found
    readable = readable_vocabulary(
        forms=forms, corpus=corpus, items_sql=items_sql, written_since_build=written_since_build
    )
    kept: dict[str, list[Correction]] = {}
    for word, items in found.items():
        for c in items:
            held = tuple(f for f in c.forms if (f[0], f[1]) in readable)
            if held:
                kept.setdefault(word, []).append(replace(c, forms=held, df=max(df for *_, df in held)))
    for items in kept.values():
        items.sort(key=lambda c: (c.distance, -c.df, c.term))
    return kept
