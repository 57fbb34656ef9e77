"""Commands pay for their work, not for imports: what `import xlarank`, scoring a saved
model, `xlarank --help` and each command's start-up (all it imports before its work)
pull in, checked in a fresh interpreter against a budget of packages it must not load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Packages that cost a second or more to import and that neither scoring nor the CLI's
# start-up needs: training imports its booster library, tuning scipy.stats, the systems
# jax.
HEAVY = ("lightgbm", "xgboost", "sklearn", "scipy.stats", "jax", "dask", "distributed",
         "matplotlib", "optuna", "torch")
# What help needs is typer alone: not numpy and Numba (it is measured against `import
# numpy`), nor rich and markdown-it (typer's rich help panels). `xlarank --help` needs no
# pydantic either: typer coerces values with it, from the root's flags on, so a command
# (its --help too) loads it.
HELP_START = (*HEAVY, "numpy", "numba", "pandas", "pyarrow", "scipy", "rich", "markdown_it")
ROOT_HELP_START = (*HELP_START, "pydantic")
# A command's start-up, up to its work: no heavy package, and not scipy.linalg either
# (Numba imports it at its first kernel, which is work).
COMMAND_START = (*HEAVY, "scipy.linalg")


def imported_after(code: str, budget: tuple[str, ...] = HEAVY) -> set[str]:
    """The packages of ``budget`` in sys.modules after running ``code`` in a fresh
    interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {list(budget)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def after_commands(runs: list[list[str]], budget: tuple[str, ...],
                   before: str = "") -> tuple[list[int], set[str]]:
    """Run the CLI (as ``python -m xlarank`` does) with each argument list of ``runs`` in
    turn in one fresh interpreter, after ``before``: their exit codes, and the packages
    of ``budget`` in sys.modules at the end."""
    code = (f"{before}\nfrom xlarank.cli import app\ncodes = []\n"
            f"for args in {runs!r}:\n"
            "    try:\n"
            "        app(args, prog_name='xlarank')\n"
            "    except SystemExit as done:\n"
            "        codes.append(done.code)\n"
            "print(json.dumps(codes))")
    probe = (f"import json, sys\n{code}\n"
             f"print(json.dumps([m for m in {list(budget)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    codes, loaded = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    return codes, set(loaded)


def command_names() -> list[str]:
    import typer.main

    from xlarank.cli import app

    return sorted(typer.main.get_command(app).commands)


def test_importing_xlarank_and_its_cli_loads_no_heavy_package():
    assert imported_after("import xlarank, xlarank.cli", ROOT_HELP_START) == set()


def test_xlarank_help_loads_typer_alone():
    assert after_commands([["--help"]], ROOT_HELP_START) == ([0], set())


def test_every_command_help_loads_typer_alone():
    runs = [[name, "--help"] for name in command_names()]
    assert len(runs) > 10
    assert after_commands(runs, HELP_START) == ([0] * len(runs), set())


@pytest.mark.slow  # a fresh process per command
@pytest.mark.parametrize("command, args, budget", [
    ("score", ["{missing}/in.npz", "--models", "{missing}/models", "--out",
               "{missing}/out.csv"], COMMAND_START),
    ("rank-graph", ["{missing}/in.npz", "--measured", "{missing}/m.csv", "--out",
                    "{missing}/out.csv"], COMMAND_START),
    ("suggest", ["{missing}/in.npz", "--measured", "{missing}/m.csv", "--out",
                 "{missing}/out.csv"], COMMAND_START),
    ("submit", ["{missing}/data", "--models", "{missing}/models", "--out",
                "{missing}/out.csv"], COMMAND_START),
    # featurize writes its frames with pyarrow: pandas is not its start-up's either.
    ("featurize", ["{missing}/in.npz", "--collection", "layout-nlp-default", "--split",
                   "test", "--out", "{missing}/out.parquet"], (*COMMAND_START, "pandas")),
])
def test_a_command_start_up_loads_no_heavy_package(tmp_path, command, args, budget):
    """Inputs that do not exist: the command imports what it needs at its start, then
    refuses them (exit 2) before any work, so what is loaded then is its start-up's."""
    args = [arg.format(missing=tmp_path / "missing") for arg in args]
    assert after_commands([[command, *args]], budget) == ([2], set())


def test_the_command_probe_catches_a_heavy_import():
    codes, loaded = after_commands([["--help"]], ROOT_HELP_START, before="import sklearn")
    assert codes == [0] and loaded >= {"sklearn", "numpy"}


@pytest.mark.slow  # a fresh process per model
@pytest.mark.parametrize("model", ["lightgbm", "xgboost", "ensemble", "tile-xla"])
def test_scoring_a_saved_booster_imports_no_booster_library(models, tiny_data, model):
    from xlarank.data.collections import COLLECTIONS, split_files

    graph = split_files(tiny_data, COLLECTIONS[0], "valid")[0]
    code = (f"from xlarank import load_graph, load_model, ranked_configs\n"
            f"order, score = ranked_configs(load_graph({str(graph)!r}), "
            f"load_model({str(models[model])!r}))\n"
            "assert len(order) > 0")
    assert imported_after(code) == set()


def test_the_budget_catches_a_heavy_import():
    assert imported_after("import sklearn") >= {"sklearn"}
