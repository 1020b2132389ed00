"""The lexical lane: BM25 over title and body, in one SQL query, from statistics built ahead of time.

Rules (each pinned by tests/search/test_lexical.py):
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from search.analysis import tsquery_any
from search.query_parser import ParsedQuery
from search.services import expansion

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
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT '', '', n_chunks, avg_body_len, max_chunk_id, (SELECT max(id) FROM search_chunk) "
            "FROM search_corpus_stats UNION ALL "
            "SELECT ts.field, ts.term, ts.df, 0, 0, 0 FROM search_term_stats ts "
            "JOIN unnest(%s::text[], %s::text[]) AS q(field, term) ON ts.field = q.field AND ts.term = q.term",
            [fields, terms],
        )
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


def _candidates(
    parsed: ParsedQuery,
    extra_by_term: dict[int, list[expansion.Expansion]],
    idfs: list[float],
    *,
    limit: int,
) -> CandidatePool:
    """The ``limit`` chunks with the best approximate BM25 from the impact-ordered postings (step 1)."""
    fields: list[str] = []
    terms: list[str] = []
    term_index: list[int] = []
    weights: list[float] = []
    prefixes: list[tuple[str, str, int, float]] = []

    def add(field: str, term: str, i: int, weight: float) -> None:
        fields.append(field)
        terms.append(term)
        term_index.append(i)
        weights.append(weight)

    for i, term in enumerate(parsed.terms):
        idf = max(idfs[i], 1e-6)
        for stem in term.stems:
            add("stem", stem, i, idf)
            add("meta", stem, i, idf)
        for surface in term.surfaces:
            add("surface", surface, i, idf * (1 + WRITTEN_FORM_BONUS))
        for form in term.title_forms:
            add("title", form, i, idf)
            if term.prefix:
                prefixes.append((*_prefix_bounds(form), i, idf * TITLE_PREFIX_FACTOR))
        for e in extra_by_term.get(i, []):
            for stem in e.stems:
                add("stem", stem, i, idf * e.weight)
            add("surface", e.form, i, idf * e.weight)
    sql = f"""
        WITH exact AS (
            SELECT field, term, ti, w, false AS cut FROM unnest(%s::text[], %s::text[], %s::int[], %s::float8[])
                AS q(field, term, ti, w)
        ),
        prefixed AS (
            SELECT 'title'::text AS field, p.term, x.ti, x.w, p.n > {PREFIX_EXPANSIONS} AS cut
            FROM unnest(%s::text[], %s::text[], %s::int[], %s::float8[]) AS x(lo, hi, ti, w)
            CROSS JOIN LATERAL (
                SELECT sp.term, count(*) OVER () AS n FROM search_postings sp
                WHERE sp.field = 'title' AND sp.term > x.lo AND sp.term < x.hi AND starts_with(sp.term, x.lo)
                ORDER BY sp.df DESC, sp.term LIMIT {PREFIX_EXPANSIONS}
            ) p
        ),
        lists AS MATERIALIZED (
            SELECT f.ti, f.w, f.cut OR p.df > least(cardinality(p.chunk_ids), %s) AS cut, p.chunk_ids, p.impacts
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
            CROSS JOIN LATERAL unnest(l.chunk_ids[1:%s], l.impacts[1:%s]) AS u(chunk_id, impact)
            GROUP BY u.chunk_id
        )
        SELECT (SELECT coalesce(bool_or(cut), false) FROM lists) OR (SELECT count(*) FROM ranked) > %s,
               ARRAY(SELECT chunk_id FROM ranked ORDER BY n DESC, total DESC, chunk_id LIMIT %s)
    """
    params: list[Any] = [
        fields, terms, term_index, weights,
        [p[0] for p in prefixes], [p[1] for p in prefixes], [p[2] for p in prefixes], [p[3] for p in prefixes],
        limit, limit, limit, limit, limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cut, chunk_ids = cursor.fetchone()
    return CandidatePool(list(chunk_ids), bool(cut))


def _identifier_ok(term: str) -> bool:
    """jsonb_to_record columns are identifiers: at most 63 bytes (longer forms are left to the other form)."""
    return 0 < len(term.encode()) <= 63 and "\x00" not in term


def _ident(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def lexical_search(
    *, parsed: ParsedQuery, corpus: str, items_sql: tuple[str, list[Any]], limit: int
) -> LexicalOutcome:
    """Rank chunks by BM25 (see module docstring). ``items_sql`` selects the item ids the caller may see.

    Synonyms and one-edit corrections of words the corpus does not know are added as weaker forms of
    the same term (never title forms); the best corrections also make the "did you mean" suggestion.
    """
    if not parsed.searchable:
        return LexicalOutcome([])
    k1 = float(settings.SEARCH["BM25_K1"])
    b = float(settings.SEARCH["BM25_B"])
    title_weight = float(settings.SEARCH["TITLE_WEIGHT"])
    synonyms = expansion.synonym_expansions(parsed)
    df, stats = _statistics(parsed, synonyms)
    n_chunks, avgdl = stats.n_chunks, stats.avgdl
    # Corrections judge words by what the caller may read, so they reveal nothing about other items.
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
    extra = [*synonyms, *typos]
    extra_by_term: dict[int, list[expansion.Expansion]] = {}
    for e in extra:
        extra_by_term.setdefault(e.term_index, []).append(e)

    # Each term-frequency map is read once per candidate row: jsonb_to_record pulls every query form out
    # as a typed column in one call (repeated ->> lookups would decompress the map once per lookup).
    stem_forms = sorted({f for t in parsed.terms for f in t.stems} | {f for e in extra for f in e.stems})
    stem_forms = [f for f in stem_forms if _identifier_ok(f)]
    surface_forms = sorted({f for t in parsed.terms for f in t.surfaces} | {e.form for e in extra})
    surface_forms = [f for f in surface_forms if _identifier_ok(f)]
    stem_cols = {f: f"s{j}" for j, f in enumerate(stem_forms)}
    surface_cols = {f: f"w{j}" for j, f in enumerate(surface_forms)}

    # Per term: its best raw term frequency over its forms (stems, written forms, weaker expansions),
    # whether the title holds it (1 as written, 0.7 as a prefix), and its keyword/type match. The title
    # counts as TITLE_WEIGHT extra occurrences inside the same saturating BM25 term (BM25F-style), so a
    # title word outweighs a body match without double-counting a word found in both.
    columns: list[str] = []
    params: list[Any] = []
    idfs: list[float] = []
    for i, term in enumerate(parsed.terms):
        tf_parts = ["0::float8"]  # float8 throughout: numeric arithmetic costs several times more per row
        written_parts = ["0::float8"]
        body_dfs = []
        for field, cols, forms in (("stem", stem_cols, term.stems), ("surface", surface_cols, term.surfaces)):
            for form in forms:
                if form in cols:
                    tf_parts.append(f"coalesce({cols[form]}, 0)")
                    if field == "surface":
                        written_parts.append(f"coalesce({cols[form]}, 0)")
                if df.get((field, form)):
                    body_dfs.append(df[(field, form)])
        for e in extra_by_term.get(i, []):
            for cols, forms in ((stem_cols, e.stems), (surface_cols, (e.form,))):
                for form in forms:
                    if form in cols:
                        tf_parts.append(f"{e.weight!r}::float8 * coalesce({cols[form]}, 0)")
        # The word as written counts a little more than another form with the same stem.
        columns.append(
            f"(greatest({', '.join(tf_parts)}) + {WRITTEN_FORM_BONUS!r}::float8 * greatest({', '.join(written_parts)}))"
            f"::float8 AS f{i}"
        )
        title_dfs = [df.get(("title", f), 0) for f in term.title_forms]
        idfs.append(_idf(max(body_dfs) if body_dfs else max(title_dfs, default=0), n_chunks))
        if term.title_forms and term.prefix:
            columns.append(
                f"(CASE WHEN NOT any_title THEN 0 WHEN lex_title @@ %s::tsquery THEN 1 "
                f"WHEN lex_title @@ %s::tsquery THEN {TITLE_PREFIX_FACTOR!r} ELSE 0 END)::float8 AS t{i}"
            )
            params += [tsquery_any(term.title_forms), tsquery_any(term.title_forms, prefix=True)]
        elif term.title_forms:
            columns.append(f"(CASE WHEN any_title AND lex_title @@ %s::tsquery THEN 1 ELSE 0 END)::float8 AS t{i}")
            params.append(tsquery_any(term.title_forms))
        else:
            columns.append(f"0::float8 AS t{i}")
        meta_idf = max((_idf(df.get(("meta", s), 0), n_chunks) for s in term.stems), default=0.0)
        columns.append(
            f"(CASE WHEN any_meta AND lex_meta @@ %s::tsquery THEN {meta_idf!r} ELSE 0 END)::float8 AS m{i}"
        )
        params.append(tsquery_any(term.stems))

    n_terms = len(parsed.terms)
    bm25 = []
    for i, idf in enumerate(idfs):
        tf = f"(f{i} + {title_weight!r} * t{i})"
        bm25.append(f"{idf!r} * {tf} * {k1 + 1.0!r} / ({tf} + norm) + {META_WEIGHT!r} * m{i}")
    score = " + ".join(bm25)
    matched = " + ".join(f"(f{i} + t{i} + m{i} > 0)::int" for i in range(n_terms))
    mask = " | ".join(f"((f{i} + t{i} + m{i} > 0)::int::bigint << {i})" for i in range(n_terms))
    title_hit = " OR ".join(f"t{i} > 0" for i in range(n_terms))
    all_stems = sorted({s for t in parsed.terms for s in t.stems} | {s for e in extra for s in e.stems})
    all_surfaces = sorted({s for t in parsed.terms for s in t.surfaces} | {e.form for e in extra})
    prefix_titles = [f for t in parsed.terms if t.prefix for f in t.title_forms]
    exact_titles = [f for t in parsed.terms if not t.prefix for f in t.title_forms]
    title_q = " | ".join(q for q in (tsquery_any(prefix_titles, prefix=True), tsquery_any(exact_titles)) if q)
    record_stem = ", ".join(f"{_ident(f)} int" for f in stem_forms) or '"_" int'
    record_surface = ", ".join(f"{_ident(f)} int" for f in surface_forms) or '"_" int'
    select_stem = ", ".join(f"s.{_ident(f)} AS {col}" for f, col in stem_cols.items())
    select_surface = ", ".join(f"w.{_ident(f)} AS {col}" for f, col in surface_cols.items())
    extracted = ", ".join(x for x in (select_stem, select_surface) if x)
    items_query, items_params = items_sql
    corpus_col = "in_live" if corpus == "live" else "in_latest"
    def scored(which_sql: str, which_params: list[Any]) -> list[LexicalHit]:
        sql = f"""
            WITH cand AS MATERIALIZED (
                SELECT c.id, c.item_id, i.updated_at, c.lex_title, c.lex_meta,
                       c.lex_title @@ %s::tsquery AS any_title, c.lex_meta @@ %s::tsquery AS any_meta,
                       {k1!r}::float8 * (1 - {b!r}::float8 + {b!r}::float8 * c.body_len / {avgdl!r}::float8) AS norm
                       {"," if extracted else ""} {extracted}
                FROM search_chunk c
                JOIN search_contentitem i ON i.id = c.item_id
                CROSS JOIN LATERAL jsonb_to_record(c.tf_stem) AS s({record_stem})
                CROSS JOIN LATERAL jsonb_to_record(c.tf_surface) AS w({record_surface})
                WHERE c.{corpus_col} AND ({which_sql}) AND c.item_id IN ({items_query})
            ),
            per_term AS MATERIALIZED (
                SELECT id, item_id, updated_at, norm, {", ".join(columns)} FROM cand
            )
            SELECT id, item_id, {matched} AS matched, {score} AS score, ({title_hit}) AS title_hit, {mask} AS mask
            FROM per_term
            ORDER BY ({matched}) >= %s DESC, score DESC, updated_at DESC, id
            LIMIT %s
        """
        with connection.cursor() as cursor:
            cursor.execute(sql, [title_q, meta_q, *which_params, *items_params, *params, n_terms, limit])
            rows = cursor.fetchall()
        return [
            LexicalHit(r[0], r[1], int(r[2]), int(r[2]) >= n_terms, float(r[3]), bool(r[4]), int(r[5])) for r in rows
        ]

    meta_q = tsquery_any(sorted({s for t in parsed.terms for s in t.stems}))
    # Every chunk holding a form of a query term: the live GIN indexes (the exhaustive path, and chunks
    # newer than the postings).
    matching_sql = (
        "c.tf_stem ?| %s::text[] OR c.tf_surface ?| %s::text[] "
        "OR c.lex_title @@ %s::tsquery OR c.lex_meta @@ %s::tsquery"
    )
    matching_params: list[Any] = [all_stems, all_surfaces, title_q, meta_q]
    pool = _candidates(parsed, extra_by_term, idfs, limit=max(CANDIDATES, 2 * limit))
    hits = scored(
        f"c.id = ANY(%s::bigint[]) OR (c.id > %s AND ({matching_sql}))",
        [pool.chunk_ids, stats.max_chunk_id, *matching_params],
    )
    if len(hits) < limit and pool.cut:  # narrow filters: the pruned pool ran dry, score every match
        hits = scored(matching_sql, matching_params)
    return LexicalOutcome(hits, expansion.suggestion_text(parsed, found), tuple(extra))


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
    bits: list[str] = []
    params: list[Any] = []
    for i, term in enumerate(parsed.terms):
        extras = extra_by_term.get(i, [])
        stems = sorted({*term.stems, *(s for e in extras for s in e.stems)})
        surfaces = sorted({*term.surfaces, *(e.form for e in extras)})
        title_q = tsquery_any(term.title_forms, prefix=term.prefix)
        bits.append(
            "((c.tf_stem ?| %s::text[] OR c.tf_surface ?| %s::text[] OR c.lex_title @@ %s::tsquery "
            f"OR c.lex_meta @@ %s::tsquery)::int::bigint << {i})"
        )
        params += [stems, surfaces, title_q, tsquery_any(term.stems)]
    key = "c.item_id" if by_item else "c.id"
    corpus_col = "in_live" if corpus == "live" else "in_latest"
    sql = (
        f"SELECT {key}, bit_or({' | '.join(bits)}) FROM search_chunk c "
        f"WHERE c.{corpus_col} AND {key} = ANY(%s::bigint[]) GROUP BY {key}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, ids])
        return {int(k): int(m) for k, m in cursor.fetchall()}
