"""``graph_metrics``: closed-form metrics of the data-flow graph, one value per graph (the
same on every config row of the graph).

Per graph: the longest (critical) path in nodes and the heaviest in output bytes; the depth
and width profile of the topological levels; in/out-degree statistics; the layout-sensitive
ops on the longest path. Per configurable node (layout only; tile kernels have none), pooled
over the configurable nodes: where the node sits between the inputs and the outputs, whether
it is on a longest path, and its betweenness on the pruned graph.

Distances are longest paths, not shortest: constants and parameters feed nodes everywhere,
so on the real samples a configurable node's shortest distance to an input is 2-3 hops
(median) whatever its place, and to an output about 10 even on a 3,700-level graph; the
longest path from the inputs is the node's topological level, its place in the program's
sequence of steps, and the longest path to the outputs how many steps still depend on it.
"""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import LayoutGraph
from xlarank.features.families.khop import LAYOUT_SENSITIVE_OPS
from xlarank.features.prune import prune_graph
from xlarank.features.tables import CONV_DOT_OPS
from xlarank.kernels.graph import csr_by_row
from xlarank.kernels.metrics import betweenness, heaviest_paths, topological_order

REDUCE_OPCODE = 70
# khop's layout-sensitive ops, plus the ops whose cost depends on the layout of what they
# read: convolution, dot, reduce.
PATH_LAYOUT_OPS = (*LAYOUT_SENSITIVE_OPS, *CONV_DOT_OPS, REDUCE_OPCODE)

GRAPH_NAMES = ("gm_log_longest_nodes", "gm_log_longest_bytes", "gm_longest_frac",
               "gm_log_width_max", "gm_log_width_mean", "gm_log_width_p50",
               "gm_log_width_p90", "gm_deg_mean", "gm_log_in_deg_max", "gm_in_deg_std",
               "gm_log_out_deg_max", "gm_out_deg_std", "gm_inputs_frac", "gm_outputs_frac",
               "gm_lp_layout_ops", "gm_lp_layout_frac", "gm_lp_log_layout_bytes")
CONFIGURABLE_NAMES = tuple(
    [f"gm_cfg_{metric}_{pool}" for metric in ("depth", "height")
     for pool in ("mean", "min", "max")]
    + ["gm_cfg_critical_frac", "gm_cfg_betweenness_mean", "gm_cfg_betweenness_max"])


class DataFlow:
    """A graph's operand and user CSRs and a topological order (operands first).

    operand_ptr, operand_idx, user_ptr, user_idx: int64 CSR; order: int64 (n,).
    """

    def __init__(self, edge_index: np.ndarray, n_nodes: int):
        consumer, producer = edge_index[:, 0].copy(), edge_index[:, 1].copy()
        self.operand_ptr, self.operand_idx = csr_by_row(consumer, producer, n_nodes)
        self.user_ptr, self.user_idx = csr_by_row(producer, consumer, n_nodes)
        self.order = topological_order(self.operand_ptr, self.operand_idx, self.user_ptr,
                                       self.user_idx)

    def from_inputs(self, weights: np.ndarray) -> np.ndarray:
        """float64 (n, k): per node, the heaviest path from an input to it (`heaviest_paths`)."""
        return heaviest_paths(self.order, self.operand_ptr, self.operand_idx, weights)

    def to_outputs(self, weights: np.ndarray) -> np.ndarray:
        """float64 (n, k): per node, the heaviest path from it to an output."""
        return heaviest_paths(self.order[::-1].copy(), self.user_ptr, self.user_idx, weights)


