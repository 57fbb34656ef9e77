"""The synthetic generator: real format, determinism, and the cost model's effects."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import SAMPLES
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.config_stats import (
    config_stats,
    layout_config_stats,
    tile_runtime_stats,
    tile_runtimes_of,
)
from xlarank.data.distinct import distinct_configs
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.data.synth import (
    COPY_NS_PER_BYTE,
    NS_PER_BYTE,
    OP_WEIGHT,
    PRESETS,
    Program,
    SynthNoise,
    SynthSize,
    default_layouts,
    draw_unmodelled_costs,
    effective_minor_pair,
    generate_program,
    layout_cost_terms,
    layout_runtime,
    layout_setting,
    make_layout_file,
    make_tile_file,
    pad_factor,
    synth_dataset,
)
from xlarank.errors import XlarankError

# Layout config statistics of the real samples (FORMAT.md, "Layout configs as they really
# are", measured per file on the real layout samples). Generated files must fall in these
# ranges, widened by the stated tolerance: a few dozen demo configs per file make the
# shares noisier than on 1,000-config real files.
REAL_OUT_FIXED2 = (0.55, 0.95)   # share of (config, node) outputs fixing exactly 2 positions
REAL_OUT_NONE = (0.03, 0.42)     # ... fixing none (all -1)
REAL_DISTINCT_PER_NODE = (1.375, 2.0)  # distinct output layouts per node (unet3d 1.375)
REAL_DUPLICATE_RATE = (0.0, 0.45)      # 1 - distinct / configs (unet3d 0.41)
REAL_SPREAD = (1.02, 3.05)             # max / min runtime
REAL_REPEAT_TAU = (0.6, 0.95)          # Kendall tau of two measurements (unet3d 0.82)
SHARE_TOL = 0.06
DISTINCT_TOL = 0.15
SPREAD_RANGE = (1.01, 3.5)
# Per file, tau is measured on as few as 10 repeated configs (standard error ~0.2): the
# per-file range is wide, the mean over files is held to the real range.
REPEAT_TAU_RANGE = (0.3, 1.0)


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
    assert len(distinct_configs(graph)) < graph.n_configs


def test_pad_factor_rule():
    dims = np.array([[7, 128, 0, 0, 0, 0]])
    aligned = np.array([[[1, 0, -1, -1, -1, -1]]], dtype=np.int8)   # minor 128, second 7
    unaligned = np.array([[[0, 1, -1, -1, -1, -1]]], dtype=np.int8)  # minor 7, second 128
    assert pad_factor(dims, aligned)[0, 0] == pytest.approx(8 / 7)
    assert pad_factor(dims, unaligned)[0, 0] == pytest.approx(128 / 7)


def test_layout_cost_grows_with_relayouts():
    rng = np.random.default_rng(0)
    program = generate_program(rng, 300, layout=True)
    setting = layout_setting(program)
    nc = len(setting.config_ids)
    assert nc > 0
    defaults = default_layouts(program.rank)
    # The real encoding: the two minor-most positions fixed, -1 after.
    keep = np.full((1, nc, 18), -1, dtype=np.int8)
    for j, node in enumerate(setting.config_ids):
        keep[0, j, :2] = defaults[node][:2]
        for slot, src in ((6, setting.input_src[j]), (12, setting.kernel_src[j])):
            if src >= 0:
                keep[0, j, slot:slot + 2] = defaults[src][:2]
    # Reading every first operand of rank >= 2 in the swapped pair forces copies.
    flipped = keep.copy()
    for j, src in enumerate(setting.input_src):
        if src >= 0 and program.rank[src] >= 2:
            flipped[0, j, 6:8] = defaults[src][:2][::-1]
    base = layout_runtime(program, setting, keep, np.random.default_rng(1))[0]
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


# ---------------------------------------------------------------- measurement noise


def _noisy_layout_files(folder, noise, count=12):
    """``count`` demo-sized layout files made with ``noise``, the same streams as the
    `generated_layout_files` fixture (so the same configs, at any noise)."""
    paths = []
    for i in range(count):
        collection = COLLECTIONS[1 + i % 4]
        path = folder / "npz" / collection.folder / "train" / f"g{i}.npz"
        make_layout_file(path, collection, 0, "train", i, PRESETS["demo"], noise=noise)
        paths.append(path)
    return paths


@pytest.mark.parametrize("tau", [0.3, 0.9])
def test_repeat_tau_setting_is_what_the_files_measure(tmp_path, tau):
    """Two measurements of a file's repeated configs agree to about the tau asked for:
    per file measured on a few repeated configs, so the mean over files is held to 0.12
    (0.3 is below every default file and near the real layout record's 0.36)."""
    paths = _noisy_layout_files(tmp_path, SynthNoise((tau, tau)))
    taus = [t for t in (layout_config_stats(p)["repeat_tau"] for p in paths) if t is not None]
    assert len(taus) >= 4
    assert abs(np.mean(taus) - tau) <= 0.12, taus


def test_noise_changes_the_measurements_alone(tmp_path):
    quiet = _noisy_layout_files(tmp_path / "quiet", SynthNoise((0.95, 0.95)), count=4)
    loud = _noisy_layout_files(tmp_path / "loud", SynthNoise((0.3, 0.3)), count=4)
    compared = 0
    for a, b in zip(quiet, loud):
        left, right = np.load(a), np.load(b)
        for key in left.files:
            if key != "config_runtime":
                np.testing.assert_array_equal(left[key], right[key])
        # Louder noise spreads the measurements of repeated configs further apart.
        group = distinct_configs(load_graph(a)).group
        spread = [_repeat_gap(group, np.load(path)["config_runtime"]) for path in (a, b)]
        if spread[0] is not None:
            assert spread[1] > spread[0], spread
            compared += 1
    assert compared >= 2


def _repeat_gap(group: np.ndarray, runtime: np.ndarray) -> float | None:
    """Median |log r1 - log r2| over the configs measured twice or more (None: none)."""
    gaps = []
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        if len(rows) >= 2:
            gaps.append(abs(np.log(runtime[rows[0]]) - np.log(runtime[rows[1]])))
    return float(np.median(gaps)) if gaps else None


def test_tile_noise_is_the_lognormal_sigma_asked_for():
    from xlarank.data.synth import TileKernel, tile_runtime

    rng = np.random.default_rng(0)
    configs = np.zeros((4000, 24), dtype=np.float32)
    configs[:, 8:10] = rng.choice([64, 128, 256, 512], size=(4000, 2))
    kernel = TileKernel(out_dims=np.array([512, 512, 0, 0, 0, 0]), element_bytes=4,
                        n_operands=3, intensity=1.0, input_bytes=4e6, contracts=True,
                        n_nodes=5)
    true = tile_runtime(kernel, configs, None)
    exact = tile_runtime(kernel, configs, np.random.default_rng(1), noise=0.0)
    np.testing.assert_array_equal(exact, np.maximum(1, np.round(true)))
    for sigma in (0.002, 0.05):
        measured = tile_runtime(kernel, configs, np.random.default_rng(1), noise=sigma)
        assert np.log(measured / true).std() == pytest.approx(sigma, rel=0.1)


@pytest.mark.parametrize("noise", [dict(layout_repeat_tau=(0.5, 0.4)),
                                   dict(layout_repeat_tau=(0.0, 0.5)),
                                   dict(layout_repeat_tau=(0.5, 1.0)),
                                   dict(layout_repeat_tau=(float("nan"), 0.5)),
                                   dict(tile_sigma=-0.01), dict(tile_sigma=float("inf"))])
def test_noise_settings_out_of_range_are_refused(noise):
    with pytest.raises(XlarankError, match="repeat tau|tile noise"):
        SynthNoise(**noise)


def test_tree_records_its_noise(tmp_path):
    out = synth_dataset(tmp_path / "d", "tiny", seed=1, noise=SynthNoise((0.3, 0.45), 0.001))
    manifest = json.loads((out / "synth.json").read_text())
    assert manifest["noise"] == {"layout_repeat_tau": [0.3, 0.45], "tile_sigma": 0.001}


# ---------------------------------------------------------------- real layout statistics


def _sample(samples, rel):
    matches = [p for p in samples if p.as_posix().endswith(rel)]
    assert matches, f"sample {rel} missing"
    return matches[0]


def test_config_stats_on_real_samples(samples):
    """Pins the measuring code on the figures FORMAT.md gives for the real samples."""
    unet = layout_config_stats(_sample(samples, "layout/xla/default/train/unet3d.npz"))
    assert unet["n_configs"] == 1159 and unet["n_configurable"] == 56
    np.testing.assert_allclose(unet["out_fixed_share"], [0.033, 0.021, 0.946, 0.0], atol=2e-3)
    np.testing.assert_allclose(unet["in_fixed_share"], [0.054, 0.0, 0.946, 0.0], atol=2e-3)
    np.testing.assert_allclose(unet["kernel_fixed_share"], [0.054, 0.0, 0.946, 0.0], atol=2e-3)
    assert unet["out_distinct_per_node"] == pytest.approx(1.375)
    np.testing.assert_allclose(unet["rank_share"], [0, 3 / 56, 0, 0, 0, 53 / 56, 0])
    assert unet["duplicate_rate"] == pytest.approx(1 - 681 / 1159)
    assert unet["runtime_spread"] == pytest.approx(3.05, abs=0.01)
    assert unet["repeat_tau"] == pytest.approx(0.82, abs=0.01)

    rnn = layout_config_stats(
        _sample(samples, "layout/xla/random/train/openai_v0_rnn_optimized.npz"))
    assert rnn["n_configs"] == 20 and rnn["out_distinct_per_node"] == 1.0
    assert rnn["duplicate_rate"] == pytest.approx(0.95) and rnn["repeat_tau"] is None

    tests = [p for p in samples if "/layout/" in p.as_posix() and p.parent.name == "test"]
    assert len(tests) == 4
    for path in tests:
        stats = layout_config_stats(path)
        assert stats["runtime_spread"] is None and stats["repeat_tau"] is None
        assert 0.74 <= stats["out_fixed_share"][2] <= 0.96
        assert 0.03 <= stats["out_fixed_share"][0] <= 0.18
        assert 1.97 <= stats["out_distinct_per_node"] <= 2.0
        assert stats["duplicate_rate"] <= 0.014


def _dominant_share(configs):
    """Mean over nodes with more than one output value of the most common value's share."""
    shares = []
    for j in range(configs.shape[1]):
        _, counts = np.unique(configs[:, j, 0:6], axis=0, return_counts=True)
        if len(counts) > 1:
            shares.append(counts.max() / counts.sum())
    return float(np.mean(shares))


@pytest.fixture(scope="module")
def generated_layout_files(tmp_path_factory):
    """12 demo-sized layout files, three per layout collection (both searches); about 40%
    of files draw almost no duplicates, so 12 leave a few with repeats to measure."""
    folder = tmp_path_factory.mktemp("layout-stats")
    files = []
    for i in range(12):
        collection = COLLECTIONS[1 + i % 4]
        path = folder / "npz" / collection.folder / "train" / f"g{i}.npz"
        make_layout_file(path, collection, 0, "train", i, PRESETS["demo"])
        files.append((collection.search, path))
    return files


def test_generated_layout_files_have_real_statistics(generated_layout_files):
    stats = [(search, layout_config_stats(path)) for search, path in generated_layout_files]
    for _, st in stats:
        out = st["out_fixed_share"]
        assert REAL_OUT_FIXED2[0] - SHARE_TOL <= out[2] <= REAL_OUT_FIXED2[1] + SHARE_TOL, st
        assert REAL_OUT_NONE[0] - 0.03 <= out[0] <= REAL_OUT_NONE[1] + SHARE_TOL, st
        assert out[1] + out[3] <= 0.2, st  # 1, 3 or 4 fixed positions are rare
        assert st["in_fixed_share"][2] >= REAL_OUT_FIXED2[0] - SHARE_TOL, st
        # Kernel layouts fix 0 or 2 positions.
        assert st["kernel_fixed_share"][1] == 0 and st["kernel_fixed_share"][3] == 0, st
        lo, hi = REAL_DISTINCT_PER_NODE
        assert lo - DISTINCT_TOL <= st["out_distinct_per_node"] <= hi + DISTINCT_TOL, st
        assert sum(st["rank_share"][2:5]) >= 0.5, st  # ranks 2-4 dominate
        assert st["rank_share"][6] == 0, st
        assert REAL_DUPLICATE_RATE[0] <= st["duplicate_rate"] <= REAL_DUPLICATE_RATE[1] + 0.05
        assert SPREAD_RANGE[0] <= st["runtime_spread"] <= SPREAD_RANGE[1], st
        if st["repeat_tau"] is not None:
            assert REPEAT_TAU_RANGE[0] <= st["repeat_tau"] <= REPEAT_TAU_RANGE[1], st
    # Across files: the means sit inside the real ranges, every rank 0-5 occurs somewhere,
    # and some files have enough repeated configs to measure their agreement.
    mean = lambda key, i: np.mean([st[key][i] for _, st in stats])  # noqa: E731
    assert REAL_OUT_FIXED2[0] <= mean("out_fixed_share", 2) <= REAL_OUT_FIXED2[1]
    assert REAL_OUT_NONE[0] <= mean("out_fixed_share", 0) <= REAL_OUT_NONE[1]
    assert all(max(st["rank_share"][r] for _, st in stats) > 0 for r in range(6))
    taus = [st["repeat_tau"] for _, st in stats if st["repeat_tau"] is not None]
    assert len(taus) >= 2 and REAL_REPEAT_TAU[0] <= np.mean(taus) <= REAL_REPEAT_TAU[1]
    spreads = [st["runtime_spread"] for _, st in stats]
    assert min(spreads) < 1.5 < max(spreads)
    assert REAL_SPREAD[0] <= np.mean(spreads) <= REAL_SPREAD[1]


def test_default_search_has_a_dominant_option_random_does_not(generated_layout_files):
    """FORMAT.md: in default search one option dominates per node (978 vs 22 configs), in
    random search options are near-uniform."""
    shares = {"default": [], "random": []}
    for search, path in generated_layout_files:
        graph = load_graph(path)
        shares[search].append(_dominant_share(graph.node_config_feat))
    assert min(shares["default"]) > 0.75 and max(shares["random"]) < 0.7, shares


def test_config_stats_of_arrays_match_the_file(generated_layout_files):
    """Stats of the float32 arrays as written equal those of the file read as int8."""
    _, path = generated_layout_files[0]
    with np.load(path) as npz:
        arrays = config_stats(npz["node_feat"], npz["node_config_ids"],
                              npz["node_config_feat"], npz["config_runtime"])
    assert arrays == layout_config_stats(path)


# ---------------------------------------------------------------- cost model terms


def _tiny_program():
    """param [7, 256], param [256, 128] -> dot [7, 128] -> transpose [128, 7] -> root.
    The dot's dim 1 (128) is lane-aligned, its dim 0 (7) is not."""
    shapes = [[7, 256], [256, 128], [7, 128], [128, 7], []]
    dims = np.zeros((5, 6), dtype=np.int64)
    for i, shape in enumerate(shapes):
        dims[i, :len(shape)] = shape
    return Program(opcode=np.array([63, 63, 34, 98, 100]), dims=dims,
                   rank=np.array([len(s) for s in shapes]),
                   element_col=np.full(5, 13), element_bytes=np.full(5, 4),
                   operands=[[], [], [0, 1], [2], [3]])


def _config(dot_out, dot_in, dot_kernel, tr_out, tr_in):
    c = np.full((1, 2, 18), -1, dtype=np.int8)
    for j, slot, value in ((0, 0, dot_out), (0, 6, dot_in), (0, 12, dot_kernel),
                           (1, 0, tr_out), (1, 6, tr_in)):
        c[0, j, slot:slot + len(value)] = value
    return c


def test_effective_minor_pair():
    prefix = np.full((5, 6), -1, dtype=np.int8)
    prefix[0, :2] = [4, 0]
    prefix[2, :1] = [0]
    prefix[3, :1] = [2]
    rank = np.array([5, 3, 3, 3, 0])
    assert effective_minor_pair(prefix, rank).tolist() == [[4, 0], [2, 1], [0, 2], [2, 1],
                                                           [-1, -1]]


def test_cost_terms_do_what_the_docstring_says():
    program = _tiny_program()
    setting = layout_setting(program)
    assert setting.config_ids.tolist() == [2, 3]
    table = draw_unmodelled_costs(np.random.default_rng(0), program, setting)

    def terms(*layouts):
        return layout_cost_terms(program, setting, _config(*layouts), table)[0]

    default = terms([1, 0], [1, 0], [1, 0], [1, 0], [1, 0])
    dot_bytes, param_bytes = 7 * 128 * 4, 7 * 256 * 4
    # (a) Swapping the dot's minor pair puts the unaligned dim (7) minor: padding to 128.
    # The transpose reads what the dot produces, so no copy either way.
    swapped = terms([0, 1], [1, 0], [1, 0], [1, 0], [0, 1])
    dot_cost = dot_bytes * OP_WEIGHT[34] * NS_PER_BYTE
    assert default[1] == swapped[1] == 0
    assert swapped[0] - default[0] == pytest.approx(dot_cost * (128 / 7 - 8 / 7))
    # (b) Reading an operand in another layout than it is produced in costs a copy of the
    # operand: the transpose reading the swapped dot output in the default pair, or the
    # dot reading its (unconfigurable) parameter in the swapped pair.
    stale = terms([0, 1], [1, 0], [1, 0], [1, 0], [1, 0])
    assert stale[1] == pytest.approx(COPY_NS_PER_BYTE * dot_bytes)
    assert stale[0] == swapped[0] and stale[2] == swapped[2]
    param = terms([1, 0], [0, 1], [1, 0], [1, 0], [1, 0])
    assert param[1] == pytest.approx(COPY_NS_PER_BYTE * param_bytes)
    # A full order with the same two minor-most dims is the same layout.
    assert terms([1, 0], [1, 0, -1], [1, 0], [1, 0], [1, 0]).tolist() == default.tolist()
    # (c) Not fixing anything is the default layout: same cost in every term.
    unfixed = terms([], [], [], [], [])
    assert unfixed.tolist() == default.tolist()
    # The unmodelled cost is per (node, effective layout): the swap changes it.
    assert swapped[2] != default[2] and default[2] > 0


def test_generated_runtimes_hold_spread_and_vary_with_the_flips(generated_layout_files):
    for search, path in generated_layout_files:
        graph = load_graph(path)
        group = distinct_configs(graph).group
        runtime = graph.config_runtime.astype(float)
        # Repeated configs differ by noise only: far less than configs differ overall.
        means = np.bincount(group, runtime) / np.bincount(group)
        within = np.abs(runtime - means[group]).mean()
        between = np.abs(runtime - runtime.mean()).mean()
        assert within < 0.5 * between, (search, within, between)


def test_config_stats_of_files_without_configs_or_configurable_nodes():
    from xlarank.data.config_stats import config_stats

    node_feat = np.zeros((3, 140), dtype=np.float32)
    no_nodes = config_stats(node_feat, np.zeros(0, np.int64), np.zeros((4, 0, 18), np.int8),
                            np.array([5, 6, 7, 8]))
    assert no_nodes["n_configurable"] == 0 and no_nodes["duplicate_rate"] == 0.75
    no_configs = config_stats(node_feat, np.array([1]), np.zeros((0, 1, 18), np.int8),
                              np.zeros(0, np.int64))
    assert no_configs["n_configs"] == 0 and no_configs["duplicate_rate"] == 0.0


# ---------------------------------------------------------------- real tile statistics

# The real TpuGraphs tuning record of 15 tile kernels (../shared/tpugraphs/raw/README).
REAL_TILE_RECORD = SAMPLES / "raw" / "op_tuning_data.pb"
# Generated kernels for the comparison: sized like the record's (2 to 56 nodes, 2 to 579
# configs), enough of them for the quantiles to be stable; seed 0.
TILE_STATS_SIZE = SynthSize((80, 0, 0), (0, 0, 0), (2, 60), (2, 600), (2, 2), (1, 1), (1, 1))
# How far the generated statistics may sit from the record's (factors, or differences for
# the fastest config over the default). The record has 15 kernels, the sample 80: its
# 90th percentile and maximum are noisy, and 80 kernels reach further into the tail.
SPREAD_MEDIAN_FACTOR = 2.0   # record 5.5x
SPREAD_Q90_FACTOR = 3.0      # record 8.5x
SPREAD_MAX_FACTOR = 5.0      # record 29x
MIN_RATIO_TOL = 0.05         # record: 10th percentile 0.93, median 1.0


def real_tile_record():
    if not REAL_TILE_RECORD.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"real tuning record missing at {REAL_TILE_RECORD} (required in CI)")
        pytest.skip(f"real tuning record not found at {REAL_TILE_RECORD}")
    return REAL_TILE_RECORD


