"""The lexical lane: BM25 over title and body, computed in one SQL query from the built statistics.

Rules (each pinned by tests/search/test_lexical.py):
- chunks holding every query term rank first; the rest follow by score, where a missing common term
  costs less than a missing rare one (BM25's idf), and the result says ``partial_match``;
- each term matches its stem (item language) and its written form (folded) in the same query;
- accent-insensitive everywhere (the folded forms are columns written by the build);
- Arabic: a leading و or ف is also tried stripped;
- titles match the word as written (article stripped) or as the start of a longer word, never by stem;
- a title word counts more than a body, keyword or content-type match; the newest item wins a tie.
Nothing is counted at query time: document frequencies, corpus size and average lengths come from
the materialized views ``search_term_stats`` and ``search_corpus_stats``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from search.query_parser import ParsedQuery

# A title matched as the start of a longer word counts a little less than the word as written.
TITLE_PREFIX_FACTOR = 0.7
# Keyword / content-type matches count at this fraction of a title match.
META_WEIGHT = 0.5


@dataclass(frozen=True)
class LexicalHit:
    chunk_id: int
    item_id: int
    matched_terms: int
    complete: bool
    score: float
    title_hit: bool


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _tsquery(lexemes: list[tuple[str, bool]]) -> str:
    parts = sorted({_quote(lex) + (":*" if prefix else "") for lex, prefix in lexemes})
    return " | ".join(parts) if parts else "''"


SQL = """
WITH cs AS MATERIALIZED (
    SELECT n_chunks, greatest(avg_body_len, 1.0) AS avgdl FROM search_corpus_stats
),
qs AS MATERIALIZED (
    SELECT q.idx, q.field, q.lexeme, q.prefix,
           ln(1 + (greatest(cs.n_chunks, 1) - coalesce(ts.df, 0) + 0.5) / (coalesce(ts.df, 0) + 0.5)) AS idf
    FROM unnest(%s::int[], %s::text[], %s::text[], %s::bool[]) AS q(idx, field, lexeme, prefix)
    CROSS JOIN cs
    LEFT JOIN search_term_stats ts ON ts.field = q.field AND ts.term = q.lexeme
),
cand AS MATERIALIZED (
    SELECT c.id, c.item_id, c.lex_stem, c.lex_surface, c.lex_title, c.lex_meta, c.body_len
    FROM search_chunk c
    WHERE c.{corpus_col}
      AND (c.lex_stem @@ %s::tsquery OR c.lex_surface @@ %s::tsquery
           OR c.lex_title @@ %s::tsquery OR c.lex_meta @@ %s::tsquery)
      AND c.item_id IN ({items_sql})
),
forms AS (
    SELECT cand.id, qs.idx, 'body' AS field,
           qs.idf * (cardinality(u.positions) * (%s + 1.0))
             / (cardinality(u.positions) + %s * (1 - %s + %s * cand.body_len / cs.avgdl)) AS s
    FROM cand CROSS JOIN cs CROSS JOIN LATERAL unnest(cand.lex_stem) u
    JOIN qs ON qs.field = 'stem' AND qs.lexeme = u.lexeme
    UNION ALL
    SELECT cand.id, qs.idx, 'body',
           qs.idf * (cardinality(u.positions) * (%s + 1.0))
             / (cardinality(u.positions) + %s * (1 - %s + %s * cand.body_len / cs.avgdl))
    FROM cand CROSS JOIN cs CROSS JOIN LATERAL unnest(cand.lex_surface) u
    JOIN qs ON qs.field = 'surface' AND qs.lexeme = u.lexeme
    UNION ALL
    SELECT cand.id, qs.idx, 'title',
           qs.idf * CASE WHEN u.lexeme = qs.lexeme THEN 1.0 ELSE {prefix_factor} END
    FROM cand CROSS JOIN LATERAL unnest(cand.lex_title) u
    JOIN qs ON qs.field = 'title' AND (u.lexeme = qs.lexeme OR (qs.prefix AND starts_with(u.lexeme, qs.lexeme)))
    UNION ALL
    SELECT cand.id, qs.idx, 'meta', qs.idf
    FROM cand CROSS JOIN LATERAL unnest(cand.lex_meta) u
    JOIN qs ON qs.field = 'meta' AND qs.lexeme = u.lexeme
),
terms AS (
    SELECT id, idx,
           coalesce(max(s) FILTER (WHERE field = 'body'), 0) AS body,
           coalesce(max(s) FILTER (WHERE field = 'title'), 0) AS title,
           coalesce(max(s) FILTER (WHERE field = 'meta'), 0) AS meta
    FROM forms GROUP BY id, idx
),
per_chunk AS (
    SELECT id, count(*) AS matched, sum(body + %s * title + %s * meta) AS score, bool_or(title > 0) AS title_hit
    FROM terms GROUP BY id
)
SELECT p.id, cand.item_id, p.matched, p.score, p.title_hit
FROM per_chunk p
JOIN cand ON cand.id = p.id
JOIN search_contentitem i ON i.id = cand.item_id
ORDER BY (p.matched >= %s) DESC, p.score DESC, i.updated_at DESC, p.id
LIMIT %s
"""


def lexical_search(
    *, parsed: ParsedQuery, corpus: str, items_sql: tuple[str, list[Any]], limit: int
) -> list[LexicalHit]:
    """Rank chunks by BM25 (see module docstring). ``items_sql`` selects the item ids the caller may see."""
    if not parsed.searchable:
        return []
    k1 = settings.SEARCH["BM25_K1"]
    b = settings.SEARCH["BM25_B"]
    title_weight = settings.SEARCH["TITLE_WEIGHT"]
    idx: list[int] = []
    fields: list[str] = []
    lexemes: list[str] = []
    prefixes: list[bool] = []

    def add(i: int, field: str, lexeme: str, prefix: bool = False) -> None:
        idx.append(i)
        fields.append(field)
        lexemes.append(lexeme)
        prefixes.append(prefix)

    stem_q, surf_q, title_q = [], [], []
    for i, term in enumerate(parsed.terms):
        for s in term.stems:
            add(i, "stem", s)
            add(i, "meta", s)
            stem_q.append((s, False))
        for s in term.surfaces:
            add(i, "surface", s)
            surf_q.append((s, False))
        for s in term.title_forms:
            add(i, "title", s, term.prefix)
            title_q.append((s, term.prefix))
    items_query, items_params = items_sql
    sql = SQL.format(
        corpus_col="in_live" if corpus == "live" else "in_latest",
        items_sql=items_query,
        prefix_factor=TITLE_PREFIX_FACTOR,
    )
    params: list[Any] = [
        idx, fields, lexemes, prefixes,
        _tsquery(stem_q), _tsquery(surf_q), _tsquery(title_q), _tsquery(stem_q),
        *items_params,
        k1, k1, b, b,
        k1, k1, b, b,
        title_weight, META_WEIGHT,
        len(parsed.terms), limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    n_terms = len(parsed.terms)
    return [LexicalHit(r[0], r[1], int(r[2]), int(r[2]) >= n_terms, float(r[3]), bool(r[4])) for r in rows]
