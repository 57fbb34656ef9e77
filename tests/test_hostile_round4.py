"""Hostile inputs, round four: sizes bounded by the file before anything is allocated
(a tuning record's runs x nodes, a model.npz's inflated arrays), models that would score
wrong refused on load (non-finite leaves, thresholds and weights, an XGBoost base_score
that is not one number, a forest of no trees), every published system's saved files
read as one XlarankError naming the file, and --seed bounded where numpy takes it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import protowrite as pw
from helpers import TILE, one_error_line, run
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import BadModelError, SpecError, XlarankError

LAYOUT = get_collection("layout-xla-default")
SRC = Path(__file__).resolve().parents[1] / "src"


def peak_rise_mb(code: str) -> tuple[str, int]:
    """Run ``code`` in a fresh interpreter: (its last stdout line, how far its peak RSS
    rose in MB while the code ran)."""
    script = ("import resource\n"
              "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              f"{code}\n"
              "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    env = {"PYTHONPATH": str(SRC), **os.environ}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    *lines, rise = done.stdout.strip().splitlines()
    return (lines[-1] if lines else ""), int(rise)


# ---------------------------------------------------------------- 1. sizes before memory

def _crafted_record(nodes: int, runs: int, per_run: int = 0) -> bytes:
    """A ModuleTuningData of ``nodes`` instructions, all named by config_index_to_node,
    and ``runs`` default runs each configuring ``per_run`` nodes: with per_run 0, a few
    bytes a run ask for runs x nodes x 18 floats."""
    insts = [pw.message(pw.instruction(1, "parameter", dims=(8, 8)))]
    insts += [pw.message(pw.instruction(i, "dot", [i - 1, 1], dims=(8, 8)))
              for i in range(2, nodes + 1)]
    comp = b"".join(pw.varint(2 << 3 | 2) + pw.varint(len(i)) + i for i in insts)
    comp = pw.message([(1, "main")]) + comp + pw.message([(5, 1), (6, nodes)])
    module = pw.message([(1, "big"), (3, comp), (6, 1)])
    run_ = pw.message(pw.layout_run([[[1, 0]]] * per_run, 100, default=True))
    packed = b"".join(pw.varint(n) for n in range(nodes))
    return (pw.message([(1, module)])
            + (pw.varint(3 << 3 | 2) + pw.varint(len(run_)) + run_) * runs
            + pw.varint(4 << 3 | 2) + pw.varint(len(packed)) + packed)


def test_a_record_claiming_runs_x_nodes_past_its_size_is_refused_before_allocating(tmp_path):
    """3,000 nodes named and 6,000 runs of no node: 200 KB that made import allocate
    6,000 x 3,000 x 18 floats (1.3 GB) before run 0 was found to configure none."""
    path = tmp_path / "crafted.pb"
    path.write_bytes(_crafted_record(3000, 6000))
    assert path.stat().st_size < 250_000
    code = ("from xlarank.data.xla import read_records\n"
            "from xlarank.errors import XlarankError\n"
            "try:\n"
            f"    read_records({str(path)!r})\n"
            "except XlarankError as exc:\n"
            "    print(exc)\n")
    message, rise_mb = peak_rise_mb(code)
    assert str(path) in message and "run 0 configures 0 nodes" in message, message
    assert rise_mb < 300, f"peak RSS rose {rise_mb} MB refusing a 200 KB record"
    one_error_line(run("import", path, "--out-dir", tmp_path / "out"), str(path),
                   "configures 0 nodes")
    assert not (tmp_path / "out").exists()


def test_a_record_whose_runs_do_configure_its_nodes_still_imports(tmp_path):
    from xlarank.data.xla import read_records

    path = tmp_path / "fine.pb"
    path.write_bytes(_crafted_record(20, 3, per_run=20))
    configs = read_records(path)[0].arrays["node_config_feat"]
    assert configs.shape == (3, 20, 18) and (configs[:, :, :2] == [1, 0]).all()


def _forest_arrays(n_trees: int = 3):
    """A fitted HistGradientBoostingRegressor's forest (NaNs in the inputs, so a split on
    NaNs alone with threshold +inf may appear)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from xlarank.rank.hgb import HgbForest

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    x[rng.random(400) < 0.3, 0] = np.nan
    y = np.isnan(x[:, 0]) + x[:, 1] + rng.normal(scale=0.1, size=400)
    names = ["a", "b", "c"]
    estimator = HistGradientBoostingRegressor(max_iter=n_trees, max_leaf_nodes=7,
                                              early_stopping=False, random_state=0)
    estimator.fit(pd.DataFrame(x, columns=names), y)
    return HgbForest.from_estimator(estimator), x


