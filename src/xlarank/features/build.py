"""Feature blocks for one graph: checks and shapes the kernels' inputs, names the columns.

A feature block is a DataFrame with one row per config of one graph: the key columns
``graph_id``, ``config_index``, ``runtime``, ``normalizer`` and then the features, all
float32, in the spec's order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from xlarank.data.graph import MAX_OPCODE, SHAPE_DIM_COLUMNS, LayoutGraph, TileGraph
from xlarank.features.spec import FeatureSpec
from xlarank.kernels.configs import (LAYOUT_JOINED_NAMES, TILE_JOINED_NAMES,
                                     layout_config_joined, layout_config_means,
                                     tile_config_joined)
from xlarank.kernels.graph import column_mean_max, csr_by_row, opcode_histogram

KEY_COLUMNS = ("graph_id", "config_index", "runtime", "normalizer")

# node_feat columns summarised per graph: shape dims, their sum and product, tuple size,
# window size sum and product, convolution group counts.
NODE_STAT_COLUMNS = (21, 22, 23, 24, 25, 26, 27, 28, 29, 43, 44, 107, 108)
# Bits per element of the one-hot element types in node_feat columns 2-20 (FORMAT.md).
ELEMENT_BITS = np.array([0, 1, 8, 16, 32, 64, 8, 16, 32, 64, 16, 32, 64, 16, 64, 128, 0, 0, 0],
                        dtype=np.float64)
LAYOUT_RAW_NAMES = tuple(f"{part}{d}" for part in ("out", "in", "kernel") for d in range(6))


def feature_names(spec: FeatureSpec, is_tile: bool) -> list[str]:
    """The feature columns, in order, that `featurize_graph` writes for this spec."""
    names: list[str] = []
    if "graph" in spec.families:
        names += ["g_log_nodes", "g_log_edges", "g_log_configurable"]
        names += [f"g_op_{op:03d}" for op in range(MAX_OPCODE + 1)]
        names += [f"g_node{col}_{stat}" for stat in ("mean", "max") for col in NODE_STAT_COLUMNS]
    if "config_raw" in spec.families:
        names += ([f"c_cfg{k:02d}" for k in range(24)] if is_tile
                  else [f"c_mean_{n}" for n in LAYOUT_RAW_NAMES])
    if "config_joined" in spec.families:
        names += [f"c_{n}" for n in (TILE_JOINED_NAMES if is_tile else LAYOUT_JOINED_NAMES)]
    return names


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


def graph_features(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """float32 (n_graph_features,): the ``graph`` family, one value per graph."""
    n = graph.n_nodes
    n_configurable = graph.n_configurable if isinstance(graph, LayoutGraph) else 0
    sizes = np.log1p([n, len(graph.edge_index), n_configurable])
    hist = opcode_histogram(graph.node_opcode, MAX_OPCODE + 1) / n
    stats = column_mean_max(np.log1p(np.abs(graph.node_feat[:, NODE_STAT_COLUMNS]
                                            .astype(np.float64))))
    return np.concatenate([sizes, hist, stats.reshape(-1)]).astype(np.float32)


def operand_tables(graph: LayoutGraph, rank: np.ndarray, nbytes: np.ndarray,
                   layouts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first two operands of each configurable node, as layout_config_joined wants them.

    Returns operand_pos int64 (nc, 2) and operand_info float64 (nc, 2, 7).
    """
    ids = graph.node_config_ids
    indptr, operands = csr_by_row(graph.edge_index[:, 0].copy(), graph.edge_index[:, 1].copy(),
                                  graph.n_nodes)
    position = np.full(graph.n_nodes, -1, dtype=np.int64)
    position[ids] = np.arange(len(ids))
    operand_pos = np.full((len(ids), 2), -2, dtype=np.int64)
    operand_info = np.zeros((len(ids), 2, 7), dtype=np.float64)
    for j, node in enumerate(ids):
        for slot, src in enumerate(operands[indptr[node]:indptr[node + 1]][:2]):
            if rank[src] == 0:
                continue
            operand_pos[j, slot] = position[src]
            operand_info[j, slot, 0] = nbytes[src]
            operand_info[j, slot, 1:] = layouts[src]
    return operand_pos, operand_info


def config_features(graph: TileGraph | LayoutGraph, spec: FeatureSpec) -> np.ndarray:
    """float32 (n_configs, n_config_features): the config families, one row per config."""
    blocks = []
    if isinstance(graph, TileGraph):
        if "config_raw" in spec.families:
            blocks.append(graph.config_feat)
        if "config_joined" in spec.families:
            dims, _, nbytes = node_shapes(graph.node_feat)
            roots = np.flatnonzero(graph.node_feat[:, 0] > 0)
            out = int(roots[-1]) if len(roots) else graph.n_nodes - 1
            element_bytes = nbytes[out] / max(1.0, float(np.prod(dims[out][dims[out] > 0])))
            blocks.append(tile_config_joined(graph.config_feat, dims[out].copy(), element_bytes))
    else:
        configs = graph.node_config_feat
        if "config_raw" in spec.families:
            blocks.append(layout_config_means(configs))
        if "config_joined" in spec.families:
            dims, rank, nbytes = node_shapes(graph.node_feat)
            layouts = default_layout(graph.node_feat, rank)
            pos, info = operand_tables(graph, rank, nbytes, layouts)
            ids = graph.node_config_ids
            blocks.append(layout_config_joined(configs, dims[ids].copy(), nbytes[ids].copy(),
                                               layouts[ids].copy(), pos, info))
    if not blocks:
        return np.zeros((graph.n_configs, 0), dtype=np.float32)
    return np.hstack(blocks).astype(np.float32, copy=False)


def featurize_graph(graph: TileGraph | LayoutGraph, spec: FeatureSpec) -> pd.DataFrame:
    """One feature block: a row per config, key columns then `feature_names` columns."""
    if isinstance(graph, LayoutGraph) and graph.node_config_feat is None:
        raise ValueError("layout graph loaded without configs; use load_graph(configs=True)")
    c = graph.n_configs
    is_tile = isinstance(graph, TileGraph)
    parts = []
    if "graph" in spec.families:
        per_graph = graph_features(graph)
        parts.append(np.broadcast_to(per_graph, (c, len(per_graph))))
    parts.append(config_features(graph, spec))
    names = feature_names(spec, is_tile)
    values = np.hstack(parts)
    block = pd.DataFrame(values.astype(np.float32, copy=False), columns=names)
    normalizer = graph.config_runtime_normalizers if is_tile else np.ones(c, dtype=np.int64)
    keys = pd.DataFrame({
        "graph_id": pd.Series([graph.graph_id] * c, dtype="string"),
        "config_index": np.arange(c, dtype=np.int32),
        "runtime": graph.config_runtime,
        "normalizer": normalizer,
    })
    return pd.concat([keys, block], axis=1)
