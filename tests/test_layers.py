"""The layer contracts (pyproject.toml, ``make lint``) hold, and would catch a surface imported from below."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The packages the contracts cover, as pyproject.toml lists them (a new app joins the layers there).
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])
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


def test_a_surface_importing_past_the_engines_front_door_breaks_the_contract(tmp_path: Path) -> None:
    # given a copy of the tree where a surface imports a module below search.engine
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    (tmp_path / "browse" / "layer_probe.py").write_text("from search.engine.scope import chunk_column  # noqa\n")
    (tmp_path / "graphql_api" / "layer_probe.py").write_text("from search.engine import retrieve  # noqa\n")
    # when the contracts are checked, then only the import past the front door fails
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "browse.layer_probe -> search.engine.scope" in result.stdout
    assert "graphql_api.layer_probe" not in result.stdout


def test_the_engine_sends_every_statement_as_a_fragment() -> None:
    # no hand-counted parameter lists: search.engine.sql.execute(cursor, Fragment/compose(...)) only
    offences = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "search" / "engine").rglob("*.py") if path.name != "sql.py"
        for number, line in enumerate(path.read_text().splitlines(), 1) if ".execute(" in line
    ]
    assert offences == []


def test_dead_code_fails_lint_and_names_the_definition(tmp_path: Path) -> None:
    # given a copy of the tree with a function nothing calls
    for package in (*PACKAGES, "config", "tests", "templates", "scripts"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "manage.py", tmp_path / "manage.py")
    probe = tmp_path / "search" / "engine" / "fusion.py"
    probe.write_text(probe.read_text() + "\n\ndef fusion_nobody_calls() -> None:\n    return None\n")
    # when the dead-code pass runs on it, then it fails and names the function; the real tree passes
    dead = subprocess.run([sys.executable, str(tmp_path / "scripts" / "dead_code.py")], capture_output=True,
                          text=True, timeout=300)
    assert dead.returncode == 1
    assert "search/engine/fusion.py" in dead.stdout and "fusion_nobody_calls" in dead.stdout
    clean = subprocess.run([sys.executable, str(ROOT / "scripts" / "dead_code.py")], capture_output=True,
                           text=True, timeout=300)
    assert clean.returncode == 0, clean.stdout


def _modules(package: str) -> list[Path]:
    return [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]


def _search_aliases(tree: ast.Module) -> set[str]:
    """Names a module binds to ``search`` modules (``from search.services import vector`` binds ``vector``)."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "search":
            aliases |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "search"}
    return aliases


def test_benchmarks_use_only_the_engines_public_names() -> None:
    offences = []
    for path in _modules("benchmarks"):
        tree = ast.parse(path.read_text())
        aliases = _search_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("search"):
                offences += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                             if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                if node.attr.startswith("_") and not node.attr.startswith("__") and node.attr != "_meta":
                    offences.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert offences == []


def test_the_product_never_imports_django_test() -> None:
    offences = []
    for package in PACKAGES + ("config",):
        if package == "benchmarks":
            continue
        for path in _modules(package):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                offences += [f"{path}: {n}" for n in names if n == "django.test" or n.startswith("django.test.")]
    assert offences == []


def _cycles(graph: Any, modules: list[str]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan's strongly connected
    components of the import graph, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if ".migrations" in nxt:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_module_of_the_product_imports_itself_through_others() -> None:
    import grimp

    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, "config", include_external_packages=False)
    finally:
        sys.path.remove(str(ROOT))
    modules = sorted(m for m in graph.modules if ".migrations" not in m)
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    class Graph:
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.edges.get(module, set())

    assert _cycles(Graph(), ["d", "a", "b", "c"]) == [["a", "b", "c"]]
