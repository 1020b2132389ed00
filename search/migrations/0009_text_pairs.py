"""Text pairs: every two space-separated pieces that stand side by side in a chunk's or a title's folded text.

The live preview matches a typed fragment as a substring of ``search_chunk.folded_text`` or
``search_revision.title_folded``. A fragment of several words can only occur where each two of its
consecutive pieces stand side by side, so when one such pair occurs nowhere the preview knows at once that
nothing matches, instead of checking candidates until its time budget runs out (at 100k items half of the
typed fragments match nothing). See ``search.engine.preview.fragment_absent``.

- ``search_text_pairs(anonymous, tail_rev, head)``: the left piece's last ``PIECE_CHARS`` characters reversed
  (so a fragment's first piece, which may be the end of a longer word, is a prefix lookup) and the right
  piece's first ``PIECE_CHARS``. Pairs whose left piece ends a sentence (``.?!;:``) are left out: they are
  most of the distinct pairs of a corpus and a fragment rarely spans them (the preview does not check such a
  pair).
- Two scopes, so that how fast a preview says "nothing" never tells a visitor what text they may not read
  holds: ``anonymous = false`` rows hold the pairs of every text (for principals who read everything);
  ``anonymous = true`` rows only those of text an anonymous visitor may read (the live revision of a public,
  unarchived item: ``search_item_public``, the SQL twin of ``searchable(ANONYMOUS, "live")``, pinned by a
  test). Other principals get no rule-out.
- Triggers keep both scopes supersets of their text, in the same transaction as every write (admin, import,
  build, publish, a visibility change, raw SQL). Pairs of text that has since changed, or stopped being
  public, stay: they only let a fragment through to the real search. A row is added only if not there yet
  (no unique index: concurrent writers never wait on each other).
- ``search_text_pairs_fill()`` adds every missing pair of both scopes (this migration, and the bench's bulk
  load, which disables the triggers while it copies rows in).
"""

from django.db import migrations

PIECE_CHARS = 64  # search.engine.preview.TEXT_PAIR_CHARS
SENTENCE_ENDS = "'.', '?', '!', ';', ':'"  # search.engine.preview.TEXT_PAIR_BREAKS

