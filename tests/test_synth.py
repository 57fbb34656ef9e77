"""The synthetic generator: real format, determinism, and the cost model's effects."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.data.synth import (PRESETS, default_layouts, generate_program, layout_runtime,
                                layout_setting, make_layout_file, pad_factor, synth_dataset)
from xlarank.errors import XlarankError


def test_tree_has_all_collections_and_loads(tiny_data):
    size = PRESETS["tiny"]
    for collection in COLLECTIONS:
        counts = size.tile_files if collection.is_tile else size.layout_files
        for split, count in zip(("train", "valid", "test"), counts):
            files = split_files(tiny_data, collection, split)
            assert len(files) == count
            for path in files:
                graph = load_graph(path)
                assert graph.collection == collection and graph.split == split
                assert graph.labelled == (split != "test")
                # Edges point from consumer to an earlier producer, as in real files.
                assert (graph.edge_index[:, 0] > graph.edge_index[:, 1]).all()
                assert graph.node_feat[-1, 0] == 1.0
    assert json.loads((tiny_data / "synth.json").read_text())["seed"] == 7


def test_same_seed_same_files(tmp_path):
    a = synth_dataset(tmp_path / "a", "tiny", seed=1)
    b = synth_dataset(tmp_path / "b", "tiny", seed=1)
    c = synth_dataset(tmp_path / "c", "tiny", seed=2)
    for path in sorted((a / "npz").rglob("*.npz")):
        rel = path.relative_to(a)
        left, right = np.load(path), np.load(b / rel)
        for key in left.files:
            np.testing.assert_array_equal(left[key], right[key])
    first = sorted((a / "npz").rglob("*.npz"))[0].relative_to(a)
    assert not np.array_equal(np.load(a / first)["node_feat"], np.load(c / first)["node_feat"])


def test_refuses_existing_folder(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(XlarankError, match="already exists"):
        synth_dataset(tmp_path / "x", "tiny")


def test_duplicate_configs_occur(tmp_path):
    path = tmp_path / "npz/layout/xla/random/train/g.npz"
    make_layout_file(path, COLLECTIONS[2], 0, "train", 0, PRESETS["demo"])
    graph = load_graph(path)
    assert isinstance(graph, LayoutGraph)
    flat = graph.node_config_feat.reshape(graph.n_configs, -1)
    assert len(np.unique(flat, axis=0)) < graph.n_configs


def test_pad_factor_rule():
    dims = np.array([[7, 128, 0, 0, 0, 0]])
    aligned = np.array([[[1, 0, -1, -1, -1, -1]]], dtype=np.int8)   # minor 128, second 7
    unaligned = np.array([[[0, 1, -1, -1, -1, -1]]], dtype=np.int8)  # minor 7, second 128
    assert pad_factor(dims, aligned)[0, 0] == pytest.approx(8 / 7)
    assert pad_factor(dims, unaligned)[0, 0] == pytest.approx(128 / 7)


def test_layout_cost_grows_with_relayouts():
    rng = np.random.default_rng(0)
    program = generate_program(rng, 300)
    setting = layout_setting(program)
    nc = len(setting.config_ids)
    assert nc > 0
    defaults = default_layouts(program.rank)
    keep = np.full((1, nc, 18), -1, dtype=np.int8)
    for j, node in enumerate(setting.config_ids):
        keep[0, j, :6] = defaults[node]
        for slot, src in ((6, setting.input_src[j]), (12, setting.kernel_src[j])):
            if src >= 0 and program.rank[src] > 0:
                keep[0, j, slot:slot + 6] = defaults[src]
    # Reading every first operand in a reversed layout forces copies.
    flipped = keep.copy()
    for j, src in enumerate(setting.input_src):
        r = int(program.rank[src]) if src >= 0 else 0
        if r >= 2:
            flipped[0, j, 6:6 + r] = defaults[src][:r][::-1]
    quiet = np.random.default_rng(1)
    base = layout_runtime(program, setting, keep, quiet)[0]
    slower = layout_runtime(program, setting, flipped, np.random.default_rng(1))[0]
    assert slower > base


def test_dims_stay_in_range_on_long_programs():
    for seed in range(3):
        program = generate_program(np.random.default_rng(seed), 5000)
        assert program.dims.max() < 2**31


def test_tile_cost_depends_on_the_kernel_not_the_tile_alone():
    from xlarank.data.synth import TileKernel, tile_runtime

    configs = np.zeros((3, 24), dtype=np.float32)
    configs[:, 8:10] = [[256, 256], [64, 512], [512, 512]]  # 2x2, 8x1, 1x1 tiles
    base = dict(out_dims=np.array([512, 512, 0, 0, 0, 0]), element_bytes=4, n_operands=3,
                intensity=1.0, input_bytes=4e6, n_nodes=5)

    def runtime(**changes):
        return tile_runtime(TileKernel(**{**base, **changes}), configs,
                            np.random.default_rng(0)).astype(float)

    plain, contracting = runtime(contracts=False), runtime(contracts=True)
    # Same noise draws: a contraction pays for re-reading its inputs, more with more tiles
    # along the minor dims, nothing with a single tile.
    extra = contracting - plain
    assert extra[2] == pytest.approx(0, abs=2) and extra[1] > extra[0] > 1000
    # More fused nodes cost more per tile: the many-tile config loses more.
    slower = runtime(contracts=False, n_nodes=50) - plain
    assert slower[1] > slower[0] > slower[2] > 0
