"""The distinct configs of one graph: configs equal in every raw config column are one.

`config_columns` gives the raw columns as rows and `distinct_configs` groups them; every
place that needs "the graph's distinct configs" (the frame's tile dedup, the measured
configs of `xlarank.rank.measured`, the tuner, the systems, the benches) calls it. It
lives in the data layer so that featurizing can use it without importing the rankers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from xlarank.data.graph import (
    N_LAYOUT_CONFIG_FEATURES,
    LayoutGraph,
    TileGraph,
    check_in_memory_configs,
    config_blocks,
)


def config_columns(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """float32 (n_configs, n_raw): the raw config columns, one row per config. A layout
    graph's tensor is refused (BadGraphError naming the file) before it is allocated where
    it is past `MAX_IN_MEMORY_CONFIG_BYTES`."""
    if isinstance(graph, TileGraph):
        return graph.config_feat.astype(np.float32)
    check_in_memory_configs(graph.path, graph.n_configs, graph.n_configurable,
                            "the raw config columns (rank-graph, suggest)")
    if graph.node_config_feat is None:  # loaded with configs=False: read them block by block
        out = np.empty((graph.n_configs, graph.n_configurable * N_LAYOUT_CONFIG_FEATURES),
                       np.float32)
        start = 0
        with config_blocks(graph) as blocks:
            for block, _ in blocks:
                out[start : start + len(block)] = block.reshape(len(block), -1)
                start += len(block)
        return out
    return graph.node_config_feat.reshape(graph.n_configs, -1).astype(np.float32)


@dataclass(frozen=True)
class DistinctConfigs:
    """The distinct configs of one graph (configs equal in every raw config column are
    one). first: int64 (n_distinct,) the lowest config index of each; group: int64
    (n_configs,) each config index's distinct config (an id into first; ids follow the
    sorted order of the config rows, as ``np.unique(..., axis=0)`` numbers them); runtime:
    float64 (n_configs,) the file's own runtimes (a labelled file's; zeros on a test
    file)."""

    first: np.ndarray
    group: np.ndarray
    runtime: np.ndarray

    @cached_property
    def median(self) -> np.ndarray:
        """float64 (n_distinct,): the median of the runtimes of each distinct config. Made
        when asked: featurizing never needs it, and pandas' groupby took 2.5 ms a tile
        kernel."""
        import pandas as pd

        return (pd.Series(self.runtime).groupby(self.group).median().to_numpy(np.float64))

    def __len__(self) -> int:
        return len(self.first)

    @property
    def lowest(self) -> np.ndarray:
        """int64 (n_configs,): each config's lowest copy (`config_groups`)."""
        return self.first[self.group]

    def in_config_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The same groups numbered by first appearance, as a frame orders its distinct
        configs: first int64 (n_distinct,) ascending, group int64 (n_configs,) ids into
        it."""
        order = np.argsort(self.first, kind="stable")
        renumber = np.empty_like(order)
        renumber[order] = np.arange(len(order))
        return self.first[order], renumber[self.group]


def varying_columns(x: np.ndarray) -> np.ndarray:
    """int64 ids of the columns of x (n, m) that vary over its rows."""
    return np.flatnonzero((x != x[:1]).any(axis=0))


def row_groups(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The equal rows of x (n, k) numbers, as ``np.unique(x, axis=0, return_index=True,
    return_inverse=True)`` numbers them: first int64 (n_groups,) each group's lowest row,
    groups in ascending lexicographic order of their rows; group int64 (n,) each row's.

    A stable lexsort and a compare of neighbours: np.unique sorts the rows as one
    structured value each, 24x slower on tile kernels' configs (12 ms a kernel, most of a
    tile file's featurize). Only the columns that vary are sorted on: the others tie in
    every comparison, and a layout graph's rows hold few that vary (the real nlp sample:
    a few hundred of 15,264; sorting on all took a quarter of a second of rank-graph).
    Rows must hold no NaN (the readers refuse them).
    """
    n, k = x.shape
    x = x[:, varying_columns(x)]
    if x.shape[1] == 0:  # every row is the same row
        return np.zeros(min(n, 1), np.int64), np.zeros(n, np.int64)
    order = np.lexsort(x.T[::-1])
    ordered = x[order]
    starts = np.empty(n, dtype=bool)
    starts[:1] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=starts[1:])
    group = np.empty(n, dtype=np.int64)
    group[order] = np.cumsum(starts) - 1
    return order[starts].astype(np.int64), group


def distinct_configs(graph: TileGraph | LayoutGraph) -> DistinctConfigs:
    """The graph's distinct configs: `DistinctConfigs` (first index, group of each config,
    and the runtimes their medians come from)."""
    first, group = row_groups(config_columns(graph))
    return DistinctConfigs(first, group, np.asarray(graph.config_runtime, np.float64))


# ---------------------------------------------------------------- repeat noise
# A config measured more than once says how far two measurements of one config differ:
# the ceiling of any ranking of those configs, and the margin within which two configs
# are equally fast.

def first_two_runs(runtime: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 (r,) twice: the first and second measurement, in file order, of each of
    the r configs measured twice or more (runtime (n_configs,) every measurement, group
    (n_configs,) each measurement's distinct config)."""
    order = np.argsort(group, kind="stable")  # file order kept within a config
    g, r = np.asarray(group)[order], np.asarray(runtime, np.float64)[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    counts = np.diff(np.r_[starts, len(g)])
    twice = starts[counts >= 2]
    return r[twice], r[twice + 1]


def repeat_noise(runtime: np.ndarray, group: np.ndarray) -> tuple[float | None, int]:
    """(noise, repeated): noise in the runtime's unit, the median over the configs
    measured twice or more of |r1 - r2|, their first two measurements in file order (None
    when no config is measured twice: unknown, not zero); repeated, the number of such
    configs. runtime, group as in `first_two_runs`."""
    first, second = first_two_runs(runtime, group)
    if len(first) == 0:
        return None, 0
    return float(np.median(np.abs(first - second))), int(len(first))


def repeat_tau(runtime: np.ndarray, group: np.ndarray, min_repeated: int = 3
               ) -> float | None:
    """Kendall tau-b between the first and second measurements of the configs measured
    twice or more (runtime, group as in `first_two_runs`): how far two measurements agree
    on their order; None under ``min_repeated`` such configs or where either side is
    constant."""
    from xlarank.metrics import kendall_tau

    first, second = first_two_runs(runtime, group)
    if len(first) < max(2, min_repeated):
        return None
    tau = kendall_tau(-first, second)  # kendall_tau reads a score: higher is faster
    return float(tau) if np.isfinite(tau) else None


def within_noise(runtime: np.ndarray, noise: float | None) -> np.ndarray:
    """bool (n,): the configs (median runtimes (n,)) within the noise of the best,
    runtime <= best + noise; an unknown noise (None) counts as 0: the best and its
    ties."""
    return runtime <= runtime.min() + (noise or 0.0)