def test_tile_runtime_stats_of_the_real_record():
    """Pins the measuring code on the record's figures (docs/synthetic.md)."""
    real = tile_runtime_stats(tile_runtimes_of([real_tile_record()]))
    assert real["n_configs"].tolist() == [61, 579, 16, 16, 16, 23, 10, 11, 5, 3, 3, 2, 3, 2, 2]
    np.testing.assert_allclose(
        real["max_ratio"],
        [6.83, 26.15, 3.68, 6.98, 6.01, 5.14, 8.33, 4.44, 8.5, 5.5, 6.66, 1.59, 1.87, 1.05, 1.0],
        atol=0.01)
    assert np.median(real["spread"]) == pytest.approx(5.5, abs=0.01)
    assert real["spread"].max() == pytest.approx(28.86, abs=0.01)
    # The default run is the fastest in 11 of the 15 kernels, and within 12% in all.
    assert (real["min_ratio"] == 1).sum() == 11 and real["min_ratio"].min() > 0.87


def test_generated_tile_runtimes_spread_like_the_real_record(tmp_path):
    """Runtime over the default, per generated kernel, against the record's 15 kernels:
    max / min at the median, 90th percentile and maximum within the stated factors, and
    the fastest config over the default (10th percentile, median) within MIN_RATIO_TOL."""
    real = tile_runtime_stats(tile_runtimes_of([real_tile_record()]))
    for i in range(TILE_STATS_SIZE.tile_files[0]):
        make_tile_file(tmp_path / f"k{i}.npz", 0, "train", i, TILE_STATS_SIZE)
    synth = tile_runtime_stats(tile_runtimes_of([tmp_path]))

    def within(key, q, factor):
        got, want = np.quantile(synth[key], q), np.quantile(real[key], q)
        assert want / factor <= got <= want * factor, (key, q, got, want)

    within("spread", 0.5, SPREAD_MEDIAN_FACTOR)
    within("spread", 0.9, SPREAD_Q90_FACTOR)
    within("spread", 1.0, SPREAD_MAX_FACTOR)
    for q in (0.1, 0.5):
        got, want = np.quantile(synth["min_ratio"], q), np.quantile(real["min_ratio"], q)
        assert abs(got - want) <= MIN_RATIO_TOL, ("min_ratio", q, got, want)
