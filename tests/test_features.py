"""features/: spec files and hashes (spec.py), featurize_graph and config dedup (build.py),
per-graph tables (tables.py), families (families/), pruning (prune.py)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import naive
from conftest import REPO_SPECS
from helpers import (
    tile_arrays,
    write_tile,
)
from xlarank.data.distinct import distinct_configs
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.errors import (
    BadGraphError,
    SpecError,
)
from xlarank.features import feature_names, featurize_graph, load_feature_spec
from xlarank.features.build import (
    group_median_int,
    layout_config_features,
    tile_config_features,
)
from xlarank.features.families.config_nodes import NODE_SLOTS, node_slots, touched_bytes
from xlarank.features.families.khop import khop_weights
from xlarank.features.spec import FeatureSpec
from xlarank.features.tables import (
    GraphTables,
    default_layout,
    node_shapes,
    operand_tables,
    undirected_csr,
)

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
BASELINE = load_feature_spec(REPO_SPECS.features("baseline"))


# ---------------------------------------------------------------- spec.py


def test_spec_hash_changes_with_families():
    assert DEFAULT.hash != BASELINE.hash
    assert len(DEFAULT.hash) == 16


def test_feature_spec_k_and_bad_specs(tmp_path):
    from xlarank.errors import SpecError

    base = 'name = "x"\nfamilies = ["graph", "khop"]\n'
    (tmp_path / "k1.toml").write_text(base + "k = 1\n")
    (tmp_path / "k3.toml").write_text(base + "k = 3\n")
    k1, k3 = load_feature_spec(tmp_path / "k1.toml"), load_feature_spec(tmp_path / "k3.toml")
    assert (k1.k, k3.k) == (1, 3) and k1.hash != k3.hash
    for text, message in [(base + "k = -1\n", "'k'"), (base + "radius = 2\n", "unknown keys"),
                          ('families = ["graph", "transformer"]\n', "unknown feature families"),
                          ("families = [\n", "not valid TOML")]:
        (tmp_path / "bad.toml").write_text(text)
        with pytest.raises(SpecError, match=message):
            load_feature_spec(tmp_path / "bad.toml")
    with pytest.raises(SpecError, match="not found"):
        load_feature_spec(tmp_path / "missing.toml")


# ---------------------------------------------------------------- build.py


def test_featurize_every_real_sample(samples):
    for path in samples:
        graph = load_graph(path)
        for spec in (DEFAULT, BASELINE):
            block = featurize_graph(graph, spec)
            names = feature_names(spec, graph.collection.is_tile)
            assert list(block.columns[4:]) == names
            assert len(block) == graph.n_configs
            assert np.isfinite(block[names].to_numpy()).all()
            np.testing.assert_array_equal(block["runtime"], graph.config_runtime)


def test_streamed_equals_in_memory_and_dedup_follows_np_unique(samples, monkeypatch):
    import xlarank.data.graph as graph_module

    # Small blocks so configs span many blocks and duplicates cross block borders.
    monkeypatch.setattr(graph_module, "CONFIG_BLOCK_BYTES", 50 * 56 * 18 * 4)
    for path in samples:
        in_memory = load_graph(path)
        if not isinstance(in_memory, LayoutGraph):
            continue
        streamed = load_graph(path, configs=False)
        a = featurize_graph(in_memory, DEFAULT)
        b = featurize_graph(streamed, DEFAULT)
        pd.testing.assert_frame_equal(a, b)
        _, distinct_of = layout_config_features(streamed, DEFAULT)
        np.testing.assert_array_equal(distinct_of,
                                      naive.distinct_groups(in_memory.node_config_feat))


def test_frames_group_configs_as_distinct_configs_does_in_config_order(samples, tiny_data):
    """Layout (streamed, by row hashes) and tile (by distinct_configs) dedup give the one
    function's groups, numbered by first appearance: on the real tile samples and on
    generated layout files (the real layout samples are
    test_streamed_equals_in_memory_and_dedup_follows_np_unique's)."""
    # The grouping is the same for any family: the cheapest one keeps the test short.
    raw_only = FeatureSpec("raw", ("config_raw",))
    layout = sorted((tiny_data / "npz/layout/xla/random/train").glob("*.npz"))
    tile = [p for p in samples if "/tile/" in p.as_posix()]
    graphs = [load_graph(p) for p in [*layout, *tile]]
    assert {isinstance(g, LayoutGraph) for g in graphs} == {False, True}
    for graph in graphs:
        is_layout = isinstance(graph, LayoutGraph)
        _, distinct_of = (layout_config_features if is_layout
                          else tile_config_features)(graph, raw_only)
        distinct = distinct_configs(graph)
        first, group = distinct.in_config_order()
        np.testing.assert_array_equal(distinct_of, group)
        np.testing.assert_array_equal(first, np.sort(distinct.first))
        raw = graph.node_config_feat if is_layout else graph.config_feat
        np.testing.assert_array_equal(group, naive.distinct_groups(raw))


def test_row_groups_number_rows_as_np_unique_does(samples, tiny_data):
    """distinct_configs' grouping (a lexsort) against np.unique(axis=0): random rows with
    many repeats, -0.0 beside 0.0, no rows, no columns, constant columns, one repeated
    row, and every real and generated graph's raw config columns."""
    from xlarank.data.distinct import config_columns, row_groups

    rng = np.random.default_rng(7)
    cases = [rng.integers(-1, 3, (n, k)).astype(np.float32)
             for n, k in ((1, 1), (2, 3), (500, 1), (800, 4), (3000, 24))]
    signed = rng.integers(-1, 2, (200, 5)).astype(np.float32)
    signed[signed == 0] = rng.choice([0.0, -0.0], int((signed == 0).sum()))
    # Constant columns between varying ones (row_groups sorts on the varying ones), and
    # rows that are all one row.
    constant = np.hstack([np.full((300, 3), 2.0, np.float32),
                          rng.integers(0, 2, (300, 2)).astype(np.float32),
                          np.full((300, 4), -1.0, np.float32),
                          rng.integers(-1, 1, (300, 1)).astype(np.float32)])
    cases += [signed, np.zeros((0, 6), np.float32), np.zeros((5, 0), np.float32), constant,
              np.ones((4, 7), np.float32)]
    files = [*sorted((tiny_data / "npz").rglob("*.npz"))[:12], *samples]
    cases += [config_columns(load_graph(p)) for p in files]
    for x in cases:
        first, group = row_groups(x)
        _, expected_first, inverse = np.unique(x, axis=0, return_index=True,
                                               return_inverse=True)
        np.testing.assert_array_equal(first, expected_first)
        np.testing.assert_array_equal(group, inverse.reshape(-1))
        assert first.dtype == group.dtype == np.int64


def test_dedup_on_unet3d(samples):
    path = next(p for p in samples if p.stem == "unet3d")
    graph = load_graph(path)
    full = featurize_graph(graph, DEFAULT)
    deduped = featurize_graph(graph, DEFAULT, dedup=True)
    assert len(full) == 1159 and len(deduped) == 681  # as the samples README says
    groups = naive.distinct_groups(graph.node_config_feat)
    medians = pd.Series(graph.config_runtime).groupby(groups).median().round().astype(np.int64)
    np.testing.assert_array_equal(deduped["runtime"], medians.to_numpy())
    first = [int(np.flatnonzero(groups == g)[0]) for g in range(groups.max() + 1)]
    np.testing.assert_array_equal(deduped["config_index"], first)
    feats = full.columns[4:]
    np.testing.assert_array_equal(deduped[feats].to_numpy(), full.loc[first, feats].to_numpy())


# ---------------------------------------------------------------- tables.py, families/


def test_operand_tables_match_pandas_reference(samples):
    for path in samples:
        graph = load_graph(path, configs=False)
        if not isinstance(graph, LayoutGraph):
            continue
        _, rank, nbytes = node_shapes(graph.node_feat)
        dims = graph.node_feat[:, 21:27].astype(np.int64)
        pos, info, operand_dims = operand_tables(graph, dims, rank, nbytes,
                                                 default_layout(graph.node_feat, rank))
        operands = naive.operands_by_node(graph.edge_index[:, 0], graph.edge_index[:, 1],
                                          graph.n_nodes)
        where = {int(n): j for j, n in enumerate(graph.node_config_ids)}
        for j, node in enumerate(graph.node_config_ids):
            for slot in range(2):
                ops = operands[node]
                if slot >= len(ops) or rank[ops[slot]] == 0:
                    assert pos[j, slot] == -2
                else:
                    assert pos[j, slot] == where.get(ops[slot], -1)
                    assert info[j, slot, 0] == nbytes[ops[slot]]
                    assert (operand_dims[j, slot] == dims[ops[slot]]).all()


def test_node_slots_order_by_bytes_then_position():
    assert node_slots(np.array([5.0, 9.0, 5.0, 1.0]), 6).tolist() == [1, 0, 2, 3, -1, -1]
    assert node_slots(np.array([3.0, 2.0, 1.0]), 2).tolist() == [0, 1]


def test_touched_bytes_adds_the_two_operands():
    output = np.array([10.0, 1.0, 5.0])
    info = np.zeros((3, 2, 7))
    info[1, :, 0] = [100.0, 50.0]  # a small output reading large operands
    info[2, 0, 0] = 2.0            # one operand only
    assert touched_bytes(output, info).tolist() == [10.0, 151.0, 7.0]
    assert node_slots(touched_bytes(output, info), 3).tolist() == [1, 0, 2]


def test_config_nodes_slots_hold_unet3d_weight_gradient_convolutions(samples):
    # On the real unet3d the output and input layouts of weight-gradient convolutions
    # (small outputs, large operands) order the runtimes (FORMAT.md's per-node signal; found
    # by a booster on the raw columns: nodes 35 and 47 carry 88% of its gain on the bulk of
    # configs, node 36 another 11%). By output bytes they ranked 45th and 51st of 56, outside
    # the slots; by bytes touched 35 and 47 are among the 32 (36, 51 MB touched, is not).
    graph = load_graph(next(p for p in samples if p.stem == "unet3d"), configs=False)
    tables = GraphTables(graph).configurable
    slots = node_slots(touched_bytes(tables.nbytes, tables.operand_info), NODE_SLOTS)
    by_output = node_slots(tables.nbytes, NODE_SLOTS)
    for j in (35, 47):
        assert tables.nbytes[j] < 1e6 and tables.operand_info[j, :, 0].sum() > 2e8
        assert j in slots and j not in by_output


def test_khop_weights_are_finite_on_real_samples(samples):
    for path in samples:
        graph = load_graph(path, configs=False)
        if isinstance(graph, LayoutGraph):
            _, rank, nbytes = node_shapes(graph.node_feat)
            weights, pruned = khop_weights(graph, 2, rank, nbytes, undirected_csr(graph))
            assert weights.shape == (graph.n_configurable, 7) and np.isfinite(weights).all()
            assert 0 < pruned <= 1


# ---------------------------------------------------------------- prune.py


# slow: networkx ego graphs of every real sample's configurable nodes
@pytest.mark.slow
def test_prune_graph_matches_networkx_ego_graphs(samples):
    import networkx as nx

    from xlarank.features.prune import prune_graph

    for path in samples:
        graph = load_graph(path, configs=False)
        if not isinstance(graph, LayoutGraph):
            continue
        for k in (0, 1, 2):
            pruned, kept = prune_graph(graph, k)
            expected = naive.khop_union(graph.edge_index, graph.n_nodes, graph.node_config_ids, k)
            np.testing.assert_array_equal(kept, np.flatnonzero(expected))
            # The pruned graph is the induced subgraph, renumbered.
            full = nx.DiGraph(list(map(tuple, graph.edge_index)))
            induced = full.subgraph(kept.tolist())
            assert sorted(map(tuple, kept[pruned.edge_index].tolist())) == sorted(induced.edges)
            np.testing.assert_array_equal(kept[pruned.node_config_ids], graph.node_config_ids)
            np.testing.assert_array_equal(pruned.node_feat, graph.node_feat[kept])
        assert pruned.n_nodes <= graph.n_nodes


@pytest.mark.parametrize("name", ["../../evil", "/tmp/evil", "..", ".hidden", "a/b", "a\\\\b",
                                  "", 5, "x" * 101])
def test_feature_spec_name_must_be_plain(tmp_path, name):
    spec = tmp_path / "s.toml"
    spec.write_text(f"name = {json.dumps(name)}\nfamilies = [\"graph\"]\n")
    with pytest.raises(SpecError, match="plain name"):
        load_feature_spec(spec)


def test_plain_feature_spec_names_pass(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "my-spec_2.1"\nfamilies = ["graph", "config_raw"]\n')
    assert load_feature_spec(spec).name == "my-spec_2.1"


@pytest.mark.parametrize("runtimes, median", [
    ([2**63 - 1, 2**63 - 1], 2**63 - 1),
    ([2**63 - 1, 2**63 - 4], 2**63 - 2),  # halfway: to even, as np.round
    ([2**63 - 1, 5, 2**63 - 3], 2**63 - 3),
    ([2**53 + 1, 2**53 + 1], 2**53 + 1),  # past float64's exact integers
    ([7, 8], 8),
    ([9, 10], 10),
    ([3, 3, 4, 4], 4),
])
def test_dedup_median_of_huge_runtimes_is_exact(tiny_data, tmp_path, repo_specs, runtimes,
                                                median):
    arrays = tile_arrays(tiny_data)
    n = len(runtimes)
    # Only the n repeats of config 0: a generated kernel may repeat it further on.
    for key in ("config_feat", "config_runtime", "config_runtime_normalizers"):
        arrays[key] = arrays[key][:n].copy()
    arrays["config_feat"][:n] = arrays["config_feat"][0]
    arrays["config_runtime"][:n] = runtimes
    arrays["config_runtime_normalizers"][:] = 1
    spec = load_feature_spec(repo_specs.features("default"))
    block = featurize_graph(load_graph(write_tile(arrays, tmp_path)), spec, dedup=True)
    first = block[block["config_index"] == 0]
    assert first["runtime"].tolist() == [median]
    assert (block["runtime"] >= 0).all()


def test_group_median_int_matches_pandas_on_small_numbers():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        values, groups = rng.integers(0, 50, n), rng.integers(0, 6, n)
        expected = np.round(pd.Series(values).groupby(groups).median().to_numpy())
        assert (group_median_int(values, groups) == expected).all()


@pytest.mark.parametrize("key, column", [("config_feat", c) for c in (0, 6, 7, 8, 15, 23)]
                         + [("node_feat", c) for c in (0, 13, 27, 60, 100, 139)])
@pytest.mark.parametrize("value", [3e38, -3e38])
def test_extreme_feature_values_give_finite_features_and_no_warnings(
        tiny_data, tmp_path, repo_specs, key, column, value):
    arrays = tile_arrays(tiny_data)
    arrays[key][:2, column] = value
    path = write_tile(arrays, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            graph = load_graph(path)
        except BadGraphError:
            return  # refused as out of range: also fine
        for name in ("default", "baseline"):
            block = featurize_graph(graph, load_feature_spec(repo_specs.features(name)))
            assert np.isfinite(block.iloc[:, 4:].to_numpy(dtype=np.float64)).all()
