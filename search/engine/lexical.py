"""The lexical lane: BM25 over title and body, in one SQL query, from statistics built ahead of time.

Rules (each pinned by tests/search/engine/test_lexical.py):
- chunks holding every query term rank first; the rest follow by score, where a missing common term
  costs less than a missing rare one (BM25's idf), and the result says ``partial_match``;
- each term matches its stem (item language) and its written form (folded) in the same query;
- accent-insensitive everywhere (the folded forms are columns written by the build);
- Arabic: a leading و or ف is also tried stripped;
- titles match the word as written (article stripped) or as the start of a longer word, never by stem;
- a title word counts more than a body, keyword or content-type match; the newest item wins a tie.

How it is fast: the build writes per-chunk term-frequency maps (``tf_stem``, ``tf_surface``: jsonb
term → count), the term statistics views, and impact-ordered postings (``search_postings``: per term,
the 1,000 chunks where it weighs most, best first). A search reads the document frequencies of its few
terms (an index lookup), then works in two steps:

1. candidates: the postings of every form of every query term (title prefixes expanded through the
   vocabulary), summed per chunk as an approximate BM25 (idf × saturated tf), chunks matching more
   terms first; the best ``CANDIDATES`` chunks go on, plus chunks written since the last build (found
   through the live GIN indexes). A list is complete when its term occurs in at most 1,000 chunks, so
   small corpora and rare words are exact; a common word contributes its best 1,000 chunks.
2. exact scoring of those candidates only, with the rules above, reading each term-frequency map once.

When step 1 was cut short and fewer than ``limit`` chunks survive the caller's filters (a narrow domain
filter, say), the lane scores every matching chunk instead (exhaustive; slower at scale, never wrong).
Nothing is counted at query time either way.

In code, ``lexical_search`` reads: statistics and expansions (``_query_terms``) → candidates
(``_candidates``) → exact scoring (``_ExactScoring``: per-term columns ``_term_columns``, score ``_bm25``).
Each piece of SQL travels with its own parameters (``search.engine.sql.Fragment``); numbers go in as ``float8``
parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings

from search.engine import expansion
from search.engine.scope import chunk_column
from search.engine.sql import Fragment, compose, execute, join, param
from search.replicas import read_connection
from search.text.analysis import tsquery_any
from search.text.query_parser import ParsedQuery, QueryTerm

# A title matched as the start of a longer word counts a little less than the word as written.
TITLE_PREFIX_FACTOR = 0.7
# Occurrences of the word as written add this fraction on top of the best form's frequency.
WRITTEN_FORM_BONUS = 0.3
# Keyword / content-type matches count at this fraction of a title match.
META_WEIGHT = 0.5
# Chunks the candidate step hands to exact scoring (at least twice the lane depth).
CANDIDATES = 400
# A title prefix (``pric`` → ``pricing``) is expanded to at most this many vocabulary words, commonest first.
PREFIX_EXPANSIONS = 20


@dataclass(frozen=True)
class LexicalOutcome:
    hits: list[LexicalHit]
    suggestion: str | None = None
    expansions: tuple[expansion.Expansion, ...] = ()
    # Each query term's idf (the terms of ``parsed``, in order): how much holding it says (confidence).
    idfs: tuple[float, ...] = ()


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: int
    item_id: int
    matched_terms: int
    complete: bool
    score: float
    title_hit: bool
    matched_mask: int = 0  # bit i set: the chunk holds query term i (``term_masks`` computes the same)


@dataclass(frozen=True)
class CorpusStats:
    n_chunks: int
    avgdl: float
    max_chunk_id: int  # the newest chunk the postings know; later ones are found live
    newest_chunk_id: int  # the newest chunk now

    @property
    def written_since_build(self) -> bool:
        return self.newest_chunk_id > self.max_chunk_id


def _statistics(
    parsed: ParsedQuery, extra: list[expansion.Expansion]
) -> tuple[dict[tuple[str, str], int], CorpusStats]:
    keys = {("stem", s) for t in parsed.terms for s in t.stems}
    keys |= {("stem", s) for e in extra for s in e.stems}
    keys |= {("surface", e.form) for e in extra}
    keys |= {("meta", s) for t in parsed.terms for s in t.stems}
    keys |= {("surface", s) for t in parsed.terms for s in t.surfaces}
    keys |= {("title", s) for t in parsed.terms for s in t.title_forms}
    keys |= {("keyword", s) for t in parsed.terms for s in t.surfaces}  # "did you mean": known keyword words
    fields = [k[0] for k in keys]
    terms = [k[1] for k in keys]
    with read_connection().cursor() as cursor:
        execute(cursor, Fragment(
            "SELECT '', '', n_chunks, avg_body_len, max_chunk_id, (SELECT max(id) FROM search_chunk) "
            "FROM search_corpus_stats UNION ALL "
            "SELECT ts.field, ts.term, ts.df, 0, 0, 0 FROM search_term_stats ts "
            "JOIN unnest(%s::text[], %s::text[]) AS q(field, term) ON ts.field = q.field AND ts.term = q.term",
            (fields, terms),
        ))
        rows = cursor.fetchall()
    df = {(r[0], r[1]): int(r[2]) for r in rows if r[0]}
    row = next(((r[2], r[3], r[4], r[5]) for r in rows if not r[0]), (0, 1.0, 0, 0))
    return df, CorpusStats(max(int(row[0]), 1), max(float(row[1]), 1.0), int(row[2]), int(row[3] or 0))


@dataclass(frozen=True)
class CandidatePool:
    chunk_ids: list[int]
    cut: bool  # a posting list, a prefix expansion or the pool itself was cut: not every match is in it


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """Bounds of the words starting with ``prefix`` in code-point order: ``lo < word < hi``."""
    return prefix, prefix + "\U0010ffff"


def _posting_forms(
    parsed: ParsedQuery, by_term: dict[int, list[expansion.Expansion]], idfs: list[float]
) -> tuple[list[tuple[str, str, int, float]], list[tuple[str, str, int, float]]]:
    """The postings step 1 reads: (field, term, term index, weight) for every exact form, and (low bound,
    high bound, term index, weight) for every title prefix to expand through the vocabulary."""
    exact: list[tuple[str, str, int, float]] = []
    prefixes: list[tuple[str, str, int, float]] = []
    for i, term in enumerate(parsed.terms):
        idf = max(idfs[i], 1e-6)
        for stem in term.stems:
            exact.append(("stem", stem, i, idf))
            exact.append(("meta", stem, i, idf))
        for surface in term.surfaces:
            exact.append(("surface", surface, i, idf * (1 + WRITTEN_FORM_BONUS)))
        for form in term.title_forms:
            exact.append(("title", form, i, idf))
            if term.prefix:
                prefixes.append((*_prefix_bounds(form), i, idf * TITLE_PREFIX_FACTOR))
        for e in by_term.get(i, []):
            for stem in e.stems:
                exact.append(("stem", stem, i, idf * e.weight))
            exact.append(("surface", e.form, i, idf * e.weight))
    return exact, prefixes


def _unnest(rows: list[tuple[str, str, int, float]], types: tuple[str, str, str, str]) -> Fragment:
    """``unnest`` over one array per column of ``rows``: the rows as a table (PostgreSQL zips the arrays)."""
    columns = [[row[j] for row in rows] for j in range(len(types))]
    return Fragment(f"unnest({', '.join(f'%s::{t}[]' for t in types)})", tuple(columns))


def _candidates(
    parsed: ParsedQuery,
    by_term: dict[int, list[expansion.Expansion]],
    idfs: list[float],
    *,
    limit: int,
) -> CandidatePool:
    """The ``limit`` chunks with the best approximate BM25 from the impact-ordered postings (step 1)."""
    exact, prefixes = _posting_forms(parsed, by_term, idfs)
    statement = compose(
        """
        WITH exact AS (
            SELECT field, term, ti, w, false AS cut FROM {exact}
                AS q(field, term, ti, w)
        ),
        prefixed AS (
            SELECT 'title'::text AS field, p.term, x.ti, x.w, p.n > {expansions} AS cut
            FROM {prefixes} AS x(lo, hi, ti, w)
            CROSS JOIN LATERAL (
                SELECT sp.term, count(*) OVER () AS n FROM search_postings sp
                WHERE sp.field = 'title' AND sp.term > x.lo AND sp.term < x.hi AND starts_with(sp.term, x.lo)
                ORDER BY sp.df DESC, sp.term LIMIT {expansions}
            ) p
        ),
        lists AS MATERIALIZED (
            SELECT f.ti, f.w, f.cut OR p.df > least(cardinality(p.chunk_ids), {limit}) AS cut, p.chunk_ids, p.impacts
            FROM (SELECT * FROM exact UNION ALL SELECT * FROM prefixed) f
            JOIN search_postings p ON p.field = f.field AND p.term = f.term
            -- keyword/type lists weigh every chunk alike: a cut one is an arbitrary sample, skip it
            WHERE f.field <> 'meta' OR p.df <= cardinality(p.chunk_ids)
        ),
        ranked AS MATERIALIZED (
            -- one pass: the terms a chunk matched as a bit set, and its approximate score (a term found
            -- through two forms counts twice; good enough to choose candidates, never used to rank)
            SELECT u.chunk_id, bit_count(bit_or(1::bigint << l.ti)::bit(64)) AS n, sum(l.w * u.impact) AS total
            FROM lists l
            CROSS JOIN LATERAL unnest(l.chunk_ids[1:{limit}], l.impacts[1:{limit}]) AS u(chunk_id, impact)
            GROUP BY u.chunk_id
        )
        SELECT (SELECT coalesce(bool_or(cut), false) FROM lists) OR (SELECT count(*) FROM ranked) > {limit},
               ARRAY(SELECT chunk_id FROM ranked ORDER BY n DESC, total DESC, chunk_id LIMIT {limit})
    """,
        exact=_unnest(exact, ("text", "text", "int", "float8")),
        prefixes=_unnest(prefixes, ("text", "text", "int", "float8")),
        expansions=param(PREFIX_EXPANSIONS),
        limit=param(limit),
    )
    with read_connection().cursor() as cursor:
        execute(cursor, statement)
        cut, chunk_ids = cursor.fetchone()
    return CandidatePool(list(chunk_ids), bool(cut))


def _identifier_ok(term: str) -> bool:
    """jsonb_to_record columns are identifiers: at most 63 bytes (longer forms are left to the other form)."""
    return 0 < len(term.encode()) <= 63 and "\x00" not in term


def _ident(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class _QueryTerms:
    """What the lane knows of the query's terms before it reads a chunk: document frequencies, corpus
    statistics, the corrections found for unknown words, and the weaker forms (synonyms, then typo
    corrections) each term also matches."""

    df: dict[tuple[str, str], int]
    stats: CorpusStats
    corrections: dict[str, list[expansion.Correction]]
    expansions: tuple[expansion.Expansion, ...]
    by_term: dict[int, list[expansion.Expansion]]


def _query_terms(parsed: ParsedQuery, *, corpus: str, items_sql: Fragment) -> _QueryTerms:
    """Statistics and expansions: synonyms, the frequencies of every form, then one-edit corrections of the
    words the corpus does not know (judged by what the caller may read, so they reveal nothing about other
    items)."""
    synonyms = expansion.synonym_expansions(parsed)
    df, stats = _statistics(parsed, synonyms)
    fresh = stats.written_since_build
    visible = expansion.visible_df(parsed, df, corpus=corpus, items_sql=items_sql, written_since_build=fresh)
    unknown = expansion.unknown_words(
        parsed, df, visible, corpus=corpus, items_sql=items_sql, written_since_build=fresh
    )
    found = expansion.corrections(unknown) if unknown else {}
    found = expansion.readable_corrections(found, corpus=corpus, items_sql=items_sql, written_since_build=fresh)
    typos = expansion.typo_expansions(parsed, found, visible)
    for correction in (c for items in found.values() for c in items):
        if correction.body_df:
            df[("surface", correction.term)] = correction.body_df
    extra = (*synonyms, *typos)
    by_term: dict[int, list[expansion.Expansion]] = {}
    for e in extra:
        by_term.setdefault(e.term_index, []).append(e)
    return _QueryTerms(df, stats, found, extra, by_term)


@dataclass(frozen=True)
class _FormColumns:
    """Each query form's column in a candidate row (stems ``s0, s1…``, written forms ``w0, w1…``).

    Each term-frequency map is read once per candidate row: jsonb_to_record pulls every query form out as a
    typed column in one call (repeated ->> lookups would decompress the map once per lookup)."""

    stem: dict[str, str]
    surface: dict[str, str]

    @classmethod
    def of(cls, parsed: ParsedQuery, expansions: tuple[expansion.Expansion, ...]) -> _FormColumns:
        stems = sorted({f for t in parsed.terms for f in t.stems} | {f for e in expansions for f in e.stems})
        surfaces = sorted({f for t in parsed.terms for f in t.surfaces} | {e.form for e in expansions})
        return cls(
            {f: f"s{j}" for j, f in enumerate(f for f in stems if _identifier_ok(f))},
            {f: f"w{j}" for j, f in enumerate(f for f in surfaces if _identifier_ok(f))},
        )

    @staticmethod
    def record(columns: dict[str, str]) -> str:
        """The column list of ``jsonb_to_record`` for these forms (one dummy column when there are none)."""
        return ", ".join(f"{_ident(f)} int" for f in columns) or '"_" int'

    def extracted(self) -> str:
        """The select list naming each extracted form by its column (empty when there are none)."""
        select_stem = ", ".join(f"s.{_ident(f)} AS {col}" for f, col in self.stem.items())
        select_surface = ", ".join(f"w.{_ident(f)} AS {col}" for f, col in self.surface.items())
        return ", ".join(x for x in (select_stem, select_surface) if x)


def _frequency_column(
    i: int, term: QueryTerm, extras: list[expansion.Expansion], forms: _FormColumns
) -> Fragment:
    """``f{i}``: the term's best frequency over its forms, plus a bonus for the word as written."""
    best = [Fragment("0::float8")]  # float8 throughout: numeric arithmetic costs several times more per row
    written = [Fragment("0::float8")]
    for columns, term_forms, as_written in ((forms.stem, term.stems, False), (forms.surface, term.surfaces, True)):
        for form in term_forms:
            if form in columns:
                best.append(Fragment(f"coalesce({columns[form]}, 0)"))
                if as_written:
                    written.append(Fragment(f"coalesce({columns[form]}, 0)"))
    for e in extras:
        for columns, term_forms in ((forms.stem, e.stems), (forms.surface, (e.form,))):
            for form in term_forms:
                if form in columns:
                    best.append(Fragment(f"%s::float8 * coalesce({columns[form]}, 0)", (e.weight,)))
    # The word as written counts a little more than another form with the same stem.
    return compose(
        "(greatest({best}) + {bonus} * greatest({written}))::float8 AS {alias}",
        best=join(best),
        bonus=param(WRITTEN_FORM_BONUS, "float8"),
        written=join(written),
        alias=f"f{i}",
    )


