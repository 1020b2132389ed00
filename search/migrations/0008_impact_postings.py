"""Impact-ordered postings: the best chunks per term, so the lexical lane scores hundreds of rows, not 100,000s.

``search_postings`` holds, per (field, term), the ``POSTINGS_DEPTH`` chunks where the term weighs most
(BM25's saturated term frequency with its length normalisation, k1 1.2 / b 0.75 as a fixed proxy: the
exact score is computed later with the configured k1 and b), best first, as two parallel arrays, plus the
term's full document frequency (so the lane knows when a list was cut). ``title`` postings carry the
title's weight, ``meta`` (keywords, content type) a flat half. ``search_corpus_stats`` gains ``max_chunk_id``: chunks written after a build are found by
the live indexes until the next refresh (refreshed first, so nothing falls between the two views).
"""

from django.db import migrations

POSTINGS_DEPTH = 1000

CORPUS_STATS = """
DROP MATERIALIZED VIEW IF EXISTS search_corpus_stats;
CREATE MATERIALIZED VIEW search_corpus_stats AS
SELECT 1 AS id,
       count(*)::integer AS n_chunks,
       coalesce(avg(body_len), 0)::float8 AS avg_body_len,
       coalesce(avg(title_len), 0)::float8 AS avg_title_len,
       (SELECT coalesce(max(id), 0) FROM search_chunk)::bigint AS max_chunk_id
  FROM search_chunk WHERE in_live OR in_latest;
CREATE UNIQUE INDEX search_corpus_stats_key ON search_corpus_stats (id);
"""

OLD_CORPUS_STATS = """
DROP MATERIALIZED VIEW IF EXISTS search_corpus_stats;
CREATE MATERIALIZED VIEW search_corpus_stats AS
SELECT 1 AS id,
       count(*)::integer AS n_chunks,
       coalesce(avg(body_len), 0)::float8 AS avg_body_len,
       coalesce(avg(title_len), 0)::float8 AS avg_title_len
  FROM search_chunk WHERE in_live OR in_latest;
CREATE UNIQUE INDEX search_corpus_stats_key ON search_corpus_stats (id);
"""

POSTINGS = f"""
CREATE MATERIALIZED VIEW search_postings AS
WITH corpus AS (
    SELECT greatest(coalesce(avg(body_len), 1), 1)::float8 AS avgdl FROM search_chunk WHERE in_live OR in_latest
),
chunks AS (
    SELECT c.id, c.tf_stem, c.tf_surface, c.lex_title, c.lex_meta,
           1.2 * (0.25 + 0.75 * c.body_len / corpus.avgdl) AS norm
      FROM search_chunk c, corpus WHERE c.in_live OR c.in_latest
),
entries AS (
    SELECT 'stem'::text AS field, e.key AS term, c.id AS chunk_id,
           (e.value::float8 / (e.value::float8 + c.norm))::real AS impact
      FROM chunks c, jsonb_each_text(c.tf_stem) e
    UNION ALL
    SELECT 'surface', e.key, c.id, (e.value::float8 / (e.value::float8 + c.norm))::real
      FROM chunks c, jsonb_each_text(c.tf_surface) e
    UNION ALL
    SELECT 'title', t.lexeme, c.id, (2.0 / (2.0 + c.norm))::real
      FROM chunks c, unnest(c.lex_title) t
    UNION ALL
    SELECT 'meta', t.lexeme, c.id, 0.5::real
      FROM chunks c, unnest(c.lex_meta) t
),
ranked AS (
    SELECT field, term, chunk_id, impact,
           row_number() OVER w AS rn, count(*) OVER (PARTITION BY field, term) AS df
      FROM entries WINDOW w AS (PARTITION BY field, term ORDER BY impact DESC, chunk_id)
)
SELECT field, term, max(df)::integer AS df,
       array_agg(chunk_id ORDER BY rn) AS chunk_ids, array_agg(impact ORDER BY rn) AS impacts
  FROM ranked WHERE rn <= {POSTINGS_DEPTH} GROUP BY field, term;
CREATE UNIQUE INDEX search_postings_key ON search_postings (field, term);
"""

DROP_POSTINGS = "DROP MATERIALIZED VIEW IF EXISTS search_postings;"


class Migration(migrations.Migration):
    dependencies = [("search", "0007_vocabulary_fuzzy")]
    operations = [
        migrations.RunSQL(CORPUS_STATS, OLD_CORPUS_STATS),
        migrations.RunSQL(POSTINGS, DROP_POSTINGS),
    ]