@pytest.mark.slow  # measures peak memory in a fresh process
def test_a_model_npz_inflating_past_its_size_is_refused_before_inflating(tmp_path):
    """30 million nodes of zeros deflate to 1.7 MB; reading them took 3 GB before the
    structure check refused them."""
    import io
    import zipfile

    from xlarank.rank.hgb import _NODE_ARRAYS

    path = tmp_path / "model.npz"
    n_nodes = 30_000_000
    with zipfile.ZipFile(path, "w") as archive:
        def member(key, array):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{key}.npy"), buffer.getvalue(),
                             compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        member("format", np.array([1], np.int64))
        member("feature_names", np.array(["a", "b"]))
        member("baseline", np.array([0.0]))
        member("starts", np.array([0, n_nodes], np.int64))
        for key, dtype in _NODE_ARRAYS.items():
            member(key, np.zeros(n_nodes, dtype))
    assert path.stat().st_size < 2_000_000
    code = ("from xlarank.rank.hgb import HgbForest\n"
            "from xlarank.errors import BadModelError\n"
            "try:\n"
            f"    HgbForest.load({str(path)!r})\n"
            "except BadModelError as exc:\n"
            "    print(exc)\n")
    message, rise_mb = peak_rise_mb(code)
    assert str(path) in message and "inflate" in message, message
    assert rise_mb < 300, f"peak RSS rose {rise_mb} MB refusing a 1.7 MB model.npz"


# ---------------------------------------------------------------- 2. never scores wrong

@pytest.mark.parametrize("fault, field", [
    ("zero trees", "trees"),
    ("a leaf value inf", "value"),
    ("an inner node value NaN", "value"),
    ("a gain NaN", "gain"),
    ("a threshold -inf", "threshold"),
    ("a threshold NaN", "threshold"),
])
def test_a_model_npz_of_no_trees_or_non_finite_values_is_refused(tmp_path, fault, field):
    from xlarank.rank.hgb import HgbForest

    forest, x = _forest_arrays()
    path = tmp_path / "model.npz"
    forest.save(path)
    np.testing.assert_array_equal(HgbForest.load(path).predict(x), forest.predict(x))
    arrays = {k: v.copy() for k, v in forest.arrays.items()}
    leaf, split = arrays["is_leaf"] == 1, arrays["is_leaf"] == 0
    if fault == "zero trees":
        arrays = {k: v[:0] for k, v in arrays.items()}
        arrays["starts"] = np.zeros(1, np.int64)
    elif fault == "a leaf value inf":
        arrays["value"][np.flatnonzero(leaf)[0]] = np.inf
    elif fault == "an inner node value NaN":
        arrays["value"][np.flatnonzero(split)[0]] = np.nan
    elif fault == "a gain NaN":
        arrays["gain"][np.flatnonzero(split)[0]] = np.nan
    else:
        arrays["threshold"][np.flatnonzero(split)[0]] = (-np.inf if "inf" in fault
                                                         else np.nan)
    HgbForest(forest.feature_names, forest.baseline, arrays).save(path)
    with pytest.raises(BadModelError, match=field) as caught:
        HgbForest.load(path)
    assert str(path) in str(caught.value)


def test_a_split_on_nans_alone_keeps_its_infinite_threshold(tmp_path):
    """scikit-learn writes +inf as the threshold of a split that sends every number left
    and NaNs right: such a model loads."""
    from xlarank.rank.hgb import HgbForest

    forest, x = _forest_arrays(20)
    assert np.isposinf(forest.arrays["threshold"]).any()
    forest.save(tmp_path / "model.npz")
    np.testing.assert_array_equal(HgbForest.load(tmp_path / "model.npz").predict(x),
                                  forest.predict(x))


@pytest.fixture(scope="module")
def library_models(tmp_path_factory):
    """A LightGBM model.txt and an XGBoost model.json as xlarank saves them, trained on
    numbers with NaNs (so LightGBM writes a threshold of inf), and their input."""
    import lightgbm as lgb
    import xgboost as xgb

    from xlarank.rank.boosters import BOOSTERS

    folder = tmp_path_factory.mktemp("library_models")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 3)).astype(np.float32)
    missing = rng.random(600) < 0.5
    x[missing, 0] = np.nan
    y = missing + 0.1 * x[:, 1]
    names = ["a", "b", "c"]
    booster = lgb.train({"objective": "regression", "verbosity": -1, "min_data_in_leaf": 5},
                        lgb.Dataset(x, label=y, feature_name=names), num_boost_round=5)
    BOOSTERS["lightgbm"].save(booster, folder / "model.txt")
    booster = xgb.train({"objective": "reg:squarederror", "max_depth": 3},
                        xgb.DMatrix(x, label=y, feature_names=names), 5)
    BOOSTERS["xgboost"].save(booster, folder / "model.json")
    return folder, x, names


