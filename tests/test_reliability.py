"""Killed runs, resume, worker counts, mismatched artifacts and edge-case graphs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.feather as feather
import pytest

from conftest import REPO_SPECS
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.data.npzwrite import write_npz
from xlarank.data.synth import synth_dataset
from xlarank.errors import BadGraphError, MismatchError
from xlarank.evaluate import per_graph_metrics
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.featurize import PART_SUFFIX, featurize_files, parts_dir_for
from xlarank.frame import read_frame, read_meta
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import ranked_configs

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
TILE = get_collection("tile-xla")
LAYOUT = get_collection("layout-xla-default")


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    """Enough files that featurizing takes a few seconds."""
    return synth_dataset(tmp_path_factory.mktemp("demo") / "d", "demo", seed=5)


def frame_equal(a: Path, b: Path) -> None:
    left, right = read_frame(a)[0], read_frame(b)[0]
    pd.testing.assert_frame_equal(left, right)
    assert read_meta(a) == read_meta(b)


@pytest.mark.slow
def test_frame_is_the_same_for_any_worker_count(demo_data, tmp_path):
    files = split_files(demo_data, LAYOUT, "train")[:8]
    featurize_files(files, tmp_path / "one.parquet", LAYOUT, "train", DEFAULT, workers=1)
    featurize_files(files, tmp_path / "two.parquet", LAYOUT, "train", DEFAULT, workers=2)
    frame_equal(tmp_path / "one.parquet", tmp_path / "two.parquet")


@pytest.mark.slow
def test_same_seed_same_predictions_for_any_worker_count(tiny_data, spec_dir, tmp_path):
    files = split_files(tiny_data, TILE, "train")
    scores = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.parquet"
        featurize_files(files, out, TILE, "train", DEFAULT, workers=workers)
        table, meta = read_frame(out)
        ranker = train_ranker(table, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
        scores.append(ranker.predict(table))
    np.testing.assert_array_equal(scores[0], scores[1])


@pytest.mark.slow
def test_sigkill_mid_run_leaves_no_partial_frame_and_resumes(demo_data, tmp_path):
    out = tmp_path / "frames" / "train.parquet"
    command = [sys.executable, "-m", "xlarank", "featurize", str(demo_data),
               "--collection", "layout-xla-random", "--split", "train", "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    parts = parts_dir_for(out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(parts.glob(f"*{PART_SUFFIX}"))) < 3:
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not out.exists()
    done = len(list(parts.glob(f"*{PART_SUFFIX}")))
    assert 3 <= done < len(split_files(demo_data, get_collection("layout-xla-random"), "train"))
    # No half-written part is mistaken for a finished one: they are renamed when whole.
    for part in parts.glob(f"*{PART_SUFFIX}"):
        assert feather.read_table(part).num_rows > 0
    # A temporary file like the one a killed writer leaves; the rerun must clear it.
    (out.parent / f".{out.name}.killed.part").write_bytes(b"half")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == [f".{out.name}.parts", out.name]
    assert not [p for p in parts.iterdir() if p.name.endswith(".part")]
    assert f"({done} unchanged files reused)" in result.stdout.replace("\n", " ")
    clean = tmp_path / "clean.parquet"
    featurize_files(split_files(demo_data, get_collection("layout-xla-random"), "train"),
                    clean, get_collection("layout-xla-random"), "train", DEFAULT)
    frame_equal(out, clean)


def test_model_from_newer_xlarank_is_refused(tiny_data, spec_dir, tmp_path):
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, TILE, "train"), out, TILE, "train", DEFAULT)
    table, meta = read_frame(out)
    train_ranker(table, meta, load_ranker_spec(spec_dir / "lgbm.toml")).save(tmp_path / "m")
    card = json.loads((tmp_path / "m" / "card.json").read_text())
    card["format"] += 1
    (tmp_path / "m" / "card.json").write_text(json.dumps(card))
    with pytest.raises(MismatchError, match="newer xlarank"):
        load_model(tmp_path / "m")


def layout_file(path: Path, n_configs: int, nc: int = 4, identical: bool = False,
                n_nodes: int = 12) -> Path:
    rng = np.random.default_rng(n_configs)
    node_feat = np.zeros((n_nodes, 140), dtype=np.float32)
    node_feat[:, 21:23] = rng.choice([8, 100, 128], (n_nodes, 2))
    node_feat[:, 134:136] = [1, 0]
    edges = np.array([[i, i - 1] for i in range(1, n_nodes)], dtype=np.int64)
    configs = rng.integers(-1, 2, (n_configs, nc, 18)).astype(np.float32)
    if identical and n_configs:
        configs[:] = configs[0]
    runtime = rng.integers(1_000, 2_000, n_configs).astype(np.int64)
    write_npz(path, {"node_feat": node_feat, "node_opcode": np.full(n_nodes, 26, np.uint8),
                     "edge_index": edges, "node_config_ids": np.arange(nc, dtype=np.int64) + 2,
                     "config_runtime": runtime,
                     "node_splits": np.array([[0, n_nodes]], dtype=np.int64)},
              streamed={"node_config_feat": ((n_configs, nc, 18), np.float32,
                                             (configs[s:s + 4096]
                                              for s in range(0, max(n_configs, 1), 4096)))})
    return path


def test_graph_with_one_config(tmp_path):
    path = layout_file(tmp_path / "npz/layout/xla/default/train/g.npz", 1)
    graph = load_graph(path)
    block = featurize_graph(graph, DEFAULT)
    assert len(block) == 1
    metrics = per_graph_metrics(block, np.zeros(1), False)
    assert np.isnan(metrics["kendall_tau"][0])


def test_graph_with_zero_configs_is_refused(tmp_path):
    """Nothing to rank; its frame part could not even be written."""
    path = layout_file(tmp_path / "npz/layout/xla/default/train/g.npz", 0)
    with pytest.raises(BadGraphError, match="no configs"):
        load_graph(path)


def test_all_identical_configs(tmp_path, spec_dir):
    path = layout_file(tmp_path / "npz/layout/xla/default/train/g.npz", 20, identical=True)
    block = featurize_graph(load_graph(path), DEFAULT)
    features = block.iloc[:, 4:].to_numpy()
    assert (features == features[0]).all()


def test_tile_kernel_of_one_node_and_no_edges(tmp_path):
    node_feat = np.zeros((1, 140), dtype=np.float32)
    node_feat[0, [0, 13, 21, 22]] = [1, 1, 64, 128]
    config = np.zeros((3, 24), dtype=np.float32)
    config[:, 8:10] = [[8, 128], [64, 128], [3, 5]]
    path = tmp_path / "npz/tile/xla/train/k.npz"
    write_npz(path, {"node_feat": node_feat, "node_opcode": np.array([63], np.uint8),
                     "edge_index": np.zeros((0, 2), np.int64), "config_feat": config,
                     "config_runtime": np.array([3, 2, 9], np.int64),
                     "config_runtime_normalizers": np.array([2, 2, 2], np.int64)})
    graph = load_graph(path)
    block = featurize_graph(graph, DEFAULT)
    assert len(block) == 3 and np.isfinite(block.iloc[:, 4:].to_numpy()).all()


@pytest.mark.slow
def test_layout_graph_with_100k_configs(tmp_path, tiny_data, spec_dir):
    path = layout_file(tmp_path / "npz/layout/xla/default/test/big.npz", 100_000, nc=30,
                       n_nodes=60)
    graph = load_graph(path)
    assert graph.node_config_feat.shape == (100_000, 30, 18)
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, LAYOUT, "train"), out, LAYOUT, "train", DEFAULT)
    table, meta = read_frame(out)
    ranker = train_ranker(table, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    order, _ = ranked_configs(graph, ranker)
    assert len(order) == 100_000 and len(np.unique(order)) == 100_000


def test_same_file_name_in_two_collections(tiny_data, tmp_path):
    """Frames are per collection, and score/submit IDs carry the collection."""
    a = split_files(tiny_data, get_collection("layout-xla-default"), "train")[0]
    b = split_files(tiny_data, get_collection("layout-nlp-default"), "train")[0]
    assert a.name == b.name
    ga, gb = load_graph(a), load_graph(b)
    assert ga.graph_id == gb.graph_id and ga.collection != gb.collection


def test_model_save_replaces_directory_whole(tiny_data, spec_dir, tmp_path):
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, TILE, "train"), out, TILE, "train", DEFAULT)
    table, meta = read_frame(out)
    ranker = train_ranker(table, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    ranker.save(tmp_path / "m")
    (tmp_path / "m" / "stray.txt").write_text("from an older run")
    ranker.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["card.json", "model.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".m.")] == []
