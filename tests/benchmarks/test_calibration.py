"""benchmarks.calibration: the confidence fit, its storage, abstention, and ``evaluate --from-dump``."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks import calibration
from search.engine import confidence

F = confidence.FEATURES


def _search(rng: np.random.Generator, qid: str, kind: str, head: str, answered: bool) -> calibration.Searched:
    """A search of 20 candidates: an answered one's first candidate holds every word and stands out of the
    vector lane's distribution; the rest, and every candidate of an unanswered one, are noise."""
    matrix = rng.normal(0.0, 0.3, size=(20, len(F))).clip(0, None)
    relevant = np.zeros(20, dtype=bool)
    if answered:
        matrix[0, F.index("lex_all")] = 1.0
        matrix[0, F.index("lex_cov")] = 1.0
        matrix[0, F.index("vec_z")] = 6.0 + rng.normal()
        matrix[:, F.index("q_vec_top_z")] = matrix[0, F.index("vec_z")]
        matrix[:, F.index("q_lex_all")] = 1.0
        relevant[0] = True
    return calibration.Searched(qid, kind, head, matrix, relevant, int(answered))


def _collected(seed: int = 3) -> calibration.Collected:
    rng = np.random.default_rng(seed)
    out = calibration.Collected()
    for head in calibration.HEADS_RUN:
        out.searches += [_search(rng, f"q{i}", "in", head, answered=True) for i in range(150)]
        out.searches += [_search(rng, f"n{i}", "nonsense", head, answered=False) for i in range(80)]
    return out


def test_a_dump_round_trips_with_what_it_was_recorded_with(tmp_path: Path) -> None:
    collected = _collected()
    path = tmp_path / "d.npz"
    calibration.collected_dump(collected, path, model="m", language="en", dataset="toy")
    again = calibration.collected_load(path)
    assert calibration.dump_info(path) == {"model": "m", "language": "en", "dataset": "toy"}
    assert len(again.searches) == len(collected.searches)
    first, copy = collected.searches[0], again.searches[0]
    assert (first.qid, first.kind, first.head, first.judged) == (copy.qid, copy.kind, copy.head, copy.judged)
    assert np.array_equal(first.matrix, copy.matrix) and np.array_equal(first.answers, copy.answers)


def test_a_dump_of_other_features_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    np.savez_compressed(path, features=np.array(["lex", "something_else"]), meta=np.array([]))
    with pytest.raises(ValueError, match="record it again"):
        calibration.collected_load(path)


def test_abstention_counts_answered_and_unanswered_questions_per_threshold() -> None:
    rng = np.random.default_rng(1)
    answered = _search(rng, "a", "in", "hybrid", answered=True)
    missed = _search(rng, "b", "in", "hybrid", answered=True)
    nonsense = _search(rng, "c", "nonsense", "hybrid", answered=False)
    collected = calibration.Collected([answered, missed, nonsense])
    # given: the first question's answer at 0.9, the second's at 0.3 (the rest lower), nonsense at most 0.2
    probs = [np.r_[0.9, np.full(19, 0.1)], np.r_[0.3, np.full(19, 0.05)], np.r_[0.2, np.full(19, 0.01)]]
    # when
    result = calibration.abstention(collected, model="m", language="en", thresholds=(0.25, 0.5), probabilities=probs)
    # then
    assert result["thresholds"]["0.25"]["in_answered"] == 1.0
    assert result["thresholds"]["0.5"]["in_answered"] == 0.5
    assert result["thresholds"]["0.25"]["nonsense_abstained"] == 1.0
    assert result["queries"] == {"in": 2, "nonsense": 1} and result["in_success@10"] == 1.0


def test_evaluate_from_dump_fits_every_head_and_stores_it_beside_the_others(tmp_path: Path, settings) -> None:
    # given a table that already holds another model, and a dump of recorded searches
    table = tmp_path / "confidence.json"
    table.write_text(json.dumps({"models": {"other": {"fr": {"heads": {}}}}, "default": {}}), encoding="utf-8")
    settings.SEARCH = {**settings.SEARCH, "CONFIDENCE_TABLE": str(table)}
    dump = tmp_path / "d.npz"
    calibration.collected_dump(_collected(), dump, model="m", language="en", dataset="toy")
    out = StringIO()
    # when
    call_command("evaluate", "--dataset", str(tmp_path), "--from-dump", str(dump), "--json", stdout=out,
                 stderr=StringIO())
    # then the model's three heads are stored (the hybrid one floored by the vector one), the other model kept
    data = json.loads(table.read_text(encoding="utf-8"))
    assert set(data["models"]) == {"other", "m"}
    heads = data["models"]["m"]["en"]["heads"]
    assert set(heads) == {"hybrid", "lexical", "vector"}
    assert heads["hybrid"]["floor"]["head"] == "vector" and "answerable" in heads["hybrid"]
    assert "lex_rr" not in heads["hybrid"]["features"]  # no rank in the hit stage
    assert data["default"]["en"]["heads"]["lexical"] == heads["lexical"]
    # and the fit tells answered questions from made-up words, cross-validated
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    row = report["abstention_cross_validated"]["thresholds"]["0.35"]
    assert row["in_answered"] >= 0.9 and row["nonsense_abstained"] >= 0.9
    # and the engine reads it
    fitted = confidence.head_model("m", "en", "hybrid", path=table)
    assert fitted is not None and fitted.answerable is not None


