"""search.services.vector_index: the build side of the vector lane (embedding backfill, the HNSW index).
The backfill's batches, resumption and space flips are tested in test_reembed.py and engine/test_space_switch.py."""

from __future__ import annotations

import pytest
from django.db import connection

from search.embeddings import spaces
from search.models import EmbeddingSpace
from search.services import vector_index
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def test_vector_index_ensure_creates_the_active_models_hnsw_index_once() -> None:
    make_item(title="Harbour guide", body="Cranes and berths.")
    build()
    name = vector_index.vector_index_ensure()
    # a second call finds it and creates nothing
    assert vector_index.vector_index_ensure() == name
    assert vector_index.vector_index_exists(spaces.lane_model())


def _index_definition(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        return str(cursor.fetchone()[0])


def test_an_index_of_the_model_over_the_other_column_pair_is_rebuilt_over_the_right_one() -> None:
    # given the active model's index left over the next-space columns (an earlier switch's)
    make_item(title="Harbour guide", body="Cranes and berths.")
    build()
    space = EmbeddingSpace.objects.get(active=True)
    vector_index.vector_index_drop(model=space.model)
    name = vector_index.vector_index_ensure(space=space, staged=True)
    assert "(embedding_next_model)" in _index_definition(name)

    # when the searched pair's index is ensured
    assert vector_index.vector_index_ensure(space=space) == name

    # then it is over the searched pair, and loads into memory
    definition = _index_definition(name)
    assert "(embedding_model)" in definition and "embedding_next" not in definition
    assert (vector_index.vector_index_prewarm(space.model) or 0) > 0


def test_the_backfill_embeds_only_chunks_without_a_vector_of_the_active_model() -> None:
    make_item(title="Harbour guide", body="Cranes and berths.")
    make_item(title="Bridge notes", body="Spans and tolls.")
    model = spaces.lane_model()
    pending = vector_index.embeddings_pending(model).count()
    assert pending >= 2
    # when
    assert vector_index.embeddings_backfill() == pending
    # then nothing is left, and a second run embeds nothing
    assert vector_index.embeddings_pending(model).count() == 0
    assert vector_index.embeddings_backfill() == 0
