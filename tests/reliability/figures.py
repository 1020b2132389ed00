"""Figures the reliability tests measure, merged into ``docs/reliability/figures.json``.

``docs/reliability.md`` cites this file: every number in it (inputs tried, statuses seen, leaks found,
faults survived, latencies) is written by the test that measured it, at the end of that test.
"""

from __future__ import annotations

import json
import os
import platform
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIGURES_PATH = Path(os.environ.get("RELIABILITY_FIGURES", ROOT / "docs" / "reliability" / "figures.json"))
_lock = threading.Lock()


def record(name: str, figures: dict[str, Any]) -> None:
    """Store ``figures`` under ``name`` (replacing an earlier run's), with when and where measured."""
    entry = {
        **figures,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    with _lock:
        FIGURES_PATH.parent.mkdir(parents=True, exist_ok=True)
        try:
            existing = json.loads(FIGURES_PATH.read_text())
        except (OSError, ValueError):
            existing = {}
        existing[name] = entry
        tmp = FIGURES_PATH.with_suffix(".tmp")
        tmp.write_text(json.dumps(existing, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")
        tmp.replace(FIGURES_PATH)
