"""Normalisation statistics (min-max over the train data) and one graph's node arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph


@dataclass
class MinMax:
    """Min-max statistics of some columns; ``keep`` are the columns that vary."""

    low: np.ndarray   # float64 (n_cols,)
    high: np.ndarray  # float64 (n_cols,)

    @classmethod
    def empty(cls, n_cols: int) -> MinMax:
        return cls(np.full(n_cols, np.inf), np.full(n_cols, -np.inf))

    def update(self, rows: np.ndarray) -> None:
        if len(rows):
            self.low = np.minimum(self.low, rows.min(axis=0))
            self.high = np.maximum(self.high, rows.max(axis=0))

    @property
    def keep(self) -> np.ndarray:
        return np.flatnonzero(self.high > self.low)

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """float32 (..., len(keep)): rows (..., n_cols) scaled so train data lies in [0, 1]."""
        keep = self.keep
        low, span = self.low[keep], (self.high - self.low)[keep]
        return ((rows[..., keep].astype(np.float64) - low) / span).astype(np.float32)


@dataclass
class Stats:
    node: MinMax
    config: MinMax

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"node_low": self.node.low, "node_high": self.node.high,
                "config_low": self.config.low, "config_high": self.config.high}

    @classmethod
    def from_arrays(cls, a) -> Stats:
        return cls(MinMax(np.asarray(a["node_low"]), np.asarray(a["node_high"])),
                   MinMax(np.asarray(a["config_low"]), np.asarray(a["config_high"])))


@dataclass
class GraphArrays:
    """One graph's node arrays: normalised features, opcodes, edges, configurable ids."""

    feat: np.ndarray       # float32 (n, F)
    op: np.ndarray         # int32 (n,)
    edges: np.ndarray      # int32 (m, 2)
    config_ids: np.ndarray  # int32 (nc,), empty for tile

    @property
    def n(self) -> int:
        return len(self.op)


def graph_arrays(graph: TileGraph | LayoutGraph, stats: Stats) -> GraphArrays:
    ids = graph.node_config_ids if isinstance(graph, LayoutGraph) else np.zeros(0)
    return GraphArrays(stats.node.apply(graph.node_feat), graph.node_opcode.astype(np.int32),
                       graph.edge_index.astype(np.int32).reshape(-1, 2),
                       np.asarray(ids, dtype=np.int32))


def layout_stats(files: Sequence[Path], collection: Collection) -> Stats:
    """Train statistics: node_feat over every node, node_config_feat over every (config,
    configurable node) row, the configs streamed block by block."""
    node, config = MinMax.empty(140), MinMax.empty(18)
    for path in files:
        graph = load_graph(path, collection, configs=False)
        node.update(graph.node_feat)
        with config_blocks(graph) as blocks:
            for block, _ in blocks:
                config.update(block.reshape(-1, 18))
    return Stats(node, config)

