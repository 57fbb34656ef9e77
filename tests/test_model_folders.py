"""Model folders as a surface: nothing in a folder runs code, a crafted booster
file gives one error line (never a signal), score loads only what its input needs, cards
say where their training data came from, seeds stay in range, saved systems refuse what
they cannot read."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import re
import shutil
import stat
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import small
from helpers import (
    TILE,
    copy_model,
    one_error_line,
    run,
)
from xlarank.atomic import (
    _umask,
)
from xlarank.data.collections import get_collection, split_files
from xlarank.errors import (
    BadModelError,
    XlarankError,
)
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame
from xlarank.rank.model import load_model
from xlarank.rank.ranker import CARD_FILE, file_sha256
from xlarank.rank.spec import RankerSpec
from xlarank.rank.train import train_ranker


def rewrite_booster(model: Path, raw: bytes, name: str | None = None) -> Path:
    """Replace a model's booster file with ``raw`` and put its sha256 in the card, as
    whoever hands over a folder can: the checksum then protects nothing."""
    card = json.loads((model / CARD_FILE).read_text())
    name = name or card["model_file"]
    (model / name).write_bytes(raw)
    card.update(model_file=name, model_sha256=file_sha256(model / name))
    (model / CARD_FILE).write_text(json.dumps(card))
    return model / name


@pytest.fixture(scope="module")
def tile_frame(tiny_data, repo_specs, tmp_path_factory):
    path = tmp_path_factory.mktemp("folders_frame") / "train.parquet"
    featurize_files(split_files(tiny_data, TILE, "train"), path, TILE, "train",
                    load_feature_spec(repo_specs.features("default")))
    return path


@pytest.fixture(scope="module")
def trained(tile_frame, tmp_path_factory):
    """Saved tile rankers of each library: {"lightgbm": dir, "xgboost": dir, "sklearn": dir}."""
    table, meta = read_frame(tile_frame)
    folder = tmp_path_factory.mktemp("folders_models")
    specs = {"lightgbm": RankerSpec(name="lgbm", features="default"),
             "xgboost": RankerSpec(name="xgb", features="default", library="xgboost",
                                   objective="rank:ndcg"),
             "sklearn": RankerSpec(name="hgb", features="default", library="sklearn",
                                   objective="squared_error")}
    return {key: train_ranker(table, meta, small(spec, rounds=8)).save(folder / key)
            for key, spec in specs.items()}


def copy(trained, kind: str, tmp_path: Path) -> Path:
    target = tmp_path / kind
    shutil.copytree(trained[kind], target)
    return target


# ---------------------------------------------------------------- 1. no code runs

class _Payload:
    """Unpickling this creates ``marker``: the proof that a pickle ran code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_sklearn_models_are_plain_arrays_and_score_as_the_estimator_does(trained,
                                                                         tile_frame):
    """The saved file is an npz of numbers and names (no pickle anywhere in it), and the
    trees walked by xlarank give scikit-learn's own scores to the bit, at every number of
    rounds, NaNs included."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from xlarank.rank.hgb import HgbForest

    model = trained["sklearn"]
    assert sorted(p.name for p in model.iterdir()) == [CARD_FILE, "model.npz"]
    with np.load(model / "model.npz", allow_pickle=False) as npz:
        assert all(npz[k].dtype.kind in "iufU" for k in npz.files)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 5))
    x[rng.random(x.shape) < 0.1] = np.nan
    y = np.nan_to_num(x[:, 0]) - 2 * np.nan_to_num(x[:, 1]) ** 2 + rng.normal(size=600)
    names = [f"f{i}" for i in range(5)]
    estimator = HistGradientBoostingRegressor(max_iter=20, max_leaf_nodes=9,
                                              early_stopping=False, random_state=0)
    estimator.fit(pd.DataFrame(x, columns=names), y)
    forest = HgbForest.from_estimator(estimator)
    frame = pd.DataFrame(x, columns=names)
    np.testing.assert_array_equal(forest.predict(x), estimator.predict(frame))
    for rounds, staged in enumerate(estimator.staged_predict(frame), start=1):
        if rounds in (1, 7, 20):
            np.testing.assert_array_equal(forest.predict(x, rounds), staged)
    path = model.parent / "direct.npz"
    forest.save(path)
    again = HgbForest.load(path)
    np.testing.assert_array_equal(again.predict(x), forest.predict(x))
    assert again.feature_names == names
    first = path.read_bytes()
    forest.save(path)
    assert path.read_bytes() == first  # one forest, one set of bytes
    # The saved ranker scores as the trained one did.
    table, meta = read_frame(tile_frame)
    loaded = load_model(model)
    spec = small(RankerSpec(name="hgb", features="default", library="sklearn",
                            objective="squared_error"), rounds=8)
    fresh = train_ranker(table, meta, spec)
    np.testing.assert_array_equal(loaded.predict(table), fresh.predict(table))
    assert loaded.importance().sum() > 0


@pytest.mark.parametrize("how", ["model.pkl named by the card", "a pickle as model.npz",
                                 "an object array inside model.npz"])
def test_a_crafted_pickle_never_runs(trained, tmp_path, how):
    model = copy(trained, "sklearn", tmp_path)
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))
    if how == "model.pkl named by the card":
        (model / "model.npz").unlink()
        rewrite_booster(model, payload, "model.pkl")
        needle = "pickle"
    elif how == "a pickle as model.npz":
        rewrite_booster(model, payload)
        needle = "sklearn model"
    else:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive, np.load(model / "model.npz") as npz:
            for key in npz.files:
                array = np.array([_Payload(marker)], dtype=object) if key == "value" \
                    else npz[key]
                member = io.BytesIO()
                np.lib.format.write_array(member, array, allow_pickle=True)
                archive.writestr(f"{key}.npy", member.getvalue())
        rewrite_booster(model, buffer.getvalue())
        needle = "objects"
    with pytest.raises(BadModelError, match=needle):
        load_model(model)
    assert not marker.exists()


def test_a_crafted_pickle_runs_in_no_command(trained, tiny_data, tile_frame, tmp_path):
    model = copy(trained, "sklearn", tmp_path)
    marker = tmp_path / "pwned"
    (model / "model.npz").unlink()
    rewrite_booster(model, pickle.dumps(_Payload(marker)), "model.pkl")
    test_file = split_files(tiny_data, TILE, "test")[0]
    one_error_line(run("evaluate", tile_frame, "--model", model), "pickle", "retrain")
    one_error_line(run("score", test_file, "--models", model, "--out", tmp_path / "s.csv"),
                   "pickle")
    one_error_line(run("report", tile_frame, "--model", f"x={model}", "--out",
                       tmp_path / "report"), "pickle")
    measured = tmp_path / "m.csv"
    measured.write_text("config_index,runtime\n0,10\n1,20\n2,30\n")
    one_error_line(run("rank-graph", test_file, "--measured", measured, "--prior", model,
                       "--out", tmp_path / "r.csv"), "pickle")
    one_error_line(run("suggest", test_file, "--measured", measured, "--prior", model,
                       "--out", tmp_path / "n.csv"), "pickle")
    assert not marker.exists()


def test_a_card_names_only_its_own_library_s_model_file(trained, tmp_path):
    """A card cannot make xlarank read another file (a pickle, or the other library's
    file) as its booster."""
    model = copy(trained, "lightgbm", tmp_path)
    shutil.copy(model / "model.txt", model / "other.txt")
    rewrite_booster(model, (model / "model.txt").read_bytes(), "other.txt")
    with pytest.raises(BadModelError, match="'model.txt', not 'other.txt'"):
        load_model(model)


def test_a_saved_hybrid_holds_no_pickle_and_loads_back(trained, tiny_data, tmp_path):
    """The hybrid's save is its card and an sklearn model folder of arrays."""
    from xlarank.data.graph import load_graph
    from xlarank.systems import load_system
    from xlarank.systems.hybrid import HybridSystem

    system = HybridSystem(seed=0)
    system.ranker_ = load_model(trained["sklearn"])
    out = tmp_path / "hybrid"
    out.mkdir()
    system.save(out)
    for path in out.rglob("*"):
        if path.is_file():
            assert not path.read_bytes().startswith(b"\x80"), path  # a pickle's first byte
            assert path.suffix in (".json", ".npz"), path
    graph = load_graph(split_files(tiny_data, TILE, "valid")[0], TILE)
    np.testing.assert_array_equal(load_system(out).score(graph), system.score(graph))


