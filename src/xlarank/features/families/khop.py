"""``khop`` (layout): per configurable node, statistics of its k-hop neighbourhood, summed,
averaged and maxed over the nodes whose layout a config changes; and the share of the graph
within k hops of any configurable node (the pruned graph). Tile kernels have no
configurable nodes: no columns there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlarank.data.graph import LayoutGraph
from xlarank.features.tables import CONV_DOT_OPS
from xlarank.kernels.configs import layout_changed_aggregates
from xlarank.kernels.graph import khop_sums, khop_union

# Opcode groups for neighbourhood statistics (ids from FORMAT.md).
LAYOUT_SENSITIVE_OPS = (11, 27, 62, 72, 75, 76, 92, 98)  # bitcast copy pad reduce-window
#   reshape reverse slice transpose: ops whose cost depends on how data is laid out
ELEMENTWISE_OPS = (1, 2, 15, 17, 20, 25, 30, 32, 37, 38, 40, 41, 50, 51, 57, 58, 59, 60, 66,
                   73, 81, 83, 90, 91, 94, 95, 96, 107)
# Per configurable node, what its k-hop neighbourhood holds (columns of khop weights).
KHOP_STATS = ("log_nodes", "log_bytes", "mean_rank", "half_frac", "layout_ops", "conv_dot",
              "elementwise")


def khop_weights(graph: LayoutGraph, k: int, rank: np.ndarray, nbytes: np.ndarray,
                 csr: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, float]:
    """Per configurable node, KHOP_STATS of its k-hop neighbourhood: float64 (nc, 7);
    and the share of the graph's nodes within k hops of any configurable node.
    csr: the graph's undirected CSR (indptr (n + 1,), indices)."""
    indptr, indices = csr
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


@dataclass(frozen=True)
class KhopTables:
    layouts: np.ndarray  # int8 (nc, 6) default output layouts
    weights: np.ndarray  # float64 (nc, 7) khop_weights
    pruned_frac: float


class KhopFamily:
    name = "khop"
    description = ("layout: k-hop neighbourhoods of the configurable nodes whose layout a "
                   "config changes (size, bytes, rank, op mix), and the pruned graph's size")

    def names(self, spec, is_tile: bool) -> list[str]:
        if is_tile:
            return []
        return ["k_pruned_frac"] + [f"k_changed_{agg}_{stat}" for agg in ("sum", "mean", "max")
                                    for stat in KHOP_STATS]

    def prepare(self, graph, tables, spec) -> KhopTables:
        _, rank, nbytes = tables.shapes
        weights, pruned = khop_weights(graph, spec.k, rank, nbytes, tables.csr)
        return KhopTables(tables.configurable.layouts, weights, pruned)

    def columns(self, prepared: KhopTables, configs: np.ndarray) -> np.ndarray:
        return np.hstack([np.full((len(configs), 1), prepared.pruned_frac, dtype=np.float32),
                          layout_changed_aggregates(configs, prepared.layouts, prepared.weights)])


FAMILY = KhopFamily()
