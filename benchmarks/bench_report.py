"""Render ``bench`` results: a text summary, ``results.json``, ``results.md`` (tables, targets, EXPLAIN
appendix) and PNG plots (matplotlib, headless)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import require
from benchmarks.bench import PAIRS, PATHS

PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")
TARGET_SIZE = 100_000


def _sizes(results: dict[str, Any]) -> list[str]:
    return sorted(results.get("sizes", {}), key=int)


def summary_table(results: dict[str, Any]) -> str:
    sizes = _sizes(results)
    header = f"{'path':<24}" + "".join(f"{s + ' items p50/p95/p99 ms':>34}" for s in sizes)
    lines = [header]
    for path in PATHS:
        row = f"{path:<24}"
        for size in sizes:
            v = results["sizes"][size].get(path)
            cell = f"{v['p50_ms']:.1f} / {v['p95_ms']:.1f} / {v['p99_ms']:.1f}" if v else "-"
            row += f"{cell:>34}"
        lines.append(row)
    load = results.get("load")
    if load:
        lines.append(
            f"load: {load['requests']} requests, {load['errors']} errors, {load['rps']} req/s, "
            f"p50 {load['p50_ms']:.1f} / p95 {load['p95_ms']:.1f} / p99 {load['p99_ms']:.1f} ms"
        )
        real = load.get("real_embedding")
        if real:
            lines.append(
                f"load, real query embedding: {real['requests']} requests, {real['errors']} errors, "
                f"{real['rps']} req/s, p50 {real['p50_ms']:.1f} / p95 {real['p95_ms']:.1f} / "
                f"p99 {real['p99_ms']:.1f} ms"
            )
    for size, compared in sorted(results.get("replica", {}).items(), key=lambda kv: int(kv[0])):
        lines += [f"replica @{size}: " + line for line in replica_lines(compared)]
    return "\n".join(lines)


def replica_lines(compared: dict[str, Any]) -> list[str]:
    """One line per load run of a ``--replica`` comparison, and what it saved."""
    if "replica" not in compared:
        return [f"no replica run: {compared.get('error', 'not started')}"]
    out = []
    for name, label in (("single", "primary only"), ("replica", "reads on a replica")):
        run = compared[name]
        line = (
            f"{label}: {run['rps']} req/s, p95 {run['p95_ms']:.1f} ms, {run['errors']} errors, "
            f"primary CPU {_fmt(run.get('primary_cpu_s'), 2)} s ({_fmt(run.get('primary_cpu_ms_per_request'), 2)} "
            "ms/request)"
        )
        if name == "replica":
            share = run.get("reads_on_replicas_share")
            line += (
                f", replica CPU {_fmt(run.get('replica_cpu_s'), 2)} s, lag max {_fmt(run.get('lag_max_s'), 3)} s, "
                f"reads on the replica {_fmt(100 * share if share is not None else None)}%"
            )
        out.append(line)
    saved = compared.get("primary_cpu_per_request_saved")
    out.append(f"primary CPU per request saved: {_fmt(100 * saved if saved is not None else None)}%")
    return out


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for the issue's targets; ``met`` is None when the run cannot tell."""
    sizes = _sizes(results)
    out: list[tuple[str, str, bool | None]] = []
    at = str(TARGET_SIZE) if str(TARGET_SIZE) in results.get("sizes", {}) else (sizes[-1] if sizes else None)
    if at is None:
        return out
    paths = results["sizes"][at]
    note = "" if at == str(TARGET_SIZE) else f" (measured at {at} items, not 100k)"
    if "preview" in paths:
        p95 = paths["preview"]["p95_ms"]
        out.append((f"Live preview p95 ≤ 20 ms{note}", f"{p95:.1f} ms", p95 <= 20))
    ratio = results.get("ratios", {}).get(at, {})
    if "preview/baseline_words" in ratio:
        out.append(_ten_times(f"Preview ≥ 10× faster than word-by-word ILIKE (p50){note}",
                              ratio["preview/baseline_words"]["p50"]))
    completeness = paths.get("preview", {}).get("completeness") or {}
    if completeness.get("share") is not None:
        out.append(
            (
                f"Preview completeness ≥ 95 %{note}",
                f"{100 * completeness['share']:.1f} %",
                completeness["share"] >= 0.95,
            )
        )
    if "hybrid" in paths:
        out.append(
            (
                f"Hybrid retrieve() p50 ≤ 40 ms{note}",
                f"{paths['hybrid']['p50_ms']:.1f} ms",
                paths["hybrid"]["p50_ms"] <= 40,
            )
        )
        out.append(
            (
                f"Hybrid retrieve() p99 ≤ 150 ms{note}",
                f"{paths['hybrid']['p99_ms']:.1f} ms",
                paths["hybrid"]["p99_ms"] <= 150,
            )
        )
    if "lexical/baseline_ts_rank" in ratio:
        out.append(_ten_times(f"Lexical lane ≥ 10× faster than ts_rank OR (p50){note}",
                              ratio["lexical/baseline_ts_rank"]["p50"]))
    grow = results.get("growth_p50") or {}
    if grow:
        for path in PATHS:
            if path in grow and grow[path] is not None and not path.startswith("baseline_"):
                out.append(
                    (
                        f"10× items ≤ 2× p50: {path} ({sizes[0]}→{sizes[-1]})",
                        f"{grow[path]:.2f}×",
                        grow[path] <= 2,
                    )
                )
    load = results.get("load")
    if load:
        out.append(
            (
                "Sustained mixed load: zero errors",
                f"{load['errors']} of {load['requests']}",
                load["errors"] == 0,
            )
        )
    return out