def _edit_first(text: str, prefix: str, value: str) -> str:
    """``text`` with the first value of the first line starting with ``prefix`` replaced."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    key, values = lines[at].split("=", 1)
    lines[at] = key + "=" + " ".join([value, *values.split(" ")[1:]])
    return "\n".join(lines)


@pytest.mark.parametrize("prefix, value", [
    ("leaf_value=", "nan"), ("leaf_value=", "inf"), ("leaf_value=", "-inf"),
    ("threshold=", "nan"), ("threshold=", "-inf"),
])
def test_a_lightgbm_model_with_non_finite_leaves_or_thresholds_is_refused(
        library_models, tmp_path, prefix, value):
    from xlarank.rank.boosters import BOOSTERS

    folder, _, _ = library_models
    text = (folder / "model.txt").read_text()
    path = tmp_path / "model.txt"
    path.write_text(_edit_first(text, prefix, value))
    with pytest.raises(BadModelError, match=prefix.rstrip("=")) as caught:
        BOOSTERS["lightgbm"].load(path)
    assert str(path) in str(caught.value)


def test_a_lightgbm_threshold_of_inf_as_lightgbm_writes_it_loads(library_models):
    from xlarank.rank.boosters import BOOSTERS

    folder, x, names = library_models
    assert "threshold=inf" in (folder / "model.txt").read_text()
    library = BOOSTERS["lightgbm"]
    assert np.isfinite(library.predict(library.load(folder / "model.txt"), x, names,
                                       None)).all()


def _xgboost_with(raw: bytes, change) -> bytes:
    model = json.loads(raw)
    change(model["learner"])
    return json.dumps(model).encode()


def _base_score(value):
    return lambda learner: learner["learner_model_param"].__setitem__("base_score", value)


@pytest.mark.parametrize("fault, field", [
    ("base_score []", "base_score"), ("base_score [1,2,3]", "base_score"),
    ("base_score 1e400", "base_score"), ("base_score nan", "base_score"),
    ("base_score [inf]", "base_score"), ("base_score a number", "base_score"),
    ("base_score missing", "base_score"),
    ("a split condition 1e400", "split_conditions"), ("a leaf weight NaN", "base_weights"),
])
def test_an_xgboost_model_whose_base_score_or_values_are_not_finite_numbers_is_refused(
        library_models, tmp_path, fault, field):
    from xlarank.rank.boosters import BOOSTERS

    folder, _, _ = library_models
    raw = (folder / "model.json").read_bytes()
    if fault == "base_score missing":
        crafted = _xgboost_with(raw, lambda learner: learner["learner_model_param"].pop(
            "base_score"))
    elif fault.startswith("base_score"):
        value = fault.split(" ", 1)[1]
        crafted = _xgboost_with(raw, _base_score(0.5 if value == "a number" else value))
    elif fault == "a split condition 1e400":
        crafted = _xgboost_with(raw, lambda learner: learner["gradient_booster"]["model"][
            "trees"][0]["split_conditions"].__setitem__(0, 1234.5)).replace(b"1234.5",
                                                                             b"1e400")
    else:
        crafted = _xgboost_with(raw, lambda learner: learner["gradient_booster"]["model"][
            "trees"][0]["base_weights"].__setitem__(0, float("nan")))
    path = tmp_path / "model.json"
    path.write_bytes(crafted)
    with pytest.raises(BadModelError, match=field) as caught:
        BOOSTERS["xgboost"].load(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("value", ["[5E-1]", "5E-1", "0.25", "[-1.5E0]"])
def test_an_xgboost_base_score_of_one_number_loads_and_scores_by_it(library_models,
                                                                     tmp_path, value):
    from xlarank.rank.boosters import BOOSTERS

    folder, x, names = library_models
    library = BOOSTERS["xgboost"]
    path = tmp_path / "model.json"
    path.write_bytes(_xgboost_with((folder / "model.json").read_bytes(), _base_score(value)))
    scores = library.predict(library.load(path), x, names, None)
    path.write_bytes(_xgboost_with((folder / "model.json").read_bytes(), _base_score("0")))
    zero = library.predict(library.load(path), x, names, None)
    np.testing.assert_allclose(scores - zero, float(value.strip("[]")), rtol=1e-5)


@pytest.mark.parametrize("family", ["gnn", "gru"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_embedding_weights_with_nan_or_inf_are_refused(tmp_path, family, bad):
    from xlarank.features.embedding import GnnWeights, load_weights, random_weights, save_weights
    from xlarank.features.gru import load_gru_weights, random_gru_weights

    weights = random_weights(0) if family == "gnn" else random_gru_weights(0)
    arrays = {k: v.copy() for k, v in weights.arrays.items()}
    key = sorted(arrays)[1]
    arrays[key].flat[3] = bad
    path = tmp_path / f"{family}.npz"
    save_weights(GnnWeights(arrays), path)
    load = load_weights if family == "gnn" else load_gru_weights
    with pytest.raises(SpecError, match=key) as caught:
        load(str(path))
    assert str(path) in str(caught.value) and "finite" in str(caught.value)


# ---------------------------------------------------------------- 3. saved systems

@pytest.fixture(scope="module")
def saved_systems(tiny_data, tmp_path_factory):
    """Saved systems of each kind, fitted as far as saving needs (start weights, the
    statistics of one graph): "tpugraphs-gnn/tile", ".../layout", "competition-gnn/tile",
    ".../layout", "gru"."""
    pytest.importorskip("jax")
    from xlarank.features.gru import GRU_HIDDEN, random_gru_weights
    from xlarank.systems.competition_gnn import CompetitionGnn
    from xlarank.systems.competition_gnn.system import Scaler, graph_inputs
    from xlarank.systems.gru import GruSystem
    from xlarank.systems.tpugraphs_gnn import TpuGraphsGnn
    from xlarank.systems.tpugraphs_gnn.stats import MinMax, Stats

    folder = tmp_path_factory.mktemp("saved_systems")
    out = {}
    for collection, kind in ((TILE, "tile"), (LAYOUT, "layout")):
        graph = load_graph(split_files(tiny_data, collection, "train")[0], collection)
        configs = (graph.config_feat if kind == "tile"
                   else graph.node_config_feat.reshape(-1, 18))
        node, config = MinMax.empty(140), MinMax.empty(configs.shape[1])
        node.update(graph.node_feat)
        config.update(configs)
        system = TpuGraphsGnn(seed=0)
        system._start(kind, Stats(node, config))
        out[f"tpugraphs-gnn/{kind}"] = folder / f"tpugraphs-{kind}"
        out[f"tpugraphs-gnn/{kind}"].mkdir()
        system.save(out[f"tpugraphs-gnn/{kind}"])
        system = CompetitionGnn(seed=0, hidden=32)
        system._start(kind, "tile:xla" if kind == "tile" else "layout:xla:default",
                      Scaler.fit(graph_inputs(graph).feat),
                      Scaler.fit(graph.config_feat) if kind == "tile" else None)
        out[f"competition-gnn/{kind}"] = folder / f"competition-{kind}"
        out[f"competition-gnn/{kind}"].mkdir()
        system.save(out[f"competition-gnn/{kind}"])
    system = GruSystem(seed=0)
    system.weights_ = random_gru_weights(0)
    system.readout_ = np.random.default_rng(0).normal(size=GRU_HIDDEN)
    out["gru"] = folder / "gru"
    out["gru"].mkdir()
    system.save(out["gru"])
    return out


def _copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "system"
    shutil.copytree(saved, target)
    return target


def _edit_json(path: Path, change) -> None:
    """Apply ``change`` to the JSON in ``path``: in place, or by what it returns."""
    data = json.loads(path.read_text())
    result = change(data)
    path.write_text(json.dumps(data if result is None else result))


def _pop(*keys):
    """A change that deletes d[keys[0]]...[keys[-1]]."""
    def change(d):
        for key in keys[:-1]:
            d = d[key]
        del d[keys[-1]]
    return change


def _edit_npz(path: Path, change) -> None:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    np.savez(path, **arrays)


def _first(prefix: str):
    return lambda arrays: sorted(k for k in arrays if k.startswith(prefix))[0]


def _set(key, value):
    return lambda d: d.__setitem__(key, value)


def _in_resolved(key, value):
    return lambda d: d["resolved"].__setitem__(key, value)


def _reshaped(prefix, shape_of):
    def change(arrays):
        key = _first(prefix)(arrays)
        arrays[key] = shape_of(arrays[key])
    return change


def _nan(prefix):
    def change(arrays):
        key = _first(prefix)(arrays)
        arrays[key] = arrays[key].astype(arrays[key].dtype)
        arrays[key].flat[0] = np.nan
    return change


def _drop(prefix):
    return lambda arrays: arrays.pop(_first(prefix)(arrays))


# (file, change, words of the message[, the file it names if not the one changed]):
# gnn.json or weights.npz of a saved GNN system.
GNN_FAULTS = {
    "kind missing": ("gnn.json", _pop("kind"), "kind"),
    "kind a number": ("gnn.json", _set("kind", 5), "kind"),
    "card a list": ("gnn.json", lambda d: [d], "gnn.json"),
    "resolved a list": ("gnn.json", lambda d: d.__setitem__("resolved", [1, 2]), "resolved"),
    "hidden a string": ("gnn.json", _in_resolved("hidden", "abc"), "hidden"),
    "hidden a bool": ("gnn.json", _in_resolved("hidden", True), "hidden"),
    "hidden of 400 digits": ("gnn.json", _in_resolved("hidden", 10**400), "hidden"),
    # The card and the weights disagree: the weights are named, with the shape each says.
    "hidden another width": ("gnn.json", _in_resolved("hidden", 4096), "shape",
                             "weights.npz"),
    "hidden past any model": ("gnn.json", _in_resolved("hidden", 10**9), "hidden"),
    "weights garbage": ("weights.npz", None, "weights.npz"),
    "a weight missing": ("weights.npz", _drop("param__"), "param__"),
    "a weight of another shape": ("weights.npz", _reshaped("param__", lambda a: a[..., :1]),
                                  "shape"),
    "a weight of an extra dimension": ("weights.npz",
                                       _reshaped("param__", lambda a: a[None]), "shape"),
    "an extra weight": ("weights.npz", lambda a: a.__setitem__("param__post9_b",
                                                               np.zeros(1, np.float32)),
                        "post9_b"),
    "a weight NaN": ("weights.npz", _nan("param__"), "finite"),
    "a weight of strings": ("weights.npz",
                            _reshaped("param__", lambda a: np.full(a.shape, "x")), "param__"),
}
TPUGRAPHS_FAULTS = {
    **GNN_FAULTS,
    "layers missing": ("gnn.json", _pop("resolved", "gnn_layers"), "gnn_layers"),
    "layers past any model": ("gnn.json", _in_resolved("gnn_layers", 10**12), "gnn_layers"),
    "statistics missing": ("weights.npz", _drop("stats__node_low"), "stats__node_low"),
    "statistics of another width": ("weights.npz",
                                    _reshaped("stats__node_high", lambda a: a[:7]), "shape"),
    "statistics NaN": ("weights.npz", _nan("stats__node_low"), "finite"),
}
COMPETITION_FAULTS = {
    **GNN_FAULTS,
    "blocks missing": ("gnn.json", _pop("resolved", "sage_blocks"), "sage_blocks"),
    "blocks past any model": ("gnn.json", _in_resolved("sage_blocks", 10**12), "sage_blocks"),
    "cross attention a number": ("gnn.json", _in_resolved("cross_attention", 1),
                                 "cross_attention"),
    "collection unknown": ("gnn.json", _set("collection", "layout:xla:other"), "collection"),
    "collection of the other kind": ("gnn.json", _set("collection", "layout:xla:default"),
                                     "collection"),
    "scaler missing": ("weights.npz", _drop("scaler__node_scale"), "scaler__node_scale"),
    "scaler NaN": ("weights.npz", _nan("scaler__node_mean"), "finite"),
    "scale zero": ("weights.npz", lambda a: a["scaler__node_scale"].__setitem__(0, 0.0),
                   "scaler__node_scale"),
}


def _damage(folder: Path, name: str, change) -> None:
    path = folder / name
    if change is None:
        path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    elif name.endswith(".json"):
        _edit_json(path, change)
    else:
        _edit_npz(path, change)


@pytest.mark.gnn  # loads saved GNN systems (jax)
@pytest.mark.parametrize("system, faults", [("tpugraphs-gnn", TPUGRAPHS_FAULTS),
                                            ("competition-gnn", COMPETITION_FAULTS)])
def test_every_crafted_file_of_a_saved_gnn_system_is_one_xlarank_error(saved_systems, tiny_data,
                                                                       tmp_path, system,
                                                                       faults):
    """Each crafted gnn.json or weights.npz raises XlarankError naming the file and the
    field (KeyError, TypeError and ValueError came out raw, or the system scored with a
    broadcast weight); the system as saved loads, of either kind, and scores as before."""
    from xlarank.systems import load_system

    graph = load_graph(split_files(tiny_data, TILE, "valid")[0], TILE)
    good = load_system(saved_systems[f"{system}/tile"])
    assert np.isfinite(good.score(graph)).all()
    load_system(saved_systems[f"{system}/layout"])
    for what, (name, change, needle, *named) in faults.items():
        folder = _copy(saved_systems[f"{system}/tile"], tmp_path / what.replace(" ", "_"))
        _damage(folder, name, change)
        with pytest.raises(XlarankError) as caught:
            load_system(folder)
        message = str(caught.value)
        assert str(folder / (named or [name])[0]) in message and needle in message, (
            what, message)


GRU_FAULTS = {
    "readout missing": lambda folder: (folder / "gru_readout.npy").unlink(),
    "readout garbage": lambda folder: (folder / "gru_readout.npy").write_bytes(b"\x00" * 99),
    "readout of strings": lambda folder: np.save(folder / "gru_readout.npy",
                                                 np.array(["a", "b"])),
    "readout of another shape": lambda folder: np.save(folder / "gru_readout.npy",
                                                       np.zeros((8, 2))),
    "readout of another length": lambda folder: np.save(folder / "gru_readout.npy",
                                                        np.zeros(5)),
    "readout NaN": lambda folder: np.save(folder / "gru_readout.npy",
                                          np.full(8, np.nan)),
    "readout claiming a huge shape": lambda folder: (folder / "gru_readout.npy").write_bytes(
        np.lib.format.magic(1, 0) + _npy_header("{'descr': '<f8', 'fortran_order': False, "
                                                "'shape': (100000000000,), }")),
    "weights NaN": lambda folder: _edit_npz(folder / "gru_weights.npz", _nan("head")),
    "a weight missing": lambda folder: _edit_npz(folder / "gru_weights.npz", _drop("head")),
}


def _npy_header(text: str) -> bytes:
    text = text + " " * (-(len(text) + 11) % 64) + "\n"
    return len(text).to_bytes(2, "little") + text.encode()


def test_every_crafted_file_of_a_saved_gru_is_one_xlarank_error(saved_systems, tiny_data,
                                                                tmp_path):
    from xlarank.systems import load_system

    graph = load_graph(split_files(tiny_data, TILE, "valid")[0], TILE)
    good = load_system(saved_systems["gru"])
    assert np.isfinite(good.score(graph)).all()
    layout = load_graph(split_files(tiny_data, LAYOUT, "valid")[0], LAYOUT)
    with pytest.raises(XlarankError, match="tile"):
        good.score(layout)
    for what, damage in GRU_FAULTS.items():
        folder = _copy(saved_systems["gru"], tmp_path / what.replace(" ", "_"))
        damage(folder)
        with pytest.raises(XlarankError) as caught:
            load_system(folder)
        name = "gru_weights.npz" if what.startswith(("weights", "a weight")) \
            else "gru_readout.npy"
        assert str(folder / name) in str(caught.value), (what, str(caught.value))


@pytest.mark.filterwarnings("ignore:.*teach the ranker nothing")
def test_a_hybrid_with_nan_gnn_weights_is_refused_on_load(tiny_data, tmp_path):
    """Weights of NaN beside a card rewritten to their hash (whoever hands over the
    folder writes both): refused by load_system, not turned into NaN columns that the
    trees read as missing values."""
    from xlarank.features.embedding import GnnWeights, random_weights, save_weights
    from xlarank.features.spec import FeatureSpec
    from xlarank.rank.ranker import CARD_FILE
    from xlarank.systems import load_system
    from xlarank.systems.hybrid import MODEL_DIR, WEIGHTS_FILE, HybridSystem

    system = HybridSystem(seed=0)
    work = system._workdir()
    files = split_files(tiny_data, TILE, "train")
    system._across(files, TILE, random_weights(0), work / WEIGHTS_FILE)
    out = tmp_path / "hybrid"
    out.mkdir()
    system.save(out)
    graph = load_graph(split_files(tiny_data, TILE, "valid")[0], TILE)
    assert np.isfinite(load_system(out).score(graph)).all()
    arrays = {k: v.copy() for k, v in random_weights(0).arrays.items()}
    arrays["head"][0, 0] = np.nan
    weights = out / MODEL_DIR / WEIGHTS_FILE
    save_weights(GnnWeights(arrays), weights)
    card = json.loads((out / MODEL_DIR / CARD_FILE).read_text())
    features = card["features"]
    rehashed = FeatureSpec.from_dict({**features, "gnn": str(weights)}).hash
    card["features"] = {**features, "hash": rehashed}
    (out / MODEL_DIR / CARD_FILE).write_text(json.dumps(card))
    with pytest.raises(XlarankError, match="finite") as caught:
        load_system(out)
    assert str(weights) in str(caught.value)


# ---------------------------------------------------------------- 4. seeds

def test_tune_seed_past_numpy_s_range_is_one_error_line(tile_frames, repo_specs, tmp_path):
    frame = tile_frames["default"]
    for seed in ("4294967296", "2147483648", "18446744073709551616"):
        result = run("tune", frame, frame, "--spec", repo_specs.models("tile-xla"), "--out",
                     tmp_path / "t.toml", "--trials", "2", "--seed", seed)
        one_error_line(result, "--seed", "0..2147483647")
    assert not (tmp_path / "t.toml").exists()


# ---------------------------------------------------------------- 5. round five's probe
# Found by a fresh probe of import, frames, models, option values and the environment:
# each a memory blow-up, a traceback, a near hang or a silent wrong reading before.

def _npz_with(source: Path, target: Path, **arrays) -> Path:
    """``source``'s arrays with some replaced, written deflated (np.savez_compressed)."""
    merged = dict(np.load(source))
    merged.update(arrays)
    np.savez_compressed(target, **merged)
    return target


