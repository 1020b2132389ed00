"""Migration 0016: items whose text holds combining marks are marked for re-indexing (the tokenizer now keeps
a word with harakat whole)."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from search.engine import retrieve
from search.models import ContentItem, IndexState
from search.types import RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db
MIGRATION = importlib.import_module("search.migrations.0016_preview_words")


def test_items_with_harakat_or_decomposed_accents_are_marked_for_the_next_build() -> None:
    # given: a built knowledge base
    harakat = make_item(title="دليل", body="عن الكِتَابةِ.", language="ar")
    decomposed = make_item(title="Note", body="Un e\u0301crit.", language="fr")
    plain = make_item(title="Guide", body="Plain text.")
    build()
    assert not ContentItem.objects.filter(index_dirty=True).exists()
    assert not IndexState.objects.get(pk=1).dirty
    # when
    with connection.cursor() as cursor:
        cursor.execute(MIGRATION.REINDEX_MARKED)
    # then
    dirty = set(ContentItem.objects.filter(index_dirty=True).values_list("pk", flat=True))
    assert dirty == {harakat.pk, decomposed.pk} and plain.pk not in dirty
    assert IndexState.objects.get(pk=1).dirty
    # and the next build indexes the word whole
    build()
    hits = retrieve(query=RetrievalQuery(text="الكتابة", mode="lexical", threshold=0)).hits
    assert [h.item_id for h in hits] == [harakat.pk]
