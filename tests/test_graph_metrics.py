"""graph_metrics: its kernels (kernels/metrics.py) and the family against networkx
(tests/naive.py) on random DAGs and on every real sample; its columns on real and synthetic
data and through the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import naive
from conftest import REPO_SPECS
from xlarank.cli import app
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.features import feature_names, featurize_graph, load_feature_spec
from xlarank.features.families import FAMILIES
from xlarank.features.families.graph_metrics import (
    CONFIGURABLE_NAMES,
    FAMILY,
    GRAPH_NAMES,
    PATH_LAYOUT_OPS,
    DataFlow,
    configurable_values,
    graph_values,
    pruned_betweenness,
)
from xlarank.features.prune import prune_graph
from xlarank.features.tables import GraphTables, node_shapes
from xlarank.kernels.graph import csr_by_row
from xlarank.kernels.metrics import betweenness

SPEC = load_feature_spec(REPO_SPECS.features("graph-metrics"))
DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
SEEDS = range(8)


def random_dag(rng, n=None):
    """edge_index rows [consumer, producer] of a random DAG whose node ids are shuffled
    (so id order is not a topological order), with some duplicate edges."""
    n = int(rng.integers(1, 60)) if n is None else n
    m = int(rng.integers(0, 3 * n))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    rank_edges = np.stack([np.maximum(a, b), np.minimum(a, b)], axis=1)[keep]
    if len(rank_edges):
        rank_edges = np.concatenate([rank_edges, rank_edges[: len(rank_edges) // 5]])
    shuffle = rng.permutation(n)
    return shuffle[rank_edges].reshape(-1, 2).astype(np.int64), n


def random_nbytes(rng, n):
    return rng.choice([0.0, 1.0, 2.0, 512.0, 4096.0, 1e6], n)


# ---------------------------------------------------------------- kernels vs networkx


@pytest.mark.parametrize("seed", SEEDS)
def test_topological_order_and_levels_match_networkx(seed):
    rng = np.random.default_rng(seed)
    edges, n = random_dag(rng)
    flow = DataFlow(edges, n)
    position = np.empty(n, dtype=np.int64)
    position[flow.order] = np.arange(n)
    assert sorted(flow.order.tolist()) == list(range(n))
    assert (position[edges[:, 1]] < position[edges[:, 0]]).all()  # operands first
    level = flow.from_inputs(np.ones((n, 1)))[:, 0] - 1
    np.testing.assert_array_equal(level, naive.topological_levels(edges, n))
    height = flow.to_outputs(np.ones((n, 1)))[:, 0] - 1
    np.testing.assert_array_equal(height, naive.topological_levels(edges[:, ::-1], n))


@pytest.mark.parametrize("seed", SEEDS)
def test_heaviest_paths_match_networkx(seed):
    rng = np.random.default_rng(seed)
    edges, n = random_dag(rng)
    flow = DataFlow(edges, n)
    nbytes = random_nbytes(rng, n)
    marked = (rng.random(n) < 0.3).astype(np.float64)
    for weights in (nbytes[:, None], np.stack([np.ones(n), marked, marked * nbytes], axis=1),
                    np.stack([marked, nbytes], axis=1)):
        best = flow.from_inputs(weights)
        top = best[np.lexsort(best.T[::-1])[-1]]
        np.testing.assert_array_equal(top, naive.heaviest_path(edges, n, weights))
        # The same path read from the other end.
        best = flow.to_outputs(weights)
        np.testing.assert_array_equal(best[np.lexsort(best.T[::-1])[-1]], top)


@pytest.mark.parametrize("seed", SEEDS)
def test_betweenness_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    edges, n = random_dag(rng)
    edges = np.unique(edges, axis=0).reshape(-1, 2)
    ptr, idx = csr_by_row(edges[:, 0].copy(), edges[:, 1].copy(), n)
    every = np.arange(n, dtype=np.int64)
    np.testing.assert_allclose(betweenness(ptr, idx, every), naive.betweenness(edges, n),
                               rtol=1e-9, atol=1e-9)
    sources = rng.choice(n, int(rng.integers(1, n + 1)), replace=False).astype(np.int64)
    np.testing.assert_allclose(betweenness(ptr, idx, sources),
                               naive.betweenness(edges, n, sources), rtol=1e-9, atol=1e-9)


def test_cycles_give_an_order_and_finite_values():
    # Never in real files: the kernels still place every node and skip the closing edge.
    edges = np.array([[1, 0], [2, 1], [0, 2], [3, 2]], dtype=np.int64)
    flow = DataFlow(edges, 4)
    assert sorted(flow.order.tolist()) == [0, 1, 2, 3]
    assert np.isfinite(flow.from_inputs(np.ones((4, 1)))).all()
    assert np.isfinite(flow.to_outputs(np.ones((4, 1)))).all()
    values, _ = graph_values(TinyGraph(edges, np.zeros(4, np.uint8)), flow, np.ones(4))
    assert np.isfinite(values).all()


class TinyGraph:
    """The fields graph_values and configurable_values read."""

    def __init__(self, edges, opcode, config_ids=None):
        self.edge_index, self.node_opcode, self.n_nodes = edges, opcode, len(opcode)
        self.node_config_ids = (np.zeros(0, np.int64) if config_ids is None else config_ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_family_values_match_networkx_on_random_dags(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    edges, n = random_dag(rng)
    opcode = rng.choice([2, 26, 34, 70, 75, 98, 63, 24], n).astype(np.uint8)
    nbytes = random_nbytes(rng, n)
    ids = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False)).astype(np.int64)
    graph = TinyGraph(edges, opcode, ids)
    flow = DataFlow(edges, n)
    values, level = graph_values(graph, flow, nbytes)
    np.testing.assert_allclose(values, naive.graph_metrics(edges, n, opcode, nbytes,
                                                           PATH_LAYOUT_OPS), rtol=1e-12)
    # Pruning is tested on its own (test_features); here it is the networkx ego graphs.
    import xlarank.features.families.graph_metrics as module

    monkeypatch.setattr(module, "prune_graph", lambda g, k: tiny_prune(g, k))
    pooled = configurable_values(graph, flow, level, 1)
    expected = naive.graph_metrics(edges, n, opcode, nbytes, PATH_LAYOUT_OPS, ids, k=1)
    np.testing.assert_allclose(pooled, expected[len(GRAPH_NAMES):], rtol=1e-9, atol=1e-12)


def tiny_prune(graph: TinyGraph, k: int):
    kept = np.flatnonzero(naive.khop_union(graph.edge_index, graph.n_nodes,
                                           graph.node_config_ids, k))
    new_id = np.full(graph.n_nodes, -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept))
    both = (new_id[graph.edge_index] >= 0).all(axis=1)
    edges = new_id[graph.edge_index[both]].reshape(-1, 2)
    return TinyGraph(edges, graph.node_opcode[kept], new_id[graph.node_config_ids]), kept


# slow: networkx on every real sample (the random-graph tests stay fast)
@pytest.mark.slow
def test_family_values_match_networkx_on_real_samples(samples):
    for path in samples:
        graph = load_graph(path, configs=False)
        _, _, nbytes = node_shapes(graph.node_feat)
        values = FAMILY.prepare(graph, GraphTables(graph), SPEC)
        layout = isinstance(graph, LayoutGraph)
        between = None
        if layout and graph.n_nodes > 5000:
            # networkx's betweenness takes half a minute on the nlp sample's pruned graph:
            # there the kernel is checked on a subset of sources below.
            between = pruned_betweenness(graph, SPEC.k)
        expected = naive.graph_metrics(graph.edge_index, graph.n_nodes, graph.node_opcode,
                                       nbytes, PATH_LAYOUT_OPS,
                                       graph.node_config_ids if layout else None, SPEC.k,
                                       between)
        assert len(values) == len(FAMILY.names(SPEC, not layout))
        np.testing.assert_allclose(values, expected.astype(np.float32), rtol=1e-6, atol=1e-7,
                                   err_msg=str(path))


# slow: networkx on every real sample (the random-graph tests stay fast)
@pytest.mark.slow
def test_betweenness_on_real_pruned_graphs(samples):
    rng = np.random.default_rng(0)
    for path in samples:
        graph = load_graph(path, configs=False)
        if not isinstance(graph, LayoutGraph):
            continue
        pruned, _ = prune_graph(graph, SPEC.k)
        n = pruned.n_nodes
        edges = pruned.edge_index
        ptr, idx = csr_by_row(edges[:, 0].copy(), edges[:, 1].copy(), n)
        sources = np.sort(rng.choice(n, min(n, 150), replace=False)).astype(np.int64)
        np.testing.assert_allclose(betweenness(ptr, idx, sources),
                                   naive.betweenness(edges, n, sources), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- the family's columns


def test_registered_not_default_and_spec_adds_it():
    assert "graph_metrics" in FAMILIES
    assert "graph_metrics" not in DEFAULT.families
    assert SPEC.families == (*DEFAULT.families, "graph_metrics") and SPEC.k == DEFAULT.k
    names = FAMILY.names(SPEC, False)
    assert all(name.startswith("gm_") for name in names) and len(set(names)) == len(names)
    assert names == [*GRAPH_NAMES, *CONFIGURABLE_NAMES]
    assert FAMILY.names(SPEC, True) == list(GRAPH_NAMES)


def check_block(graph, block):
    names = feature_names(SPEC, graph.collection.is_tile)
    ours = FAMILY.names(SPEC, graph.collection.is_tile)
    assert list(block.columns[4:]) == names and len(block) == graph.n_configs
    values = block[ours].to_numpy()
    assert values.shape[1] == len(ours) and np.isfinite(values).all()
    # One value per graph, on every config row.
    assert (values == values[:1]).all()


def test_columns_on_every_real_sample(samples):
    for path in samples:
        graph = load_graph(path)
        check_block(graph, featurize_graph(graph, SPEC))


def test_columns_on_tiny_synthetic_data(tiny_data):
    files = sorted(tiny_data.rglob("*.npz"))
    assert files
    for path in files:
        graph = load_graph(path)
        check_block(graph, featurize_graph(graph, SPEC))


def test_cli_featurize_with_the_spec(samples, tmp_path):
    path = next(p for p in samples if p.stem == "unet3d")
    out = tmp_path / "frame.parquet"
    result = CliRunner().invoke(app, ["featurize", str(path.parents[4]), "--collection",
                                      "layout-xla-default", "--split", "train", "--out",
                                      str(out), "--spec",
                                      str(REPO_SPECS.features("graph-metrics"))])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out)
    assert set(FAMILY.names(SPEC, False)) <= set(frame.columns)
    assert np.isfinite(frame[FAMILY.names(SPEC, False)].to_numpy()).all()
