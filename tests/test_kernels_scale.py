"""The k-hop, hashing and narrowing kernels against references, and streaming + dedup."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import naive
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.features.build import layout_config_features
from xlarank.features.families.khop import FAMILY as KHOP
from xlarank.features.families.khop import khop_weights
from xlarank.features.tables import GraphTables, node_shapes, undirected_csr
from xlarank.kernels.configs import (config_row_hashes, config_to_int8,
                                     layout_changed_aggregates)
from xlarank.kernels.graph import khop_sums, khop_union

DEFAULT = load_feature_spec("features/default.toml")
SEEDS = range(6)


class EdgeGraph:
    """The two fields undirected_csr reads."""

    def __init__(self, edges, n):
        self.edge_index, self.n_nodes = edges, n


def random_graph(rng):
    n = int(rng.integers(1, 80))
    m = int(rng.integers(0, 3 * n))
    edges = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)], axis=1).astype(np.int64)
    return edges, n


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_khop_kernels_match_networkx(seed, k):
    rng = np.random.default_rng(seed)
    edges, n = random_graph(rng)
    seeds = rng.choice(n, int(rng.integers(1, n + 1)), replace=False).astype(np.int64)
    values = rng.normal(size=(n, 3))
    indptr, indices = undirected_csr(EdgeGraph(edges, n))
    np.testing.assert_allclose(khop_sums(indptr, indices, seeds, k, values),
                               naive.khop_sums(edges, n, seeds, k, values), atol=1e-9)
    np.testing.assert_array_equal(khop_union(indptr, indices, seeds, k),
                                  naive.khop_union(edges, n, seeds, k))


def test_khop_on_real_samples(samples):
    for path in samples:
        graph = load_graph(path, configs=False)
        if not isinstance(graph, LayoutGraph):
            continue
        indptr, indices = undirected_csr(graph)
        seeds = graph.node_config_ids[:25]
        _, rank, nbytes = node_shapes(graph.node_feat)
        values = np.stack([np.ones(graph.n_nodes), np.log1p(nbytes), rank], axis=1)
        np.testing.assert_allclose(
            khop_sums(indptr, indices, seeds, 2, values),
            naive.khop_sums(graph.edge_index, graph.n_nodes, seeds, 2, values), rtol=1e-9)
        np.testing.assert_array_equal(
            khop_union(indptr, indices, graph.node_config_ids, 2),
            naive.khop_union(graph.edge_index, graph.n_nodes, graph.node_config_ids, 2))


@pytest.mark.parametrize("seed", SEEDS)
def test_changed_aggregates_random(seed):
    rng = np.random.default_rng(seed)
    c, nc = int(rng.integers(1, 30)), int(rng.integers(0, 10))
    default = rng.integers(-1, 3, (nc, 6)).astype(np.int8)
    configs = rng.integers(-1, 3, (c, nc, 18)).astype(np.int8)
    configs[::2, :, :6] = default  # some configs change nothing
    if nc:
        configs[1::3, 0, :6] = default[0]
    weights = rng.normal(size=(nc, 4))
    np.testing.assert_allclose(layout_changed_aggregates(configs, default, weights),
                               naive.layout_changed_aggregates(configs, default, weights),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_hashes_group_like_unique_rows(seed):
    rng = np.random.default_rng(seed)
    distinct = rng.integers(-1, 3, (int(rng.integers(1, 20)), 5, 18)).astype(np.int8)
    configs = distinct[rng.integers(0, len(distinct), 60)]
    hashes = config_row_hashes(configs)
    _, by_hash = np.unique(hashes, return_inverse=True)
    _, by_rows = np.unique(configs.reshape(60, -1), axis=0, return_inverse=True)
    # Same partition of configs into groups.
    assert len(set(zip(by_hash.tolist(), by_rows.reshape(-1).tolist()))) == len(set(by_rows.reshape(-1).tolist()))
    assert len(np.unique(hashes)) == len(np.unique(configs.reshape(60, -1), axis=0))


@pytest.mark.parametrize("bad", [np.nan, np.inf, 6.0, -2.0, 0.5])
def test_config_to_int8(bad):
    rng = np.random.default_rng(0)
    block = rng.integers(-1, 6, (7, 3, 18)).astype(np.float32)
    narrow, ok = config_to_int8(block)
    expected, expected_ok = naive.config_to_int8(block)
    assert ok and expected_ok
    np.testing.assert_array_equal(narrow, expected)
    block[3, 1, 4] = bad
    assert config_to_int8(block)[1] is False and naive.config_to_int8(block)[1] is False


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
        np.testing.assert_array_equal(distinct_of, naive.distinct_groups(in_memory.node_config_feat))


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


def test_khop_weights_are_finite_on_real_samples(samples):
    for path in samples:
        graph = load_graph(path, configs=False)
        if isinstance(graph, LayoutGraph):
            _, rank, nbytes = node_shapes(graph.node_feat)
            weights, pruned = khop_weights(graph, 2, rank, nbytes, undirected_csr(graph))
            assert weights.shape == (graph.n_configurable, 7) and np.isfinite(weights).all()
            assert 0 < pruned <= 1


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


def test_changed_aggregates_on_real_samples(samples):
    for path in samples:
        graph = load_graph(path)
        if not isinstance(graph, LayoutGraph):
            continue
        khop = KHOP.prepare(graph, GraphTables(graph), DEFAULT)
        configs = graph.node_config_feat[:60]
        np.testing.assert_allclose(
            layout_changed_aggregates(configs, khop.layouts, khop.weights),
            naive.layout_changed_aggregates(configs, khop.layouts, khop.weights),
            rtol=1e-5, atol=1e-4)
