"""The layer contracts (pyproject.toml, ``make lint``) hold, and would catch a surface imported from below."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("search", "presets", "analytics", "browse", "graphql_api", "mcp_api")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def test_the_tree_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_engine_importing_a_surface_breaks_the_contract(tmp_path: Path) -> None:
    # given a copy of the tree where the engine imports the browse surface
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    (tmp_path / "search" / "layer_probe.py").write_text("from browse import presenters  # noqa: F401\n")
    # when the contracts are checked, then they fail and name the import
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "search.layer_probe -> browse.presenters" in result.stdout
