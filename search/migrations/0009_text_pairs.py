"""Text pairs: every two space-separated pieces that stand side by side in a chunk's or a title's folded text.

The live preview matches a typed fragment as a substring of ``search_chunk.folded_text`` or
``search_revision.title_folded``. A fragment of several words can only occur where each two of its
consecutive pieces stand side by side, so when one such pair occurs nowhere the preview knows at once that
nothing matches, instead of checking candidates until its time budget runs out (at 100k items half of the
typed fragments match nothing). See ``search.selectors.fragment_absent``.

- ``search_text_pairs(tail_rev, head)``: the left piece's last ``PIECE_CHARS`` characters reversed (so a
  fragment's first piece, which may be the end of a longer word, is a prefix lookup) and the right piece's
  first ``PIECE_CHARS``. Pairs whose left piece ends a sentence (``.?!;:``) are left out: they are most of the
  distinct pairs of a corpus and a fragment rarely spans them (the preview does not check such a pair).
- Triggers keep it a superset of the pairs in the text, in the same transaction as every write (admin,
  import, build, raw SQL); pairs of text that has since changed stay (they only make the check pass).
  A row is added only if not there yet (no unique index: concurrent writers never wait on each other).
- ``search_text_pairs_fill()`` adds the pairs of every chunk and title that are not there yet (this
  migration, and the bench's bulk load, which disables the triggers while it copies rows in).
"""

from django.db import migrations

PIECE_CHARS = 64  # search.selectors.TEXT_PAIR_CHARS
SENTENCE_ENDS = "'.', '?', '!', ';', ':'"  # search.selectors.TEXT_PAIR_BREAKS

FORWARD = f"""
CREATE TABLE search_text_pairs (
    tail_rev text COLLATE "C" NOT NULL,
    head text COLLATE "C" NOT NULL
);

CREATE FUNCTION search_text_pairs_of(t text) RETURNS TABLE (tail_rev text, head text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT reverse(right(u.l, {PIECE_CHARS})) COLLATE "C", left(u.r, {PIECE_CHARS}) COLLATE "C"
      FROM unnest(string_to_array(t, ' '), (string_to_array(t, ' '))[2:]) AS u(l, r)
     WHERE u.r IS NOT NULL AND right(u.l, 1) NOT IN ({SENTENCE_ENDS})
$$;

CREATE FUNCTION search_text_pairs_add(t text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pairs (tail_rev, head)
    SELECT DISTINCT p.tail_rev, p.head FROM search_text_pairs_of(t) p
     WHERE NOT EXISTS (
        SELECT 1 FROM search_text_pairs q WHERE q.tail_rev = p.tail_rev AND q.head = p.head
     )
$$;

-- EXCEPT reads both sides before the first row goes in (an anti-join could re-read the rows it inserts).
CREATE FUNCTION search_text_pairs_fill() RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pairs (tail_rev, head)
    SELECT p.tail_rev, p.head
      FROM (SELECT folded_text AS t FROM search_chunk UNION ALL SELECT title_folded FROM search_revision) s,
           search_text_pairs_of(s.t) p
    EXCEPT
    SELECT tail_rev, head FROM search_text_pairs
$$;

CREATE FUNCTION search_chunk_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM search_text_pairs_add(NEW.folded_text);
    RETURN NULL;
END $$;

CREATE FUNCTION search_revision_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM search_text_pairs_add(NEW.title_folded);
    RETURN NULL;
END $$;

CREATE TRIGGER search_chunk_text_pairs_insert AFTER INSERT ON search_chunk
    FOR EACH ROW WHEN (NEW.folded_text <> '') EXECUTE FUNCTION search_chunk_text_pairs();
CREATE TRIGGER search_chunk_text_pairs_update AFTER UPDATE OF folded_text ON search_chunk
    FOR EACH ROW WHEN (NEW.folded_text IS DISTINCT FROM OLD.folded_text)
    EXECUTE FUNCTION search_chunk_text_pairs();
CREATE TRIGGER search_revision_text_pairs_insert AFTER INSERT ON search_revision
    FOR EACH ROW WHEN (NEW.title_folded <> '') EXECUTE FUNCTION search_revision_text_pairs();
CREATE TRIGGER search_revision_text_pairs_update AFTER UPDATE OF title_folded ON search_revision
    FOR EACH ROW WHEN (NEW.title_folded IS DISTINCT FROM OLD.title_folded)
    EXECUTE FUNCTION search_revision_text_pairs();

-- The triggers above hold off writers to both tables until this migration commits: nothing written
-- meanwhile can miss the fill. The index goes on after it (faster than keeping it up row by row).
SET LOCAL work_mem = '256MB';
SELECT search_text_pairs_fill();
CREATE INDEX search_text_pairs_key ON search_text_pairs (tail_rev, head);
ANALYZE search_text_pairs;
"""

BACKWARD = """
DROP TRIGGER IF EXISTS search_chunk_text_pairs_insert ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_text_pairs_update ON search_chunk;
DROP TRIGGER IF EXISTS search_revision_text_pairs_insert ON search_revision;
DROP TRIGGER IF EXISTS search_revision_text_pairs_update ON search_revision;
DROP FUNCTION IF EXISTS search_chunk_text_pairs();
DROP FUNCTION IF EXISTS search_revision_text_pairs();
DROP FUNCTION IF EXISTS search_text_pairs_fill();
DROP FUNCTION IF EXISTS search_text_pairs_add(text);
DROP FUNCTION IF EXISTS search_text_pairs_of(text);
DROP TABLE IF EXISTS search_text_pairs;
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0008_impact_postings")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