def test_an_edge_index_claiming_more_edges_than_any_graph_is_refused_before_inflating(
        tiny_data, tmp_path):
    """5 million edges of zeros for a graph of a few nodes deflate to 80 KB; the reader
    inflated all of them (50 million took 2.6 GB) to find the first a self-loop. The
    edge count against the node count, from the headers, refuses it first."""
    source = split_files(tiny_data, TILE, "test")[0]
    bomb = tmp_path / "npz/tile/xla/test/bomb.npz"
    bomb.parent.mkdir(parents=True)
    _npz_with(source, bomb, edge_index=np.zeros((5_000_000, 2), np.int64))
    assert bomb.stat().st_size < 1_000_000
    line, rise = peak_rise_mb(
        "from xlarank.data.graph import load_graph\n"
        "from xlarank.errors import BadGraphError\n"
        f"try:\n    load_graph({str(bomb)!r})\n"
        "except BadGraphError as exc:\n    print(exc)\n")
    assert "edge_index: 5,000,000 edges for" in line and "real graphs have under 2" in line, line
    assert rise < 40, f"peak memory rose {rise} MB"
    # A real graph's edges, and as many as the bound allows, still load.
    n = len(np.load(source)["node_opcode"])
    chain = np.array([[u, u - 1] for u in range(1, n)] * 100, dtype=np.int64)
    assert len(load_graph(_npz_with(source, bomb, edge_index=chain), TILE).edge_index) \
        == len(chain)