def test_evaluate_from_dump_without_model_or_language_says_what_to_give(tmp_path: Path) -> None:
    dump = tmp_path / "d.npz"
    calibration.collected_dump(_collected(), dump)
    with pytest.raises(CommandError, match="give --model and --language"):
        call_command("evaluate", "--dataset", str(tmp_path), "--from-dump", str(dump), stderr=StringIO())


def test_recordings_of_one_model_and_language_are_fitted_together_and_of_two_refused(
    tmp_path: Path, settings
) -> None:
    table = tmp_path / "confidence.json"
    settings.SEARCH = {**settings.SEARCH, "CONFIDENCE_TABLE": str(table)}
    full, more, other = tmp_path / "full.npz", tmp_path / "more.npz", tmp_path / "other.npz"
    calibration.collected_dump(_collected(3), full, model="m", language="en", dataset="toy")
    calibration.collected_dump(_collected(4), more, model="m", language="en", dataset="toy")
    calibration.collected_dump(_collected(5), other, model="m", language="fr", dataset="toy")
    # when two recordings of (m, en) are fitted together
    out = StringIO()
    call_command("evaluate", "--dataset", str(tmp_path), "--from-dump", str(full), str(more), "--json",
                 stdout=out, stderr=StringIO())
    # then every question of both counts
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["abstention"]["queries"] == {"in": 300, "nonsense": 160}
    # and recordings of two languages are refused with what to do
    with pytest.raises(CommandError, match="different models or languages"):
        call_command("evaluate", "--dataset", str(tmp_path), "--from-dump", str(full), str(other), stderr=StringIO())


def test_kinds_must_be_known_and_go_with_dump_alone(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="unknown kind.*rare_wrod"):
        call_command("evaluate", "--dataset", str(tmp_path), "--dump", str(tmp_path / "d.npz"),
                     "--kinds", "rare_wrod", stderr=StringIO())
    with pytest.raises(CommandError, match="with --dump alone"):
        call_command("evaluate", "--dataset", str(tmp_path), "--fit-confidence", "--kinds", "rare_word",
                     stderr=StringIO())


def test_rare_word_questions_are_words_few_documents_hold_answered_by_them(tmp_path: Path) -> None:
    # given a corpus where "quorvex" is in one body, "pallets" in two, "shipping" in every document
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in [
        {"_id": "a", "title": "Audit report", "text": "The audit named quorvex; shipping pallets."},
        {"_id": "b", "title": "Delivery note", "text": "Shipping schedule with pallets."},
        {"_id": "c", "title": "Route plan", "text": "Shipping route for Monday."},
        {"_id": "d", "title": "Route plan two", "text": "Shipping route for Tuesday."},
    ]) + "\n", encoding="utf-8")
    dataset = calibration.Dataset(corpus=tmp_path / "corpus.jsonl", queries={}, qrels={})
    # when
    queries, answers = calibration.rare_word_queries(dataset, n=1000, most=2)
    # then every question is a word at most two documents hold, answered by exactly those
    by_word = {text: answers[qid] for qid, text in queries.items()}
    assert by_word["quorvex"] == {"a"} and by_word["pallets"] == {"a", "b"}
    assert by_word["route"] == {"c", "d"} and "shipping" not in by_word  # four hold it


def test_a_rare_word_is_answered_by_what_the_engine_finds_holding_it() -> None:
    rng = np.random.default_rng(2)
    lex_all = F.index("lex_all")

    def search(qid: str, head: str, holders: int) -> calibration.Searched:
        s = _search(rng, qid, "rare_word", head, answered=True)
        s.matrix[:, lex_all] = 0.0
        if head == "lexical":
            s.matrix[:holders, lex_all] = 1.0
        return calibration.Searched(qid, "rare_word", head, s.matrix, s.relevant, 1, None,
                                    tuple(f"{qid}-d{i}" for i in range(20)))

    collected = calibration.Collected([
        search("few", "lexical", 2), search("few", "vector", 0),  # the engine finds two documents holding it
        search("many", "lexical", 9), search("many", "vector", 0),  # nine: not rare as the engine matches
        _search(rng, "q", "in", "lexical", answered=True),
    ])
    # when
    out = calibration.rare_words_as_the_engine_matches(collected, most=3)
    # then the rare one is answered by both holders in every head (by document), the common one is left out
    few = [s for s in out.searches if s.qid == "few"]
    assert [s.head for s in few] == ["lexical", "vector"]
    assert all(s.judged == 2 and list(np.flatnonzero(s.answers)) == [0, 1] for s in few)
    assert not [s for s in out.searches if s.qid == "many"]
    assert [s.kind for s in out.searches].count("in") == 1


def test_the_vector_head_is_not_fitted_on_rare_word_questions(tmp_path: Path, settings) -> None:
    # given the same searches in every head, plus rare-word questions (answered by holding the word)
    settings.SEARCH = {**settings.SEARCH, "CONFIDENCE_TABLE": str(tmp_path / "confidence.json")}
    rng = np.random.default_rng(8)
    plain = _collected()
    with_rare = calibration.Collected(list(plain.searches) + [
        _search(rng, f"r{i}", "rare_word", head, answered=True) for head in calibration.HEADS_RUN for i in range(40)
    ])
    # when both are fitted
    before = calibration.table_fit(plain, model="m", language="en", dataset="toy")["fit"]
    after = calibration.table_fit(with_rare, model="m", language="en", dataset="toy")["fit"]
    # then the lexical and hybrid heads learn from them, the vector head does not
    assert after["lexical"]["rows"] > before["lexical"]["rows"]
    assert after["hybrid"]["rows"] > before["hybrid"]["rows"]
    assert after["vector"]["rows"] == before["vector"]["rows"]