def _title_column(i: int, term: QueryTerm) -> Fragment:
    """``t{i}``: 1 when the title holds the word as written, ``TITLE_PREFIX_FACTOR`` as a prefix, else 0."""
    if term.title_forms and term.prefix:
        return compose(
            "(CASE WHEN NOT any_title THEN 0 WHEN lex_title @@ {exact} THEN 1 "
            "WHEN lex_title @@ {prefix} THEN {factor} ELSE 0 END)::float8 AS {alias}",
            exact=param(tsquery_any(term.title_forms), "tsquery"),
            prefix=param(tsquery_any(term.title_forms, prefix=True), "tsquery"),
            factor=param(TITLE_PREFIX_FACTOR, "float8"),
            alias=f"t{i}",
        )
    if term.title_forms:
        return compose(
            "(CASE WHEN any_title AND lex_title @@ {exact} THEN 1 ELSE 0 END)::float8 AS {alias}",
            exact=param(tsquery_any(term.title_forms), "tsquery"),
            alias=f"t{i}",
        )
    return Fragment(f"0::float8 AS t{i}")


def _meta_column(i: int, term: QueryTerm, terms: _QueryTerms) -> Fragment:
    """``m{i}``: the idf of the term's keyword/content-type match, or 0."""
    meta_idf = max((_idf(terms.df.get(("meta", s), 0), terms.stats.n_chunks) for s in term.stems), default=0.0)
    return compose(
        "(CASE WHEN any_meta AND lex_meta @@ {stems} THEN {idf} ELSE 0 END)::float8 AS {alias}",
        stems=param(tsquery_any(term.stems), "tsquery"),
        idf=param(meta_idf, "float8"),
        alias=f"m{i}",
    )


