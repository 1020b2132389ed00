"""The toy confidence calibration the tests search with is what the fit gives (tests/support/toy_calibration.py)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.toy_calibration import TOY_TABLE, toy_fit

pytestmark = pytest.mark.django_db


def _heads(data: dict) -> dict:
    out = {}
    sections = [*(data.get("models") or {}).items(), ("*", data.get("default") or {})]
    for model, langs in sections:
        for code, entry in langs.items():
            for head, fitted in entry.get("heads", {}).items():
                out[(model, code, head)] = fitted
    return out


def test_the_toy_calibration_is_what_the_fit_gives(tmp_path):
    # when the toy calibration is fitted again, as the engine records the demo's questions now
    path = tmp_path / "toy.json"
    reports = toy_fit(path)
    fitted = json.loads(path.read_text(encoding="utf-8"))
    if os.environ.get("KB_REFIT_TOY_CALIBRATION"):
        TOY_TABLE.parent.mkdir(parents=True, exist_ok=True)
        TOY_TABLE.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    # then it is the committed table (refit it with KB_REFIT_TOY_CALIBRATION=1 after changing the features)
    committed = json.loads(TOY_TABLE.read_text(encoding="utf-8"))
    assert committed["features"] == fitted["features"]
    ours, theirs = _heads(fitted), _heads(committed)
    assert ours.keys() == theirs.keys()
    for key, head in ours.items():
        assert head["features"] == theirs[key]["features"], key
        assert head["coef"] == pytest.approx(theirs[key]["coef"], abs=1e-3), key
        assert head["intercept"] == pytest.approx(theirs[key]["intercept"], abs=1e-3), key
    # and each head learned something: relevant hits outnumber nothing, and the fit beats a constant
    for head, report in reports["fit"].items():
        base_rate = report["positives"] / report["rows"]
        assert report["positives"] > 20, head
        assert report["brier"] < 0.8 * base_rate * (1 - base_rate), head
