"""Where the reliability suite writes its figures (tests/reliability/figures.py): under var/ by default, so a
test run leaves the tracked docs/reliability/figures.json as it was (issue 21, item 10).

It lives here because tests/reliability/ is another team's; it belongs in tests/reliability/test_figures.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.reliability import figures


def test_a_figure_written_to_the_default_path_leaves_the_tracked_doc_byte_identical(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: no RELIABILITY_FIGURES, as in `make test`
    monkeypatch.delenv(figures.ENV_NAME, raising=False)
    before = figures.DOC_FIGURES.read_bytes()
    # when
    figures.record("figures.default_path_check", {"written": 1})
    # then
    assert figures.DOC_FIGURES.read_bytes() == before
    written = json.loads(figures.DEFAULT_FIGURES.read_text())
    assert written["figures.default_path_check"]["written"] == 1
    assert figures.DEFAULT_FIGURES.is_relative_to(figures.ROOT / "var")


def test_the_default_path_is_gitignored() -> None:
    # `git check-ignore` only reads: exit status 0 when the path is ignored
    result = subprocess.run(
        ["git", "check-ignore", "-q", str(figures.DEFAULT_FIGURES)], cwd=figures.ROOT, check=False
    )
    assert result.returncode == 0, "var/ must stay in .gitignore"


def test_the_environment_picks_another_path(tmp_path: Path) -> None:
    # given
    target = tmp_path / "figures.json"
    # when
    path = figures.figures_path({figures.ENV_NAME: str(target)})
    figures.record("figures.env_path_check", {"written": 2}, path=path)
    # then
    assert path == target
    assert json.loads(target.read_text())["figures.env_path_check"]["written"] == 2
    assert figures.figures_path({}) == figures.DEFAULT_FIGURES
    assert figures.figures_path({figures.ENV_NAME: "  "}) == figures.DEFAULT_FIGURES
