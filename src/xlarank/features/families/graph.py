"""``graph``: graph size, opcode histogram and node-feature aggregates, one value per graph
(the same on every config row of the graph)."""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import MAX_OPCODE, LayoutGraph
from xlarank.kernels.graph import column_mean_max, opcode_histogram

# node_feat columns summarised per graph: shape dims, their sum and product, tuple size,
# window size sum and product, convolution group counts.
NODE_STAT_COLUMNS = (21, 22, 23, 24, 25, 26, 27, 28, 29, 43, 44, 107, 108)


def graph_features(graph) -> np.ndarray:
    """float32 (n_graph_features,): the family's values for one graph."""
    n = graph.n_nodes
    n_configurable = graph.n_configurable if isinstance(graph, LayoutGraph) else 0
    sizes = np.log1p([n, len(graph.edge_index), n_configurable])
    hist = opcode_histogram(graph.node_opcode, MAX_OPCODE + 1) / n
    stats = column_mean_max(np.log1p(np.abs(graph.node_feat[:, NODE_STAT_COLUMNS]
                                            .astype(np.float64))))
    return np.concatenate([sizes, hist, stats.reshape(-1)]).astype(np.float32)


class GraphFamily:
    name = "graph"
    description = "graph size, opcode histogram and node-feature aggregates (one value per graph)"

    def names(self, spec, is_tile: bool) -> list[str]:
        return (["g_log_nodes", "g_log_edges", "g_log_configurable"]
                + [f"g_op_{op:03d}" for op in range(MAX_OPCODE + 1)]
                + [f"g_node{col}_{stat}" for stat in ("mean", "max")
                   for col in NODE_STAT_COLUMNS])

    def prepare(self, graph, tables, spec) -> np.ndarray:
        return graph_features(graph)

    def columns(self, prepared: np.ndarray, configs: np.ndarray) -> np.ndarray:
        return np.broadcast_to(prepared, (len(configs), len(prepared)))


FAMILY = GraphFamily()