def _term_idf(term: QueryTerm, terms: _QueryTerms) -> float:
    """The term's BM25 idf: from its commonest body form, or its commonest title form when the body has none."""
    df = terms.df
    body_dfs = [
        df[(field, form)]
        for field, forms in (("stem", term.stems), ("surface", term.surfaces))
        for form in forms
        if df.get((field, form))
    ]
    title_dfs = [df.get(("title", f), 0) for f in term.title_forms]
    return _idf(max(body_dfs) if body_dfs else max(title_dfs, default=0), terms.stats.n_chunks)


def _term_columns(parsed: ParsedQuery, terms: _QueryTerms, forms: _FormColumns) -> Fragment:
    """Every term's columns, in term order: its best raw term frequency over its forms (stems, written forms,
    weaker expansions), whether the title holds it (1 as written, 0.7 as a prefix), and its keyword/type
    match. The title counts as TITLE_WEIGHT extra occurrences inside the same saturating BM25 term
    (BM25F-style, ``_bm25``), so a title word outweighs a body match without double-counting a word found
    in both."""
    columns: list[Fragment] = []
    for i, term in enumerate(parsed.terms):
        columns.append(_frequency_column(i, term, terms.by_term.get(i, []), forms))
        columns.append(_title_column(i, term))
        columns.append(_meta_column(i, term, terms))
    return join(columns)