def test_no_loader_unpickles():
    """Every np.load of the package refuses pickles in so many words, and nothing
    imports pickle to read."""
    src = Path(__file__).resolve().parents[1] / "src" / "xlarank"
    for path in src.rglob("*.py"):
        text = path.read_text()
        assert "pickle.load" not in text, path
        assert "allow_pickle=True" not in text, path
        for line in text.splitlines():
            if "np.load(" in line and "allow_pickle=False" not in line:
                raise AssertionError(f"{path}: {line.strip()}")


# ---------------------------------------------------------------- 2. no crash

def _lightgbm_faults(text: str) -> dict[str, str]:
    """Crafted model.txt texts, each one LightGBM would crash on or misread."""
    lines = text.split("\n")

    def edit(prefix: str, change, nth: int = 0) -> str:
        out, seen = [], 0
        for line in lines:
            if line.startswith(prefix):
                if seen == nth:
                    line = change(line)
                seen += 1
            out.append(line)
        return "\n".join(out)

    def first_value(value: str):
        return lambda line: line.split("=")[0] + "=" + " ".join(
            [value, *line.split("=", 1)[1].split(" ")[1:]])

    return {
        "left child out of range": edit("left_child=", first_value("99")),
        "right child loops to the root": edit("right_child=", first_value("0")),
        "negative leaf count": edit("num_leaves=", lambda _: "num_leaves=-5"),
        "huge leaf count": edit("num_leaves=", lambda _: "num_leaves=2000000000"),
        "split on a feature it lacks": edit("split_feature=", first_value("99999")),
        "tree_sizes point elsewhere": edit("tree_sizes=", lambda line: line + "0"),
        "no trees per iteration": edit("num_tree_per_iteration=",
                                       lambda _: "num_tree_per_iteration=0"),
        "a tree line without =": edit("shrinkage=", lambda _: "shrinkage"),
        "fewer thresholds": edit("threshold=", lambda line: line.rsplit(" ", 1)[0]),
        "max_feature_idx too big": edit("max_feature_idx=", lambda _: "max_feature_idx=7"),
        "broken parameter line": edit("[boosting:", lambda _: "[boosting gbdt"),
        "pandas_categorical not JSON": edit("pandas_categorical:",
                                            lambda _: "pandas_categorical:{oops"),
        "categorical decision": edit("decision_type=", first_value("1")),
        "tree numbers skip": edit("Tree=1", lambda _: "Tree=5"),
    }