def graph_values(graph, flow: DataFlow, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 (len(GRAPH_NAMES),): the per-graph metrics; and level, int64 (n,): each
    node's topological level (the longest path from an input to it, in edges).

    nbytes: float64 (n,) output bytes of every node (`tables.node_shapes`).
    """
    n = graph.n_nodes
    ones = np.ones((n, 1))
    level = flow.from_inputs(ones)[:, 0].astype(np.int64) - 1
    longest = int(level.max()) + 1
    heaviest = flow.from_inputs(nbytes[:, None].astype(np.float64))[:, 0].max()
    width = np.bincount(level, minlength=longest).astype(np.float64)
    in_deg = np.diff(flow.operand_ptr).astype(np.float64)
    out_deg = np.diff(flow.user_ptr).astype(np.float64)
    layout_op = np.isin(graph.node_opcode, PATH_LAYOUT_OPS).astype(np.float64)
    # The longest path in nodes; among those, the most layout-sensitive ops, then bytes.
    path = flow.from_inputs(np.stack([np.ones(n), layout_op, layout_op * nbytes], axis=1))
    end = int(np.lexsort((path[:, 2], path[:, 1], path[:, 0]))[-1])
    _, layout_ops, layout_bytes = path[end]
    values = [np.log1p(longest), np.log1p(heaviest), longest / n,
              np.log1p(width.max()), np.log1p(width.mean()),
              np.log1p(np.quantile(width, 0.5)), np.log1p(np.quantile(width, 0.9)),
              in_deg.mean(), np.log1p(in_deg.max()), in_deg.std(),
              np.log1p(out_deg.max()), out_deg.std(), (in_deg == 0).mean(),
              (out_deg == 0).mean(), layout_ops, layout_ops / longest, np.log1p(layout_bytes)]
    return np.array(values, dtype=np.float64), level


def pruned_betweenness(graph: LayoutGraph, k: int) -> np.ndarray:
    """float64 (nc,): per configurable node, its directed betweenness on the graph pruned to
    the k-hop neighbourhoods of the configurable nodes (`prune_graph`), normalised by
    (n - 1)(n - 2) as networkx does."""
    pruned, _ = prune_graph(graph, k)
    n = pruned.n_nodes
    # Duplicate edges (none in real files) would count paths twice: one key per edge.
    key = np.unique(pruned.edge_index[:, 0] * n + pruned.edge_index[:, 1])
    ptr, idx = csr_by_row(key // n, key % n, n)
    between = betweenness(ptr, idx, np.arange(n, dtype=np.int64))
    return between[pruned.node_config_ids] / max(1.0, (n - 1.0) * (n - 2.0))


def configurable_values(graph: LayoutGraph, flow: DataFlow, level: np.ndarray,
                        k: int) -> np.ndarray:
    """float64 (len(CONFIGURABLE_NAMES),): the configurable nodes' place in the graph,
    pooled; zeros for a graph without configurable nodes.

    level: int64 (n,) topological levels (`graph_values`). Depth and height are the
    longest paths from the inputs and to the outputs, in edges, over the longest path's
    length, so 0..1 on every graph.
    """
    ids = graph.node_config_ids
    if len(ids) == 0:
        return np.zeros(len(CONFIGURABLE_NAMES))
    height = flow.to_outputs(np.ones((graph.n_nodes, 1)))[:, 0].astype(np.int64) - 1
    span = int(level.max())
    depth_c, height_c = level[ids], height[ids]
    scale = max(span, 1)
    rel_depth, rel_height = depth_c / scale, height_c / scale
    critical = (depth_c + height_c) == span
    between = pruned_betweenness(graph, k)
    return np.array([rel_depth.mean(), rel_depth.min(), rel_depth.max(), rel_height.mean(),
                     rel_height.min(), rel_height.max(), critical.mean(), between.mean(),
                     between.max()], dtype=np.float64)


class GraphMetricsFamily:
    name = "graph_metrics"
    description = ("closed-form graph metrics: longest path in nodes and bytes, level widths, "
                   "degrees, layout-sensitive ops on the longest path; layout: the configurable "
                   "nodes' depth, height, criticality and pruned-graph betweenness, pooled")

    def names(self, spec, is_tile: bool) -> list[str]:
        return list(GRAPH_NAMES) + ([] if is_tile else list(CONFIGURABLE_NAMES))

    def prepare(self, graph, tables, spec) -> np.ndarray:
        flow = DataFlow(graph.edge_index, graph.n_nodes)
        values, level = graph_values(graph, flow, tables.shapes[2])
        if isinstance(graph, LayoutGraph):
            values = np.concatenate([values, configurable_values(graph, flow, level, spec.k)])
        return values.astype(np.float32)

    def columns(self, prepared: np.ndarray, configs: np.ndarray) -> np.ndarray:
        return np.broadcast_to(prepared, (len(configs), len(prepared)))


FAMILY = GraphMetricsFamily()