def _tile_record_of(kernel_copies: int) -> bytes:
    """The samples' tile record with its first kernel repeated ``kernel_copies`` times."""
    from conftest import SAMPLES

    source = SAMPLES / "raw" / "op_tuning_data.pb"
    if not source.is_file():
        pytest.skip("no tile tuning record in the samples")
    pairs = pw.parse(source.read_bytes())
    return pw.message(pairs[:1] * kernel_copies)


def test_a_tile_record_repeating_one_kernel_is_refused_at_the_first_repeat(tmp_path,
                                                                          monkeypatch):
    """3,000 copies of one kernel (12 MB) were all encoded, 21 s, before the duplicate
    names were noticed; now the second copy stops the read."""
    from xlarank.data.xla import read_records, records

    path = tmp_path / "t.pb"
    path.write_bytes(_tile_record_of(300))
    encoded = []
    real = records.encode_module
    monkeypatch.setattr(records, "encode_module",
                        lambda *a, **k: encoded.append(1) or real(*a, **k))
    with pytest.raises(XlarankError, match="two kernels share a name and fingerprint"):
        read_records(path, drop_failed_runs=True)
    assert len(encoded) == 2


def test_tune_trials_past_any_search_and_a_time_limit_of_nan_or_negative_are_refused(
        tile_frames, spec_dir, tmp_path):
    """--trials 10**12 drew every trial's parameters up front (MemoryError, a
    traceback); --max-minutes nan never stopped the search by time and -1 stopped it
    after one trial: both ran on silently."""
    frame = tile_frames["default"]
    base = ["tune", frame, frame, "--spec", spec_dir / "lgbm.toml", "--out", tmp_path / "t.toml"]
    one_error_line(run(*base, "--trials", str(10**12)), "--trials", "1..100,000")
    for minutes in ("nan", "-1"):
        one_error_line(run(*base, "--trials", "1", "--max-minutes", minutes),
                       "--max-minutes", ">= 0")
    assert not (tmp_path / "t.toml").exists()