def _ten_times(target: str, ratio_p50: float | None) -> tuple[str, str, bool]:
    """A "≥ 10× faster" target from the p50 ratio (path / its baseline; 0.1 or less meets it)."""
    return target, f"{1 / ratio_p50:.1f}×" if ratio_p50 else "–", bool(ratio_p50 is not None and ratio_p50 <= 0.1)


def federation_lines(size: str, fed: dict[str, Any]) -> list[str]:
    """The federated latency section (benchmarks/bench_federation.py)."""
    lines = [
        "", f"### Federated search with 2 peers ({size} items)", "",
        "Three web servers on the same corpus: two answer as peers, the third searches itself and both "
        "(`POST /api/search` with `\"sources\": [\"local\", \"peer1\", \"peer2\"]`) or both peers only; "
        "each question timed on each in turn, one request in flight. With its own search, three searches share "
        "these 2 cores. `replay1`/`replay2` answer what `peer1`/`peer2` answered to the same question, after the "
        "time they took, using no CPU (as peers on their own hosts); `federated_replays` searches both of them.", "",
        "| | n | errors | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|",
    ]
    for kind in ("peer1", "peer2", "federated_peers_only", "federated", "replay1", "replay2", "federated_replays"):
        v = fed[kind]
        lines.append(f"| {kind} | {v['n']} | {v['errors']} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} | "
                     f"{v['p99_ms']:.1f} |")
    lines += ["", f"Federated over both peers, p50 − slower peer's p50: **{fed['overhead_p50_ms']:+.1f} ms** "
                  f"(target ≤ 15 ms: {'met' if fed['target_met'] else 'not met'}); with this instance's own search "
                  f"too: {fed['overhead_with_local_p50_ms']:+.1f} ms.", "",
              f"Federated over both replay peers, p50 − slower replay peer's p50: "
              f"**{fed['replay']['overhead_p50_ms']:+.1f} ms** (target ≤ 15 ms: "
              f"{'met' if fed['replay']['target_met'] else 'not met'}); per question, the median time past the "
              f"slower of the two recorded delays: {fed['replay']['past_slower_delay_p50_ms']} ms."]
    return lines


