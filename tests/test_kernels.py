"""kernels/: every Numba kernel against its plain reference in naive.py (or networkx, or
pandas), on random and real graphs."""

from __future__ import annotations

import numpy as np
import pytest

import naive
from conftest import REPO_SPECS
from xlarank.data.graph import MAX_OPCODE, LayoutGraph, TileGraph, load_graph
from xlarank.features import load_feature_spec
from xlarank.features.families.config_nodes import node_slots
from xlarank.features.families.khop import FAMILY as KHOP
from xlarank.features.tables import (
    GraphTables,
    default_layout,
    node_shapes,
    operand_tables,
    undirected_csr,
)
from xlarank.kernels.configs import (
    config_to_int8,
    layout_changed_aggregates,
    layout_config_joined,
    layout_config_means,
    layout_node_groups,
    layout_node_slots,
    tile_config_joined,
)
from xlarank.kernels.graph import (
    column_mean_max,
    csr_by_row,
    khop_sums,
    khop_union,
    opcode_histogram,
)
from xlarank.kernels.hashing import config_row_hashes, first_seen_ids, seen_table

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
SEEDS = range(8)
SCALE_SEEDS = range(6)  # the k-hop, hashing and narrowing tests


def random_edges(rng, n_nodes, n_edges):
    src = rng.integers(0, n_nodes, n_edges)
    dst = rng.integers(0, n_nodes, n_edges)
    return src.astype(np.int64), dst.astype(np.int64)