def _bm25(idfs: list[float]) -> Fragment:
    """The chunk's score: per term, BM25 of its frequency with the title counted as ``TITLE_WEIGHT`` extra
    occurrences, plus its keyword/type match at ``META_WEIGHT``."""
    title_weight = float(settings.SEARCH["TITLE_WEIGHT"])
    k1 = float(settings.SEARCH["BM25_K1"])
    return join(
        (
            compose(
                "{idf} * {tf} * {k1_plus_1} / ({tf} + norm) + {meta_weight} * {meta}",
                idf=param(idf, "float8"),
                tf=Fragment(f"(f{i} + %s::float8 * t{i})", (title_weight,)),
                k1_plus_1=param(k1 + 1.0, "float8"),
                meta_weight=param(META_WEIGHT, "float8"),
                meta=f"m{i}",
            )
            for i, idf in enumerate(idfs)
        ),
        " + ",
    )


def _title_query(parsed: ParsedQuery) -> str:
    """A tsquery matching a title that holds any term: as a prefix (prefix terms) or as written."""
    prefix_titles = [f for t in parsed.terms if t.prefix for f in t.title_forms]
    exact_titles = [f for t in parsed.terms if not t.prefix for f in t.title_forms]
    return " | ".join(q for q in (tsquery_any(prefix_titles, prefix=True), tsquery_any(exact_titles)) if q)