def _xgboost_faults(raw: bytes) -> dict[str, bytes]:
    model = json.loads(raw)
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]

    def changed(change) -> bytes:
        copy_ = json.loads(raw)
        change(copy_["learner"]["gradient_booster"]["model"]["trees"][0], copy_)
        return json.dumps(copy_).encode()

    n = len(tree["left_children"])
    return {
        "left child out of range": changed(lambda t, m: t["left_children"].__setitem__(0, 999)),
        "child loops to the root": changed(lambda t, m: t["right_children"].__setitem__(0, 0)),
        "split on a feature it lacks": changed(
            lambda t, m: t["split_indices"].__setitem__(0, 99999)),
        "num_nodes larger than its arrays": changed(
            lambda t, m: t["tree_param"].__setitem__("num_nodes", str(n + 50))),
        "arrays shorter": changed(lambda t, m: t["base_weights"].pop()),
        "deep nesting": b'{"learner": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "huge integer": raw.replace(b'"id":0', b'"id":' + b"9" * 5000, 1),
        "duplicate key": raw.replace(b'{"learner":', b'{"version":[1,2,3],"learner":', 1),
    }


def _crafted_folders(trained, tmp_path: Path) -> list[Path]:
    """Model folders of crafted booster files with matching checksums: every cut of each
    file at 40 points, and the faults above."""
    folders = []
    for kind in ("lightgbm", "xgboost", "sklearn"):
        name = {"lightgbm": "model.txt", "xgboost": "model.json", "sklearn": "model.npz"}[kind]
        raw = (trained[kind] / name).read_bytes()
        variants = {f"cut at {n}": raw[:n] for n in
                    sorted(set(np.linspace(0, len(raw) - 1, 40).astype(int)) | {len(raw) // 2})}
        if kind == "lightgbm":
            variants.update({k: v.encode() for k, v in _lightgbm_faults(raw.decode()).items()})
        elif kind == "xgboost":
            variants.update(_xgboost_faults(raw))
        for i, (what, data) in enumerate(variants.items()):
            folder = tmp_path / f"{kind}-{i:03d}"
            shutil.copytree(trained[kind], folder)
            rewrite_booster(folder, data)
            (folder / "what.txt").write_text(what)
            folders.append(folder)
    return folders


LOAD_ALL = """
import json, sys
from pathlib import Path
from xlarank.errors import XlarankError
from xlarank.frame import read_frame
from xlarank.rank.model import load_model

table, _ = read_frame(sys.argv[1])
outcome = {}
for folder in map(Path, sys.argv[2:]):
    what = folder.name + ": " + (folder / "what.txt").read_text()
    print(what, flush=True)  # the last line printed names the file of a crash
    try:
        load_model(folder).predict(table)
        outcome[what] = "loaded"
    except XlarankError:
        outcome[what] = "refused"
print(json.dumps(outcome))
"""


# slow: every crafted folder of each library, loaded in a child process
@pytest.mark.slow
def test_crafted_booster_files_are_refused_never_a_crash(trained, tile_frame, tmp_path):
    """Cut or crafted booster files, their sha256 in the card, each load (and score) or
    raise BadModelError, in a process that must not die of a signal: a model.txt cut in
    half gave SIGSEGV, a crafted one SIGABRT."""
    import os

    folders = _crafted_folders(trained, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    result = subprocess.run([sys.executable, "-c", LOAD_ALL, str(tile_frame),
                             *map(str, folders)], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, (result.returncode, result.stdout[-500:],
                                    result.stderr[-2000:])
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(outcome) == len(folders)
    refused = {what for what, how in outcome.items() if how == "refused"}
    for folder in folders:
        what = folder.name + ": " + (folder / "what.txt").read_text()
        # Only a cut in the text after the trees (parameters, the last line) may load.
        if not what.split(": ", 1)[1].startswith("cut at") or what.endswith("cut at 0"):
            assert what in refused, what
    assert any(w.startswith("lightgbm") and w.endswith(
        f"cut at {len((trained['lightgbm'] / 'model.txt').read_bytes()) // 2}")
        for w in refused)


# Each fault is a child process; make test-fast keeps the first.
@pytest.mark.parametrize("fault", ["cut in half",
                                   pytest.param("left child out of range",
                                                marks=pytest.mark.slow),
                                   pytest.param("negative leaf count", marks=pytest.mark.slow)])
def test_a_crafted_model_txt_is_one_error_line_and_exit_2(trained, tile_frame, tmp_path,
                                                          fault):
    import os

    model = copy(trained, "lightgbm", tmp_path)
    text = (model / "model.txt").read_text()
    rewrite_booster(model, (text[: len(text) // 2] if fault == "cut in half"
                            else _lightgbm_faults(text)[fault]).encode())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    result = subprocess.run([sys.executable, "-m", "xlarank", "evaluate", str(tile_frame),
                             "--model", str(model)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "not a LightGBM model xlarank can read" in lines[0]


def test_every_library_s_real_models_pass_the_checks(tmp_path):
    """The checks accept what the libraries write, for every objective and tree kind a
    spec may ask for, and the model scores as it did."""
    import lightgbm as lgb
    import xgboost as xgb

    from xlarank.rank.boosters import BOOSTERS

    rng = np.random.default_rng(0)
    x = rng.random((400, 3)).astype(np.float32)
    x[::5, 1] = np.nan
    y = (x[:, 0] * 3).astype(int)
    group = [50] * 8
    lightgbm = BOOSTERS["lightgbm"]
    for params in ({"objective": "lambdarank", "label_gain": [0, 1, 2, 3]},
                   {"objective": "rank_xendcg"}, {"objective": "regression"},
                   {"objective": "regression", "min_data_in_leaf": 1000},  # one-leaf trees
                   {"objective": "regression", "boosting": "rf", "bagging_fraction": 0.5,
                    "bagging_freq": 1},
                   {"objective": "regression", "boosting": "dart"},
                   {"objective": "lambdarank", "data_sample_strategy": "goss"},
                   {"objective": "lambdarank", "extra_trees": True}):
        data = lgb.Dataset(x, label=y, group=None if "regression" in params.values()
                           else group, feature_name=["a", "b", "c"])
        booster = lgb.train({**params, "verbosity": -1}, data, num_boost_round=4)
        path = tmp_path / "model.txt"
        lightgbm.save(booster, path)
        np.testing.assert_array_equal(lightgbm.predict(lightgbm.load(path), x, None, None),
                                      booster.predict(x))
    xgboost = BOOSTERS["xgboost"]
    for objective, params in (("rank:ndcg", {}), ("rank:pairwise", {}),
                              ("reg:squarederror", {}),
                              ("rank:ndcg", {"grow_policy": "lossguide", "max_leaves": 7})):
        data = xgb.DMatrix(x, label=y, qid=np.repeat(np.arange(8), 50),
                           feature_names=["a", "b", "c"])
        booster = xgb.train({"objective": objective, "max_depth": 4, **params}, data, 4)
        path = tmp_path / "model.json"
        xgboost.save(booster, path)
        np.testing.assert_array_equal(
            xgboost.predict(xgboost.load(path), x, ["a", "b", "c"], None),
            booster.predict(xgb.DMatrix(x, feature_names=["a", "b", "c"])))


# ---------------------------------------------------------------- 3. only what is needed

def test_score_loads_only_the_models_its_input_needs(trained, tiny_data, tmp_path,
                                                     monkeypatch):
    """A folder with a tile model and a damaged layout model scores tile files: the layout
    model is never loaded (its card is read, to know its collection)."""
    import xlarank.score as score

    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copytree(trained["lightgbm"], folder / "tile")
    layout = folder / "layout"
    shutil.copytree(trained["lightgbm"], layout)
    card = json.loads((layout / CARD_FILE).read_text())
    (layout / CARD_FILE).write_text(json.dumps({**card, "collection": "layout:xla:default"}))
    rewrite_booster(layout, b"not a model at all")
    loaded = []
    real_load = score.load_model
    monkeypatch.setattr(score, "load_model", lambda d: loaded.append(Path(d).name)
                        or real_load(d))
    score._cached_ranker.cache_clear()
    files = split_files(tiny_data, TILE, "test")
    rows, skipped = score.score_files(files, folder, tmp_path / "s.csv")
    assert rows > 0 and not skipped and set(loaded) == {"tile"}
    result = run("score", *files, "--models", folder, "--out", tmp_path / "cli.csv")
    assert result.exit_code == 0, result.output
    # A file that does need the damaged model gets its error.
    layout_file = split_files(tiny_data, get_collection("layout-xla-default"), "test")[0]
    one_error_line(run("score", layout_file, "--models", folder, "--out", tmp_path / "l.csv"),
                   "not a LightGBM model")


def test_two_models_of_one_collection_are_an_error_not_the_last_by_name(trained, tiny_data,
                                                                       tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("a-tile", "b-tile"):
        shutil.copytree(trained["lightgbm"], folder / name)
    test_file = split_files(tiny_data, TILE, "test")[0]
    one_error_line(run("score", test_file, "--models", folder, "--out", tmp_path / "s.csv"),
                   "two models of collection tile:xla", "a-tile/", "b-tile/")
    one_error_line(run("submit", tiny_data, "--models", folder, "--out", tmp_path / "u.csv"),
                   "two models of collection tile:xla")
    assert not (tmp_path / "s.csv").exists()


def test_the_parent_of_model_folders_says_what_it_found(trained, tiny_data, tile_frame,
                                                        tmp_path):
    parent = tmp_path / "trained"
    shutil.copytree(trained["lightgbm"], parent / "synth-demo" / "xlarank" / "tile-xla")
    shutil.copytree(trained["xgboost"], parent / "synth-demo" / "baseline" / "tile-xla")
    test_file = split_files(tiny_data, TILE, "test")[0]
    one_error_line(run("score", test_file, "--models", parent, "--out", tmp_path / "s.csv"),
                   "found 2 model folder(s)", "synth-demo/xlarank/tile-xla",
                   str(parent / "synth-demo" / "baseline"))
    one_error_line(run("evaluate", tile_frame, "--model", parent), "not a model directory",
                   "found 2 model folder(s)")
    one_error_line(run("evaluate", tile_frame, "--model", parent / "synth-demo" / "xlarank"),
                   "found 1 model folder(s)", "tile-xla")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_error_line(run("score", test_file, "--models", empty, "--out", tmp_path / "s.csv"),
                   "train a model")


def test_an_ensemble_listing_one_member_many_times_is_refused_at_once(trained, tmp_path):
    from xlarank.rank.ensemble import Ensemble, ensemble_card

    members = [load_model(trained["lightgbm"]), load_model(trained["lightgbm"])]
    folder = Ensemble(ensemble_card(members), members).save(tmp_path / "ensemble")
    card = json.loads((folder / CARD_FILE).read_text())
    for entries in ([card["members"][0]] * 3000,
                    [card["members"][0], {**card["members"][1], "dir": "members//00"}]):
        (folder / CARD_FILE).write_text(json.dumps({**card, "members": entries}))
        with pytest.raises(BadModelError, match="more than once"):
            load_model(folder)
    (folder / CARD_FILE).write_text(json.dumps(card))
    assert len(load_model(folder).members) == 2


# ---------------------------------------------------------------- 4. data origin

@pytest.fixture(scope="module")
def real_copy(tiny_data, tmp_path_factory):
    """The tiny synthetic tree copied without its synth.json and with other file names:
    to xlarank, real data."""
    root = tmp_path_factory.mktemp("real") / "tpugraphs"
    shutil.copytree(tiny_data, root, ignore=shutil.ignore_patterns("synth.json"))
    for path in sorted(root.rglob("synth_*.npz")):
        path.rename(path.with_name(path.name.replace("synth_", "graph_")))
    return root


def test_cards_record_where_their_training_data_came_from(trained, tiny_data, real_copy,
                                                         tile_frame, tmp_path):
    from xlarank.data.origin import file_origin
    from xlarank.frame import read_meta

    assert (tiny_data / "synth.json").is_file()  # what xlarank synth marks
    assert file_origin(split_files(tiny_data, TILE, "test")[0]) == "synthetic"
    assert file_origin(split_files(real_copy, TILE, "test")[0]) == "real"
    copied = tmp_path / split_files(tiny_data, TILE, "test")[0].name  # out of its tree
    shutil.copy(split_files(tiny_data, TILE, "test")[0], copied)
    assert file_origin(copied) == "synthetic"
    assert read_meta(tile_frame).data_origin == "synthetic"
    for kind in trained:
        card = json.loads((trained[kind] / CARD_FILE).read_text())
        assert card["training_data"]["origin"] == "synthetic"
    real_frame = tmp_path / "real.parquet"
    spec = load_feature_spec(Path(__file__).resolve().parents[1] / "features" / "default.toml")
    featurize_files(split_files(real_copy, TILE, "train"), real_frame, TILE, "train", spec)
    assert read_meta(real_frame).data_origin == "real"
    mixed = tmp_path / "mixed.parquet"
    featurize_files(split_files(real_copy, TILE, "valid") + split_files(tiny_data, TILE,
                                                                        "valid"),
                    mixed, TILE, "valid", spec)
    assert read_meta(mixed).data_origin == "mixed"
    table, meta = read_frame(real_frame)
    ranker = train_ranker(table, meta, small(RankerSpec(name="r", features="default"), 3))
    assert ranker.card["training_data"]["origin"] == "real"


def _warnings(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def test_a_synthetic_model_meeting_real_graphs_warns_in_score_and_prior(trained, tiny_data,
                                                                       real_copy, tmp_path):
    real_file = split_files(real_copy, TILE, "test")[0]
    synthetic_file = split_files(tiny_data, TILE, "test")[0]
    model = trained["lightgbm"]
    result = run("score", real_file, "--models", model, "--out", tmp_path / "s.csv")
    assert result.exit_code == 0, result.output
    (line,) = _warnings(result)
    assert "trained on synthetic data" in line and "1 real graph" in line
    result = run("score", synthetic_file, "--models", model, "--out", tmp_path / "t.csv")
    assert result.exit_code == 0 and not _warnings(result), result.stderr
    measured = tmp_path / "m.csv"
    measured.write_text("config_index,runtime\n0,10\n1,20\n2,30\n3,25\n")
    for command in ("rank-graph", "suggest"):
        result = run(command, real_file, "--measured", measured, "--prior", model,
                     "--out", tmp_path / f"{command}.csv")
        assert result.exit_code == 0, result.output
        assert any("--prior model" in w and "synthetic" in w for w in _warnings(result))
        result = run(command, synthetic_file, "--measured", measured, "--prior", model,
                     "--out", tmp_path / f"{command}-synth.csv")
        # Four measured configs may also warn that too few are measured; not this test's.
        origin = [w for w in _warnings(result) if "synthetic" in w]
        assert result.exit_code == 0 and not origin, result.stderr


def test_a_synthetic_model_meeting_real_graphs_warns_in_submit(tiny_data, real_copy,
                                                               tmp_path):
    from xlarank.data.collections import COLLECTIONS
    from xlarank.errors import XlarankWarning
    from xlarank.score import write_submission

    class Constant:
        def __init__(self, collection: str, origin: str):
            self.card = {"collection": collection, "training_data": {"origin": origin}}

        def score(self, graph):
            return np.zeros(graph.n_configs)

    synthetic = {c.id: Constant(c.id, "synthetic") for c in COLLECTIONS}
    with pytest.warns(XlarankWarning) as caught:
        write_submission(real_copy, synthetic, tmp_path / "sub.csv")
    assert sum("trained on synthetic data" in str(w.message) for w in caught) == 5
    real = {c.id: Constant(c.id, "real") for c in COLLECTIONS}
    for root, models in ((tiny_data, synthetic), (real_copy, real)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            write_submission(root, models, tmp_path / "sub2.csv")
        assert not [w for w in caught if "synthetic" in str(w.message)]


# ---------------------------------------------------------------- 5. seeds, system formats

@pytest.mark.parametrize("seeds", ["0,4294967296", "2147483648", "-1", "0,-5"])
def test_seeds_outside_31_bits_are_one_error_line(tile_frame, tmp_path, seeds):
    result = run("train", tile_frame, f"--seeds={seeds}", "--out", tmp_path / "m")
    one_error_line(result, "--seeds", "0..2147483647")
    assert not (tmp_path / "m").exists()


def test_seeds_outside_31_bits_are_refused_in_specs_and_the_library(tile_frame, tmp_path):
    from xlarank.errors import SpecError
    from xlarank.rank.ensemble import load_training_plan
    from xlarank.rank.spec import load_ranker_spec
    from xlarank.rank.train_specs import train_from_specs

    member = tmp_path / "member.toml"
    member.write_text('name = "m"\nfeatures = "default"\nseed = 2147483647\n')
    assert load_ranker_spec(member).seed == 2**31 - 1
    for seed in (2**31, -1, 2**32):
        member.write_text(f'name = "m"\nfeatures = "default"\nseed = {seed}\n')
        with pytest.raises(SpecError, match="seed"):
            load_ranker_spec(member)
    member.write_text('name = "m"\nfeatures = "default"\n')
    ensemble = tmp_path / "ensemble.toml"
    ensemble.write_text('kind = "ensemble"\nmembers = ["member.toml"]\n'
                        "seeds = [0, 4294967296]\n")
    with pytest.raises(SpecError, match="0..2147483647"):
        load_training_plan(ensemble)
    with pytest.raises(XlarankError, match="0..2147483647"):
        train_from_specs(tile_frame, [member], tmp_path / "out", seeds=[0, 2**32])
    table, meta = read_frame(tile_frame)
    with pytest.raises(XlarankError, match="0..2147483647"):
        train_ranker(table, meta, dataclasses.replace(
            small(RankerSpec(name="r", features="default"), 2), seed=2**31))
    assert not (tmp_path / "out").exists()


def test_a_system_from_a_newer_xlarank_or_with_unknown_settings_is_refused(trained, tiny_data,
                                                                          tmp_path):
    from xlarank.data.graph import load_graph
    from xlarank.systems import SYSTEM_FILE, load_system
    from xlarank.systems.booster import BoosterSystem

    system = BoosterSystem(seed=3)
    system.ranker_ = load_model(trained["lightgbm"])
    out = tmp_path / "system"
    out.mkdir()
    system.save(out)
    card = json.loads((out / SYSTEM_FILE).read_text())
    assert card["format"] == 1 and card["versions"]["xlarank"]
    graph = load_graph(split_files(tiny_data, TILE, "valid")[0], TILE)
    np.testing.assert_array_equal(load_system(out).score(graph), system.score(graph))
    faults = {
        "newer format": ({**card, "format": 2, "versions": {"xlarank": "9.0"}},
                         "newer xlarank (9.0)"),
        "unknown settings": ({**card, "settings": {**card["settings"], "boost": 3}},
                             "does not know (boost)"),
        "format not a number": ({**card, "format": "2"}, "not a format number"),
        "seed out of range": ({**card, "seed": 2**31}, "0..2147483647"),
        "settings not a table": ({**card, "settings": 5}, "not a saved system"),
    }
    for change, needle in faults.values():
        (out / SYSTEM_FILE).write_text(json.dumps(change))
        with pytest.raises(XlarankError, match=re.escape(needle)):
            load_system(out)
    # A system saved before formats were recorded still loads.
    (out / SYSTEM_FILE).write_text(json.dumps({k: v for k, v in card.items()
                                               if k not in ("format", "versions")}))
    assert load_system(out).seed == 3


def _random_tree(rng, n_features: int, nodes: list | None = None, depth: int = 0) -> list:
    """A random tree in pre-order, as scikit-learn numbers its nodes: (feature,
    threshold, missing_left, left, right, value, is_leaf) per node; each node splits with
    probability 0.6 down to depth 4."""
    nodes = [] if nodes is None else nodes
    index = len(nodes)
    nodes.append(None)
    if depth < 4 and rng.random() < 0.6:
        left = len(nodes)
        _random_tree(rng, n_features, nodes, depth + 1)
        right = len(nodes)
        _random_tree(rng, n_features, nodes, depth + 1)
        nodes[index] = (int(rng.integers(n_features)), rng.normal(), int(rng.integers(2)),
                        left, right, 0.0, 0)
    else:
        nodes[index] = (0, 0.0, 0, 0, 0, rng.normal(), 1)
    return nodes


@pytest.mark.parametrize("seed", range(4))
def test_the_tree_walk_kernel_matches_its_plain_reference(seed):
    """kernels.trees.forest_predict against naive.forest_predict on random forests (trees
    of random shape, NaNs in the inputs, a number of trees below the forest's)."""
    import naive
    from xlarank.kernels.trees import forest_predict

    rng = np.random.default_rng(seed)
    n_features, arrays = 4, {k: [] for k in ("feature", "threshold", "missing_left", "left",
                                             "right", "value", "is_leaf")}
    starts = [0]
    for _ in range(int(rng.integers(1, 6))):
        nodes = _random_tree(rng, n_features)
        for node in nodes:
            for key, v in zip(arrays, node, strict=True):
                arrays[key].append(v)
        starts.append(starts[-1] + len(nodes))
    dtypes = {"feature": np.int64, "threshold": np.float64, "missing_left": np.uint8,
              "left": np.int64, "right": np.int64, "value": np.float64, "is_leaf": np.uint8}
    a = {k: np.array(v, dtype=dtypes[k]) for k, v in arrays.items()}
    x = rng.normal(size=(50, n_features))
    x[rng.random(x.shape) < 0.2] = np.nan
    starts = np.array(starts, dtype=np.int64)
    for n_trees in (len(starts) - 1, 1):
        args = (x, starts, a["feature"], a["threshold"], a["missing_left"], a["left"],
                a["right"], a["value"], a["is_leaf"], 0.25, n_trees)
        np.testing.assert_array_equal(forest_predict(*args), naive.forest_predict(*args))


DAMAGES = ("deleted", "emptied", "halved", "garbage", "a folder", "a FIFO", "json list")


@pytest.mark.parametrize("kind", ["xlarank", "hybrid"])
def test_every_damaged_file_of_a_saved_system_is_one_xlarank_error(trained, tmp_path, kind):
    """Each file of a saved system, damaged each way, makes load_system raise XlarankError
    (the CLI's one error line), never another exception or a hang."""
    import os
    import shutil

    from xlarank.systems import load_system
    from xlarank.systems.booster import BoosterSystem
    from xlarank.systems.hybrid import HybridSystem

    system = BoosterSystem(seed=1) if kind == "xlarank" else HybridSystem(seed=1)
    system.ranker_ = load_model(trained["lightgbm" if kind == "xlarank" else "sklearn"])
    saved = tmp_path / "saved"
    saved.mkdir()
    system.save(saved)
    files = sorted(p.relative_to(saved) for p in saved.rglob("*") if p.is_file())
    assert files
    tried = 0
    for relative in files:
        for damage in DAMAGES:
            if damage == "json list" and relative.suffix != ".json":
                continue
            out = tmp_path / f"case{tried}"
            shutil.copytree(saved, out)
            target = out / relative
            data = target.read_bytes()
            target.unlink()
            if damage == "emptied":
                target.write_bytes(b"")
            elif damage == "halved":
                target.write_bytes(data[:len(data) // 2])
            elif damage == "garbage":
                target.write_bytes(bytes(range(256)) * 4)
            elif damage == "a folder":
                target.mkdir()
            elif damage == "a FIFO":
                os.mkfifo(target)
            elif damage == "json list":
                target.write_text("[1, 2, 3]")
            tried += 1
            with pytest.raises(XlarankError):
                load_system(out)
    assert tried >= len(files) * (len(DAMAGES) - 1)


def booster_file(model: Path) -> Path:
    return model / json.loads((model / "card.json").read_text())["model_file"]


def edit_card(model: Path, change) -> None:
    card = model / "card.json"
    edited = change(json.loads(card.read_text()))
    card.write_text(edited if isinstance(edited, str) else json.dumps(edited))


BOOSTER_FILE_FAULTS = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "garbage": lambda raw: bytes(range(256)) * 8,
    "one byte changed": lambda raw: raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
}


@pytest.mark.parametrize("kind", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("fault", [*BOOSTER_FILE_FAULTS, "missing", "a folder"])
def test_damaged_booster_file_is_refused_before_the_library_reads_it(models, tmp_path, kind,
                                                                      fault):
    model = copy_model(models, kind, tmp_path)
    path = booster_file(model)
    if fault == "missing":
        path.unlink()
    elif fault == "a folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(BOOSTER_FILE_FAULTS[fault](path.read_bytes()))
    with pytest.raises(BadModelError, match=path.name):
        load_model(model)


def test_booster_file_of_another_model_is_refused(models, tmp_path):
    model = copy_model(models, "lightgbm", tmp_path)
    shutil.copyfile(booster_file(models["lightgbm-other"]), booster_file(model))
    with pytest.raises(BadModelError, match="not the one saved with"):
        load_model(model)


def test_truncated_model_through_the_cli_is_one_error_line(models, tile_frames, tmp_path):
    """A truncated model.txt used to crash the process with SIGSEGV (exit 139)."""
    model = copy_model(models, "lightgbm", tmp_path)
    path = booster_file(model)
    path.write_bytes(path.read_bytes()[:9000])
    one_error_line(run("evaluate", tile_frames["default"], "--model", model), "model.txt")


CARD_FAULTS = {
    "a list": lambda card: [1, 2, 3],
    "a number": lambda card: 7,
    "only format": lambda card: {"format": 1},
    "not JSON": lambda card: "{not json",
    "format a string": lambda card: {**card, "format": "1"},
    "features not a table": lambda card: {**card, "features": ["a"]},
    "names shortened": lambda card: {**card, "features": {
        **card["features"], "names": card["features"]["names"][:-3]}},
    "names reordered": lambda card: {**card, "features": {
        **card["features"], "names": card["features"]["names"][::-1]}},
    "names empty": lambda card: {**card, "features": {**card["features"], "names": []}},
    "no checksum (older xlarank)": lambda card: {k: v for k, v in card.items()
                                                 if k != "model_sha256"},
    "model_file leaves the folder": lambda card: {**card,
                                                  "model_file": "../../../../etc/passwd"},
    "model_file absolute": lambda card: {**card, "model_file": "/etc/passwd"},
    "model_file the folder itself": lambda card: {**card, "model_file": "."},
    "gnn weights leave the folder": lambda card: {**card, "features": {
        **card["features"], "families": [*card["features"]["families"], "gnn"],
        "gnn": "../../etc/passwd"}},
    "unknown library": lambda card: {**card, "library": "catboost"},
}


@pytest.mark.parametrize("fault", CARD_FAULTS)
def test_bad_card_is_one_clear_error(models, tile_frames, tmp_path, fault):
    model = copy_model(models, "lightgbm", tmp_path)
    edit_card(model, CARD_FAULTS[fault])
    result = run("evaluate", tile_frames["default"], "--model", model)
    one_error_line(result)


@pytest.mark.parametrize("member", ["../lightgbm", "/etc", "", None, ".", "members/../.."])
def test_ensemble_member_outside_the_ensemble_is_refused(models, tmp_path, member):
    model = copy_model(models, "ensemble", tmp_path)
    edit_card(model, lambda card: {**card, "members": [{"dir": member}]})
    with pytest.raises(BadModelError, match="inside the ensemble"):
        load_model(model)


def test_saved_models_still_load_and_score(models, tile_frames):
    table, _ = read_frame(tile_frames["default"])
    for kind in ("lightgbm", "ensemble"):
        assert len(load_model(models[kind]).predict(table)) == len(table)


def test_saved_model_is_readable_by_others(models):
    """Models used to be 0700 folders of 0600 files whatever the umask."""
    assert stat.S_IMODE(models["lightgbm"].stat().st_mode) & 0o055 == 0o055 & ~_umask()
