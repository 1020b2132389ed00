"""search_text_pairs, search_text_pieces and selectors.fragment_absent: the preview rules out a fragment two
of whose pieces never stand side by side, or one of whose pieces occurs in no text, never rules out one that a
title or chunk the caller may read holds, and never lets the speed of an empty answer tell a caller about
text they may not read."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from search.engine import preview as selectors
from search.models import ContentItem
from search.principal import ANONYMOUS, Principal
from search.services import content
from search.text.analysis import folded_text
from search.text.query_parser import normalize_query_text
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis" * 2  # 90 letters: longer than a stored piece

TRICKY_BODIES = [
    "The risk of cancer rises with age. Smoking doubles it; exercise halves it!",
    "Café au lait spots — Ærøskøbing's Straße: naïve coöperation, ΟΔΟΣ and Ελλάδα.",
    "Discount of 50% for snake_case names, back\\slash paths and 100 % sure (p<0.05).",
    f"A {LONG_WORD} case and a {LONG_WORD}s plural follow here.",
    "Spaces\u00a0that are not spaces, a  double space, and a tab\there.",
    "Arabic: والكتاب الكبير في المكتبة. Hindi: नमस्ते दुनिया.",
    "Et al. 2005 reported e.g. x: y? z! end.",
]


STAFF = Principal(kind="staff", user_id=1, all_content=True)


def _absent(fragment: str, *, anonymous: bool = True) -> bool:
    return selectors.fragment_absent(folded_text(normalize_query_text(fragment)), anonymous=anonymous)


@pytest.fixture
def corpus() -> list[Any]:
    items = [make_item(title=f"Note {i}: {body[:30]}", body=body) for i, body in enumerate(TRICKY_BODIES)]
    build()
    return items


def _stored_texts() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT folded_text FROM search_chunk UNION ALL SELECT title_folded FROM search_revision"
        )
        return [row[0] for row in cursor.fetchall()]


def test_no_substring_of_any_stored_text_is_ever_ruled_out(corpus: list[Any]) -> None:
    # given: every chunk's and title's folded text, windows starting and ending anywhere (mid-word too)
    rng = random.Random(7)
    texts = _stored_texts()
    assert texts
    checked = 0
    for text in texts:
        for _ in range(150):
            start = rng.randrange(len(text))
            end = min(len(text), start + rng.randint(2, 120))
            window = text[start:end]
            # when / then: the exact window (whatever its spacing) is never ruled out, in either scope
            # (every item here is public and live)
            assert not selectors.fragment_absent(window, anonymous=True), window
            assert not selectors.fragment_absent(window, anonymous=False), window
            checked += 1
    assert checked > 1000


def test_no_part_of_any_stored_piece_is_ever_ruled_out(corpus: list[Any]) -> None:
    # given: every piece of every stored text (long words, accents, Greek, Arabic, %, _, backslash)
    rng = random.Random(11)
    pieces = {piece for text in _stored_texts() for piece in text.split(" ") if piece}
    assert len(pieces) > 80
    for piece in pieces:
        windows = {piece, piece[1:], piece[:-1]}
        for _ in range(5):
            start = rng.randrange(len(piece))
            windows.add(piece[start : start + rng.randint(1, len(piece))])
        for window in windows - {""}:
            # when / then: a part of one piece typed alone (its start, its end, anywhere in it)
            assert not selectors.fragment_absent(window, anonymous=True), window
            assert not selectors.fragment_absent(window, anonymous=False), window


def test_typed_fragments_found_mid_word_across_punctuation_and_long_words(corpus: list[Any]) -> None:
    # the first piece may end a longer word, the last start one; pieces longer than the stored 64 characters
    for fragment in [
        "isk of canc", "RISK OF CANCER", "cafe au la", "naive cooperation", "οδος and ελλ",
        "of 50% for snake_", "back\\slash pa", f"a {LONG_WORD} ca", f"{LONG_WORD[5:]}s plural",
        "that are not", "et al. 2005", "z! end", "الكبير في",
    ]:
        assert not _absent(fragment), fragment
        hits = selectors.preview_search(principal=ANONYMOUS, text=fragment)
        assert hits, fragment


def test_a_fragment_whose_pieces_never_stand_side_by_side_is_answered_without_searching(
    corpus: list[Any],
) -> None:
    # given: "risk" and "cancer" both occur, but never side by side
    assert selectors.preview_search(principal=ANONYMOUS, text="risk of canc")
    for fragment in ["risk cancer", "cancer risk of", "the risk cancer rises", f"{LONG_WORD} plural"]:
        assert _absent(fragment), fragment
        # when
        with CaptureQueriesContext(connection) as queries:
            hits = selectors.preview_search(principal=ANONYMOUS, text=fragment)
        # then: nothing, after one statement (the pairs), no title or chunk read
        assert hits == []
        assert len(queries) == 1 and "search_text_pairs" in queries[0]["sql"], queries.captured_queries


def test_a_piece_that_occurs_in_no_text_rules_the_fragment_out_in_one_statement(corpus: list[Any]) -> None:
    # a typo of one word; a piece no pair check covers (after a sentence end, after a first piece under 3
    # characters); a whole middle piece beside pairs that are not checked
    assert selectors.preview_search(principal=ANONYMOUS, text="cancer")
    for fragment in ["zzzqqq", "canser", "ancerr", "age. zzzqqq", "ge zzzqqq", "age zzzqqq", "age. zzz. smoking"]:
        assert _absent(fragment), fragment
        with CaptureQueriesContext(connection) as queries:
            assert selectors.preview_search(principal=ANONYMOUS, text=fragment) == []
        assert len(queries) == 1, queries.captured_queries
    # while the parts of real pieces stay: inside a word, its end, its start
    for fragment in ["ance", "ancer", "smok", "oubles", "age. smoking", "ge of"]:
        assert not _absent(fragment), fragment


def test_what_the_check_leaves_alone(corpus: list[Any]) -> None:
    # a fragment of one or two characters (any text holds it, and no trigram can look it up); a pair across
    # a sentence end whose pieces each occur (pairs across sentence ends are not stored)
    assert not _absent("zq")
    assert not _absent("age. halves")
    assert _absent("age halves")


def test_a_new_title_counts_at_once_and_new_body_text_from_its_build(corpus: list[Any]) -> None:
    # given: a fragment that occurs nowhere yet, and a word that occurs nowhere yet
    assert _absent("quoll census atoll")
    assert _absent("quolli")
    # when: a title holding it is saved (its chunks get their text at the next build)
    item = make_item(title="Quoll census atoll by atoll", body="Maps and counts.")
    # then: the title counts before any build, and the preview finds it
    assert not _absent("quoll census atoll")
    assert not _absent("uoll")
    assert [h.title for h in selectors.preview_search(principal=ANONYMOUS, text="quoll census ato")] == [
        "Quoll census atoll by atoll"
    ]
    # and body text joins the pairs when the build writes the chunk's folded text
    assert _absent("wallaby tally") and _absent("wallab")
    content.item_save_revision(
        item=item, title=item.live_revision.title, body="A wallaby tally too.", publish=True
    )
    build()
    assert not _absent("wallaby tally") and not _absent("wallab")


# Every stored text with its scope: any text (false), and text anonymous visitors may read (true).
_SCOPED_TEXTS = """
    SELECT false AS anonymous, folded_text AS t FROM search_chunk
    UNION ALL SELECT false, title_folded FROM search_revision
    UNION ALL SELECT true, folded_text FROM search_chunk WHERE in_live AND search_item_public(item_id)
    UNION ALL SELECT true, r.title_folded FROM search_contentitem i
        JOIN search_revision r ON r.id = i.live_revision_id WHERE search_item_public(i.id)
