"""Feature blocks for one graph: checks and shapes the kernels' inputs, names the columns.

A feature block is a DataFrame with one row per config of one graph: the key columns
``graph_id``, ``config_index``, ``runtime``, ``normalizer`` and then the features, all
float32, in the spec's order.

Layout configs are read block by block (see `config_blocks`), so a graph's config
tensor is never whole in memory, and each distinct config is featurized once: configs are
hashed per block, and only configs not seen before reach the per-config kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from xlarank.data.graph import (MAX_OPCODE, SHAPE_DIM_COLUMNS, LayoutGraph, TileGraph,
                                config_blocks)
from xlarank.features.embedding import (LAYOUT_POSITIONS, gnn_column_names, layout_node_heads,
                                        load_weights, tile_columns)
from xlarank.features.spec import FeatureSpec
from xlarank.kernels.configs import (LAYOUT_JOINED_NAMES, NODE_SLOT_STATS, TILE_JOINED_NAMES,
                                     layout_changed_aggregates, layout_config_joined,
                                     layout_config_means, layout_embedding_join,
                                     layout_embedding_table, layout_node_slots,
                                     tile_config_joined)
from xlarank.kernels.graph import (column_mean_max, csr_by_row, khop_sums, khop_union,
                                   opcode_histogram)

KEY_COLUMNS = ("graph_id", "config_index", "runtime", "normalizer")
# int8 configs gathered before the per-config kernels run on them.
FEATURE_BATCH_BYTES = 1 << 20
PARAMETER_OPCODE = 63

# node_feat columns summarised per graph: shape dims, their sum and product, tuple size,
# window size sum and product, convolution group counts.
NODE_STAT_COLUMNS = (21, 22, 23, 24, 25, 26, 27, 28, 29, 43, 44, 107, 108)
# Bits per element of the one-hot element types in node_feat columns 2-20 (FORMAT.md).
ELEMENT_BITS = np.array([0, 1, 8, 16, 32, 64, 8, 16, 32, 64, 16, 32, 64, 16, 64, 128, 0, 0, 0],
                        dtype=np.float64)
LAYOUT_RAW_NAMES = tuple(f"{part}{d}" for part in ("out", "in", "kernel") for d in range(6))
# Opcode groups for neighbourhood statistics (ids from FORMAT.md).
LAYOUT_SENSITIVE_OPS = (11, 27, 62, 72, 75, 76, 92, 98)  # bitcast copy pad reduce-window
#   reshape reverse slice transpose: ops whose cost depends on how data is laid out
CONV_DOT_OPS = (26, 34)
ELEMENTWISE_OPS = (1, 2, 15, 17, 20, 25, 30, 32, 37, 38, 40, 41, 50, 51, 57, 58, 59, 60, 66,
                   73, 81, 83, 90, 91, 94, 95, 96, 107)
# Per configurable node, what its k-hop neighbourhood holds (columns of khop weights).
KHOP_STATS = ("log_nodes", "log_bytes", "mean_rank", "half_frac", "layout_ops", "conv_dot",
              "elementwise")
# Configurable nodes that the config_nodes family describes one by one: the largest outputs
# first, so slot k means "the k-th largest configurable tensor" on every graph.
NODE_SLOTS = 16


def feature_names(spec: FeatureSpec, is_tile: bool) -> list[str]:
    """The feature columns, in order, that `featurize_graph` writes for this spec.

    ``khop`` is a layout family: tile graphs have no configurable nodes, so it adds nothing.
    """
    names: list[str] = []
    for family in spec.families:
        if family == "graph":
            names += ["g_log_nodes", "g_log_edges", "g_log_configurable"]
            names += [f"g_op_{op:03d}" for op in range(MAX_OPCODE + 1)]
            names += [f"g_node{col}_{stat}" for stat in ("mean", "max")
                      for col in NODE_STAT_COLUMNS]
        elif family == "config_raw":
            names += ([f"c_cfg{k:02d}" for k in range(24)] if is_tile
                      else [f"c_mean_{n}" for n in LAYOUT_RAW_NAMES])
        elif family == "config_joined":
            names += [f"c_{n}" for n in (TILE_JOINED_NAMES if is_tile else LAYOUT_JOINED_NAMES)]
        elif family == "khop" and not is_tile:
            names += ["k_pruned_frac"]
            names += [f"k_changed_{agg}_{stat}" for agg in ("sum", "mean", "max")
                      for stat in KHOP_STATS]
        elif family == "config_nodes" and not is_tile:
            names += [f"n{k:02d}_{stat}" for k in range(NODE_SLOTS) for stat in NODE_SLOT_STATS]
        elif family == "gnn":
            names += gnn_column_names(is_tile)
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


def undirected_csr(graph) -> tuple[np.ndarray, np.ndarray]:
    """CSR over both edge directions: (indptr (n + 1,), indices (2 * n_edges,))."""
    edges = graph.edge_index
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    return csr_by_row(src, dst, graph.n_nodes)


def graph_features(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """float32 (n_graph_features,): the ``graph`` family, one value per graph."""
    n = graph.n_nodes
    n_configurable = graph.n_configurable if isinstance(graph, LayoutGraph) else 0
    sizes = np.log1p([n, len(graph.edge_index), n_configurable])
    hist = opcode_histogram(graph.node_opcode, MAX_OPCODE + 1) / n
    stats = column_mean_max(np.log1p(np.abs(graph.node_feat[:, NODE_STAT_COLUMNS]
                                            .astype(np.float64))))
    return np.concatenate([sizes, hist, stats.reshape(-1)]).astype(np.float32)


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


def node_slots(node_bytes: np.ndarray, n_slots: int = NODE_SLOTS) -> np.ndarray:
    """int64 (n_slots,): the configurable nodes (indices into node_config_ids) by output
    bytes, largest first, ties in topological order; -1 fills slots past nc.

    node_bytes: float64 (nc,) output bytes of the configurable nodes, in node id order.
    """
    order = np.lexsort((np.arange(len(node_bytes)), -node_bytes))[:n_slots]
    return np.concatenate([order, np.full(n_slots - len(order), -1)]).astype(np.int64)


def khop_weights(graph: LayoutGraph, k: int, rank: np.ndarray,
                 nbytes: np.ndarray) -> tuple[np.ndarray, float]:
    """Per configurable node, KHOP_STATS of its k-hop neighbourhood: float64 (nc, 7);
    and the share of the graph's nodes within k hops of any configurable node."""
    indptr, indices = undirected_csr(graph)
    op = graph.node_opcode
    half = graph.node_feat[:, [12, 15]].sum(axis=1) > 0  # f16, bf16
    values = np.stack([np.ones(graph.n_nodes), nbytes, rank.astype(np.float64),
                       half.astype(np.float64), np.isin(op, LAYOUT_SENSITIVE_OPS),
                       np.isin(op, CONV_DOT_OPS), np.isin(op, ELEMENTWISE_OPS)],
                      axis=1).astype(np.float64)
    seeds = graph.node_config_ids
    sums = khop_sums(indptr, indices, seeds, k, values)
    count = np.maximum(sums[:, 0], 1.0)
    weights = np.stack([np.log1p(sums[:, 0]), np.log1p(sums[:, 1]), sums[:, 2] / count,
                        sums[:, 3] / count, sums[:, 4], sums[:, 5], sums[:, 6]], axis=1)
    pruned = khop_union(indptr, indices, seeds, k).mean() if len(seeds) else 0.0
    return np.ascontiguousarray(weights), float(pruned)