FORWARD = f"""
CREATE TABLE search_text_pairs (
    anonymous boolean NOT NULL,
    tail_rev text COLLATE "C" NOT NULL,
    head text COLLATE "C" NOT NULL
);

CREATE FUNCTION search_text_pairs_of(t text) RETURNS TABLE (tail_rev text, head text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT reverse(right(u.l, {PIECE_CHARS})) COLLATE "C", left(u.r, {PIECE_CHARS}) COLLATE "C"
      FROM unnest(string_to_array(t, ' '), (string_to_array(t, ' '))[2:]) AS u(l, r)
     WHERE u.r IS NOT NULL AND right(u.l, 1) NOT IN ({SENTENCE_ENDS})
$$;

-- What an anonymous visitor may read: ContentItem.objects.searchable(ANONYMOUS, "live").
CREATE FUNCTION search_item_public(item bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM search_contentitem i
         WHERE i.id = item AND i.visibility = 'public' AND i.archived_at IS NULL
           AND i.live_revision_id IS NOT NULL
    )
$$;

CREATE FUNCTION search_text_pairs_add(t text, readable_by_anonymous boolean) RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pairs (anonymous, tail_rev, head)
    SELECT DISTINCT s.anonymous, p.tail_rev, p.head
      FROM search_text_pairs_of(t) p, (VALUES (false), (true)) AS s(anonymous)
     WHERE (NOT s.anonymous OR readable_by_anonymous)
       AND NOT EXISTS (
        SELECT 1 FROM search_text_pairs q
         WHERE q.anonymous = s.anonymous AND q.tail_rev = p.tail_rev AND q.head = p.head
     )
$$;

-- EXCEPT reads both sides before the first row goes in (an anti-join could re-read the rows it inserts).
CREATE FUNCTION search_text_pairs_fill() RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pairs (anonymous, tail_rev, head)
    SELECT false, p.tail_rev, p.head
      FROM (SELECT folded_text AS t FROM search_chunk UNION ALL SELECT title_folded FROM search_revision) s,
           search_text_pairs_of(s.t) p
    UNION ALL
    SELECT true, p.tail_rev, p.head
      FROM (SELECT c.folded_text AS t FROM search_chunk c WHERE c.in_live AND search_item_public(c.item_id)
            UNION ALL
            SELECT r.title_folded
              FROM search_contentitem i JOIN search_revision r ON r.id = i.live_revision_id
             WHERE search_item_public(i.id)) s,
           search_text_pairs_of(s.t) p
    EXCEPT
    SELECT anonymous, tail_rev, head FROM search_text_pairs
$$;

CREATE FUNCTION search_chunk_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM search_text_pairs_add(NEW.folded_text, NEW.in_live AND search_item_public(NEW.item_id));
    RETURN NULL;
END $$;

CREATE FUNCTION search_revision_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM search_text_pairs_add(
        NEW.title_folded,
        EXISTS (SELECT 1 FROM search_contentitem i
                 WHERE i.live_revision_id = NEW.id AND search_item_public(i.id))
    );
    RETURN NULL;
END $$;

-- An item that becomes readable by anonymous visitors (published, made public, unarchived): its live text
-- joins their scope.
CREATE FUNCTION search_item_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF search_item_public(NEW.id) THEN
        PERFORM search_text_pairs_add(c.folded_text, true)
           FROM search_chunk c WHERE c.item_id = NEW.id AND c.in_live;
        PERFORM search_text_pairs_add(r.title_folded, true)
           FROM search_revision r WHERE r.id = NEW.live_revision_id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER search_chunk_text_pairs_insert AFTER INSERT ON search_chunk
    FOR EACH ROW WHEN (NEW.folded_text <> '') EXECUTE FUNCTION search_chunk_text_pairs();
CREATE TRIGGER search_chunk_text_pairs_update AFTER UPDATE OF folded_text, in_live ON search_chunk
    FOR EACH ROW WHEN (NEW.folded_text IS DISTINCT FROM OLD.folded_text OR (NEW.in_live AND NOT OLD.in_live))
    EXECUTE FUNCTION search_chunk_text_pairs();
CREATE TRIGGER search_revision_text_pairs_insert AFTER INSERT ON search_revision
    FOR EACH ROW WHEN (NEW.title_folded <> '') EXECUTE FUNCTION search_revision_text_pairs();
CREATE TRIGGER search_revision_text_pairs_update AFTER UPDATE OF title_folded ON search_revision
    FOR EACH ROW WHEN (NEW.title_folded IS DISTINCT FROM OLD.title_folded)
    EXECUTE FUNCTION search_revision_text_pairs();
CREATE TRIGGER search_item_text_pairs_insert AFTER INSERT ON search_contentitem
    FOR EACH ROW WHEN (NEW.live_revision_id IS NOT NULL) EXECUTE FUNCTION search_item_text_pairs();
CREATE TRIGGER search_item_text_pairs_update AFTER UPDATE OF visibility, archived_at, live_revision_id
    ON search_contentitem FOR EACH ROW
    WHEN (NEW.visibility IS DISTINCT FROM OLD.visibility OR NEW.archived_at IS DISTINCT FROM OLD.archived_at
          OR NEW.live_revision_id IS DISTINCT FROM OLD.live_revision_id)
    EXECUTE FUNCTION search_item_text_pairs();

-- The triggers above hold off writers to these tables until this migration commits: nothing written
-- meanwhile can miss the fill. The index goes on after it (faster than keeping it up row by row).
SET LOCAL work_mem = '256MB';
SELECT search_text_pairs_fill();
CREATE INDEX search_text_pairs_key ON search_text_pairs (anonymous, tail_rev, head);
ANALYZE search_text_pairs;
"""

TRIGGERS = {
    "search_chunk": ("search_chunk_text_pairs_insert", "search_chunk_text_pairs_update"),
    "search_revision": ("search_revision_text_pairs_insert", "search_revision_text_pairs_update"),
    "search_contentitem": ("search_item_text_pairs_insert", "search_item_text_pairs_update"),
}

BACKWARD = "\n".join(
    f"DROP TRIGGER IF EXISTS {name} ON {table};" for table, names in TRIGGERS.items() for name in names
) + """
DROP FUNCTION IF EXISTS search_chunk_text_pairs();
DROP FUNCTION IF EXISTS search_revision_text_pairs();
DROP FUNCTION IF EXISTS search_item_text_pairs();
DROP FUNCTION IF EXISTS search_text_pairs_fill();
DROP FUNCTION IF EXISTS search_text_pairs_add(text, boolean);
DROP FUNCTION IF EXISTS search_item_public(bigint);
DROP FUNCTION IF EXISTS search_text_pairs_of(text);
DROP TABLE IF EXISTS search_text_pairs;
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0008_impact_postings")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
