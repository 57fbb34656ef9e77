"""The package's import graph, read from the source (every import statement, those inside
functions too: a lazy import is a dependency all the same): no two modules import each
other, the packages import one another one way only, the kernels import nothing of the
package, nothing imports the CLI; and the repository holds no issue numbers."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import networkx as nx
import pytest

from helpers import package_modules

ROOT = Path(__file__).resolve().parents[1]


def import_graph() -> nx.DiGraph:
    """module -> module it imports (the longest module prefix of each imported name)."""
    mods = package_modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for module, path in mods.items():
        graph.add_node(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                # `from package import module` imports the module.
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            for name in names:
                target = owner(name) if name.startswith("xlarank") else None
                if target and target != module:
                    graph.add_edge(module, target)
    return graph


def unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: xlarank.rank.tuner ->
    xlarank.rank."""
    return ".".join(module.split(".")[:2])


def test_the_graph_reader_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    graph = import_graph()
    # score.py imports the model loader inside a function; the CLI imports lazily too.
    assert graph.has_edge("xlarank.cli.scoring", "xlarank.rank.tuner")
    assert graph.has_edge("xlarank.rank.tuner", "xlarank.rank.strategies")
    assert len(graph) == len(package_modules()) > 100


def test_no_two_modules_import_each_other():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph())
              if len(c) > 1]
    assert cycles == [], f"modules that import each other: {cycles}"


def test_packages_import_one_another_one_way():
    """Collapsed to packages, the graph has no cycle: the packages stand on floors, and
    no import runs back up one."""
    units = nx.DiGraph()
    for a, b in import_graph().edges:
        if unit(a) != unit(b):
            units.add_edge(unit(a), unit(b))
    cycles = [sorted(c) for c in nx.strongly_connected_components(units) if len(c) > 1]
    assert cycles == [], f"packages that import each other: {cycles}"


def test_the_kernels_stand_alone_and_nothing_imports_the_cli():
    graph = import_graph()
    for module in graph:
        if unit(module) == "xlarank.kernels":
            assert {unit(t) for t in graph.successors(module)} <= {"xlarank.kernels"}, module
        elif unit(module) not in ("xlarank.cli", "xlarank.__main__"):
            assert not any(unit(t) == "xlarank.cli" for t in graph.successors(module)), module


# "issue", "issues" or "PR" and a number, with or without "#": a tracker's. ("fixes 2" is
# not one here: a layout fixes positions.)
ISSUE_NUMBER = re.compile(r"\b(?:issues?|pr)\s+#?\d+\b", re.IGNORECASE)


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True,
                            text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / p for p in listed.stdout.split()]


def test_no_issue_numbers_in_code_tests_or_docs():
    """The project names its rules and commits, not its tracker's numbers: a number
    means nothing to a reader without the tracker."""
    found = []
    for path in tracked("src", "tests", "bench/*.py", "docs", "README.md", "Makefile",
                        "features", "models", "corpus/*.toml"):
        if path.suffix not in (".py", ".md", ".toml", "") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if ISSUE_NUMBER.search(line) and "noqa: issue-number" not in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert found == []


@pytest.mark.parametrize("line, holds", [
    ("see issue <n> for why", True), ("(issue #<n>)", True), ("fixes 2 positions", False),
    ("Issues <n> and 4", True), ("PR <n>", True), ("colour #ff0000", False),
    ("xla default #1 (258 distinct)", False), ("step 45 of the issue", False),
    ("https://x.org/a#12", False), ("the fix: 3 ms", False),
])
def test_the_issue_number_pattern(line, holds):
    # <n> stands for a number, so that this file holds no issue number itself.
    assert bool(ISSUE_NUMBER.search(line.replace("<n>", "45"))) == holds
