"""``gnn``: a small message-passing network's node embeddings (`xlarank.features.embedding`):
layout, each configurable node's embedding modulated by the config's layout of it, mean and
max over those nodes; tile, joined with the tile features. Weights from the spec's ``gnn``
(random:SEED, or a weights .npz)."""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import TileGraph
from xlarank.features.embedding import (
    LAYOUT_POSITIONS,
    gnn_column_names,
    layout_node_heads,
    load_weights,
    tile_columns,
)
from xlarank.kernels.configs import layout_embedding_join, layout_embedding_table


class GnnFamily:
    name = "gnn"
    # Trained weights, in the spec's ``gnn`` field (`xlarank.features.families.Family`).
    weights = "gnn"
    loss = "pairwise loss"
    description = ("a small message-passing network's node embeddings over the pruned graph: "
                   "layout, each configurable node's embedding modulated by the config's "
                   "layout of it, mean and max over those nodes; tile, joined with the tile "
                   "features; weights from `gnn` (random:SEED, or a weights .npz)")

    def names(self, spec, is_tile: bool) -> list[str]:
        return gnn_column_names(is_tile)

    def prepare(self, graph, tables, spec):
        weights = load_weights(spec.weights_for(self.weights))
        if isinstance(graph, TileGraph):
            return True, (graph, tables, weights)
        table = layout_embedding_table(layout_node_heads(graph, spec.k, weights),
                                       weights["layout_table"])
        return False, table

    def columns(self, prepared, configs: np.ndarray) -> np.ndarray:
        is_tile, state = prepared
        if is_tile:
            graph, tables, weights = state
            return tile_columns(graph, tables.tile_joined(configs), weights)
        return layout_embedding_join(configs, state, LAYOUT_POSITIONS)

    def load_weights(self, source: str):
        return load_weights(source)

    def train_weights(self, files, collection, k, seed, epochs, configs_per_graph,
                      on_epoch=None):
        from xlarank.features.gnn_train import train_gnn_weights

        return train_gnn_weights(files, collection, k, seed, epochs, configs_per_graph,
                                 on_epoch=on_epoch)


FAMILY = GnnFamily()