def _meta_query(parsed: ParsedQuery) -> str:
    """A tsquery matching keywords or a content type that hold any term's stem."""
    return tsquery_any(sorted({s for t in parsed.terms for s in t.stems}))


def _matching(parsed: ParsedQuery, expansions: tuple[expansion.Expansion, ...]) -> Fragment:
    """Every chunk holding a form of a query term, through the live GIN indexes (the exhaustive path, and
    chunks newer than the postings)."""
    all_stems = sorted({s for t in parsed.terms for s in t.stems} | {s for e in expansions for s in e.stems})
    all_surfaces = sorted({s for t in parsed.terms for s in t.surfaces} | {e.form for e in expansions})
    return Fragment(
        "c.tf_stem ?| %s::text[] OR c.tf_surface ?| %s::text[] "
        "OR c.lex_title @@ %s::tsquery OR c.lex_meta @@ %s::tsquery",
        (all_stems, all_surfaces, _title_query(parsed), _meta_query(parsed)),
    )


_EXACT_SCORING = """
    WITH cand AS MATERIALIZED (
        SELECT c.id, c.item_id, i.updated_at, c.lex_title, c.lex_meta,
               c.lex_title @@ {title_q} AS any_title, c.lex_meta @@ {meta_q} AS any_meta,
               {k1} * (1 - {b} + {b} * c.body_len / {avgdl}) AS norm
               {extracted}
        FROM search_chunk c
        JOIN search_contentitem i ON i.id = c.item_id
        CROSS JOIN LATERAL jsonb_to_record(c.tf_stem) AS s({record_stem})
        CROSS JOIN LATERAL jsonb_to_record(c.tf_surface) AS w({record_surface})
        WHERE c.{corpus_col} AND ({which}) AND c.item_id IN ({items})
    ),
    per_term AS MATERIALIZED (
        SELECT id, item_id, updated_at, norm, {columns} FROM cand
    )
    SELECT id, item_id, {matched} AS matched, {score} AS score, ({title_hit}) AS title_hit, {mask} AS mask
    FROM per_term
    ORDER BY ({matched}) >= {n_terms} DESC, score DESC, updated_at DESC, id
    LIMIT {limit}
"""