@dataclass
class LayoutContext:
    """Per-graph inputs of the per-config layout kernels, computed once per graph."""

    dims: np.ndarray
    nbytes: np.ndarray
    layouts: np.ndarray
    operand_pos: np.ndarray
    operand_info: np.ndarray
    operand_dims: np.ndarray
    khop: np.ndarray | None
    pruned_frac: float
    slots: np.ndarray  # node_slots of the configurable nodes
    gnn: np.ndarray | None = None  # layout_embedding_table of the node embeddings

    @classmethod
    def of(cls, graph: LayoutGraph, spec: FeatureSpec) -> LayoutContext:
        dims, rank, nbytes = node_shapes(graph.node_feat)
        layouts = default_layout(graph.node_feat, rank)
        pos, info, operand_dims = operand_tables(graph, dims, rank, nbytes, layouts)
        khop, pruned = (khop_weights(graph, spec.k, rank, nbytes) if "khop" in spec.families
                        else (None, 0.0))
        gnn = None
        if "gnn" in spec.families:
            weights = load_weights(spec.gnn)
            gnn = layout_embedding_table(layout_node_heads(graph, spec.k, weights),
                                         weights["layout_table"])
        ids = graph.node_config_ids
        return cls(np.ascontiguousarray(dims[ids]), np.ascontiguousarray(nbytes[ids]),
                   np.ascontiguousarray(layouts[ids]), pos, info, operand_dims, khop, pruned,
                   node_slots(nbytes[ids]), gnn)

    def features(self, configs: np.ndarray, spec: FeatureSpec) -> np.ndarray:
        """float32 (b, n_config_features) for int8 configs (b, nc, 18)."""
        blocks = []
        for family in spec.families:
            if family == "config_raw":
                blocks.append(layout_config_means(configs))
            elif family == "config_joined":
                blocks.append(layout_config_joined(configs, self.dims, self.nbytes, self.layouts,
                                                   self.operand_pos, self.operand_info,
                                                   self.operand_dims))
            elif family == "khop":
                blocks.append(np.full((len(configs), 1), self.pruned_frac, dtype=np.float32))
                blocks.append(layout_changed_aggregates(configs, self.layouts, self.khop))
            elif family == "config_nodes":
                blocks.append(layout_node_slots(configs, self.slots, self.dims, self.layouts,
                                                self.operand_pos, self.operand_info,
                                                self.operand_dims))
            elif family == "gnn":
                blocks.append(layout_embedding_join(configs, self.gnn, LAYOUT_POSITIONS))
        return (np.hstack(blocks).astype(np.float32, copy=False) if blocks
                else np.zeros((len(configs), 0), dtype=np.float32))


