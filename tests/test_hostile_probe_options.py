"""Option values and files a hostile probe crafted: a --timeout past time_t, work counts
with no maximum (--epochs 1e9), --workers below 1 or past the cores of a Dask local
cluster, feature specs of a repeated family or of graph-level families only, an empty
booster spec, tampered model cards, a missing HOME, and repeated or empty seeds. Each is
refused with one ``error:`` line naming the option or file (an XlarankError from Python),
or handled without a side effect."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import copy_model, one_error_line, run
from xlarank.errors import BadModelError, SpecError, XlarankError
from xlarank.features.spec import load_feature_spec
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec


# 1. --timeout past a week (1e10 overflowed time_t in setitimer: a traceback).
@pytest.mark.parametrize("value", ["1e10", "1e308", "604801", "0", "nan", "inf"])
def test_a_timeout_past_a_week_or_not_above_0_is_one_error_line(tmp_path, value):
    one_error_line(run("measure", tmp_path / "prog.py:f", "--out", tmp_path / "o.pb",
                       "--timeout", value), "--timeout", "604,800")
    one_error_line(run("corpus", tmp_path / "programs.toml", "--out-dir", tmp_path / "c",
                       "--timeout", value), "--timeout")
    assert not (tmp_path / "o.pb").exists() and not (tmp_path / "c").exists()


def test_the_time_limit_takes_a_week_and_refuses_more():
    from xlarank.measure import MAX_TIMEOUT, check_timeout, program_time_limit

    check_timeout(MAX_TIMEOUT)
    with pytest.raises(XlarankError, match="--timeout"), program_time_limit(1e10, "p.py"):
        pass


# 2. Every count that sizes work has a maximum.
@pytest.mark.parametrize("option, value, needle", [("--epochs", 10**9, "1000"),
                                                   ("--configs-per-graph", 10**9, "10000")])
def test_gnn_train_counts_have_a_maximum(tiny_data, tmp_path, option, value, needle):
    one_error_line(run("gnn-train", tiny_data, "--collection", "tile-xla", "--out",
                       tmp_path / "w.npz", option, value), option, needle)
    assert not (tmp_path / "w.npz").exists()


def test_suggest_batch_has_a_maximum(tiny_data, tmp_path):
    graph = next((tiny_data / "npz" / "tile" / "xla" / "train").glob("*.npz"))
    one_error_line(run("suggest", graph, "--out", tmp_path / "s.csv", "--batch", 10**9),
                   "--batch")


def test_measure_counts_have_a_maximum(tmp_path):
    from xlarank.measure import Settings

    for name in ("rounds", "repeats", "warmup"):
        with pytest.raises(XlarankError, match=f"--{name} must lie in .*1000"):
            Settings(**{name: 10**9}).check()
    one_error_line(run("corpus", tmp_path / "programs.toml", "--out-dir", tmp_path / "c",
                       "--retry-rounds", 10**9), "--retry-rounds", "1..1000")


def test_every_ranged_count_option_has_a_maximum():
    """An int option with a minimum and no maximum sizes work without a bound."""
    import typer.main

    from xlarank.cli import app

    group = typer.main.get_command(app)
    unbounded = [(name, param.opts[0]) for name, command in group.commands.items()
                 for param in command.params
                 if getattr(param, "min", None) is not None
                 and getattr(param, "max", None) is None
                 and param.opts[0] not in ("--threads", "--top", "--trials")]
    # --threads: use_threads's MAX_THREADS; --trials: the search's MAX_TRIALS; --top keeps
    # rows, it sizes no work.
    assert unbounded == []


# 3. --workers below 1 is refused; a Dask local cluster has no more than the cores.
@pytest.mark.parametrize("value", ["0", "-1", "1025"])
def test_workers_outside_1_to_1024_is_one_error_line(models, tiny_data, tmp_path, value):
    one_error_line(run("score", tiny_data, "--models", models["tile-xla"], "--out",
                       tmp_path / "s.csv", "--workers", value), "--workers")
    assert not (tmp_path / "s.csv").exists()


def test_the_api_refuses_workers_below_1():
    from xlarank.distributed import engine_client

    for workers in (0, -1, True, 2.0):
        with pytest.raises(XlarankError, match="--workers"), \
                engine_client("local", None, workers):
            pass


def test_a_dask_local_cluster_has_no_more_workers_than_cores(monkeypatch):
    from xlarank import distributed, threads

    made = {}

    class Fake:
        @staticmethod
        def LocalCluster(n_workers, **kwargs):  # noqa: N802 (distributed's name)
            made["n_workers"] = n_workers
            return contextlib.nullcontext("cluster")

        @staticmethod
        def Client(cluster, **kwargs):  # noqa: N802
            return contextlib.nullcontext("client")

    monkeypatch.setattr(distributed, "require_dask", lambda: Fake)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    with distributed.engine_client("dask", None, 8) as client:
        assert client == "client"
    assert made == {"n_workers": 2}


# 4 and 5. Feature specs: a family twice; graph-level families only.
def _feature_spec(tmp_path: Path, families: list[str]) -> Path:
    spec = tmp_path / "f.toml"
    spec.write_text(f"name = \"f\"\nfamilies = {json.dumps(families)}\n")
    return spec


def test_a_feature_family_listed_twice_is_refused(tiny_data, tmp_path):
    spec = _feature_spec(tmp_path, ["graph", "graph", "config_raw"])
    with pytest.raises(SpecError, match=r"f\.toml: feature family 'graph' is listed more"):
        load_feature_spec(spec)
    one_error_line(run("featurize", tiny_data, "--spec", spec, "--collection", "tile-xla",
                       "--split", "train", "--out", tmp_path / "o.parquet"),
                   str(spec), "'graph'")
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("families", [["graph"], ["graph_metrics"],
                                      ["graph", "graph_metrics"]])
def test_a_spec_of_graph_level_families_only_is_refused(tiny_data, tmp_path, families):
    spec = _feature_spec(tmp_path, families)
    with pytest.raises(SpecError, match=r"f\.toml: .*same features.*config_raw"):
        load_feature_spec(spec)
    one_error_line(run("featurize", tiny_data, "--spec", spec, "--collection", "tile-xla",
                       "--split", "train", "--out", tmp_path / "o.parquet"),
                   str(spec), "vary by config")


def test_a_spec_with_a_config_family_is_taken(tmp_path):
    spec = load_feature_spec(_feature_spec(tmp_path, ["graph", "config_raw"]))
    assert spec.families == ("graph", "config_raw")


# 6. An empty booster spec names the missing key, an unknown key is named as a key.
def test_an_empty_booster_spec_names_the_missing_key(tile_frames, tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(SpecError, match=r"empty\.toml: missing key 'features'$"):
        load_ranker_spec(empty)
    line = one_error_line(run("train", tile_frames["default"], "--spec", empty, "--out",
                              tmp_path / "m"), str(empty), "missing key 'features'")
    assert "__init__" not in line and "positional" not in line
    odd = tmp_path / "odd.toml"
    odd.write_text('features = "default"\nrounds = 5\n')
    with pytest.raises(SpecError, match=r"odd\.toml: unknown key 'rounds'; known: name"):
        load_ranker_spec(odd)
    assert not (tmp_path / "m").exists()


# 7. Tampered model cards.
def _tamper(folder: Path, change) -> Path:
    card_file = folder / "card.json"
    card = json.loads(card_file.read_text())
    change(card)
    card_file.write_text(json.dumps(card))
    return card_file


@pytest.mark.parametrize("field, change", [
    ("kind", lambda c: c.update(kind="weird")),
    ("objective", lambda c: c.update(objective="weird")),
    ("features.schema", lambda c: c["features"].update(schema=9)),
    ("features.schema", lambda c: c["features"].pop("schema")),
    ("'k'", lambda c: c["features"].update(k=2.5)),
    ("'k'", lambda c: c["features"].update(k=True)),
    ("families", lambda c: c["features"].update(families=["graph", "graph"])),
])
def test_a_tampered_ranker_card_is_refused(models, tiny_data, tmp_path, field, change):
    folder = copy_model(models, "tile-xla", tmp_path)
    card_file = _tamper(folder, change)
    with pytest.raises(BadModelError, match=field) as caught:
        load_model(folder)
    assert str(card_file) in str(caught.value)
    one_error_line(run("score", tiny_data, "--models", folder, "--out", tmp_path / "s.csv"),
                   str(card_file), field)
    assert not (tmp_path / "s.csv").exists()


def test_a_card_of_an_older_feature_schema_asks_for_retraining(models, tmp_path):
    from xlarank.errors import MismatchError

    folder = copy_model(models, "tile-xla", tmp_path)
    _tamper(folder, lambda c: c["features"].update(schema=1))
    with pytest.raises(MismatchError, match="retrain"):
        load_model(folder)


def test_an_ensemble_card_whose_features_are_not_its_members_is_refused(models, tmp_path):
    layout_features = json.loads((models["layout-xla-default"] / "card.json").read_text())[
        "features"]
    for change in (lambda c: c.update(features=layout_features),
                   lambda c: c["features"].update(names=c["features"]["names"][:10])):
        folder = copy_model(models, "ensemble", tmp_path / str(id(change)))
        _tamper(folder, change)
        with pytest.raises(BadModelError, match=r"card\.json: card field features\."):
            load_model(folder)


def test_an_ensemble_card_of_another_collection_is_refused(models, tmp_path):
    folder = copy_model(models, "ensemble", tmp_path)
    _tamper(folder, lambda c: c.update(collection="layout:xla:default"))
    with pytest.raises(BadModelError, match="different feature specs or collections"):
        load_model(folder)


# 8. A missing HOME is never made.
@pytest.mark.parametrize("variable", ["HOME", "XDG_CACHE_HOME"])
def test_a_missing_home_is_not_made_for_the_numba_cache(tmp_path, variable):
    missing = tmp_path / "gone"
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR",
                                                            "XDG_CACHE_HOME")}
    env[variable] = str(missing / "x") if variable == "XDG_CACHE_HOME" else str(missing)
    out = subprocess.run([sys.executable, "-c", "import xlarank; print(xlarank.NUMBA_CACHE_DIR)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert not missing.exists()
    assert out in ("None", os.path.join(tempfile.gettempdir(), f"xlarank-numba-{os.getuid()}"))


# 9. Seeds: none twice, no empty item, in the API as on the command line.
@pytest.mark.parametrize("seeds", ["1,1", "1,,2", "", "1,", ",", "a"])
def test_train_refuses_repeated_or_empty_seeds(tile_frames, tmp_path, seeds):
    one_error_line(run("train", tile_frames["default"], "--out", tmp_path / "m", "--seeds",
                       seeds), "--seeds")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("seeds", [[1, 1], []])
def test_train_from_specs_refuses_repeated_or_no_seeds(tile_frames, tmp_path, seeds):
    from xlarank import train_from_specs

    with pytest.raises(XlarankError, match="seeds"):
        train_from_specs(tile_frames["default"], [], tmp_path / "m", seeds=seeds)
    assert not (tmp_path / "m").exists()


def test_an_ensemble_spec_of_repeated_seeds_is_refused(tmp_path):
    from xlarank.rank.ensemble import load_training_plan

    (tmp_path / "a.toml").write_text('features = "default"\n')
    spec = tmp_path / "e.toml"
    spec.write_text('kind = "ensemble"\nmembers = ["a.toml"]\nseeds = [1, 1]\n')
    with pytest.raises(SpecError, match=r"e\.toml: seeds: seed 1 is given more than once"):
        load_training_plan(spec)
