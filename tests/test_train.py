"""rank/train.py, ranker.py, model.py: training from frames, saved models, refusals."""

from __future__ import annotations

import dataclasses
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import REPO_SPECS, ROOT, small
from helpers import (
    TILE,
    one_error_line,
    run,
    tile_arrays,
    write_tile,
)
from xlarank.data.collections import COLLECTIONS, get_collection
from xlarank.errors import (
    MismatchError,
    SpecError,
    XlarankError,
)
from xlarank.evaluate import per_graph_metrics, random_scores
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import group_sizes, read_frame, read_meta, write_frame
from xlarank.rank.ensemble import Ensemble
from xlarank.rank.model import load_model
from xlarank.rank.ranker import Ranker
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker, train_ranker_from_file, training_arrays
from xlarank.rank.train_specs import train_from_specs

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))


@pytest.mark.parametrize("slug", [c.slug for c in COLLECTIONS])
def test_train_save_load_predict(frames, spec_dir, tmp_path, slug):
    train, meta = read_frame(frames["default", slug, "train"])
    valid, valid_meta = read_frame(frames["default", slug, "valid"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    ranker.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    again.check_frame(valid_meta)
    np.testing.assert_array_equal(ranker.predict(valid), again.predict(valid))
    assert again.card["features"]["hash"] == DEFAULT.hash
    assert again.card["training_data"]["graphs"] == len(group_sizes(train))
    metrics = per_graph_metrics(valid, again.predict(valid), get_collection(slug).is_tile)
    assert len(metrics) == len(group_sizes(valid))


def test_xgboost_baseline_and_mismatches(frames, spec_dir, tmp_path):
    train, meta = read_frame(frames["baseline", "layout-nlp-random", "train"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "xgb.toml"))
    ranker.save(tmp_path / "xgb")
    loaded = load_model(tmp_path / "xgb")
    np.testing.assert_allclose(loaded.predict(train), ranker.predict(train))
    with pytest.raises(MismatchError, match="feature spec"):
        loaded.check_frame(read_meta(frames["default", "layout-nlp-random", "valid"]))
    with pytest.raises(MismatchError, match="collection"):
        loaded.check_frame(read_meta(frames["baseline", "layout-xla-random", "valid"]))
    with pytest.raises(MismatchError, match="wants 'default'"):
        train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))