"""


def _missing_per_scope(sql: str) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        found = dict(cursor.fetchall())
    return found.get(False, 0), found.get(True, 0)


def missing_text_pairs() -> tuple[int, int]:
    """Pairs of stored text missing from their scope: (any text, anonymous-readable text)."""
    return _missing_per_scope(
        f"""
        SELECT s.anonymous, count(*) FROM ({_SCOPED_TEXTS}) s, search_text_pairs_of(s.t) p
        WHERE NOT EXISTS (
            SELECT 1 FROM search_text_pairs q
             WHERE q.anonymous = s.anonymous AND q.tail_rev = p.tail_rev AND q.head = p.head
        )
        GROUP BY s.anonymous
        """
    )


def missing_text_pieces() -> tuple[int, int]:
    """Pieces of stored text missing from their scope: (any text, anonymous-readable text)."""
    return _missing_per_scope(
        f"""
        SELECT s.anonymous, count(*) FROM ({_SCOPED_TEXTS}) s, unnest(string_to_array(s.t, ' ')) AS u(piece)
        WHERE u.piece <> '' AND NOT EXISTS (
            SELECT 1 FROM search_text_pieces q WHERE q.anonymous = s.anonymous AND q.piece = u.piece
        )
        GROUP BY s.anonymous
        """
    )


def test_the_pairs_and_pieces_hold_every_pair_and_piece_of_every_stored_text(corpus: list[Any]) -> None:
    assert missing_text_pairs() == (0, 0)
    assert missing_text_pieces() == (0, 0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT anonymous, count(*) > 50 FROM search_text_pairs GROUP BY 1 ORDER BY 1")
        assert cursor.fetchall() == [(False, True), (True, True)]
        cursor.execute("SELECT anonymous, count(*) > 50 FROM search_text_pieces GROUP BY 1 ORDER BY 1")
        assert cursor.fetchall() == [(False, True), (True, True)]


def test_search_item_public_is_exactly_what_anonymous_visitors_may_read() -> None:
    # given: items in every state the access rule tells apart
    from django.utils import timezone

    make_item(title="Public live")
    make_item(title="Public never published", publish=False)
    make_item(title="Signed in", visibility="signed_in")
    make_item(title="Staff", visibility="staff")
    make_item(title="Groups", visibility="groups", groups=["legal"])
    archived = make_item(title="Archived")
    ContentItem.objects.filter(pk=archived.pk).update(archived_at=timezone.now())
    # when
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM search_contentitem WHERE search_item_public(id)")
        public = {row[0] for row in cursor.fetchall()}
    # then: the SQL twin of the access rule agrees with the access rule
    readable = set(ContentItem.objects.searchable(ANONYMOUS, "live").values_list("pk", flat=True))
    assert public == readable and len(readable) == 1


def test_an_anonymous_visitor_cannot_tell_restricted_text_from_no_text(corpus: list[Any]) -> None:
    # given: a phrase only a staff-only item holds, and one only the draft of a public item holds
    secret = make_item(
        title="Board minutes", body="The acme acquisition closes in May. Codename quokkagate.", visibility="staff"
    )
    public = corpus[0]
    content.item_save_revision(
        item=public, title=public.live_revision.title, body="Draft: the secret merger plan.", publish=False
    )
    build()
    for fragment in ["acme acquisition", "secret merger", "okkagat"]:
        # then: for anonymous visitors both look like text that exists nowhere (the same fast empty answer)
        assert _absent(fragment, anonymous=True), fragment
        assert _absent("zzqx wwvy", anonymous=True)
        # and whoever reads everything is not ruled out
        assert not _absent(fragment, anonymous=False), fragment
    staff_hits = selectors.preview_search(principal=STAFF, text="acme acquisition")
    assert [h.title for h in staff_hits] == ["Board minutes"]
    # a signed-in user (who reads some but not all) gets no rule-out at all
    assert selectors.text_pair_scope(Principal(kind="user", user_id=5)) is None
    # when: the item is made public, and the draft is published
    secret.visibility = "public"
    secret.save()
    public.refresh_from_db()
    content.item_publish(item=public)
    build()
    # then: both phrases join the anonymous scope, and the preview finds them
    assert not _absent("acme acquisition") and not _absent("secret merger") and not _absent("okkagat")
    assert [h.title for h in selectors.preview_search(principal=ANONYMOUS, text="acme acquisition")] == [
        "Board minutes"
    ]
    assert selectors.preview_search(principal=ANONYMOUS, text="secret merger")
    assert missing_text_pairs() == (0, 0)
    assert missing_text_pieces() == (0, 0)


def test_the_bench_load_turns_every_pair_trigger_off_and_back_on() -> None:
    from benchmarks.bench_corpus import text_pair_triggers_off

    def states() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT tgenabled FROM pg_trigger WHERE tgname LIKE %s", ["search\\_%\\_text\\_pairs\\_%"]
            )
            return [row[0] for row in cursor.fetchall()]

    with text_pair_triggers_off():
        assert states() == ["D"] * 6  # chunks, revisions, items: insert and update each
    assert states() == ["O"] * 6
