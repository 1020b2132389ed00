"""search.selectors.revisions: an item's live body and contents, passages with their neighbours, quality."""

from __future__ import annotations

import pytest

from search.errors import NotFound
from search.models import Chunk
from search.principal import ANONYMOUS, Principal
from search.selectors.revisions import item_quality, item_read, passage_read
from tests.mcp_api.conftest import Corpus

pytestmark = pytest.mark.django_db
KEY = Principal(kind="api_key", all_content=True, api_key_id=1)


def test_item_read_gives_the_live_body_and_its_table_of_contents(corpus: Corpus) -> None:
    # when
    view = item_read(principal=ANONYMOUS, item_id=corpus.guide.pk)
    # then
    body = corpus.guide.live_revision.body
    assert view.scope == "item" and view.text == body
    assert [(t.path, t.level) for t in view.toc] == [
        ("Day rates", 1),
        ("Fixed fees", 1),
        ("Discounts", 1),
        ("Payment terms", 1),
    ]
    assert all(body[t.char_start :].startswith("## " + t.path) for t in view.toc)


def test_passage_read_joins_neighbours_without_repeating_overlaps(corpus: Corpus) -> None:
    # given: a middle chunk of the live revision
    chunks = list(Chunk.objects.filter(revision=corpus.guide.live_revision).order_by("ordinal"))
    middle = chunks[len(chunks) // 2]
    # when
    wide = passage_read(principal=ANONYMOUS, chunk_id=middle.pk, neighbours=1)
    narrow = passage_read(principal=ANONYMOUS, chunk_id=middle.pk, neighbours=0)
    # then
    body = corpus.guide.live_revision.body
    assert narrow.text == middle.text and narrow.chunk_ids == (middle.pk,)
    assert wide.chunk_ids == tuple(c.pk for c in chunks[len(chunks) // 2 - 1 : len(chunks) // 2 + 2])
    assert wide.text == body[wide.char_start : wide.char_end] and middle.text in wide.text
    assert wide.matched_chunk_id == middle.pk


def test_unreadable_items_and_draft_passages_are_not_found(corpus: Corpus) -> None:
    # given
    draft_chunk = Chunk.objects.get(revision=corpus.with_draft.latest_revision)
    # then
    for item in (corpus.staff_only, corpus.group_only, corpus.draft_only):
        with pytest.raises(NotFound):
            item_read(principal=ANONYMOUS, item_id=item.pk)
        assert item_read(principal=KEY, item_id=item.pk, corpus="latest").item.pk == item.pk
    with pytest.raises(NotFound) as caught:
        passage_read(principal=ANONYMOUS, chunk_id=draft_chunk.pk)
    assert caught.value.field == "match_id"
    assert "zebra" in passage_read(principal=KEY, chunk_id=draft_chunk.pk, corpus="latest").text
    with pytest.raises(NotFound):
        passage_read(principal=ANONYMOUS, chunk_id=10**9)


def test_item_quality_reads_the_persisted_fields(
    corpus: Corpus, django_assert_max_num_queries: object
) -> None:
    with django_assert_max_num_queries(1):  # type: ignore[operator]
        view = item_quality(principal=ANONYMOUS, item_id=corpus.guide.pk)
    assert view.quality_score == pytest.approx(0.82)
    assert view.quality_breakdown == {"freshness": 0.9, "completeness": 0.7}
    assert view.review_status == "due_soon" and view.title == "Tender pricing guide"
