"""Term statistics as materialized views (refreshed CONCURRENTLY by the build) and the preview's trigram index."""

from django.db import migrations

TERM_STATS = """
CREATE MATERIALIZED VIEW search_term_stats AS
SELECT 'stem'::text AS field, t.lexeme AS term, count(*)::integer AS df
  FROM search_chunk c, unnest(c.lex_stem) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
UNION ALL
SELECT 'surface', t.lexeme, count(*)::integer
  FROM search_chunk c, unnest(c.lex_surface) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
UNION ALL
SELECT 'title', t.lexeme, count(*)::integer
  FROM search_chunk c, unnest(c.lex_title) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
UNION ALL
SELECT 'meta', t.lexeme, count(*)::integer
  FROM search_chunk c, unnest(c.lex_meta) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
;
CREATE UNIQUE INDEX search_term_stats_key ON search_term_stats (field, term);

CREATE MATERIALIZED VIEW search_corpus_stats AS
SELECT 1 AS id,
       count(*)::integer AS n_chunks,
       coalesce(avg(body_len), 0)::float8 AS avg_body_len,
       coalesce(avg(title_len), 0)::float8 AS avg_title_len
  FROM search_chunk WHERE in_live OR in_latest
;
CREATE UNIQUE INDEX search_corpus_stats_key ON search_corpus_stats (id);

CREATE INDEX chunk_folded_text_trgm ON search_chunk USING gin (folded_text gin_trgm_ops);
"""

DROP = """
DROP INDEX IF EXISTS chunk_folded_text_trgm;
DROP MATERIALIZED VIEW IF EXISTS search_corpus_stats;
DROP MATERIALIZED VIEW IF EXISTS search_term_stats;
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]
    operations = [migrations.RunSQL(TERM_STATS, DROP)]
