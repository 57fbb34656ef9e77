"""Every Numba kernel against its plain reference in naive.py, on random and real graphs."""

from __future__ import annotations

import numpy as np
import pytest

import naive
from xlarank.data.graph import MAX_OPCODE, LayoutGraph, TileGraph, load_graph
from xlarank.features.families.config_nodes import node_slots
from xlarank.features.tables import default_layout, node_shapes, operand_tables
from xlarank.kernels.configs import (layout_config_joined, layout_config_means, layout_node_slots,
                                     tile_config_joined)
from xlarank.kernels.graph import column_mean_max, csr_by_row, opcode_histogram

SEEDS = range(8)


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
    np.testing.assert_allclose(slots[:, :6], [[0, 2, 8 / 7, 1, 1, 0], [1, 2, 128 / 7, 1, 1, 0],
                                              [0, 0, 8 / 7, 1, 1, 0]], rtol=1e-6)
    assert not slots[:, 6:].any()


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


def test_node_slots_order_by_bytes_then_position():
    assert node_slots(np.array([5.0, 9.0, 5.0, 1.0]), 6).tolist() == [1, 0, 2, 3, -1, -1]
    assert node_slots(np.array([3.0, 2.0, 1.0]), 2).tolist() == [0, 1]


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
        checked += 1
    assert checked == len(samples)
