"""Language-aware fusion on a mixed corpus (English, French and Arabic items in one knowledge base)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.embeddings import spaces
from search.engine import lane_weights, retrieve
from search.models import Chunk
from search.principal import Principal
from search.services import importer
from search.types import RetrievalQuery
from tests.factories import build, make_item

STAFF = Principal(kind="staff", all_content=True)


@pytest.fixture
def weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A table that says the test embedder is worth nothing on Arabic, half on French, all on English."""
    path = tmp_path / "lane_weights.json"
    model = spaces.lane_model()
    path.write_text(json.dumps({"models": {model: {"en": {"vector_weight": 1.0}, "fr": {"vector_weight": 0.5},
                                                   "ar": {"vector_weight": 0.0}}}}))
    monkeypatch.setattr(lane_weights, "TABLE_PATH", path)
    return path


@pytest.fixture
def mixed_corpus() -> None:
    make_item(title="Pricing policy", body="How the bid team sets prices for framework agreements.",
              language="en")
    make_item(title="Politique de prix", body="Comment l’équipe fixe les prix des accords-cadres et de l'offre.",
              language="fr")
    make_item(title="سياسة التسعير", body="كيف يحدد فريق العطاءات أسعار الاتفاقيات الإطارية في المدرسة.",
              language="ar")
    make_item(title="Catering", body="Menus for the annual event and its guests.", language="en")
    build()


@pytest.mark.django_db
def test_each_chunk_knows_its_language(mixed_corpus: None) -> None:
    languages = set(Chunk.objects.current().values_list("language", flat=True))
    assert languages == {"en", "fr", "ar"}


@pytest.mark.django_db
def test_english_item_section_in_a_french_item_is_stemmed_as_english() -> None:
    item = make_item(title="Guide", language="fr",
                     body="## Résumé\n\nLe guide des offres.\n\n## English summary\n\n"
                          "The bidding teams are reviewing the winning proposals carefully every quarter.")
    build()
    languages = dict(Chunk.objects.filter(item=item).values_list("toc_path", "language"))
    assert any(code == "en" for code in languages.values())


@pytest.mark.django_db
def test_a_lane_weighed_at_zero_is_not_run(weights: Path, mixed_corpus: None) -> None:
    # given an Arabic query and a table that gives the vector lane nothing in Arabic
    hybrid = retrieve(query=RetrievalQuery(text="سياسة التسعير", principal=STAFF, threshold=0.0))
    lexical = retrieve(query=RetrievalQuery(text="سياسة التسعير", principal=STAFF, mode="lexical"))
    # then the page is the lexical lane's, and the vector lane did not run
    assert [h.external_id for h in hybrid.hits] == [h.external_id for h in lexical.hits]
    assert "vector_ms" not in hybrid.timings_ms
    assert all(h.lanes == ("lexical",) for h in hybrid.hits)


@pytest.mark.django_db
def test_english_query_still_hybrid(weights: Path, mixed_corpus: None) -> None:
    result = retrieve(query=RetrievalQuery(text="pricing policy for framework agreements", principal=STAFF,
                                           threshold=0.0))
    assert "vector_ms" in result.timings_ms
    assert result.hits[0].title == "Pricing policy"
    assert "vector" in result.hits[0].lanes


@pytest.mark.django_db
def test_half_weight_lowers_vector_only_hits(weights: Path, mixed_corpus: None) -> None:
    # a French query: the vector lane counts, at the weight measured for French
    full = lane_weights.language_weight(spaces.lane_model(), "fr")
    assert full == 0.5
    result = retrieve(query=RetrievalQuery(text="politique de prix de l'offre", principal=STAFF, threshold=0.0))
    assert result.hits[0].title == "Politique de prix"
    vector_only = [h for h in result.hits if h.lanes == ("vector",)]
    both = [h for h in result.hits if set(h.lanes) == {"lexical", "vector"}]
    assert both and all(v.score < both[0].score for v in vector_only)


@pytest.mark.django_db
def test_import_detects_language_when_not_given(tmp_path: Path) -> None:
    source = tmp_path / "items.jsonl"
    rows = [
        {"id": "d-en", "title": "Pricing policy", "body": "How the bid team sets prices for every tender."},
        {"id": "d-fr", "title": "Politique de prix", "body": "Comment l'équipe fixe les prix de chaque offre."},
        {"id": "d-ar", "title": "سياسة التسعير", "body": "كيف يحدد الفريق أسعار كل عطاء."},
        {"id": "d-given", "title": "Pricing", "body": "How the team sets prices.", "language": "fr"},
    ]
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    importer.import_path(source, fmt="jsonl", publish=True)
    from search.models import ContentItem

    got = dict(ContentItem.objects.values_list("external_id", "language"))
    assert got == {"d-en": "en", "d-fr": "fr", "d-ar": "ar", "d-given": "fr"}