def layout_config_features(graph: LayoutGraph, spec: FeatureSpec
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Config features of every config, each distinct config computed once.

    Returns (features float32 (n_distinct, n_config_features), distinct_of int64
    (n_configs,)): config i's features are features[distinct_of[i]]. Distinct ids follow
    first appearance.
    """
    seen: dict[int, int] = {}
    rows: list[np.ndarray] = []
    pending: list[np.ndarray] = []
    pending_bytes = 0
    distinct_of = np.empty(graph.n_configs, dtype=np.int64)
    start = 0
    with config_blocks(graph) as blocks:
        # Configs are being read while the per-graph tables are made.
        context = LayoutContext.of(graph, spec)
        for block, hashes in blocks:
            unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
            ids = np.empty(len(unique), dtype=np.int64)
            new = []
            # Visit in order of first appearance so ids follow config order.
            order = np.argsort(first, kind="stable")
            for u, h in zip(order.tolist(), unique[order].tolist()):
                if h not in seen:
                    seen[h] = len(seen)
                    new.append(u)
                ids[u] = seen[h]
            if new:
                rows_of_new = first[new]
                # Most blocks hold only new configs, in order: take the block as it is.
                fresh = (block if len(new) == len(block)
                         and np.array_equal(rows_of_new, np.arange(len(block)))
                         else block[rows_of_new])
                pending.append(fresh)
                pending_bytes += fresh.nbytes
            # New configs are featurized in batches of FEATURE_BATCH_BYTES: read blocks of
            # a large graph hold a few configs only, and per-call costs would dominate.
            if pending and pending_bytes >= FEATURE_BATCH_BYTES:
                rows.append(context.features(np.concatenate(pending), spec))
                pending, pending_bytes = [], 0
            distinct_of[start:start + len(block)] = ids[inverse]
            start += len(block)
    if pending or not rows:
        batch = (np.concatenate(pending) if pending
                 else np.zeros((0, graph.n_configurable, 18), np.int8))
        rows.append(context.features(batch, spec))
    return np.vstack(rows), distinct_of


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


def tile_config_features(graph: TileGraph, spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:
    """Like `layout_config_features`, for a tile kernel's config_feat rows."""
    _, first, distinct_of = np.unique(graph.config_feat, axis=0, return_index=True,
                                      return_inverse=True)
    # Renumber by first appearance, as for layout.
    order = np.argsort(first, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(len(order))
    configs = graph.config_feat[first[order]]
    joined = (tile_joined(graph, configs)
              if {"config_joined", "gnn"} & set(spec.families) else None)
    blocks = []
    for family in spec.families:
        if family == "config_raw":
            blocks.append(configs)
        elif family == "config_joined":
            blocks.append(joined)
        elif family == "gnn":
            blocks.append(tile_columns(graph, joined, load_weights(spec.gnn)))
    table = (np.hstack(blocks).astype(np.float32, copy=False) if blocks
             else np.zeros((len(configs), 0), dtype=np.float32))
    return table, renumber[distinct_of.reshape(-1)]


def featurize_graph(graph: TileGraph | LayoutGraph, spec: FeatureSpec,
                    dedup: bool = False) -> pd.DataFrame:
    """One feature block: key columns then `feature_names` columns.

    One row per config (for scoring and evaluation), or with ``dedup`` one row per
    distinct config (for training): the row of its first appearance, whose runtime is the
    median of the duplicates' runtimes, rounded to whole ns.
    """
    is_tile = isinstance(graph, TileGraph)
    table, distinct_of = (tile_config_features(graph, spec) if is_tile
                          else layout_config_features(graph, spec))
    runtime = graph.config_runtime
    normalizer = graph.config_runtime_normalizers if is_tile else np.ones_like(runtime)
    if dedup:
        _, rows = np.unique(distinct_of, return_index=True)
        runtime = np.round(pd.Series(runtime).groupby(distinct_of).median().to_numpy()
                           ).astype(np.int64)
        config_index, normalizer, distinct_of = rows, normalizer[rows], distinct_of[rows]
    else:
        config_index = np.arange(graph.n_configs)
    names = feature_names(spec, is_tile)
    columns = table[distinct_of]
    column_names = [n for n in names if not n.startswith("g_")]
    if "graph" in spec.families:
        per_graph = graph_features(graph)
        columns = np.hstack([np.broadcast_to(per_graph, (len(columns), len(per_graph))),
                             columns])
        column_names = [n for n in names if n.startswith("g_")] + column_names
    if column_names != names:
        position = {name: i for i, name in enumerate(column_names)}
        columns = columns[:, [position[name] for name in names]]
    # One float32 block: pandas builds it without a per-column copy.
    block = pd.DataFrame(columns, columns=names, copy=False)
    keys = pd.DataFrame({
        "graph_id": pd.Series([graph.graph_id] * len(config_index), dtype="string"),
        "config_index": config_index.astype(np.int32),
        "runtime": runtime,
        "normalizer": normalizer,
    })
    return pd.concat([keys, block], axis=1)
