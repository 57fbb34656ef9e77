"""score.py: every config of a graph ranked, best first."""

from __future__ import annotations

import csv
import json
import shutil
import warnings

import numpy as np
import pytest

from helpers import (
    TILE,
    one_error_line,
    run,
)
from xlarank.data.collections import COLLECTIONS, get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import (
    XlarankError,
    XlarankWarning,
)
from xlarank.evaluate import compare_runs
from xlarank.frame import read_frame
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import evaluate_model, npz_inputs, ranked_configs, score_files, write_submission


def test_ranked_configs_keep_every_index(samples, frames, spec_dir):
    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    unet = load_graph(next(p for p in samples if p.stem == "unet3d"))
    order, score = ranked_configs(unet, ranker)
    assert sorted(order) == list(range(unet.n_configs))
    assert (np.diff(score) <= 0).all()


def test_npz_inputs_lists_folders_and_files(tiny_data, tmp_path):
    folder = tiny_data / "npz" / "tile"
    loose = tmp_path / "loose.npz"
    assert npz_inputs([folder, loose]) == sorted(folder.rglob("*.npz")) + [loose]
    (tmp_path / "empty").mkdir()
    with pytest.raises(XlarankError, match="no npz files"):
        npz_inputs([tmp_path / "empty"])


def test_evaluate_model_records_and_compare_runs(frames, spec_dir, tmp_path):
    train, meta = read_frame(frames["default", "tile-xla", "train"])
    model_dir = tmp_path / "models" / "tile"
    train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml")).save(model_dir)
    valid = frames["default", "tile-xla", "valid"]
    out = tmp_path / "runs" / "m" / "tile.csv"
    result = evaluate_model(valid, model_dir, out=out)
    record = result.record
    assert record["run"] == "models" and record["model"] == str(model_dir)
    assert (record["collection"], record["split"], record["headline"]) == (
        "tile:xla", "valid", "score")
    assert json.loads(out.with_suffix(".summary.json").read_text()) == record
    assert list(csv.DictReader(open(out)))[0]["graph_id"] == result.per_graph["graph_id"][0]
    floor = evaluate_model(valid, None, seed=1, name="floor",
                           out=tmp_path / "runs" / "r" / "tile.csv")
    assert floor.record["run"] == "floor" and floor.record["model"] is None
    assert evaluate_model(valid, None, seed=1).summary == floor.summary
    wide = compare_runs(tmp_path / "runs", out=tmp_path / "compare.csv")
    assert list(wide.index) == [("tile:xla", "score")]
    assert wide.loc[("tile:xla", "score"), "models"] == record["score"]
    assert wide.loc[("tile:xla", "score"), "floor"] == floor.record["score"]
    assert (tmp_path / "compare.csv").exists()
    with pytest.raises(XlarankError, match="no \\*.summary.json"):
        compare_runs(tmp_path / "models")


@pytest.mark.parametrize("top", ["0", "-3"])
def test_score_top_must_be_at_least_one(tiny_data, models, tmp_path, top):
    files = split_files(tiny_data, TILE, "test")
    result = run("score", *files, "--models", models["lightgbm"], "--out", tmp_path / "s.csv",
                 "--top", top)
    assert result.exit_code == 2 and "--top" in result.stderr
    with pytest.raises(XlarankError, match="at least 1"):
        score_files(files, models["lightgbm"], tmp_path / "s.csv", top=int(top))
    assert not (tmp_path / "s.csv").exists()


def test_partial_submission_warns_how_many_ids_are_missing(tiny_data, tmp_path, monkeypatch):
    # The ranking itself is not under test: every config in file order.
    monkeypatch.setattr("xlarank.score.ranked_configs",
                        lambda graph, model: (np.arange(graph.n_configs), None))
    found = sum(len(split_files(tiny_data, c, "test")) for c in COLLECTIONS)
    # The same test files without synth.json: no longer marked as generated data.
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data, ignore=shutil.ignore_patterns("synth.json"))
    with pytest.warns(XlarankWarning, match=f"{894 - found} of the 894 official test IDs"):
        write_submission(data, dict.fromkeys(c.id for c in COLLECTIONS), tmp_path / "sub.csv")
    lines = (tmp_path / "sub.csv").read_text().splitlines()
    assert len(lines) == found + 1 and all(line.split(",")[1] for line in lines[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # generated data: nothing to warn about
        write_submission(tiny_data, dict.fromkeys(c.id for c in COLLECTIONS),
                         tmp_path / "sub2.csv")


def test_a_file_without_its_collections_model_names_the_models_collections(
        tiny_data, models, tmp_path):
    # A layout file against a folder holding only a tile model: the line says both.
    layout = split_files(tiny_data, get_collection("layout:xla:default"), "test")[:1]
    result = run("score", *layout, "--models", models["tile-xla"], "--out", tmp_path / "s.csv")
    one_error_line(result, "no model for collection layout:xla:default",
                   "its models are for tile:xla")
    assert not (tmp_path / "s.csv").exists()