@dataclass(frozen=True)
class _ExactScoring:
    """Step 2: the statement scoring chosen chunks exactly by the rules of the module docstring, built once
    for any choice of chunks (``hits(which)``: the candidate pool, or every match)."""

    parts: dict[str, Fragment | str]
    n_terms: int

    @classmethod
    def of(
        cls, parsed: ParsedQuery, terms: _QueryTerms, idfs: list[float], *, corpus: str, items: Fragment, limit: int
    ) -> _ExactScoring:
        n_terms = len(parsed.terms)
        forms = _FormColumns.of(parsed, terms.expansions)
        extracted = forms.extracted()
        parts: dict[str, Fragment | str] = {
            "title_q": param(_title_query(parsed), "tsquery"),
            "meta_q": param(_meta_query(parsed), "tsquery"),
            "k1": param(float(settings.SEARCH["BM25_K1"]), "float8"),
            "b": param(float(settings.SEARCH["BM25_B"]), "float8"),
            "avgdl": param(terms.stats.avgdl, "float8"),
            "extracted": f", {extracted}" if extracted else "",
            "record_stem": forms.record(forms.stem),
            "record_surface": forms.record(forms.surface),
            "corpus_col": chunk_column(corpus),
            "items": items,
            "columns": _term_columns(parsed, terms, forms),
            "matched": " + ".join(f"(f{i} + t{i} + m{i} > 0)::int" for i in range(n_terms)),
            "score": _bm25(idfs),
            "title_hit": " OR ".join(f"t{i} > 0" for i in range(n_terms)),
            "mask": " | ".join(f"((f{i} + t{i} + m{i} > 0)::int::bigint << {i})" for i in range(n_terms)),
            "n_terms": param(n_terms),
            "limit": param(limit),
        }
        return cls(parts, n_terms)

    def hits(self, which: Fragment) -> list[LexicalHit]:
        statement = compose(_EXACT_SCORING, which=which, **self.parts)
        with read_connection().cursor() as cursor:
            execute(cursor, statement)
            rows = cursor.fetchall()
        n_terms = self.n_terms
        return [
            LexicalHit(r[0], r[1], int(r[2]), int(r[2]) >= n_terms, float(r[3]), bool(r[4]), int(r[5])) for r in rows
        ]


