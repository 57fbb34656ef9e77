"""Feature blocks for one graph: loops over the spec's feature families and checks each
block's width against its names.

A feature block is a DataFrame with one row per config of one graph: the key columns
``graph_id``, ``config_index``, ``runtime``, ``normalizer`` and then the features, all
float32, in the spec's order (`xlarank.features.families` holds the families).

Layout configs are read block by block (see `config_blocks`), so a graph's config
tensor is never whole in memory, and each distinct config is featurized once: configs are
hashed per block, and only configs not seen before reach the per-config kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlarank.data.distinct import distinct_configs
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks
from xlarank.errors import checked_type
from xlarank.features.families import get_family
from xlarank.features.spec import FeatureSpec
from xlarank.features.tables import GraphTables
from xlarank.kernels.hashing import first_seen_ids, seen_table

if TYPE_CHECKING:  # pandas loads on first use: featurizing never needs it
    import pandas as pd

KEY_COLUMNS = ("graph_id", "config_index", "runtime", "normalizer")
# int8 configs gathered before the per-config kernels run on them.
FEATURE_BATCH_BYTES = 1 << 20


def feature_names(spec: FeatureSpec, is_tile: bool) -> list[str]:
    """The feature columns, in order, that `featurize_graph` writes for this spec: each
    family's names in the spec's order."""
    return [name for family in spec.families for name in get_family(family).names(spec, is_tile)]


class PreparedFamilies:
    """A spec's families prepared for one graph (their per-graph state, made once); a
    batch of configs then gets every family's columns."""

    def __init__(self, graph: TileGraph | LayoutGraph, spec: FeatureSpec):
        is_tile = isinstance(graph, TileGraph)
        tables = GraphTables(graph)
        self.parts = []
        for name in spec.families:
            family = get_family(name)
            width = len(family.names(spec, is_tile))
            if width:  # a family may not apply (khop on tile kernels)
                self.parts.append((family, family.prepare(graph, tables, spec), width))

    def columns(self, configs: np.ndarray) -> np.ndarray:
        """float32 (b, n_features) for a batch of b distinct configs (layout int8 (b, nc,
        18), tile float32 (b, 24))."""
        blocks = []
        for family, prepared, width in self.parts:
            block = family.columns(prepared, configs)
            if block.shape != (len(configs), width):
                raise RuntimeError(f"feature family {family.name!r} made a block of shape "
                                   f"{block.shape}, its names say ({len(configs)}, {width})")
            blocks.append(block)
        return (np.hstack(blocks).astype(np.float32, copy=False) if blocks
                else np.zeros((len(configs), 0), dtype=np.float32))


