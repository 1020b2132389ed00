"""The live preview matches words, not one piece of text (Step 17).

- ``search_revision`` gets the tsvectors the preview matches typed words against (``title_words``,
  ``title_lead``, ``preview_words``; ``search.text.analysis.revision_preview_columns``), filled here for
  every revision, with GIN indexes.
- ``search_term_stats`` gets two B-tree indexes that find the corpus words sharing a typed word's first or
  last letters: the preview's typo lookup (``search.engine.preview.typo_forms``) finds every word within
  one or two edits through them and the trigram index of 0013, never by scanning the vocabulary. A migration that
  recreates the view must recreate them.
- ``search_keyword_words`` (0013, the SQL twin of the tokenizer for keywords) keeps a combining mark inside a
  word, as ``analysis.tokens`` now does.
- Items whose text holds combining marks (Arabic harakat, decomposed accents) are marked for re-indexing: the
  tokenizer used to split a word at each mark, and now keeps it whole (``analysis.WORD_RE``); the next index
  build rewrites their chunks' search columns.
- The text pairs and pieces of 0009 and 0010 (which ruled out a fragment as one contiguous piece of text)
  are dropped with their triggers: a fragment's words now match in any order.
"""

import importlib

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.conf import settings
from django.db import migrations

PAIRS = importlib.import_module("search.migrations.0009_text_pairs")
VOCABULARY = importlib.import_module("search.migrations.0013_suggestion_vocabulary")
PIECES = importlib.import_module("search.migrations.0010_text_pieces")

WORDS = "field IN ('surface', 'title')"  # the preview's words: body words as written, title words
TERM_INDEXES = f"""
CREATE INDEX search_term_stats_prefix ON search_term_stats (term text_pattern_ops) WHERE {WORDS};
CREATE INDEX search_term_stats_suffix ON search_term_stats (reverse(term) text_pattern_ops) WHERE {WORDS};
"""
DROP_TERM_INDEXES = """
DROP INDEX IF EXISTS search_term_stats_prefix;
DROP INDEX IF EXISTS search_term_stats_suffix;
"""
BATCH = 500


# ``search_keyword_words`` (0013) split as ``analysis.tokens`` now splits: a combining mark no longer ends a
# word, so the marks go before the split (``search_fold`` strips them anyway); its index is rebuilt with it.
KEYWORD_WORDS = f"""
DROP INDEX IF EXISTS search_contentitem_keyword_words;
CREATE OR REPLACE FUNCTION search_keyword_words(keywords text[], content_type text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN array_remove(regexp_split_to_array(search_fold(
    regexp_replace(
        regexp_replace(
            regexp_replace(
                array_to_string(array_append(keywords, replace(coalesce(content_type, ''), '_', ' ')), ' '),
                '[{VOCABULARY.MARKS}]', '', 'g'
            ),
            '(^|[^[:alnum:]])({VOCABULARY.ELISIONS})[{VOCABULARY.APOSTROPHES}](?=[[:alpha:]])', '\\1', 'gi'
        ),
        '([^[:alnum:]]|[_\\u02bc])+', ' ', 'g'
    )
), ' '), '');

CREATE INDEX search_contentitem_keyword_words ON search_contentitem
    USING gin (search_keyword_words(ai_keywords::text[], content_type));
"""
_OLD = VOCABULARY.functions_sql("lower(word)")
KEYWORD_WORDS_BEFORE = "DROP INDEX IF EXISTS search_contentitem_keyword_words;\n" + _OLD[
    _OLD.index("CREATE FUNCTION search_keyword_words") :
].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
MARKED = r"[\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed]"
REINDEX_MARKED = f"""
UPDATE search_contentitem SET index_dirty = true
WHERE id IN (SELECT item_id FROM search_chunk WHERE text ~ '{MARKED}');
UPDATE search_indexstate SET dirty = true, dirty_since = coalesce(dirty_since, now())
WHERE EXISTS (SELECT 1 FROM search_contentitem WHERE index_dirty);
"""


def fill_preview_columns(apps, schema_editor):  # type: ignore[no-untyped-def]
    from search.text.analysis import revision_preview_columns

    Revision = apps.get_model("search", "Revision")
    last = 0
    while True:
        batch = list(Revision.objects.filter(pk__gt=last).order_by("pk").values_list("pk", "title", "body")[:BATCH])
        if not batch:
            return
        with schema_editor.connection.cursor() as cursor:
            cursor.executemany(
                "UPDATE search_revision SET title_words = %s::tsvector, title_lead = %s::tsvector, "
                "preview_words = %s::tsvector WHERE id = %s",
                [
                    (c["title_words"], c["title_lead"], c["preview_words"], pk)
                    for pk, title, body in batch
                    for c in [revision_preview_columns(title, body)]
                ],
            )
        last = batch[-1][0]


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0015_accounts_moved_out'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='revision',
            name='preview_words',
            field=django.contrib.postgres.search.SearchVectorField(null=True),
        ),
        migrations.AddField(
            model_name='revision',
            name='title_lead',
            field=django.contrib.postgres.search.SearchVectorField(null=True),
        ),
        migrations.AddField(
            model_name='revision',
            name='title_words',
            field=django.contrib.postgres.search.SearchVectorField(null=True),
        ),
        migrations.RunPython(fill_preview_columns, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='revision',
            index=django.contrib.postgres.indexes.GinIndex(fields=['title_words'], name='revision_title_words_gin'),
        ),
        migrations.AddIndex(
            model_name='revision',
            index=django.contrib.postgres.indexes.GinIndex(fields=['title_lead'], name='revision_title_lead_gin'),
        ),
        migrations.AddIndex(
            model_name='revision',
            index=django.contrib.postgres.indexes.GinIndex(fields=['preview_words'], name='revision_preview_words_gin'),
        ),
        migrations.RunSQL(TERM_INDEXES, DROP_TERM_INDEXES),
        migrations.RunSQL(KEYWORD_WORDS, KEYWORD_WORDS_BEFORE),
        migrations.RunSQL(REINDEX_MARKED, migrations.RunSQL.noop),
        migrations.RunSQL(PIECES.BACKWARD + PAIRS.BACKWARD, PAIRS.FORWARD + PIECES.FORWARD),
    ]
