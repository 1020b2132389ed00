"""Figures the reliability tests measure, merged into a JSON file at the end of the test that measured them.

A test run writes them to ``var/reliability/figures.json`` (gitignored), so ``make test`` leaves the tree
clean. ``docs/reliability.md`` cites the tracked copy, ``docs/reliability/figures.json``: every number in it
(inputs tried, statuses seen, leaks found, faults survived, latencies) was written by the test that measured
it, and ``make reliability-figures`` refreshes it (the suite with ``RELIABILITY_FIGURES`` pointing there).
"""

from __future__ import annotations

import json
import os
import platform
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC_FIGURES = ROOT / "docs" / "reliability" / "figures.json"  # tracked: what docs/reliability.md cites
DEFAULT_FIGURES = ROOT / "var" / "reliability" / "figures.json"  # gitignored: where a plain test run writes
ENV_NAME = "RELIABILITY_FIGURES"
_lock = threading.Lock()


def figures_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where figures are written: ``$RELIABILITY_FIGURES`` when set (relative to the working directory),
    else ``var/reliability/figures.json``."""
    value = environ.get(ENV_NAME, "").strip()
    return Path(value) if value else DEFAULT_FIGURES


def record(name: str, figures: dict[str, Any], *, path: Path | None = None) -> None:
    """Store ``figures`` under ``name`` (replacing an earlier run's), with when and where measured, in
    ``path`` (default: ``figures_path()``, read at each call)."""
    target = path or figures_path()
    entry = {
        **figures,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    with _lock:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            existing = json.loads(target.read_text())
        except (OSError, ValueError):
            existing = {}
        existing[name] = entry
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(existing, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")
        tmp.replace(target)
