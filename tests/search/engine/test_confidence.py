"""search.engine.confidence: the features fusion hands it, the fitted models and their table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from search.engine import confidence
from search.engine.background import QueryBackground


def _col(name: str) -> int:
    return confidence.FEATURES.index(name)


def _evidence(**kw):
    base = dict(idfs=(2.0, 1.0), background=QueryBackground(mean=0.75, std=0.02), lexical_scores=[6.0, 3.0],
                similarities=[0.85, 0.80, 0.78])
    base.update(kw)
    return confidence.query_evidence(**base)


def test_a_hit_holding_every_word_and_standing_out_gets_the_strong_features():
    # given a candidate both lanes found first, holding both query words
    cand = confidence.Candidate(
        lexical=confidence.LexicalEvidence(rank=1, score=6.0, mask=0b11, title=True),
        vector=confidence.VectorEvidence(rank=1, similarity=0.85),
        mask=0b11,
    )
    # when
    row = confidence.features([cand], _evidence())[0]
    # then
    assert row[_col("lex")] == 1 and row[_col("lex_all")] == 1 and row[_col("title")] == 1
    assert row[_col("lex_cov")] == pytest.approx(1.0)
    assert row[_col("lex_rel")] == pytest.approx(1.0)
    assert row[_col("lex_norm")] == pytest.approx(6.0 / (3.0 * 2.2))
    assert row[_col("vec_z")] == pytest.approx((0.85 - 0.75) / 0.02)
    assert row[_col("vec_gap")] == pytest.approx(0.0)
    assert row[_col("q_vec_top_z")] == pytest.approx(5.0)
    assert row[_col("q_lex_all")] == 1
    assert row[_col("q_terms")] == pytest.approx(math.log1p(2))


def test_coverage_is_weighted_by_idf_and_a_vector_only_hit_has_no_lexical_evidence():
    # given one candidate holding only the rarer word, and one only the vector lane found
    partial = confidence.Candidate(lexical=confidence.LexicalEvidence(2, 3.0, 0b01, False), mask=0b01)
    vector_only = confidence.Candidate(vector=confidence.VectorEvidence(3, 0.78))
    # when
    rows = confidence.features([partial, vector_only], _evidence())
    # then: idf 2 of 3 held; nobody holds every word
    assert rows[0][_col("lex_cov")] == pytest.approx(2 / 3)
    assert rows[0][_col("lex_all")] == 0 and rows[0][_col("q_lex_all")] == 0
    assert rows[1][_col("lex")] == 0 and rows[1][_col("lex_cov")] == 0
    assert rows[1][_col("vec_rr")] == pytest.approx(1 / 3)
    # and the lexical-only candidate counts at most as close as the lane's last hit
    assert rows[0][_col("vec")] == 0
    assert rows[0][_col("vec_z")] == pytest.approx((0.78 - 0.75) / 0.02)


def test_z_scores_are_capped_and_a_missing_background_leaves_vector_features_empty():
    far = confidence.Candidate(vector=confidence.VectorEvidence(1, 0.99))
    capped = confidence.features([far], _evidence(background=QueryBackground(mean=0.0, std=0.001)))[0]
    assert capped[_col("vec_z")] == confidence.Z_CAP
    none = confidence.features([far], _evidence(background=None))[0]
    assert none[_col("vec")] == 0 and none[_col("vec_z")] == 0 and none[_col("q_vec_top_z")] == 0


def _head(features: tuple[str, ...], coef: tuple[float, ...], intercept: float, **iso) -> confidence.HeadModel:
    return confidence.HeadModel.from_json({
        "features": list(features), "coef": list(coef), "intercept": intercept,
        "mean": [0.0] * len(features), "scale": [1.0] * len(features), "isotonic": iso,
    })


def test_a_head_model_is_a_logistic_model_then_its_isotonic_map():
    head = _head(("lex_all",), (2.0,), -1.0)
    matrix = np.zeros((2, len(confidence.FEATURES)))
    matrix[0, _col("lex_all")] = 1.0
    raw = head.predict(matrix)
    assert raw[0] == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert raw[1] == pytest.approx(1 / (1 + math.exp(1.0)))
    mapped = _head(("lex_all",), (2.0,), -1.0, x=[0.0, 0.5, 1.0], y=[0.0, 0.1, 0.9]).predict(matrix)
    assert mapped[1] < raw[1] and 0.0 <= mapped[1] <= mapped[0] <= 1.0
    # round trip through the stored form
    again = confidence.HeadModel.from_json(head.to_json())
    assert np.allclose(again.predict(matrix), raw)


def test_a_table_naming_an_unknown_feature_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="refit with evaluate --calibrate"):
        _head(("no_such_feature",), (1.0,), 0.0)


def _write_table(path, models, default=None):
    data = {"models": models, "default": default or {}}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _entry(intercept: float) -> dict:
    return {"heads": {"lexical": {"features": ["lex_all"], "coef": [0.0], "intercept": intercept,
                                  "mean": [0.0], "scale": [1.0]}}}


def test_lookup_falls_back_from_the_model_and_language_to_the_default(tmp_path):
    table = _write_table(tmp_path / "c.json", {"m": {"en": _entry(2.0)}}, {"fr": _entry(-2.0), "*": _entry(0.0)})
    assert confidence.head_model("m", "en", "lexical", path=table).intercept == 2.0
    assert confidence.head_model("m", "fr", "lexical", path=table).intercept == -2.0  # default's French
    assert confidence.head_model("other", "ar", "lexical", path=table).intercept == 0.0  # pooled default
    # a head nobody fitted (a model only the default knows) is judged by its words: the lexical head
    assert confidence.head_model("m", "en", "vector", path=table).intercept == 2.0
    assert confidence.head_model("other", "fr", "hybrid", path=table).intercept == -2.0
    assert confidence.head_model("m", "en", "lexical", path=tmp_path / "none.json") is None


def test_a_query_of_two_languages_gets_the_mean_of_their_models(tmp_path):
    # given English and French models that disagree ("cancer" is about half English, half French)
    table = _write_table(tmp_path / "c.json", {"m": {"en": _entry(3.0), "fr": _entry(-3.0)}})
    matrix = np.zeros((1, len(confidence.FEATURES)))
    # when
    english = confidence.confidences(matrix, model="m", head="lexical", query_text="the pricing policy",
                                     path=table)[0]
    mixed = confidence.confidences(matrix, model="m", head="lexical", query_text="cancer", path=table)[0]
    # then
    assert english > 0.9
    assert 0.2 < mixed < 0.8


def test_without_any_fitted_model_every_candidate_counts_as_certain(tmp_path):
    matrix = np.zeros((3, len(confidence.FEATURES)))
    values = confidence.confidences(matrix, model="m", head="hybrid", query_text="x", path=tmp_path / "none.json")
    assert values.tolist() == [1.0, 1.0, 1.0]


def test_table_update_keeps_other_rows_and_writes_the_default(tmp_path):
    path = tmp_path / "c.json"
    head = _head(("lex_all",), (1.0,), 0.5).to_json()
    confidence.table_update(model="m", code="en", heads={"lexical": head}, measured={"dataset": "a"}, path=path)
    confidence.table_update(model="m", code="fr", heads={"lexical": head}, measured={"dataset": "b"}, path=path)
    confidence.table_update(model="*", code="fr", heads={"lexical": head}, measured={"dataset": "b"}, path=path)
    data = json.loads(path.read_text())
    assert set(data["models"]["m"]) == {"en", "fr"}
    assert data["default"]["fr"]["measured"] == {"dataset": "b"}
    assert data["features"] == list(confidence.FEATURES)


def test_recording_hands_back_what_each_search_computed():
    entry = confidence.Recorded("q", "hybrid", [1], [1], np.zeros((1, len(confidence.FEATURES))))
    confidence.record(entry)  # outside a recording block: dropped
    with confidence.recording() as sink:
        confidence.record(entry)
    assert sink == [entry]


def test_columns_gathered_from_the_lanes_give_the_features_of_the_candidates_they_describe():
    # given three candidates (both lanes, lexical only, vector only) and the lanes' hits in lane order
    both = confidence.Candidate(confidence.LexicalEvidence(1, 6.0, 0b11, True), confidence.VectorEvidence(2, 0.80),
                                mask=0b11)
    lexical_only = confidence.Candidate(lexical=confidence.LexicalEvidence(2, 3.0, 0b01, False), mask=0b01)
    vector_only = confidence.Candidate(vector=confidence.VectorEvidence(1, 0.85))
    # when
    gathered = confidence.Columns.gather(
        [10, 20, 30], [0b11, 0b01, 0],
        lexical=[(10, 6.0, True), (20, 3.0, False)],
        vector=[(30, 0.85), (10, 0.80)],
    )
    # then
    expected = confidence.features([both, lexical_only, vector_only], _evidence())
    assert np.array_equal(confidence.features(gathered, _evidence()), expected)
    assert list(gathered.lex_rank) == [1, 2, 0] and list(gathered.vec_rank) == [2, 0, 1]
