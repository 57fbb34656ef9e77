"""Hostile probes of the public API: strategy settings bounded, graphs whose headers claim
more nodes or configs than the format allows refused before anything is allocated, the
raw config columns bounded, a model of one score warned about by train, tuner seeds kept
to the boosters' range, and wrong-typed arguments to every public callable refused as an
XlarankError."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest

import xlarank
import xlarank.data.graph as graph_module
from helpers import TILE, npz_arrays, one_error_line, run
from xlarank.data.collections import get_collection
from xlarank.data.distinct import config_columns
from xlarank.data.graph import MAX_CONFIGS, MAX_NODES, load_graph
from xlarank.errors import BadGraphError, XlarankError
from xlarank.rank.strategies import (
    STRATEGIES,
    AutotvmStrategy,
    BoosterStrategy,
    TpeStrategy,
    make_strategy,
)
from xlarank.seeds import MAX_BOOSTER_SEED

LAYOUT = get_collection("layout-xla-random")


# ---------------------------------------------------------------- 1. strategy settings

@pytest.mark.parametrize("name, option, value", [
    ("booster", "bootstraps", "100000000"), ("booster", "kappa", "1e9"),
    ("booster", "diversity", "1e9"), ("autotvm", "rounds", "1000000000"),
    ("autotvm", "depth", "1000"), ("autotvm", "learning_rate", "50"),
    ("tpe", "startup", "1000000000")])
def test_numeric_strategy_options_have_an_upper_bound(tmp_path, tile_file, name, option,
                                                      value):
    with pytest.raises(XlarankError, match=f"{option}=.* outside its range; {option} is a"):
        make_strategy(name, {option: value})
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,100\n1,300\n2,200\n")
    result = run("suggest", tile_file, "--measured", csv, "--out", tmp_path / "o.csv",
                 "--strategy", name, "--strategy-option", f"{option}={value}")
    one_error_line(result, option, "range")
    assert not (tmp_path / "o.csv").exists()


def test_every_numeric_setting_has_a_documented_range():
    for cls in STRATEGIES.values():
        numeric = {f.name for f in __import__("dataclasses").fields(cls)
                   if isinstance(f.default, int | float) and not isinstance(f.default, bool)}
        assert numeric == set(cls.SETTING_RANGES), cls
    assert BoosterStrategy(bootstraps=64).bootstraps == 64
    assert AutotvmStrategy(rounds=10_000, learning_rate=1.0).rounds == 10_000
    assert TpeStrategy(startup=10_000).startup == 10_000


# ---------------------------------------------------------------- 2. rank-graph memory

def test_rank_graph_refuses_a_config_tensor_past_the_in_memory_limit(tmp_path, layout_file,
                                                                     monkeypatch):
    graph = load_graph(layout_file, configs=False)
    nbytes = graph.n_configs * graph.n_configurable * 18 * 4
    monkeypatch.setattr(graph_module, "MAX_IN_MEMORY_CONFIG_BYTES", nbytes - 1)
    with pytest.raises(BadGraphError, match="GiB as float32, more than"):
        config_columns(graph)
    with pytest.raises(BadGraphError, match=str(layout_file)):
        load_graph(layout_file)
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,100\n1,300\n2,200\n")
    result = run("rank-graph", layout_file, "--measured", csv, "--out", tmp_path / "o.csv")
    one_error_line(result, str(layout_file), "node_config_feat")
    assert not (tmp_path / "o.csv").exists()
    monkeypatch.setattr(graph_module, "MAX_IN_MEMORY_CONFIG_BYTES", nbytes)
    assert config_columns(graph).shape == (graph.n_configs, graph.n_configurable * 18)


# ---------------------------------------------------------------- 6. counts by the format

def test_a_small_file_claiming_too_many_configs_is_refused_before_allocating(tmp_path,
                                                                             layout_file):
    """3 million configs of one configurable node: 216 MB of deflated zeros in a file of a
    few hundred KB, whose shapes all agree."""
    arrays = npz_arrays(layout_file)
    c = MAX_CONFIGS * 3
    arrays["node_config_ids"] = arrays["node_config_ids"][:1]
    arrays["node_config_feat"] = np.zeros((c, 1, 18), np.float32)
    arrays["config_runtime"] = np.zeros(c, np.int64)
    path = tmp_path / "claims.npz"
    np.savez_compressed(path, **arrays)
    del arrays
    assert path.stat().st_size < 2_000_000
    for configs in (True, False):
        with pytest.raises(BadGraphError, match="3,000,000 configs, more than"):
            load_graph(path, configs=configs)
    result = run("rank-graph", path, "--measured", tmp_path / "none.csv",
                 "--out", tmp_path / "o.csv")
    assert result.exit_code == 2


def test_a_header_claiming_too_many_nodes_is_refused(tmp_path, tile_file, monkeypatch):
    arrays = npz_arrays(tile_file)
    n = len(arrays["node_opcode"])
    monkeypatch.setattr(graph_module, "MAX_NODES", n - 1)
    with pytest.raises(BadGraphError, match=f"{n:,} nodes, more than"):
        load_graph(tile_file)
    assert MAX_NODES >= 1_000_000


# ---------------------------------------------------------------- 3. train warns

def test_train_warns_when_the_spec_leaves_the_model_one_score(tmp_path, tile_frames,
                                                             spec_dir):
    spec = tmp_path / "absurd.toml"
    spec.write_text((spec_dir / "lgbm.toml").read_text().replace(
        "min_data_in_leaf = 5", "min_data_in_leaf = 1000000000"))
    frame = tile_frames["default"]
    result = run("train", frame, "--out", tmp_path / "model", "--spec", spec,
                 "--threads", "1")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "one score" in result.stderr, result.stderr


# ---------------------------------------------------------------- 4. tuner seeds

@pytest.mark.parametrize("seed", [2**64, MAX_BOOSTER_SEED + 1, -1])
def test_the_tuner_keeps_seeds_to_the_boosters_range(tile_file, seed):
    with pytest.raises(XlarankError, match=f"seed {seed}"):
        xlarank.Tuner(tile_file, seed=seed)


def test_the_largest_booster_seed_makes_a_tuner(tile_file):
    assert xlarank.Tuner(tile_file, seed=MAX_BOOSTER_SEED).seed == MAX_BOOSTER_SEED


# ---------------------------------------------------------------- 5. wrong-typed arguments

WRONG = [None, 2.5, [1], object()]
# Every public callable, and the calls of it with wrong-typed arguments (``bad`` stands
# for each of WRONG). None: not a function of user input (an abstract class, a dataclass
# of arrays, an exception class), said why.
CALLS = {
    "load_graph": lambda bad: xlarank.load_graph(bad),
    "import_records": lambda bad: xlarank.import_records(bad, "out"),
    "get_collection": lambda bad: xlarank.get_collection(bad),
    "featurize_files": lambda bad: xlarank.featurize_files(bad, "f.parquet", TILE, None,
                                                           None),
    "train_from_specs": lambda bad: xlarank.train_from_specs(bad, [], "out"),
    "load_model": lambda bad: xlarank.load_model(bad),
    "graph_headline": lambda bad: xlarank.graph_headline(bad, [1.0]),
    "in_graph_split": lambda bad: xlarank.in_graph_split(bad, 0.5, 0),
    "rank_graph": lambda bad: xlarank.rank_graph(bad, {"config_index": [0]}),
    "Tuner": lambda bad: xlarank.Tuner(bad),
    "make_strategy": lambda bad: make_strategy("booster", bad if bad is not None else [1]),
    "BoosterStrategy": lambda bad: xlarank.BoosterStrategy(bootstraps=bad),
    "AutotvmStrategy": lambda bad: xlarank.AutotvmStrategy(rounds=bad),
    "TpeStrategy": lambda bad: xlarank.TpeStrategy(startup=bad),
    "featurize_graph": lambda bad: xlarank.featurize_graph(bad, None),
    "load_feature_spec": lambda bad: xlarank.load_feature_spec(bad),
    "ranked_configs": lambda bad: xlarank.ranked_configs(bad, None),
    "score_files": lambda bad: xlarank.score_files(bad, "m", "o.csv"),
    "evaluate_model": lambda bad: xlarank.evaluate_model(bad, "f"),
    "get_system": lambda bad: xlarank.get_system(bad),
    "load_system": lambda bad: xlarank.load_system(bad),
    "rank_graph_with": lambda bad: xlarank.rank_graph_with(bad, "g", {}),
    "fit_by_cross_validation": lambda bad: xlarank.fit_by_cross_validation(bad, "f", None),
    # No settings to take, or no function of user input.
    "RandomStrategy": None, "GreedyStrategy": None, "TunerStrategy": None,
    "RankingSystem": None, "TileGraph": None, "LayoutGraph": None,
}


def _public_callables() -> list[str]:
    names = []
    for name in xlarank.__all__:
        value = getattr(xlarank, name)
        if not callable(value) or (isinstance(value, type)
                                   and issubclass(value, BaseException)):
            continue
        names.append(name)
    return names


def test_every_public_callable_has_an_entry():
    missing = set(_public_callables()) - set(CALLS)
    assert not missing, f"add wrong-typed calls of {sorted(missing)} to CALLS"


@pytest.mark.parametrize("name", sorted(n for n, c in CALLS.items() if callable(c)))
def test_wrong_typed_arguments_are_an_xlarank_error(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for bad in WRONG:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                CALLS[name](bad)
            except XlarankError:
                continue
            except TypeError as exc:
                # Python's own argument binding (the arity) is acceptable.
                assert "positional argument" in str(exc) or "keyword argument" in str(exc), (
                    name, bad, exc)
                continue
        pytest.fail(f"{name}({bad!r}) raised nothing")


def test_tuner_methods_refuse_wrong_types(tile_file):
    tuner = xlarank.Tuner(tile_file, seed=0)
    for bad in (2.5, None, "4", [1]):
        with pytest.raises(XlarankError, match="batch size"):
            tuner.ask(bad)
    with pytest.raises(XlarankError, match="measured"):
        tuner.tell_table([1, 2])
    with pytest.raises(XlarankError):
        tuner.with_seed(2.5)
    # Still a TypeError, as Python's own is, for callers that catch that.
    with pytest.raises(TypeError):
        tuner.ask(2.5)
    assert isinstance(pd.DataFrame(), pd.DataFrame) and inspect.isclass(xlarank.Tuner)


@pytest.mark.parametrize("threads", [-1, 1025, 100_000, 10**9])
def test_api_thread_counts_are_the_clis(tile_file, tmp_path, threads):
    # libgomp segfaulted or ran out of memory on 100,000 threads asked from Python.
    with pytest.raises(XlarankError, match="threads"):
        xlarank.Tuner(tile_file, seed=0, threads=threads)
    with pytest.raises(XlarankError, match="threads"):
        xlarank.rank_graph_with("xlarank", tile_file,
                                {"config_index": [0, 1], "runtime": [1.0, 2.0]},
                                threads=threads)
    with pytest.raises(XlarankError, match="threads"):
        xlarank.train_from_specs(tmp_path / "f.parquet", ["tile-xla"], tmp_path / "m",
                                 threads=threads)
