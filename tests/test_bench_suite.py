"""bench/ as one harness: every bench declared once (bench/benches.py), run by one runner
(bench/run.py, which the Makefile calls instead of listing commands), rendered by one
renderer per bench (bench/render/); the scripts share library modules and never import
each other; no file of bench/ grows past 600 lines; and the page is what they render."""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
try:
    import benches
    import publish
    import run
    from render import RENDERERS
finally:
    sys.path.remove(str(BENCH))

MOST_LINES = 600
# The scripts that are not benches: the runner and the page's driver.
DRIVERS = {"run", "publish"}


def script_of(command: str) -> str:
    """The module name of the bench script a declared command runs."""
    argv = shlex.split(command)
    assert argv[0] == "python" and re.fullmatch(r"bench/\w+\.py", argv[1]), command
    return Path(argv[1]).stem


def scripts() -> set[str]:
    return {script_of(b.command) for b in benches.BENCHES.values()} | DRIVERS


def imported(path: Path) -> set[str]:
    """The top-level names of the modules a file imports, anywhere in it (absolute
    imports; relative ones stay inside their package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_declared_bench_has_a_renderer_and_every_renderer_a_bench():
    assert set(benches.BENCHES) == set(RENDERERS)
    assert publish.BENCHES is benches.BENCHES and publish.RENDERERS is RENDERERS
    assert len(benches.BENCHES) == len(benches._BENCHES), "a bench declared twice"


def test_every_declaration_is_whole_and_runs_a_script_that_exists():
    for bench in benches.BENCHES.values():
        assert bench.title and bench.description, bench.name
        assert (BENCH / f"{script_of(bench.command)}.py").is_file(), bench.command
        assert f"--out bench/results/{bench.name}.json" in bench.command, bench.name
        assert bench.target in (*benches.TARGETS, None), bench.name
        assert all(isinstance(p, str) and p for p in bench.needs), bench.name
    # make bench runs every bench but the full-size one, the fresh-clone set-up and the
    # earlier runs kept on the page.
    assert "full" not in {b.name for b in benches.of_target("bench")}
    assert [b.name for b in benches.of_target("bench-full")] == ["full"]
    assert [b.name for b in benches.of_target("bench-setup")] == ["setup"]


def test_each_published_record_was_made_by_its_declared_script():
    """The published command may differ in its arguments (a rerun's --partial, more
    seeds; the page shows the record's own), never in the script."""
    for name, bench in benches.BENCHES.items():
        path = BENCH / "published" / f"{name}.json"
        if path.exists():
            command = json.loads(path.read_text())["provenance"]["command"]
            assert script_of(command) == script_of(bench.command), name


def test_the_makefile_runs_benches_through_the_runner_alone():
    text = (ROOT / "Makefile").read_text()
    recipes = [line for line in text.splitlines() if line.startswith("\t")]
    for line in recipes:
        for script in re.findall(r"bench/(\w+)\.py", line):
            # The real-scale layout graph is data `make bench` makes first, not a bench.
            assert script in DRIVERS or "--make-graph" in line, (
                f"the Makefile runs a bench itself, not through bench/run.py: {line.strip()}")
    bench = text[text.index("\nbench:"):]
    bench = bench[:bench.index("\n\n")]
    assert "bench/run.py --target bench" in bench
    for target in ("bench-setup", "bench-full"):
        rule = text[text.index(f"\n{target}:"):]
        assert f"bench/run.py --target {target}" in rule[:rule.index("\n\n")], target


def test_no_bench_script_imports_another_script():
    """Scripts import the library modules beside them (provenance, harness, crossgraph,
    ...), xlarank and third-party packages; nothing in bench/ imports a script."""
    names = scripts()
    assert {"systems", "ingraph", "autotune", "corpus"} <= names
    found = []
    for path in sorted(BENCH.rglob("*.py")):
        mine = path.stem if path.parent == BENCH else None
        for name in sorted((imported(path) & names) - {mine}):
            found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []


def test_no_file_of_bench_exceeds_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted(BENCH.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MOST_LINES}
    assert long == {}


def test_the_rendered_page_is_docs_benchmarks_md():
    page = publish.render(BENCH / "published")
    assert (ROOT / "docs" / "benchmarks.md").read_text() == page


def test_the_runner_runs_each_declared_command_with_this_interpreter(capsys):
    bench = benches.BENCHES["full"]
    argv = run.argv_of(bench, {"preset": "small"})
    assert argv[0] == sys.executable
    assert argv[1:] == ["bench/full.py", "--preset", "small", "--out",
                        "bench/results/full.json"]
    with pytest.raises(ValueError, match="no --seeds"):
        run.argv_of(bench, {"seeds": "2"})
    assert [b.name for b in run.selected("bench", None)] == [
        b.name for b in benches.BENCHES.values() if b.target == "bench"]
    assert [b.name for b in run.selected(None, ["corpus", "setup"])] == ["setup", "corpus"]
    with pytest.raises(ValueError, match="no such bench"):
        run.selected(None, ["nope"])
    assert run.main(["--list", "--target", "all"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{name} [" in listed for name in benches.BENCHES)
    assert run.main(["--list", "--only", "ingraph_timing"]) == 0
    assert "python bench/ingraph.py --timing-only --before 'd9fd505^'" in capsys.readouterr().out
