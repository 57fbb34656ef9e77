"""Per-graph tables that feature families share: node shapes and bytes, default layouts,
the undirected CSR, the operand tables of configurable nodes, and a tile kernel's configs
joined with its shapes.

Computed once per graph, on first use (`GraphTables`), so a spec without the families that
need a table never builds it. This module imports no family.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from xlarank.data.graph import SHAPE_DIM_COLUMNS, LayoutGraph, TileGraph
from xlarank.kernels.configs import tile_config_joined
from xlarank.kernels.graph import csr_by_row

PARAMETER_OPCODE = 63
CONV_DOT_OPS = (26, 34)
# Bits per element of the one-hot element types in node_feat columns 2-20 (FORMAT.md).
ELEMENT_BITS = np.array([0, 1, 8, 16, 32, 64, 8, 16, 32, 64, 16, 32, 64, 16, 64, 128, 0, 0, 0],
                        dtype=np.float64)


def node_shapes(node_feat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: dims int64 (n, 6), rank int64 (n,), output bytes float64 (n,)."""
    dims = node_feat[:, SHAPE_DIM_COLUMNS].astype(np.int64)
    rank = (dims > 0).sum(axis=1)
    live = np.arange(6)[None, :] < rank[:, None]
    # float64: a product of six dims can pass the int64 range.
    elements = np.where(live, dims, 1).astype(np.float64).prod(axis=1)
    bits = node_feat[:, 2:21].astype(np.float64) @ ELEMENT_BITS
    return dims, rank, elements * np.maximum(bits, 8.0) / 8.0


def default_layout(node_feat: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """int8 (n, 6): each node's layout as in node_feat (134-139), -1 past its rank."""
    layout = node_feat[:, 134:140].clip(-1, 5).astype(np.int8)
    return np.where(np.arange(6)[None, :] < rank[:, None], layout, -1).astype(np.int8)


def undirected_csr(graph) -> tuple[np.ndarray, np.ndarray]:
    """CSR over both edge directions: (indptr (n + 1,), indices (2 * n_edges,))."""
    edges = graph.edge_index
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    return csr_by_row(src, dst, graph.n_nodes)


def operand_tables(graph: LayoutGraph, dims: np.ndarray, rank: np.ndarray,
                   nbytes: np.ndarray, layouts: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first two operands of each configurable node, as layout_config_joined wants them.

    Returns operand_pos int64 (nc, 2), operand_info float64 (nc, 2, 7) and operand_dims
    int64 (nc, 2, 6).
    """
    ids = graph.node_config_ids
    indptr, operands = csr_by_row(graph.edge_index[:, 0].copy(), graph.edge_index[:, 1].copy(),
                                  graph.n_nodes)
    position = np.full(graph.n_nodes, -1, dtype=np.int64)
    position[ids] = np.arange(len(ids))
    operand_pos = np.full((len(ids), 2), -2, dtype=np.int64)
    operand_info = np.zeros((len(ids), 2, 7), dtype=np.float64)
    operand_dims = np.zeros((len(ids), 2, 6), dtype=np.int64)
    starts, counts = indptr[ids], indptr[ids + 1] - indptr[ids]
    for slot in range(2):
        rows = np.flatnonzero(counts > slot)
        src = operands[starts[rows] + slot]
        # An operand without a shape (a token, a tuple) carries no layout to compare.
        shaped = rank[src] != 0
        rows, src = rows[shaped], src[shaped]
        operand_pos[rows, slot] = position[src]
        operand_info[rows, slot, 0] = nbytes[src]
        operand_info[rows, slot, 1:] = layouts[src]
        operand_dims[rows, slot] = dims[src]
    return operand_pos, operand_info, operand_dims


def tile_joined(graph: TileGraph, configs: np.ndarray) -> np.ndarray:
    """float32 (n_configs, len(TILE_JOINED_NAMES)): configs (n_configs, 24) against the
    kernel's output shape, inputs and size."""
    dims, _, nbytes = node_shapes(graph.node_feat)
    roots = np.flatnonzero(graph.node_feat[:, 0] > 0)
    out = int(roots[-1]) if len(roots) else graph.n_nodes - 1
    element_bytes = nbytes[out] / max(1.0, float(np.prod(dims[out][dims[out] > 0])))
    inputs = graph.node_opcode == PARAMETER_OPCODE
    return tile_config_joined(
        configs, dims[out].copy(), element_bytes, int(inputs.sum()) + 1,
        float(nbytes[inputs].sum()), bool(np.isin(graph.node_opcode, CONV_DOT_OPS).any()),
        graph.n_nodes)


@dataclass(frozen=True)
class ConfigurableTables:
    """What the per-config layout kernels read of the configurable nodes (nc of them):
    dims int64 (nc, 6), nbytes float64 (nc,), layouts int8 (nc, 6) default output layouts,
    and their first two operands (`operand_tables`): operand_pos int64 (nc, 2),
    operand_info float64 (nc, 2, 7), operand_dims int64 (nc, 2, 6)."""

    dims: np.ndarray
    nbytes: np.ndarray
    layouts: np.ndarray
    operand_pos: np.ndarray
    operand_info: np.ndarray
    operand_dims: np.ndarray


class GraphTables:
    """The shared tables of one graph, each computed on first use."""

    def __init__(self, graph: TileGraph | LayoutGraph):
        self.graph = graph
        self._joined: tuple[np.ndarray, np.ndarray] | None = None

    @cached_property
    def shapes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`node_shapes` of every node: dims (n, 6), rank (n,), output bytes (n,)."""
        return node_shapes(self.graph.node_feat)

    @cached_property
    def layouts(self) -> np.ndarray:
        """int8 (n, 6): `default_layout` of every node."""
        return default_layout(self.graph.node_feat, self.shapes[1])

    @cached_property
    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        """`undirected_csr` of the graph."""
        return undirected_csr(self.graph)

    @cached_property
    def configurable(self) -> ConfigurableTables:
        """Layout graphs: the configurable nodes' tables."""
        dims, rank, nbytes = self.shapes
        pos, info, operand_dims = operand_tables(self.graph, dims, rank, nbytes, self.layouts)
        ids = self.graph.node_config_ids
        return ConfigurableTables(np.ascontiguousarray(dims[ids]),
                                  np.ascontiguousarray(nbytes[ids]),
                                  np.ascontiguousarray(self.layouts[ids]), pos, info,
                                  operand_dims)

    def tile_joined(self, configs: np.ndarray) -> np.ndarray:
        """`tile_joined` of a tile kernel's config batch, computed once for the families
        that share it (config_joined, gnn)."""
        if self._joined is None or self._joined[0] is not configs:
            self._joined = (configs, tile_joined(self.graph, configs))
        return self._joined[1]
