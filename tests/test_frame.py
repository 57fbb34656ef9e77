"""frame.py (the parquet frame format) and featurize.py (files into frames: dedup, bad
files, row groups, reused parts)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import REPO_SPECS
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import XlarankError
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files, parts_dir_for
from xlarank.frame import group_sizes, read_frame, read_meta

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
TILE = get_collection("tile-xla")


def test_frame_round_trip(frames, tiny_data):
    path = frames["default", "layout-xla-default", "train"]
    table, meta = read_frame(path)
    assert meta.collection == "layout:xla:default" and meta.split == "train"
    assert meta.spec_hash == DEFAULT.hash and meta.feature_names == list(table.columns[4:])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "train")
    distinct = [len(np.unique(load_graph(f).node_config_feat.reshape(load_graph(f).n_configs, -1),
                              axis=0)) for f in files]
    # Train frames keep one row per distinct config; valid frames keep every config.
    assert meta.dedup and list(group_sizes(table)) == distinct
    assert table["config_index"].dtype == np.int32
    valid, valid_meta = read_frame(frames["default", "layout-xla-default", "valid"])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "valid")
    assert not valid_meta.dedup
    assert list(group_sizes(valid)) == [load_graph(f).n_configs for f in files]


def test_skip_bad_records_file(tiny_data, tmp_path):
    collection = get_collection("tile-xla")
    files = split_files(tiny_data, collection, "train")
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"not a zip")
    out = tmp_path / "f.parquet"
    with pytest.raises(XlarankError, match="broken.npz"):
        featurize_files(files + [bad], out, collection, "train", DEFAULT)
    assert not out.exists()
    rows, skipped, _ = featurize_files(files + [bad], out, collection, "train", DEFAULT,
                                       skip_bad=True)
    assert len(skipped) == 1 and "broken.npz" in skipped[0]
    assert read_meta(out).skipped == skipped


def test_row_groups_hold_whole_graphs(tiny_data, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import xlarank.frame as frame_module
    from xlarank.frame import row_group_graph_sizes

    monkeypatch.setattr(frame_module, "ROW_GROUP_ROWS", 40)
    collection = get_collection("tile-xla")
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, collection, "train"), out, collection, "train",
                    DEFAULT, dedup=False)
    table, _ = read_frame(out)
    per_group = row_group_graph_sizes(out)
    assert 1 < len(per_group) < len(group_sizes(table))
    assert list(np.concatenate(per_group)) == list(group_sizes(table))
    parquet = pq.ParquetFile(out)
    ids = [set(parquet.read_row_group(g, columns=["graph_id"])["graph_id"].to_pylist())
           for g in range(parquet.metadata.num_row_groups)]
    assert sum(len(s) for s in ids) == len(set().union(*ids))  # no graph in two groups


def test_rerun_reuses_parts_and_redoes_changed_files(tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    files = split_files(data, TILE, "train")
    out = tmp_path / "f.parquet"
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == 0
    manifest = json.loads((parts_dir_for(out) / "manifest.json").read_text())
    assert set(manifest) == {str(f) for f in files}
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == len(files)
    # Replace one file by another graph: only it is redone, and its old part goes.
    old_part = parts_dir_for(out) / manifest[str(files[0])]["part"]
    shutil.copy(files[1], files[0])
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == len(files) - 1
    assert not old_part.exists()
    assert len(list(parts_dir_for(out).glob("*.parquet"))) == len(files)