def lexical_search(
    *, parsed: ParsedQuery, corpus: str, items_sql: Fragment, limit: int
) -> LexicalOutcome:
    """Rank chunks by BM25 (see module docstring). ``items_sql`` selects the item ids the caller may see.

    Synonyms and one-edit corrections of words the corpus does not know are added as weaker forms of
    the same term (never title forms); the best corrections also make the "did you mean" suggestion.
    """
    if not parsed.searchable:
        return LexicalOutcome([])
    terms = _query_terms(parsed, corpus=corpus, items_sql=items_sql)
    idfs = [_term_idf(term, terms) for term in parsed.terms]
    pool = _candidates(parsed, terms.by_term, idfs, limit=max(CANDIDATES, 2 * limit))
    items = items_sql
    scoring = _ExactScoring.of(parsed, terms, idfs, corpus=corpus, items=items, limit=limit)
    matching = _matching(parsed, terms.expansions)
    hits = scoring.hits(
        compose(
            "c.id = ANY({pool}) OR (c.id > {built} AND ({matching}))",
            pool=param(pool.chunk_ids, "bigint[]"),
            built=param(terms.stats.max_chunk_id),
            matching=matching,
        )
    )
    if len(hits) < limit and pool.cut:  # narrow filters: the pruned pool ran dry, score every match
        hits = scoring.hits(matching)
    return LexicalOutcome(
        hits, expansion.suggestion_text(parsed, terms.corrections), terms.expansions, tuple(idfs)
    )


def term_masks(
    parsed: ParsedQuery,
    expansions: tuple[expansion.Expansion, ...],
    *,
    corpus: str,
    ids: list[int],
    by_item: bool,
) -> dict[int, int]:
    """Which query terms each chunk (or each item, over all its chunks in ``corpus``) holds, as a bit set:
    bit i is set when term i matches by the lane's rule (a stem or written form in the body, expansions
    included; the title as written or as a prefix; keywords and content type). The lane's own
    ``matched_mask`` is this same set for the chunks it scored; this answers for the others (hits only the
    vector lane found, the other chunks of an item)."""
    if not parsed.searchable or not ids:
        return {}
    extra_by_term: dict[int, list[expansion.Expansion]] = {}
    for e in expansions:
        extra_by_term.setdefault(e.term_index, []).append(e)
    bits: list[Fragment] = []
    for i, term in enumerate(parsed.terms):
        extras = extra_by_term.get(i, [])
        # The forms the lane's term-frequency columns can hold (``_identifier_ok``), so both agree.
        stems = sorted(f for f in {*term.stems, *(s for e in extras for s in e.stems)} if _identifier_ok(f))
        surfaces = sorted(f for f in {*term.surfaces, *(e.form for e in extras)} if _identifier_ok(f))
        title_q = tsquery_any(term.title_forms, prefix=term.prefix)
        holds = Fragment(
            "c.tf_stem ?| %s::text[] OR c.tf_surface ?| %s::text[] OR c.lex_title @@ %s::tsquery "
            "OR c.lex_meta @@ %s::tsquery",
            (stems, surfaces, title_q, tsquery_any(term.stems)),
        )
        bits.append(compose("(({holds})::int::bigint << {bit})", holds=holds, bit=str(i)))
    key = "c.item_id" if by_item else "c.id"
    statement = compose(
        "SELECT {key}, bit_or({bits}) FROM search_chunk c WHERE c.{corpus_col} AND {key} = ANY({ids}) GROUP BY {key}",
        key=key,
        bits=join(bits, " | "),
        corpus_col=chunk_column(corpus),
        ids=param(ids, "bigint[]"),
    )
    with read_connection().cursor() as cursor:
        execute(cursor, statement)
        return {int(k): int(m) for k, m in cursor.fetchall()}
