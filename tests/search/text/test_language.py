"""Language of items, chunks and queries, and the vector lane's weight per language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.engine import lane_weights
from search.text import language


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("How does the framework agreement set prices?", "en"),
        ("Quelle est la politique de prix de l'offre ?", "fr"),
        ("ما هي سياسة التسعير في العرض؟", "ar"),
        ("données", "fr"),
    ],
)
def test_detects_the_three_languages(text: str, code: str) -> None:
    assert language.detect_language(text) == code


def test_no_letters_no_language() -> None:
    assert language.detect_language("1234 — 56") is None
    assert language.language_probabilities("") == ()


def test_unsure_short_text_has_no_label() -> None:
    # "cancer" is an English and a French word: no label rather than a guess
    assert language.detect_language("cancer") is None
    probabilities = dict(language.language_probabilities("cancer"))
    assert probabilities["en"] > 0.3 and probabilities["fr"] > 0.3


def test_chunk_language_follows_its_text_then_its_item() -> None:
    english = "The bid team reviews every tender against the pricing policy before submission."
    assert language.chunk_language(english, item_language="fr") == "en"
    assert language.chunk_language("Contact : 0123", item_language="fr") == "fr"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lane_weights.json"
    path.write_text(json.dumps({"models": {"english-only": {"en": {"vector_weight": 1.0},
                                                            "fr": {"vector_weight": 0.5},
                                                            "ar": {"vector_weight": 0.0}}}}))
    return path


def test_vector_weight_per_query_language(table: Path, settings) -> None:
    settings.SEARCH = {**settings.SEARCH, "VECTOR_WEIGHT": 1.0}
    # an Arabic query with an English-only embedder: the lane is left out
    assert lane_weights.vector_weight("english-only", "ما هي سياسة التسعير", path=table) == 0.0
    # an English one counts fully, a French one by what was measured
    assert lane_weights.vector_weight("english-only", "pricing policy for tenders", path=table) == pytest.approx(
        1.0, abs=0.05
    )
    assert lane_weights.vector_weight("english-only", "la politique de prix des offres", path=table) == pytest.approx(
        0.5, abs=0.05
    )
    # an ambiguous word gets the weights under the detector's posterior
    mixed = lane_weights.vector_weight("english-only", "cancer", path=table)
    assert 0.5 < mixed < 1.0
    # a model the table does not know counts at the configured weight
    assert lane_weights.vector_weight("other-model", "ما هي", path=table) == 1.0


def test_table_update_keeps_other_rows(table: Path) -> None:
    lane_weights.table_update(model="english-only", code="fr", weight=0.25, measured={"ndcg@10": {"x": 1}},
                              path=table)
    data = json.loads(table.read_text())
    assert data["models"]["english-only"]["fr"] == {"vector_weight": 0.25, "ndcg@10": {"x": 1}}
    assert data["models"]["english-only"]["ar"] == {"vector_weight": 0.0}
    assert lane_weights.language_weight("english-only", "fr", path=table) == 0.25


def test_override_for_calibration(table: Path) -> None:
    with lane_weights.weight_override(model="english-only", code="ar", weight=0.75):
        assert lane_weights.language_weight("english-only", "ar", path=table) == 0.75
    assert lane_weights.language_weight("english-only", "ar", path=table) == 0.0