def flip_lines(size: str, flip: dict[str, Any]) -> list[str]:
    """The embedding-space flip section (benchmarks/bench_flip.py)."""
    if "error" in flip:
        return ["", f"### Embedding-space flip ({size} items)", "", f"Not measured: {flip['error']}."]
    writes = flip["writes"]
    prefilled = flip.get("prefill_s") is not None
    staged = (
        f"prefilled by one table rewrite in {flip['prefill_s']} s (placeholder vectors; staging then found "
        f"nothing to do: {flip['stage_s']} s)" if prefilled else f"staged in {flip['stage_s']} s"
    )
    emptied = (
        "the next-space columns left as they are (prefill)" if flip["cleared"] is None
        else f"{flip['cleared']} next-space rows emptied"
    )
    lines = [
        "", f"### Embedding-space flip ({size} items, {flip['chunks']} chunks)", "",
        f"Switch to `{flip['model']}`: {staged} (no search running); then, while "
        f"{flip['search_threads']} threads searched (hybrid `retrieve()`), prepared in {flip['prepare_s']} s "
        "(next-space columns filled, the new HNSW index built concurrently and prewarmed), flipped "
        f"({flip['outcome']}) in **{flip['flip_s']} s** (of which {flip['swap_wait_s']} s waiting for running "
        f"searches before the swap; {flip['filled_in_flip']} chunks filled inside it), cleaned up in "
        f"{flip['cleanup_s']} s ({emptied}, the old index dropped).", "",
        "| searches | n | errors | p50 ms | p99 ms | max ms | over 1 s |", "|---|---|---|---|---|---|---|",
    ]
    for when, v in flip["searches"].items():
        lines.append(f"| {when} | {v['count']} | {v['errors']} | {v.get('p50_ms', '–')} | {v.get('p99_ms', '–')} | "
                     f"{v.get('max_ms', '–')} | {v.get('over_1s', 0)} |")
    waits = ", ".join(f"{step} {writes[step].get('max_ms', '–')} ms" for step in ("prepare", "flip", "cleanup"))
    lines += ["", f"A one-row chunk write every 0.5 s waited at most {writes['longest_wait_s']} s "
                  f"(longest per step: {waits})."]
    return lines


def _speed_line(machine: dict[str, Any]) -> list[str]:
    speed = machine.get("speed")
    if not speed:
        return []
    return [
        f"Machine speed at start (lower is faster; compare runs by these before comparing latencies): "
        f"Python loop {speed['python_ms']} ms, PostgreSQL generate_series {speed['postgres_ms']} ms.",
        "",
    ]


