"""Text pieces: every space-separated piece of a chunk's or a title's folded text, beside the text pairs.

Migration 0009's pairs rule out a typed fragment two of whose pieces never stand side by side. A fragment of
one piece ("coatme", a typo of a single word: the commonest thing typed into a search box) has no pair, so
at 100k items it ran the preview's whole time budget and showed nothing. Wherever such a fragment occurs it
lies inside one piece of the text, so one trigram-index probe of the distinct pieces rules it out, exactly.
The same table checks the pieces of a longer fragment that no pair check covers (a first piece under 3
characters, a pair across a sentence end). See ``search.engine.preview.fragment_absent``.

- ``search_text_pieces(anonymous, piece)``: whole pieces (no length cut: a fragment may sit anywhere in a
  long one), in the same two scopes as the pairs (``anonymous = true``: text anonymous visitors may read).
- The triggers of 0009 now call ``search_text_add``, which adds a text's pairs and its pieces; rows are
  added only when not there yet (a hash index finds them; no unique index, so writers never wait on each
  other, and a hash index has no length limit on a piece).
- Trigram indexes, one per scope (partial), answer ``piece LIKE '%fragment%'``.
- ``search_text_pieces_fill()`` adds every missing piece of both scopes (this migration and the bench's bulk
  load). Writers to chunks, revisions and items wait until this migration commits, so none can miss the fill.
"""

from django.db import migrations

PUBLIC_TEXTS = """
    SELECT c.folded_text AS t FROM search_chunk c WHERE c.in_live AND search_item_public(c.item_id)
    UNION ALL
    SELECT r.title_folded FROM search_contentitem i JOIN search_revision r ON r.id = i.live_revision_id
     WHERE search_item_public(i.id)
"""


def trigger_functions(add: str) -> str:
    """The bodies of 0009's trigger functions, adding a text through ``add`` (``search_text_add`` here,
    ``search_text_pairs_add`` when this migration is reversed)."""
    return f"""
CREATE OR REPLACE FUNCTION search_chunk_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {add}(NEW.folded_text, NEW.in_live AND search_item_public(NEW.item_id));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION search_revision_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {add}(
        NEW.title_folded,
        EXISTS (SELECT 1 FROM search_contentitem i
                 WHERE i.live_revision_id = NEW.id AND search_item_public(i.id))
    );
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION search_item_text_pairs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF search_item_public(NEW.id) THEN
        PERFORM {add}(c.folded_text, true)
           FROM search_chunk c WHERE c.item_id = NEW.id AND c.in_live;
        PERFORM {add}(r.title_folded, true)
           FROM search_revision r WHERE r.id = NEW.live_revision_id;
    END IF;
    RETURN NULL;
END $$;
"""


FORWARD = f"""
LOCK TABLE search_chunk, search_revision, search_contentitem IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE search_text_pieces (
    anonymous boolean NOT NULL,
    piece text COLLATE "C" NOT NULL
);

CREATE FUNCTION search_text_pieces_of(t text) RETURNS TABLE (piece text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT u.p COLLATE "C" FROM unnest(string_to_array(t, ' ')) AS u(p) WHERE u.p <> ''
$$;

CREATE FUNCTION search_text_pieces_add(t text, readable_by_anonymous boolean) RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pieces (anonymous, piece)
    SELECT s.anonymous, p.piece
      FROM search_text_pieces_of(t) p, (VALUES (false), (true)) AS s(anonymous)
     WHERE (NOT s.anonymous OR readable_by_anonymous)
       AND NOT EXISTS (
        SELECT 1 FROM search_text_pieces q WHERE q.piece = p.piece AND q.anonymous = s.anonymous
     )
$$;

CREATE FUNCTION search_text_add(t text, readable_by_anonymous boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM search_text_pairs_add(t, readable_by_anonymous);
    PERFORM search_text_pieces_add(t, readable_by_anonymous);
END $$;

CREATE FUNCTION search_text_pieces_fill() RETURNS void LANGUAGE sql AS $$
    INSERT INTO search_text_pieces (anonymous, piece)
    SELECT false, u.p COLLATE "C"
      FROM (SELECT folded_text AS t FROM search_chunk UNION ALL SELECT title_folded FROM search_revision) s,
           unnest(string_to_array(s.t, ' ')) AS u(p)
     WHERE u.p <> ''
    UNION
    SELECT true, u.p COLLATE "C"
      FROM ({PUBLIC_TEXTS}) s, unnest(string_to_array(s.t, ' ')) AS u(p)
     WHERE u.p <> ''
    EXCEPT
    SELECT anonymous, piece FROM search_text_pieces
$$;

{trigger_functions("search_text_add")}

SET LOCAL work_mem = '256MB';
SELECT search_text_pieces_fill();
CREATE INDEX search_text_pieces_key ON search_text_pieces USING hash (piece);
CREATE INDEX search_text_pieces_trgm_anonymous ON search_text_pieces USING gin (piece gin_trgm_ops)
    WHERE anonymous;
CREATE INDEX search_text_pieces_trgm_all ON search_text_pieces USING gin (piece gin_trgm_ops)
    WHERE NOT anonymous;
ANALYZE search_text_pieces;
"""

BACKWARD = f"""
{trigger_functions("search_text_pairs_add")}
DROP FUNCTION IF EXISTS search_text_add(text, boolean);
DROP FUNCTION IF EXISTS search_text_pieces_fill();
DROP FUNCTION IF EXISTS search_text_pieces_add(text, boolean);
DROP FUNCTION IF EXISTS search_text_pieces_of(text);
DROP TABLE IF EXISTS search_text_pieces;
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0009_text_pairs")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
