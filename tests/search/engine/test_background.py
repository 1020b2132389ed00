"""search.engine.background: the query's cosine distribution over the whole corpus, as the vector lane reports it."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from search.embeddings import spaces
from search.engine import background, vector
from search.engine.scope import ItemScope
from search.principal import Principal
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db

STAFF = Principal(kind="staff", all_content=True)


@pytest.fixture(autouse=True)
def _fresh(settings):
    # these corpora are small: estimate their background anyway (the product needs BACKGROUND_MIN_CHUNKS)
    settings.SEARCH = {**settings.SEARCH, "BACKGROUND_MIN_CHUNKS": 1}
    background.background_forget()
    yield
    background.background_forget()


def test_a_corpus_smaller_than_the_minimum_has_no_background(settings) -> None:
    make_item(title="Alpha", body="Quay number one, tides and ropes.")
    build()
    settings.SEARCH = {**settings.SEARCH, "BACKGROUND_MIN_CHUNKS": 200}
    query = vector.query_embedding("tides")
    assert background.query_background(list(query), model=spaces.lane_model(), dims=384, newest_chunk_id=0) is None


def _all_vectors() -> np.ndarray:
    model, dims = spaces.lane_model(), 384
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT embedding::vector({dims})::real[] FROM search_chunk WHERE embedding_model = %s",
                       [model])
        rows = np.asarray([r[0] for r in cursor.fetchall()], dtype=float)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_background_is_the_query_cosines_mean_and_spread_over_every_chunk_of_the_space() -> None:
    # given a corpus small enough to be read whole, a staff-only item included
    for i in range(30):
        make_item(title=f"Note {i}", body=f"Harbour cranes {i} tides berth {i % 7} ropes {i % 3} winch.")
    make_item(title="Secret", body="Harbour cranes secret plans.", visibility="staff")
    build()
    query = vector.query_embedding("harbour cranes tides")
    # when
    lane = vector.vector_lane(vector=query, corpus="live", items_sql=ItemScope.of(STAFF).items_sql(), limit=5)
    # then the mean is exact and the spread close to the sample's (shrunk a little towards isotropic)
    q = np.asarray(query) / np.linalg.norm(query)
    cosines = _all_vectors() @ q
    assert lane.background is not None
    assert lane.background.mean == pytest.approx(float(cosines.mean()), abs=1e-6)
    assert lane.background.std == pytest.approx(float(cosines.std(ddof=1)), rel=0.6)
    # and the best hit stands out of it
    assert lane.background.z(lane.hits[0].similarity) > 1.0


def test_a_changed_corpus_is_sampled_again() -> None:
    make_item(title="Alpha", body="Quay number one, tides and ropes.")
    build()
    query = vector.query_embedding("tides")
    items_sql = ItemScope.of(STAFF).items_sql()
    first = vector.vector_lane(vector=query, corpus="live", items_sql=items_sql, limit=5).background
    # when the corpus grows
    for i in range(5):
        make_item(title=f"Beta {i}", body=f"Completely different words about gardening {i}.")
    build()
    second = vector.vector_lane(vector=query, corpus="live", items_sql=items_sql, limit=5).background
    # then the background moved with it
    assert first is not None and second is not None
    assert second.mean != pytest.approx(first.mean)


def test_an_empty_space_has_no_background() -> None:
    query = vector.query_embedding("anything")
    lane = vector.vector_lane(vector=query, corpus="live", items_sql=ItemScope.of(STAFF).items_sql(), limit=5)
    assert lane.hits == [] and lane.background is None