def layout_config_features(graph: LayoutGraph, spec: FeatureSpec
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Config features of every config, each distinct config computed once.

    Returns (features float32 (n_distinct, n_config_features), distinct_of int64
    (n_configs,)): config i's features are features[distinct_of[i]]. Distinct ids follow
    first appearance.

    The groups are `xlarank.data.distinct.distinct_configs`'s (renumbered by first
    appearance, as tests/test_features.py checks), found here by the reader's row hashes
    block by block instead: that function holds every config's columns at once (float32),
    which the streamed reader is there to avoid, and here features are made while reading
    goes on.
    """
    table_hash, table_id = seen_table(graph.n_configs)
    n_seen = 0
    rows: list[np.ndarray] = []
    pending: list[np.ndarray] = []
    pending_bytes = 0
    distinct_of = np.empty(graph.n_configs, dtype=np.int64)
    start = 0
    with config_blocks(graph) as blocks:
        # Configs are being read while the per-graph tables are made.
        families = PreparedFamilies(graph, spec)
        for block, hashes in blocks:
            ids, rows_of_new, n_seen = first_seen_ids(hashes, table_hash, table_id, n_seen)
            if len(rows_of_new):
                # Most blocks hold only new configs, in order: take the block as it is.
                fresh = block if len(rows_of_new) == len(block) else block[rows_of_new]
                pending.append(fresh)
                pending_bytes += fresh.nbytes
            # New configs are featurized in batches of FEATURE_BATCH_BYTES: read blocks of
            # a large graph hold a few configs only, and per-call costs would dominate.
            if pending and pending_bytes >= FEATURE_BATCH_BYTES:
                rows.append(families.columns(np.concatenate(pending)))
                pending, pending_bytes = [], 0
            distinct_of[start:start + len(block)] = ids
            start += len(block)
    if pending or not rows:
        batch = (np.concatenate(pending) if pending
                 else np.zeros((0, graph.n_configurable, 18), np.int8))
        rows.append(families.columns(batch))
    return np.vstack(rows), distinct_of


def tile_config_features(graph: TileGraph, spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:
    """Like `layout_config_features`, for a tile kernel's config_feat rows (few enough to
    group at once: `distinct_configs`)."""
    first, distinct_of = distinct_configs(graph).in_config_order()
    return PreparedFamilies(graph, spec).columns(graph.config_feat[first]), distinct_of


def group_median_int(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """int64 (n_groups,): the median of each group's values, groups in ascending order, a
    half rounded to even. values int64 >= 0 (n,), groups (n,).

    Exact in integers: a float64 median loses the low bits of runtimes past 2^53, and one
    rounded up to 2^63 wrapped to -2^63 when cast back.
    """
    order = np.lexsort((values, groups))
    ordered = values[order]
    _, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    low = ordered[starts + (counts - 1) // 2]
    high = ordered[starts + counts // 2]
    # Both >= 0, so high - low cannot overflow, nor can low + half.
    diff = high - low
    middle = low + diff // 2
    halfway = diff % 2 == 1
    return middle + (halfway & (middle % 2 == 1))


@dataclass(frozen=True)
class FeatureBlock:
    """One graph's feature rows, before they become a DataFrame or an arrow table.

    Row r is config ``config_index[r]``; its features are ``table[table_row[r]]``.
    config_index int32 (n,), runtime int64 (n,), normalizer int64 (n,), table float32
    (n_distinct, n_features), table_row int64 (n,); ``names`` the feature columns.
    """

    graph_id: str
    config_index: np.ndarray
    runtime: np.ndarray
    normalizer: np.ndarray
    table: np.ndarray
    table_row: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.config_index)

    def feature_columns(self) -> np.ndarray:
        """float32 (n_features, n): the features, one contiguous row per feature column.

        Gathered along the table's transpose, so each column is written in one run: the
        arrow table takes the rows without a copy, where columns of the row-major
        (n, n_features) gather are strided (0.03 s against 0.2 s through pandas for the
        benchmark graph's 10,000 x 585).
        """
        return np.take(self.table.T, self.table_row, axis=1)

    def to_frame(self) -> pd.DataFrame:
        """Key columns then `feature_names` columns, float32 features."""
        import pandas as pd

        # One float32 block: pandas builds it without a per-column copy.
        block = pd.DataFrame(self.table[self.table_row], columns=self.names, copy=False)
        keys = pd.DataFrame({
            "graph_id": pd.Series([self.graph_id] * len(self), dtype="string"),
            "config_index": self.config_index,
            "runtime": self.runtime,
            "normalizer": self.normalizer,
        })
        return pd.concat([keys, block], axis=1)


def feature_block(graph: TileGraph | LayoutGraph, spec: FeatureSpec,
                  dedup: bool = False) -> FeatureBlock:
    """The rows of `featurize_graph`, as arrays."""
    is_tile = isinstance(graph, TileGraph)
    table, distinct_of = (tile_config_features(graph, spec) if is_tile
                          else layout_config_features(graph, spec))
    runtime = graph.config_runtime
    normalizer = graph.config_runtime_normalizers if is_tile else np.ones_like(runtime)
    if dedup:
        _, rows = np.unique(distinct_of, return_index=True)
        runtime = group_median_int(runtime, distinct_of)
        config_index, normalizer, distinct_of = rows, normalizer[rows], distinct_of[rows]
    else:
        config_index = np.arange(graph.n_configs)
    return FeatureBlock(graph.graph_id, config_index.astype(np.int32), runtime, normalizer,
                        table, distinct_of, feature_names(spec, is_tile))


def featurize_graph(graph: TileGraph | LayoutGraph, spec: FeatureSpec,
                    dedup: bool = False) -> pd.DataFrame:
    """One feature block: key columns then `feature_names` columns.

    One row per config (for scoring and evaluation), or with ``dedup`` one row per
    distinct config (for training): the row of its first appearance, whose runtime is the
    median of the duplicates' runtimes, rounded to whole ns.
    """
    checked_type(graph, (TileGraph, LayoutGraph), "featurize_graph: graph",
                 "a graph from xlarank.load_graph")
    checked_type(spec, FeatureSpec, "featurize_graph: spec",
                 "a FeatureSpec (xlarank.load_feature_spec)")
    return feature_block(graph, spec, dedup).to_frame()
