"""Commands pay for their work, not for imports: what `import xlarank` and scoring a saved
model pull in, checked in a fresh interpreter against a budget of heavy packages."""

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


def imported_after(code: str) -> set[str]:
    """The HEAVY packages in sys.modules after running ``code`` in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_xlarank_and_its_cli_loads_no_heavy_package():
    assert imported_after("import xlarank, xlarank.cli") == set()


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