@pytest.mark.parametrize("seed", SEEDS)
def test_opcode_histogram_random(seed):
    rng = np.random.default_rng(seed)
    opcode = rng.integers(0, MAX_OPCODE + 1, rng.integers(1, 500)).astype(np.uint8)
    np.testing.assert_array_equal(opcode_histogram(opcode, MAX_OPCODE + 1),
                                  naive.opcode_histogram(opcode, MAX_OPCODE + 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_csr_by_row_keeps_file_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    src, dst = random_edges(rng, n, int(rng.integers(0, 200)))
    indptr, indices = csr_by_row(src, dst, n)
    expected = naive.operands_by_node(src, dst, n)
    assert [list(indices[indptr[i]:indptr[i + 1]]) for i in range(n)] == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_column_mean_max_random(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(int(rng.integers(1, 50)), 5)) * 10
    np.testing.assert_allclose(column_mean_max(values), naive.column_mean_max(values))


def random_layout_inputs(rng, c, nc):
    configs = rng.integers(-1, 4, size=(c, nc, 18)).astype(np.int8)
    dims = rng.choice([1, 3, 7, 8, 16, 100, 128, 256], size=(nc, 6)).astype(np.int64)
    node_bytes = rng.uniform(0, 1e6, nc)
    default = rng.integers(-1, 4, size=(nc, 6)).astype(np.int8)
    operand_pos = rng.integers(-2, nc, size=(nc, 2)).astype(np.int64)
    operand_info = np.concatenate([rng.uniform(0, 1e5, (nc, 2, 1)),
                                   rng.integers(-1, 4, (nc, 2, 6)).astype(np.float64)], axis=2)
    operand_dims = rng.choice([0, 1, 3, 7, 8, 128, 256], size=(nc, 2, 6)).astype(np.int64)
    # Make some configs copy the default and some reads match what was made.
    configs[0, :, :6] = default
    if nc:
        configs[1 % c, :, 6:12] = configs[1 % c, np.clip(operand_pos[:, 0], 0, None), :6]
    return configs, dims, node_bytes, default, operand_pos, operand_info, operand_dims


@pytest.mark.parametrize("seed", SEEDS)
def test_layout_kernels_random(seed):
    rng = np.random.default_rng(seed)
    c, nc = int(rng.integers(1, 30)), int(rng.integers(0, 12))
    inputs = random_layout_inputs(rng, c, nc)
    np.testing.assert_allclose(layout_config_means(inputs[0]),
                               naive.layout_config_means(inputs[0]), rtol=1e-6)
    np.testing.assert_allclose(layout_config_joined(*inputs),
                               naive.layout_config_joined(*inputs), rtol=1e-5, atol=1e-6)
    slots = rng.integers(-1, max(nc, 1), size=5).astype(np.int64) if nc else np.full(5, -1)
    configs, dims, _, default, pos, info, operand_dims = inputs
    slot_inputs = (configs, slots, dims, default, pos, info, operand_dims)
    np.testing.assert_allclose(layout_node_slots(*slot_inputs),
                               naive.layout_node_slots(*slot_inputs), rtol=1e-5, atol=1e-6)


def repeated_layout_inputs(rng, c, nc):
    """`random_layout_inputs` whose configs take 1-3 rows per node, as real ones do
    (FORMAT.md: 1.4-2.0 distinct output layouts per node), so nodes' groups repeat."""
    inputs = random_layout_inputs(rng, c, nc)
    pools = rng.integers(-1, 4, size=(nc, 3, 18)).astype(np.int8)
    choice = rng.integers(0, rng.integers(1, 4, size=nc), size=(c, nc))
    configs = pools[np.arange(nc), choice]
    return (np.ascontiguousarray(configs),) + inputs[1:]


def node_groups_reference(configs, j, operand_pos):
    """(reps, ids) by np.unique over the 30 bytes node j's features read: its row, then
    the first 6 columns of each configurable operand's row (zeros where none)."""
    c = len(configs)
    parts = [configs[:, j, :]] + [configs[:, p, :6] if p >= 0 else np.zeros((c, 6), np.int8)
                                  for p in operand_pos[j]]
    keys = np.ascontiguousarray(np.hstack(parts)).view(np.dtype((np.void, 30)))[:, 0]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)
    renumber = np.empty_like(order)
    renumber[order] = np.arange(len(order))
    return first[order], renumber[inverse.reshape(-1)]


@pytest.mark.parametrize("seed", SEEDS)
def test_node_groups_against_unique_keys(seed):
    rng = np.random.default_rng(seed)
    c, nc = int(rng.integers(1, 400)), int(rng.integers(1, 12))
    make = repeated_layout_inputs if seed % 2 else random_layout_inputs
    configs, *_, operand_pos, _, _ = make(rng, c, nc)
    for j in range(nc):
        ids = np.empty(c, np.int64)
        reps = layout_node_groups(configs, j, operand_pos, ids)
        expected_reps, expected_ids = node_groups_reference(configs, j, operand_pos)
        np.testing.assert_array_equal(reps, expected_reps)
        np.testing.assert_array_equal(ids, expected_ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_layout_kernels_repeated_node_layouts(seed):
    # The kernels compute each node's terms once per group of configs: with repeats,
    # every copy must get its group's terms.
    rng = np.random.default_rng(100 + seed)
    c, nc = int(rng.integers(1, 200)), int(rng.integers(1, 12))
    inputs = repeated_layout_inputs(rng, c, nc)
    np.testing.assert_allclose(layout_config_joined(*inputs),
                               naive.layout_config_joined(*inputs), rtol=1e-5, atol=1e-6)
    configs, dims, _, default, pos, info, operand_dims = inputs
    slots = rng.integers(-1, nc, size=6).astype(np.int64)
    slot_inputs = (configs, slots, dims, default, pos, info, operand_dims)
    np.testing.assert_allclose(layout_node_slots(*slot_inputs),
                               naive.layout_node_slots(*slot_inputs), rtol=1e-5, atol=1e-6)


def test_real_encoding_compares_fixed_positions_only():
    # A real config fixes the two minor-most positions (-1 elsewhere): against a full
    # default layout it keeps the default exactly when the fixed prefix agrees.
    dims = np.array([[7, 128, 0, 0, 0, 0]])
    default = np.array([[1, 0, -1, -1, -1, -1]], dtype=np.int8)
    configs = np.full((3, 1, 18), -1, dtype=np.int8)
    configs[0, 0, :2] = [1, 0]   # the default prefix: minor dim 128, second 7
    configs[1, 0, :2] = [0, 1]   # swapped: minor 7 pads to 128
    # configs[2] fixes nothing: the compiler keeps the default
    no_operands = np.full((1, 2), -2, dtype=np.int64)
    info = np.zeros((1, 2, 7))
    operand_dims = np.zeros((1, 2, 6), dtype=np.int64)
    joined = layout_config_joined(configs, dims, np.array([100.0]), default, no_operands, info,
                                  operand_dims)
    assert joined[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert joined[0, 4] == joined[2, 4] == pytest.approx(8 / 7)
    assert joined[1, 4] == pytest.approx(128 / 7)
    slots = layout_node_slots(configs, np.array([0, -1]), dims, default, no_operands, info,
                              operand_dims)
    # The fixed pair as places in the default layout: as the default (0, 1), swapped
    # (1, 0), nothing fixed (-1); input and kernel reads fix nothing.
    unfixed_reads = [-1, -1, -1, -1]
    np.testing.assert_allclose(slots[:, :12], [[0, 2, 8 / 7, 1, 1, 0, 0, 1, *unfixed_reads],
                                               [1, 2, 128 / 7, 1, 1, 0, 1, 0, *unfixed_reads],
                                               [0, 0, 8 / 7, 1, 1, 0, -1, -1, *unfixed_reads]],
                               rtol=1e-6)
    assert not slots[:, 12:].any()


def test_operand_read_layout_pads_and_relayouts():
    # A convolution reads its input (dims 2 x 128) as made ([1, 0]: minor 128) or swapped
    # ([0, 1]: minor 2, padded to 128); the swapped read also costs a relayout.
    dims = np.array([[4, 128, 0, 0, 0, 0]])
    default = np.array([[1, 0, -1, -1, -1, -1]], dtype=np.int8)
    operand_pos = np.array([[-1, -2]], dtype=np.int64)
    info = np.zeros((1, 2, 7))
    info[0, 0] = [1000.0, 1, 0, -1, -1, -1, -1]
    operand_dims = np.zeros((1, 2, 6), dtype=np.int64)
    operand_dims[0, 0, :2] = [2, 128]
    configs = np.full((2, 1, 18), -1, dtype=np.int8)
    configs[:, 0, :2] = [1, 0]
    configs[0, 0, 6:8] = [1, 0]
    configs[1, 0, 6:8] = [0, 1]
    joined = layout_config_joined(configs, dims, np.array([10.0]), default, operand_pos, info,
                                  operand_dims)
    assert joined[:, 8].tolist() == [0.0, 1.0]  # relayout_count
    # As made: minor 128 (no padding), second-minor 2 padded to 8: 4x. Swapped: minor 2
    # padded to 128: 64x, second-minor 128 needs none.
    assert joined[0, 10] == pytest.approx(np.log1p(1000.0 * (4 - 1)))
    assert joined[1, 10] == pytest.approx(np.log1p(1000.0 * (64 - 1)))
    slots = layout_node_slots(configs, np.array([0]), dims, default, operand_pos, info,
                              operand_dims)
    assert slots[:, 3].tolist() == pytest.approx([4.0, 64.0])
    assert slots[:, 5].tolist() == pytest.approx([0.0, np.log1p(1000.0)])
    # The input read as made puts the operand's default pair in place (0, 1); swapped, (1, 0).
    assert slots[:, 8:10].tolist() == [[0.0, 1.0], [1.0, 0.0]]


@pytest.mark.parametrize("seed", SEEDS)
def test_tile_kernel_random(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(0, 7))
    out_dims = np.zeros(6, dtype=np.int64)
    out_dims[:rank] = rng.choice([1, 3, 8, 100, 128, 1000], rank)
    if seed % 3 == 0:
        out_dims[rng.integers(6)] = 0  # a zero dim inside the shape
    configs = np.zeros((int(rng.integers(1, 40)), 24), dtype=np.float32)
    configs[:, 8:8 + rank] = rng.integers(0, 300, (len(configs), rank))
    contracts = bool(seed % 2)
    np.testing.assert_allclose(tile_config_joined(configs, out_dims, 2.0, 3, 5e5, contracts, 7),
                               naive.tile_config_joined(configs, out_dims, 2.0, 3, 5e5,
                                                        contracts, 7), rtol=1e-5)


def test_tile_kernel_hand_worked():
    # Output 100 x 300 (f32) tiled 64 x 128: 2 x 3 tiles, 128 x 384 padded elements.
    configs = np.zeros((1, 24), dtype=np.float32)
    configs[0, 8:10] = [64, 128]
    # A dot kernel of 5 nodes reading 1000 input bytes: inputs read (2 + 3) / 2 times.
    out = tile_config_joined(configs, np.array([100, 300, 0, 0, 0, 0]), 4.0, 3, 1000.0,
                             True, 5)[0]
    np.testing.assert_allclose(out, [128 * 384 / 30000, np.log(6), np.log(64 * 128 * 4),
                                     1.0, 1.0, 64 * 128 / 30000, np.log(64 * 128 * 4 * 3),
                                     np.log(6 * 64 * 128 * 4), np.log1p(2500.0), np.log(30)],
                               rtol=1e-6)


def layout_inputs(graph: LayoutGraph):
    dims, rank, nbytes = node_shapes(graph.node_feat)
    layouts = default_layout(graph.node_feat, rank)
    pos, info, operand_dims = operand_tables(graph, dims, rank, nbytes, layouts)
    ids = graph.node_config_ids
    return graph.node_config_feat, dims[ids], nbytes[ids], layouts[ids], pos, info, operand_dims


@pytest.mark.slow
def test_kernels_match_reference_on_real_samples(samples):
    checked = 0
    for path in samples:
        graph = load_graph(path)
        np.testing.assert_array_equal(opcode_histogram(graph.node_opcode, MAX_OPCODE + 1),
                                      naive.opcode_histogram(graph.node_opcode, MAX_OPCODE + 1))
        if isinstance(graph, TileGraph):
            dims, _, nbytes = node_shapes(graph.node_feat)
            root = int(np.flatnonzero(graph.node_feat[:, 0])[-1])
            inputs = graph.node_opcode == 63  # parameter
            args = (4.0, 2, float(nbytes[inputs].sum()), True, graph.n_nodes)
            np.testing.assert_allclose(
                tile_config_joined(graph.config_feat, dims[root], *args),
                naive.tile_config_joined(graph.config_feat, dims[root], *args), rtol=1e-5)
        else:
            inputs = layout_inputs(graph)
            # The reference is plain Python per config: check a slice of the big graphs.
            few = (inputs[0][:40],) + inputs[1:]
            np.testing.assert_allclose(layout_config_joined(*few),
                                       naive.layout_config_joined(*few), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(layout_config_means(inputs[0]),
                                       naive.layout_config_means(inputs[0]), rtol=1e-6)
            configs, dims, nbytes, default, pos, info, operand_dims = few
            slot_inputs = (configs, node_slots(nbytes), dims, default, pos, info, operand_dims)
            np.testing.assert_allclose(layout_node_slots(*slot_inputs),
                                       naive.layout_node_slots(*slot_inputs), rtol=1e-5,
                                       atol=1e-6)
            some = np.ascontiguousarray(inputs[0][:300])
            for j in range(some.shape[1]):
                ids = np.empty(len(some), np.int64)
                reps = layout_node_groups(some, j, pos, ids)
                expected_reps, expected_ids = node_groups_reference(some, j, pos)
                np.testing.assert_array_equal(reps, expected_reps)
                np.testing.assert_array_equal(ids, expected_ids)
        checked += 1
    assert checked == len(samples)


# ---------------------------------------------------------------- k-hop, hashing, narrowing


class EdgeGraph:
    """The two fields undirected_csr reads."""

    def __init__(self, edges, n):
        self.edge_index, self.n_nodes = edges, n


def random_graph(rng):
    n = int(rng.integers(1, 80))
    m = int(rng.integers(0, 3 * n))
    edges = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)], axis=1).astype(np.int64)
    return edges, n


@pytest.mark.parametrize("seed", SCALE_SEEDS)
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


@pytest.mark.parametrize("seed", SCALE_SEEDS)
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


@pytest.mark.parametrize("seed", SCALE_SEEDS)
def test_hashes_group_like_unique_rows(seed):
    rng = np.random.default_rng(seed)
    distinct = rng.integers(-1, 3, (int(rng.integers(1, 20)), 5, 18)).astype(np.int8)
    configs = distinct[rng.integers(0, len(distinct), 60)]
    hashes = config_row_hashes(configs)
    _, by_hash = np.unique(hashes, return_inverse=True)
    _, by_rows = np.unique(configs.reshape(60, -1), axis=0, return_inverse=True)
    # Same partition of configs into groups.
    assert len(set(zip(by_hash.tolist(), by_rows.reshape(-1).tolist()))) == len(
        set(by_rows.reshape(-1).tolist()))
    assert len(np.unique(hashes)) == len(np.unique(configs.reshape(60, -1), axis=0))


@pytest.mark.parametrize("seed", SCALE_SEEDS)
def test_first_seen_ids_against_a_dict(seed):
    # Blocks of hashes with repeats within and across blocks (and hashes that share the
    # table's low bits), numbered by first appearance as a dict numbers them.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    pool = rng.integers(0, 2**63, int(rng.integers(1, n + 1)), dtype=np.uint64)
    pool[: len(pool) // 3] <<= np.uint64(20)
    hashes = pool[rng.integers(0, len(pool), n)]
    table_hash, table_id = seen_table(n)
    seen, n_seen, start = {}, 0, 0
    while start < n:
        block = hashes[start:start + int(rng.integers(1, 200))]
        ids, new, n_seen = first_seen_ids(block, table_hash, table_id, n_seen)
        expected_new = []
        for r, h in enumerate(block.tolist()):
            if h not in seen:
                seen[h] = len(seen)
                expected_new.append(r)
        assert ids.tolist() == [seen[h] for h in block.tolist()]
        assert new.tolist() == expected_new and n_seen == len(seen)
        start += len(block)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 6.0, -2.0, 0.5, -0.5, 5.5, -1.5, 1e30])
