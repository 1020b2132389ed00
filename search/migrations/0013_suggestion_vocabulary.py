""""Did you mean" draws on every vocabulary the lexical lane matches a word in: bodies, titles, keywords.

``search_term_stats`` already held body written forms (``surface``) and title words (``title``); keywords
and the content type were there only as stems (``meta``), and a stem is not a word to suggest. This adds:

- ``search_fold(text)``: the SQL twin of ``search.text.analysis.fold`` (lower-case, NFKD, combining marks and
  tatweel removed, NFC, Arabic letter variants folded), its mark ranges taken from Python's ``unicodedata``
  when the migration runs, so both fold alike (pinned by ``tests/search/engine/test_suggestions.py``);
- ``search_keyword_words(ai_keywords, content_type)``: the folded words of an item's keywords and content
  type, split as ``search.text.analysis.tokens`` splits (on anything but letters and digits, French elisions
  dropped; a word may repeat), and a GIN index on it, so "may this reader see an item with this keyword
  word?" is one probe;
- a ``keyword`` field in ``search_term_stats`` (document frequency: chunks of items with the word), in the
  same trigram index as the other fields. The build refreshes the view as before.
"""

import unicodedata

from django.db import migrations


def _mark_ranges() -> str:
    """A regex bracket body (``\\u0300-\\u036f...``) of every character ``unicodedata.combining`` marks."""

    def escape(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"

    ranges: list[tuple[int, int]] = []
    for code in range(0x110000):
        if unicodedata.combining(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(escape(a) if a == b else f"{escape(a)}-{escape(b)}" for a, b in ranges)


MARKS = _mark_ranges()
# search.text.analysis.FRENCH_ELISIONS and APOSTROPHES, frozen here: a change there needs a new migration.
ELISIONS = "l|d|j|m|n|s|t|c|qu|jusqu|lorsqu|puisqu|quoiqu"
APOSTROPHES = "'\u2019\u02bc\u2018`\u00b4".replace("'", "''")

DROP_FUNCTIONS = """
DROP INDEX IF EXISTS search_contentitem_keyword_words;
DROP FUNCTION IF EXISTS search_keyword_words(text[], text);
DROP FUNCTION IF EXISTS search_fold(text);
"""


def functions_sql(lower: str) -> str:
    """The functions and the index, lower-casing with ``lower`` (a SQL expression of ``word``).

    SQL-standard bodies (``RETURN``), parsed when created: a refresh of the view or a build of the index runs
    with ``search_path`` set to ``pg_catalog`` only (PostgreSQL 17+), where a body read at call time would not
    find ``search_fold``."""
    return f"""
CREATE FUNCTION search_fold(word text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN translate(
    normalize(regexp_replace(normalize(replace({lower}, E'\\u0640', ''), NFKD), '[{MARKS}]', '', 'g'), NFC),
    E'\\u0671\\u0649\\u0629', E'\\u0627\\u064a\\u0647'
);

CREATE FUNCTION search_keyword_words(keywords text[], content_type text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN array_remove(regexp_split_to_array(search_fold(
    regexp_replace(
        regexp_replace(
            array_to_string(array_append(keywords, replace(coalesce(content_type, ''), '_', ' ')), ' '),
            '(^|[^[:alnum:]])({ELISIONS})[{APOSTROPHES}](?=[[:alpha:]])', '\\1', 'gi'
        ),
        '([^[:alnum:]]|[_\\u02bc{MARKS}])+', ' ', 'g'
    )
), ' '), '');

CREATE INDEX search_contentitem_keyword_words ON search_contentitem
    USING gin (search_keyword_words(ai_keywords::text[], content_type));
"""


def functions_create(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Python lower-cases with Unicode's full case mapping (a final sigma is ``ς``): so does PostgreSQL 18's
    ``pg_unicode_fast`` collation. An older server (``DATABASE_URL``) lower-cases by the database's locale."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_collation WHERE collname = 'pg_unicode_fast'")
        full_case = cursor.fetchone() is not None
    lower = "lower(word COLLATE pg_unicode_fast)" if full_case else "lower(word)"
    schema_editor.execute(functions_sql(lower), params=None)


def functions_drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    schema_editor.execute(DROP_FUNCTIONS, params=None)


STATS_BODY = """
SELECT 'stem'::text AS field, k AS term, count(*)::integer AS df
  FROM search_chunk c, jsonb_object_keys(c.tf_stem) k WHERE c.in_live OR c.in_latest GROUP BY k
UNION ALL
SELECT 'surface', k, count(*)::integer
  FROM search_chunk c, jsonb_object_keys(c.tf_surface) k WHERE c.in_live OR c.in_latest GROUP BY k
UNION ALL
SELECT 'title', t.lexeme, count(*)::integer
  FROM search_chunk c, unnest(c.lex_title) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
UNION ALL
SELECT 'meta', t.lexeme, count(*)::integer
  FROM search_chunk c, unnest(c.lex_meta) t WHERE c.in_live OR c.in_latest GROUP BY t.lexeme
"""

KEYWORD_STATS = """
UNION ALL
SELECT 'keyword', k.w, sum(c.n)::integer
  FROM (SELECT item_id, count(*) AS n FROM search_chunk WHERE in_live OR in_latest GROUP BY item_id) c
  CROSS JOIN LATERAL (
      SELECT DISTINCT w
        FROM search_contentitem i, unnest(search_keyword_words(i.ai_keywords::text[], i.content_type)) w
       WHERE i.id = c.item_id
  ) k
 GROUP BY k.w
"""

INDEXES = """
CREATE UNIQUE INDEX search_term_stats_key ON search_term_stats (field, term);
CREATE INDEX search_term_stats_trgm ON search_term_stats USING gin (term gin_trgm_ops);
"""

DROP_STATS = "DROP MATERIALIZED VIEW IF EXISTS search_term_stats;"
STATS = f"{DROP_STATS}\nCREATE MATERIALIZED VIEW search_term_stats AS {STATS_BODY}{KEYWORD_STATS};\n{INDEXES}"
OLD_STATS = f"{DROP_STATS}\nCREATE MATERIALIZED VIEW search_term_stats AS {STATS_BODY};\n{INDEXES}"


class Migration(migrations.Migration):
    dependencies = [("search", "0012_embedding_space_switch")]
    operations = [
        migrations.RunPython(functions_create, functions_drop),
        migrations.RunSQL(STATS, OLD_STATS),
    ]
