"""search.services.indexing: the build writes each chunk's search columns once, only for what changed, and
refreshes the statistics the lexical lane reads."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from search.models import Chunk, ContentItem, IndexState
from search.services import content, indexing
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def test_chunk_columns_stem_the_body_in_the_chunks_own_language_and_fold_title_and_text() -> None:
    item = make_item(title="Tenders", body="Les offres publiques sont évaluées par le comité des marchés.",
                     language="fr")
    chunk = Chunk.objects.filter(item=item, in_live=True).select_related("revision").first()
    assert chunk is not None
    # when
    columns = indexing.chunk_columns(chunk, item, chunk.revision.title, chunk.revision.summary)
    # then: the French body is stemmed as French (offres → offre, évaluées → evalue), its surface forms kept
    assert columns["language"] == "fr"
    stems = json.loads(columns["tf_stem"])
    assert {"offre", "evalue"} <= set(stems) and "offres" not in stems
    assert "offres" in json.loads(columns["tf_surface"])
    # and the title's lexemes, the lengths and the folded text (accents gone) are there for the lanes
    assert "tender" in columns["lex_title"]
    assert columns["body_len"] > 0 and columns["title_len"] == 1
    assert "evaluees" in columns["folded_text"]


def test_columns_build_writes_only_new_chunks_and_those_of_changed_items() -> None:
    first = make_item(title="Harbour guide", body="Cranes and berths.")
    make_item(title="Bridge notes", body="Spans and tolls.")
    assert indexing.columns_build() == Chunk.objects.current().count()
    # nothing changed: nothing is written again
    assert indexing.columns_build() == 0
    assert indexing.columns_pending().count() == 0
    # when one item gets a new revision
    content.item_save_revision(item=first, title="Harbour guide", body="Cranes, berths and tides.", publish=True)
    # then only its current chunks are written
    written = indexing.columns_build()
    assert written == Chunk.objects.current().filter(item=first).count()
    assert not ContentItem.objects.filter(index_dirty=True).exists()


def test_stats_refresh_makes_new_terms_countable_by_the_lexical_lane() -> None:
    make_item(title="Quoll census", body="The quoll census counts quolls.")
    indexing.columns_build()
    # when
    indexing.stats_refresh()
    # then the term statistics count the new word (the lexical lane's document frequencies)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_term_stats WHERE term = 'quoll'")
        (rows,) = cursor.fetchone()
    assert rows >= 1


def test_index_rebuild_reports_what_it_did_and_clears_the_dirty_flag() -> None:
    make_item(title="Harbour guide", body="Cranes and berths.")
    IndexState.objects.update_or_create(pk=1, defaults={"dirty": True})
    # when
    report = build()
    # then
    assert report["columns"] >= 1 and report["embedded"] >= 1 and report["seconds"] >= 0
    status = indexing.index_status()
    assert status["dirty"] is False and status["built_at"] is not None and status["pending_columns"] == 0
