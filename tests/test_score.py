"""score.py: every config of a graph ranked, best first."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from xlarank.data.graph import load_graph
from xlarank.errors import XlarankError
from xlarank.evaluate import compare_runs
from xlarank.frame import read_frame
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import evaluate_model, npz_inputs, ranked_configs


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