def test_tune_draws_its_trials_as_it_runs():
    """The search's draws are lazy: a budget far past the time limit costs nothing."""
    import inspect

    from xlarank.rank import search

    assert "list(ParameterSampler" not in inspect.getsource(search.tune_spec)
    assert search.MAX_TRIALS == 100_000


def test_local_workers_are_never_more_than_the_items_or_the_cores(monkeypatch):
    """--workers 1000000 started a process per file (60 for the tiny synth preset, 40
    times as slow as one)."""
    from xlarank import engine, threads

    monkeypatch.setattr(threads, "available_cores", lambda: 3)
    try:
        assert list(engine.map_ordered(abs, [-1, -2, -3, -4, -5], workers=10**6)) == \
            [1, 2, 3, 4, 5]
        assert engine._pool._max_workers == 3
        assert list(engine.map_ordered(abs, [-1, -2], workers=10**6)) == [1, 2]
        assert engine._pool._max_workers == 2
    finally:
        engine.shutdown_pool()


# ---------------------------------------------------------------- 6. the environment
# Unit checks of what tests/test_env_contract.py runs end to end.

@pytest.mark.parametrize("name, value, needle", [
    ("NUMBA_NUM_THREADS", "0", "1..1024"), ("NUMBA_NUM_THREADS", "9" * 30, "1..1024"),
    ("NUMBA_NUM_THREADS", "abc", "whole number"), ("NUMBA_NUM_THREADS", "٣", "whole number"),
    ("OMP_NUM_THREADS", "2,0", "1..1024"), ("OMP_NUM_THREADS", "-3", "whole number"),
    ("OMP_WAIT_POLICY", "sometimes", "active, passive"),
    ("NUMBA_THREADING_LAYER", "fast", "workqueue")])