def _kinds_table(load: dict[str, Any]) -> list[str]:
    """A load run's table per request kind, and its errors."""
    lines = ["| kind | requests | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    for kind, v in load["by_kind"].items():
        lines.append(f"| {kind} | {v['n']} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} | {v['p99_ms']:.1f} |")
    if load.get("error_kinds"):
        lines += ["", "Errors: " + "; ".join(f"{k} × {n}" for k, n in load["error_kinds"].items())]
    return lines


def markdown(results: dict[str, Any], *, plots: list[str] | None = None) -> str:
    sizes = _sizes(results)
    m = results.get("machine", {})
    o = results.get("options", {})
    loadavg = ", ".join(f"{x:.1f}" for x in m.get("loadavg_at_start", []))
    lines = [
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu')}), {m.get('memory_gb')} GB RAM, {m.get('postgres')}, "
        f"Python {m.get('python')}; load average at start {loadavg}; "
        f"commit {m.get('git_commit')}, {m.get('started_at')}.",
        "",
        *_speed_line(m),

        f"Corpus: {', '.join(sizes)} items, about {o.get('chunks_per_item')} chunks each, "
        f"seed {o.get('seed')}; "
        f"vectors: {o.get('embedding')} (deterministic). Queries: {o.get('queries')} per path "
        f"({o.get('baseline_queries')} per baseline) after {o.get('warmup')} warm-up queries, the searched "
        f"tables and indexes read into memory first (pg_prewarm, see Build); lane depth "
        f"{o.get('lane_depth')}, hnsw.ef_search {o.get('hnsw_ef_search')}.",
        "",
        "### Latency per path (ms, p50 / p95 / p99)",
        "",
        "| path | " + " | ".join(f"{s} items" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for path in PATHS:
        cells = []
        for size in sizes:
            v = results["sizes"][size].get(path)
            cells.append(f"{v['p50_ms']:.1f} / {v['p95_ms']:.1f} / {v['p99_ms']:.1f}" if v else "–")
        lines.append(f"| `{path}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Ours vs baseline (same run, same queries)",
        "",
        "| ours / baseline | items | ours p50 | baseline p50 | ratio p50 | ratio p95 | faster (p50) |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        paths = results["sizes"][size]
        for ours, base in PAIRS:
            if ours in paths and base in paths:
                r = results["ratios"][size][f"{ours}/{base}"]
                lines.append(
                    f"| `{ours}` / `{base}` | {size} | {paths[ours]['p50_ms']:.1f} | "
                    f"{paths[base]['p50_ms']:.1f} | {_fmt(r['p50'], 3)} | {_fmt(r['p95'], 3)} | "
                    f"{_fmt(1 / r['p50'] if r['p50'] else None)}× |"
                )
    grow = results.get("growth_p50") or {}
    if grow:
        lines += [
            "",
            f"### Growth {sizes[0]} → {sizes[-1]} items (p50 ratio)",
            "",
            "| path | p50 small | p50 large | growth |",
            "|---|---|---|---|",
        ]
        for path, g in grow.items():
            lines.append(
                f"| `{path}` | {results['sizes'][sizes[0]][path]['p50_ms']:.1f} | "
                f"{results['sizes'][sizes[-1]][path]['p50_ms']:.1f} | {_fmt(g, 2)}× |"
            )
    checks = targets(results)
    if checks:
        lines += ["", "### Targets", "", "| target | measured | met |", "|---|---|---|"]
        for name, measured, met in checks:
            lines.append(f"| {name} | {measured} | {'yes' if met else ('no' if met is False else '?')} |")
    completeness = [(size, results["sizes"][size]["preview"].get("completeness")) for size in sizes]
    if any(c for _, c in completeness):
        lines += [
            "",
            "### What the preview's time budget costs in results",
            "",
            "The same typed fragments previewed within the budget (as timed above) and without it (every step "
            "run to the end, however long). A fragment is complete when the budgeted preview shows every item "
            "the unbudgeted one puts in its first 8. Fragments: the SciFact claims' (`claims`: many match "
            "nothing), and words drawn from the corpus's titles and bodies (one, two or three, the last often "
            "cut short; `typo`: one word of 5+ letters mistyped).",
            "",
            "| items | budget applies | kind | fragments | with matches | showed some | complete |",
            "|---|---|---|---|---|---|---|",
        ]

        def share(n: int, total: int) -> str:
            return f"{n} ({100 * n / total:.0f}%)" if total else str(n)

        for size, c in completeness:
            if not c:
                continue
            rows = [("all", c), *sorted((c.get("by_kind") or {}).items())]
            for kind, k in rows:
                lines.append(
                    f"| {size} | {'yes' if c['budgeted'] else 'no'} | {kind} | {k['previews']} | "
                    f"{k['with_matches']} | {share(k['showed_some'], k['with_matches'])} | "
                    f"{share(k.get('complete', k['showed_all']), k['previews'])} |"
                )
    loads = results.get("load_sizes") or (
        {str(results["load"]["items"]): results["load"]} if results.get("load") else {}
    )
    for load in (loads[size] for size in sorted(loads, key=int)):
        lines += [
            "",
            f"### Sustained mixed load ({load['items']} items)",
            "",
            f"{load['users']} concurrent simulated users for {load['seconds']} s (typists on the preview, "
            f"then a search; API searches; GraphQL searches; MCP find): **{load['requests']} requests, "
            f"{load['errors']} errors, {load['rps']} req/s**; all requests p50 {load['p50_ms']:.1f} / "
            f"p95 {load['p95_ms']:.1f} / p99 {load['p99_ms']:.1f} ms.",
            "",
        ]
        lines += _kinds_table(load)
        real = load.get("real_embedding")
        if real:
            lines += [
                "",
                f"The same load with every search embedding its query afresh with the default embedder "
                f"(`{real.get('engine', 'e5')}`, never from the query cache; the corpus keeps its hash vectors): "
                f"**{real['requests']} requests, {real['errors']} errors, {real['rps']} req/s**; all requests "
                f"p50 {real['p50_ms']:.1f} / p95 {real['p95_ms']:.1f} / p99 {real['p99_ms']:.1f} ms.",
                "",
            ]
            lines += _kinds_table(real)
    for size, fed in sorted(results.get("federation", {}).items(), key=lambda kv: int(kv[0])):
        lines += federation_lines(size, fed)
    for size, flip in sorted(results.get("flip", {}).items(), key=lambda kv: int(kv[0])):
        lines += flip_lines(size, flip)
    for size, compared in sorted(results.get("replica", {}).items(), key=lambda kv: int(kv[0])):
        lines += ["", f"### Reads on a replica ({size} items)", ""]
        if "replica" not in compared:
            lines.append(f"No replica run: {compared.get('error', 'not started')}.")
            continue
        single, replica = compared["single"], compared["replica"]
        lines += [
            "The same mixed load on the primary alone, then with reads on a streaming replica of its server "
            "(same machine: both share its cores).",
            "",
            "| run | req/s | p50 | p95 | p99 | errors | primary CPU s | primary CPU ms/request | replica CPU s | "
            "lag max s | reads on replica |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for label, run in (("primary only", single), ("reads on a replica", replica)):
            on_replica = run.get("reads_on_replicas_share")
            lines.append(
                f"| {label} | {run['rps']} | {run['p50_ms']:.1f} | {run['p95_ms']:.1f} | {run['p99_ms']:.1f} | "
                f"{run['errors']} | {_fmt(run.get('primary_cpu_s'), 2)} | "
                f"{_fmt(run.get('primary_cpu_ms_per_request'), 2)} | "
                f"{_fmt(run.get('replica_cpu_s'), 2)} | {_fmt(run.get('lag_max_s'), 3)} | "
                f"{_fmt(100 * on_replica if on_replica is not None else None)}% |"
            )
    lines += [
        "",
        "### Build (seconds)",
        "",
        "| items | chunks | " + "generate+COPY | secondary indexes | "
        "VACUUM ANALYZE | term statistics | HNSW index | ts_rank baseline table | prewarm |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        b = results["build"][size]
        s = b["seconds"]
        reused = " (kept database, times from its build)" if b.get("reused") else ""
        lines.append(
            f"| {size}{reused} | {b['chunks']} | {_fmt(s.get('generate_copy'))} | "
            f"{_fmt(s.get('secondary_indexes'))} | {_fmt(s.get('vacuum_analyze'))} | "
            f"{_fmt(s.get('stats_refresh'))} | {_fmt(s.get('hnsw_index'))} | "
            f"{_fmt(b.get('baseline_ts_rank_table_s'))} | "
            f"{_fmt(b.get('prewarm_s')) if b.get('prewarm_s') is not None else 'not available'} |"
        )
    for plot in plots or []:
        lines += ["", f"![{plot}]({plot})"]  # written beside results.md
    if sizes and results.get("explain", {}).get(sizes[-1]):
        lines += [
            "",
            f"### Appendix: EXPLAIN ANALYZE at {sizes[-1]} items",
            "",
            "The slowest statement of each path for its median-latency query (results.json has every size).",
        ]
        for path, plans in results["explain"][sizes[-1]].items():
            for plan in plans:
                lines += [
                    "",
                    f"#### `{path}` — {plan['query']!r} ({plan['ms']:.1f} ms when captured)",
                    "",
                    "```sql",
                    plan["sql"],
                    "```",
                    "",
                    f"Parameters: {', '.join(plan['params'])}",
                    "",
                    "```",
                    plan["plan"],
                    "```",
                ]
    return "\n".join(lines) + "\n"


def _save(fig: Any, path: Path) -> str:
    """Write a finished figure as a PNG and free it; its file name."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt: Any = require("matplotlib.pyplot")
    plt.close(fig)
    return path.name


def _plots(results: dict[str, Any], out: Path) -> list[str]:
    matplotlib: Any = require("matplotlib")
    matplotlib.use("Agg")
    plt: Any = require("matplotlib.pyplot")

    sizes = _sizes(results)
    written = []
    # 1. percentiles per path, one panel per size
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 3.6 * len(sizes)), squeeze=False)
    for ax, size in zip(axes[:, 0], sizes, strict=True):
        paths = [p for p in PATHS if p in results["sizes"][size]]
        for k, q in enumerate(PERCENTILES):
            values = [results["sizes"][size][p][q] for p in paths]
            ax.bar(
                [i + (k - 1) * 0.27 for i in range(len(paths))],
                values,
                width=0.27,
                label=q.replace("_ms", ""),
            )
        ax.set_xticks(range(len(paths)), paths, rotation=25, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"Latency per path, {size} items")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    written.append(_save(fig, out / "latency-percentiles.png"))
    # 2. ours vs baseline
    fig, axes = plt.subplots(1, len(PAIRS), figsize=(12, 3.8), squeeze=False)
    for ax, (ours, base) in zip(axes[0], PAIRS, strict=True):
        labels, ours_v, base_v = [], [], []
        for size in sizes:
            paths = results["sizes"][size]
            if ours in paths and base in paths:
                for q in ("p50_ms", "p95_ms"):
                    labels.append(f"{int(size) // 1000}k {q[:3]}")
                    ours_v.append(paths[ours][q])
                    base_v.append(paths[base][q])
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], ours_v, width=0.4, label=ours)
        ax.bar([i + 0.2 for i in x], base_v, width=0.4, label=base)
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"{ours} vs {base}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    written.append(_save(fig, out / "baselines.png"))
    # 3. growth
    if len(sizes) >= 2:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        xs = [int(s) for s in sizes]
        for path in PATHS:
            if all(path in results["sizes"][s] for s in sizes):
                ax.plot(
                    xs,
                    [results["sizes"][s][path]["p50_ms"] for s in sizes],
                    marker="o",
                    label=path,
                    linestyle="--" if path.startswith("baseline_") else "-",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("items (log)")
        ax.set_ylabel("p50 ms (log)")
        ax.set_title("p50 latency as the corpus grows")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        written.append(_save(fig, out / "growth.png"))
    # 4. load, one panel per size
    loads = results.get("load_sizes") or (
        {str(results["load"]["items"]): results["load"]} if results.get("load") else {}
    )
    if loads:
        fig, axes = plt.subplots(1, len(loads), figsize=(7 * len(loads), 3.8), squeeze=False)
        for ax, size in zip(axes[0], sorted(loads, key=int), strict=True):
            load = loads[size]
            kinds = list(load["by_kind"])
            for k, q in enumerate(PERCENTILES):
                ax.bar(
                    [i + (k - 1) * 0.27 for i in range(len(kinds))],
                    [load["by_kind"][n][q] for n in kinds],
                    width=0.27,
                    label=q.replace("_ms", ""),
                )
            ax.set_xticks(range(len(kinds)), [f"{n}\n({load['by_kind'][n]['n']})" for n in kinds], fontsize=8)
            ax.set_yscale("log")
            ax.set_ylabel("ms (log)")
            ax.set_title(
                f"Mixed load, {size} items: {load['rps']} req/s, {load['errors']} errors", fontsize=9
            )
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8)
        written.append(_save(fig, out / "load.png"))
    return written


def report_write(results: dict[str, Any], out: Path) -> list[Path]:
    """Write results.json, the PNG plots and results.md into ``out``; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    plots = _plots(results, out)
    (out / "results.md").write_text(markdown(results, plots=plots), encoding="utf-8")
    return [out / "results.json", out / "results.md", *(out / p for p in plots)]
