"""``gru``: the "GRU runtime model" design as a feature extractor (`xlarank.features.gru`):
the GRU's last hidden state after the graph's nodes and then the config, per config.
Weights from the spec's ``gru`` (random:SEED, or a weights .npz)."""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import TileGraph
from xlarank.features.gru import gru_column_names, gru_state, load_gru_weights


class GruFamily:
    name = "gru"
    # Trained weights, in the spec's ``gru`` field (`xlarank.features.families.Family`).
    weights = "gru"
    loss = "centred log-runtime mse"
    description = ("a GRU over the nodes in topological order (opcode-scaled inputs, operand "
                   "context) that runs on over the config: layout, segments of configurable "
                   "nodes with a convolution over their layouts; tile, the tile config; its "
                   "last hidden state; weights from `gru` (random:SEED, or a weights .npz)")

    def names(self, spec, is_tile: bool) -> list[str]:
        return gru_column_names(is_tile)

    def prepare(self, graph, tables, spec):
        weights = load_gru_weights(spec.weights_for(self.weights))
        # The undirected CSR is shared with khop when both are in the spec.
        return gru_state(graph, weights, None if isinstance(graph, TileGraph) else tables.csr)

    def columns(self, prepared, configs: np.ndarray) -> np.ndarray:
        return prepared.columns(configs)

    def load_weights(self, source: str):
        return load_gru_weights(source)

    def train_weights(self, files, collection, k, seed, epochs, configs_per_graph,
                      on_epoch=None):
        """``k`` is not used: the gru prunes to its own context (one hop)."""
        from xlarank.features.gru_train import train_gru_weights

        return train_gru_weights(files, collection, seed, epochs, configs_per_graph,
                                 on_epoch=on_epoch)


FAMILY = GruFamily()