def test_test_split_is_refused_for_training_and_evaluation(frames, spec_dir):
    test, meta = read_frame(frames["default", "tile-xla", "test"])
    with pytest.raises(MismatchError, match="no runtimes"):
        train_ranker(test, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    with pytest.raises(XlarankError, match="no runtimes"):
        per_graph_metrics(test, random_scores(test, 0), True)


def test_training_is_reproducible(frames, spec_dir):
    train, meta = read_frame(frames["default", "tile-xla", "train"])
    spec = load_ranker_spec(spec_dir / "lgbm.toml")
    a, b = train_ranker(train, meta, spec), train_ranker(train, meta, spec)
    np.testing.assert_array_equal(a.predict(train), b.predict(train))


def test_pointwise_labels_are_negated_log_slowdown(frames, repo_specs):
    train, meta = read_frame(frames["default", "tile-xla", "train"])
    spec = load_ranker_spec(repo_specs.models("objectives/regression"))
    _, labels, sizes = training_arrays(train, meta.feature_names, True, spec)
    assert labels.dtype == np.float64 and (labels <= 0).all()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert np.allclose(np.maximum.reduceat(labels, starts), 0.0)


@pytest.mark.parametrize("collection", ["tile-xla", "layout-nlp-random"])
def test_training_from_the_file_equals_training_in_memory(frames, repo_specs, collection,
                                                          tmp_path, monkeypatch):
    # Row group by row group (a few graphs each here), with graphs past
    # max_configs_per_graph drawn down: the same rows, labels and booster as on the whole
    # frame.
    import xlarank.frame

    table, meta = read_frame(frames["default", collection, "train"])
    monkeypatch.setattr(xlarank.frame, "ROW_GROUP_ROWS", 10)
    path = tmp_path / "frame.parquet"
    blocks = [block for _, block in table.groupby("graph_id", sort=False)]
    write_frame(path, blocks, get_collection(meta.collection), meta.split,
                load_feature_spec(repo_specs.features("default")), meta.feature_names,
                dedup=meta.dedup, data_origin=meta.data_origin)
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    spec = dataclasses.replace(small(load_ranker_spec(repo_specs.models(collection))),
                               max_configs_per_graph=4)
    whole = train_ranker(table, meta, spec, threads=1)
    streamed = train_ranker_from_file(path, spec, threads=1)
    np.testing.assert_array_equal(whole.predict(table), streamed.predict(table))
    assert streamed.card["training_data"] == whole.card["training_data"]


def test_percentile_labels_span_each_graph(frames, repo_specs):
    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    spec = load_ranker_spec(repo_specs.models("layout-xla-default"))
    assert spec.pointwise and spec.label_scheme == "percentile"
    _, labels, sizes = training_arrays(train, meta.feature_names, False, spec)
    assert labels.dtype == np.float64 and labels.min() >= 0 and labels.max() <= 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert np.allclose(np.maximum.reduceat(labels, starts), 1.0)
    assert np.allclose(np.minimum.reduceat(labels, starts), 0.0)


def test_train_from_specs_one_booster_or_an_ensemble(frames, spec_dir, tmp_path):
    train = frames["default", "tile-xla", "train"]
    said = []

    @contextmanager
    def status(text):
        said.append(text)
        yield

    one = train_from_specs(train, [spec_dir / "lgbm.toml"], tmp_path / "one",
                           valid_path=frames["default", "tile-xla", "valid"], status=status)
    assert isinstance(one.model, Ranker) and one.collection == "tile:xla"
    assert [s.name for s in one.specs] == ["xlarank"]
    assert said == [f"training lightgbm lambdarank on {train} (local)"]
    card = load_model(tmp_path / "one").card
    assert card["validation"]["frame"] == str(frames["default", "tile-xla", "valid"])
    assert np.isfinite(card["validation"]["score"])
    both = train_from_specs(train, [spec_dir / "lgbm.toml"], tmp_path / "two", seeds=[1, 2])
    assert isinstance(both.model, Ensemble) and "validation" not in both.model.card
    assert [m["seed"] for m in load_model(tmp_path / "two").card["members"]] == [1, 2]
    plans = []
    for seeds in ("[1]", "[2]"):
        plans.append(tmp_path / f"ens{seeds[1]}.toml")
        plans[-1].write_text(f'kind = "ensemble"\nmembers = ["{spec_dir / "lgbm.toml"}"]\n'
                             f"seeds = {seeds}\n")
    with pytest.raises(XlarankError, match="different seeds"):
        train_from_specs(train, plans, tmp_path / "none")
    with pytest.raises(XlarankError, match="unknown engine"):
        train_from_specs(train, [spec_dir / "lgbm.toml"], tmp_path / "none", engine="spark")
    assert not (tmp_path / "none").exists()


def flat_frame(tiny_data, tmp_path, repo_specs, flat_graphs: int) -> Path:
    """A tile train frame of 3 graphs; ``flat_graphs`` of them have all-equal runtimes."""
    arrays = tile_arrays(tiny_data)
    for i in range(3):
        graph = {k: v.copy() for k, v in arrays.items()}
        if i < flat_graphs:
            graph["config_runtime"][:] = 1000
            graph["config_runtime_normalizers"][:] = 1000
        write_tile(graph, tmp_path, f"g{i}")
    out = tmp_path / "flat.parquet"
    featurize_files(sorted((tmp_path / "npz/tile/xla/train").glob("*.npz")), out, TILE,
                    "train", load_feature_spec(repo_specs.features("default")))
    return out


def test_frame_with_no_ranking_to_learn_is_refused(tiny_data, tmp_path, repo_specs,
                                                   spec_dir):
    """LightGBM failed 'Check failed: (num_data) > (0)' on such a frame (the real tile
    train sample is one)."""
    frame = flat_frame(tiny_data, tmp_path, repo_specs, 3)
    one_error_line(run("train", frame, "--spec", spec_dir / "lgbm.toml", "--out",
                       tmp_path / "m"), "no ranking to learn")
    assert not (tmp_path / "m").exists()


def test_frame_with_some_flat_graphs_trains_with_a_warning(tiny_data, tmp_path, repo_specs,
                                                           spec_dir):
    frame = flat_frame(tiny_data, tmp_path, repo_specs, 2)
    result = run("train", frame, "--spec", spec_dir / "lgbm.toml", "--out", tmp_path / "m")
    assert result.exit_code == 0, result.stderr
    assert ("warning: 2 of 3 training graphs have one distinct config or all-equal "
            "runtimes") in result.stderr
    assert "Traceback" not in result.stderr and "UserWarning" not in result.stderr


@pytest.mark.parametrize("slug", [c.slug for c in COLLECTIONS])
def test_a_collections_spec_refuses_a_frame_of_another(frames, repo_specs, slug):
    from xlarank.errors import MismatchError

    other = "layout-xla-random" if slug == "tile-xla" else "tile-xla"
    table, meta = read_frame(frames["default", other, "train"])
    spec = small(load_ranker_spec(repo_specs.models(slug)))
    assert spec.collections == [get_collection(slug).id]
    with pytest.raises(MismatchError, match=rf"frame is of {re.escape(get_collection(other).id)}"
                       rf", booster spec 'xlarank' is made for"):
        train_ranker(table, meta, spec)


@pytest.mark.parametrize("value", ['"tile:xla"', '["tile-xla"]', "[1]", '["layout:xla"]'])
def test_spec_collections_must_be_collection_ids(tmp_path, value):
    path = tmp_path / "spec.toml"
    path.write_text(f'features = "default"\ncollections = {value}\n')
    with pytest.raises(SpecError, match=r"collections must be a list of collection ids"):
        load_ranker_spec(path)


@pytest.mark.parametrize("typed", ["tile-xla", "MODELS"])
def test_a_spec_of_another_collection_is_named_as_typed(frames, tmp_path, typed):
    frame = frames["default", "layout-xla-default", "train"]
    spec = str(ROOT / "models/tile-xla.toml") if typed == "MODELS" else typed
    result = run("train", frame, "--spec", spec, "--out", tmp_path / "m")
    line = one_error_line(result, str(frame), f"booster spec '{spec}' is made for tile:xla")
    assert "'xlarank'" not in line