def test_an_invalid_thread_variable_is_taken_out_and_named(name, value, needle):
    from xlarank.threads import screen_environment

    environ = {name: value, "OTHER": "kept"}
    found = screen_environment(environ)
    assert environ == {"OTHER": "kept"} and list(found) == [name]
    assert found[name].startswith(f"{name}={value!r}") and needle in found[name]


@pytest.mark.parametrize("name, value", [
    ("NUMBA_NUM_THREADS", "4"), ("OMP_NUM_THREADS", "4,2"), ("OMP_WAIT_POLICY", "PASSIVE"),
    ("NUMBA_THREADING_LAYER", "workqueue"), ("OMP_NUM_THREADS", "")])
def test_a_valid_or_empty_thread_variable_is_kept_or_dropped_silently(name, value):
    from xlarank.threads import screen_environment

    environ = {name: value}
    assert screen_environment(environ) == {}
    assert environ == ({name: value} if value else {})


def test_use_threads_refuses_a_thread_variable_the_screen_took_out(monkeypatch):
    from xlarank import environment, threads

    monkeypatch.setattr(environment, "_refused", {})
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")
    with pytest.raises(XlarankError, match="OMP_NUM_THREADS='lots'"):
        threads.use_threads(1)
    assert "OMP_NUM_THREADS" not in os.environ