def test_config_to_int8(bad):
    rng = np.random.default_rng(0)
    block = rng.integers(-1, 6, (7, 3, 18)).astype(np.float32)
    narrow, ok = config_to_int8(block)
    expected, expected_ok = naive.config_to_int8(block)
    assert ok and expected_ok
    np.testing.assert_array_equal(narrow, expected)
    block[3, 1, 4] = bad
    assert config_to_int8(block)[1] is False and naive.config_to_int8(block)[1] is False


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


# ---------------------------------------------------------------- gnn embedding join


@pytest.mark.parametrize("seed", range(4))
def test_layout_embedding_join_matches_pandas(seed):
    from xlarank.features.embedding import LAYOUT_POSITIONS
    from xlarank.kernels.configs import layout_embedding_join, layout_embedding_table

    rng = np.random.default_rng(seed)
    nc = int(rng.integers(1, 9))
    configs = rng.integers(-1, 6, (int(rng.integers(1, 12)), nc, 18)).astype(np.int8)
    heads = rng.normal(size=(nc, 5))
    tables = rng.normal(size=(len(LAYOUT_POSITIONS), 7, 5))
    paired = layout_embedding_table(heads, tables)
    np.testing.assert_allclose(layout_embedding_join(configs, paired, LAYOUT_POSITIONS),
                               naive.layout_embedding_join(configs, heads, tables,
                                                           LAYOUT_POSITIONS), rtol=1e-5)