@pytest.mark.parametrize("value, on", [("", True), ("1", True), (" Yes ", True), ("off", False),
                                       ("0", False)])
def test_the_load_backoff_reads_on_and_off(monkeypatch, value, on):
    from xlarank.threads import LOAD_ENV, load_backoff_enabled

    monkeypatch.setenv(LOAD_ENV, value)
    assert load_backoff_enabled() is on


@pytest.mark.parametrize("value", ["2", "maybe", "-1", "/etc/passwd"])
def test_the_load_backoff_refuses_anything_else_naming_it(monkeypatch, value):
    """Anything but 0/no/false/off read as on, silently."""
    from xlarank.threads import LOAD_ENV, load_backoff_enabled

    monkeypatch.setenv(LOAD_ENV, value)
    with pytest.raises(XlarankError, match=LOAD_ENV):
        load_backoff_enabled()


def test_makeflags_with_a_job_count_of_thousands_of_digits_means_unlimited():
    """int() refuses past 4,300 digits: a ValueError traceback from every command."""
    from xlarank.threads import available_cores, make_jobs

    assert make_jobs("-j" + "9" * 5000) == available_cores()
    assert make_jobs("-j12 -l") == 12


def test_a_relative_xdg_runtime_dir_is_ignored(monkeypatch, tmp_path):
    """XDG_RUNTIME_DIR=abc put the pid folder in the working folder (the XDG spec says a
    relative path is to be ignored)."""
    from xlarank.threads import _job_folders

    monkeypatch.setenv("XDG_RUNTIME_DIR", "abc")
    assert all(folder.is_absolute() for folder in _job_folders())
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert _job_folders()[0].parent == tmp_path


@pytest.mark.parametrize("name, value, needle", [
    ("XLA_FLAGS", "abc", "XLA_FLAGS='abc'"), ("XLA_FLAGS", "--a=1 0", "--name=value"),
    ("JAX_ENABLE_X64", "maybe", "JAX_ENABLE_X64='maybe'")])
def test_require_jax_refuses_what_would_abort_or_raise_in_jax(name, value, needle):
    """XLA aborts the process (no Python error) on XLA_FLAGS not made of --flags; jax
    raises a bare ValueError at import on a truth value it cannot read. Checked in a
    fresh interpreter: jax reads them once, when it starts."""
    pytest.importorskip("jax")
    code = ("from xlarank.compat import require_jax\n"
            "from xlarank.errors import XlarankError\n"
            "try:\n    require_jax()\nexcept XlarankError as exc:\n    print(exc)\n")
    env = {**os.environ, "PYTHONPATH": str(SRC), name: value}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and needle in done.stdout, (done.stdout, done.stderr[-2000:])
