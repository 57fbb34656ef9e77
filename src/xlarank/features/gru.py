"""The gru family: the published "GRU runtime model" design, small, as a feature extractor.

Its five parts, as built here:

1. Opcode-weighted scaling: node inputs (the gnn's node_feat columns, signed log1p / 10,
   plus a configurable flag) are scaled per opcode and input column by ``opcode_scale``:
   ``u = tanh((x * opcode_scale[opcode]) @ feat_proj + feat_bias)``, (n, NODE_DIM).
2. Edge dependencies: one message-passing layer (the gnn's kernel) gives each node
   ``c = tanh(u @ dep_self + mean over operands of u @ dep_in + mean over users of
   u @ dep_out + dep_bias)``, (n, NODE_DIM).
3. Flags on configurable nodes: layout, the input's last column is 1 on configurable
   nodes, and each configurable node's config values reach the GRU through (4); tile, the
   kernel's tile config is the GRU's last input.
4. A convolution over the config: layout, a width-2 filter over the one-hot dimension
   ids of each layout's minor-most position pair, the output, input and kernel layouts
   its channels, summed: ``layout_conv`` (3 channels, 2 taps, 7 ids, CODE_DIM), times the
   node's ``tanh(c @ head)``. Real configs fix that pair only, if any (FORMAT.md): on all
   six layout samples the positions past it tell no further config apart, so the filter
   is not slid over them. The output layout alone tells only 16 of unet3d's 681 distinct
   configs apart, the three layouts all. Tile: a width-2 filter over the 6 bound dims,
   the three groups its channels, max-pooled, ``tile_conv`` (3, 2, TILE_FILTERS).
5. A GRU (GRU_HIDDEN) over the nodes in topological order (node ids are): layout, over the
   configurable nodes' contexts ``c``, then, per config, over N_STEPS segments of those
   nodes in the same order, each step's input the mean config code of its nodes; tile,
   over every node's ``c`` then one step with the tile config. Columns: its last hidden
   state; layout, also the mean of its states over the config steps.

Only the config steps are per config. One GRU step per configurable node and config (848 x
1,001 on the nlp sample) would cost several times the whole default featurization; the
segments keep the family within its budget. Layout runs on the graph pruned to the
configurable nodes' one-hop neighbourhoods (CONTEXT_HOPS), all the message layer reads for
them, whatever the spec's k.

Weights are "random:SEED" or a .npz from ``xlarank gnn-train --embedding gru`` (trained to
regress log runtime: `xlarank.features.gru_train`), written by
`xlarank.features.embedding.save_weights` as the gnn's. Inference runs in Numba kernels
(`xlarank.kernels.sequence`) in float64; columns are float32.
"""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import MAX_OPCODE, LayoutGraph, TileGraph
from xlarank.features.embedding import (
    NODE_INPUT_COLUMNS,
    GnnWeights,
    load_family_weights,
)
from xlarank.features.prune import prune_graph
from xlarank.kernels.graph import csr_by_row, gnn_message_layer
from xlarank.kernels.sequence import (
    gru_sequence,
    layout_gru_columns,
    opcode_scaled_input,
    tile_gru_columns,
)

NODE_DIM = 16
GRU_HIDDEN = 8
CODE_DIM = 8
TILE_FILTERS = 8
N_STEPS = 16
CONTEXT_HOPS = 1
# The gnn's node inputs plus the configurable flag.
N_NODE_INPUTS = len(NODE_INPUT_COLUMNS) + 1
GRU_WEIGHT_SHAPES = {
    "opcode_scale": (MAX_OPCODE + 1, N_NODE_INPUTS),
    "feat_proj": (N_NODE_INPUTS, NODE_DIM),
    "feat_bias": (NODE_DIM,),
    "dep_self": (NODE_DIM, NODE_DIM),
    "dep_in": (NODE_DIM, NODE_DIM),
    "dep_out": (NODE_DIM, NODE_DIM),
    "dep_bias": (NODE_DIM,),
    "node_input": (NODE_DIM, 3 * GRU_HIDDEN),
    "node_input_bias": (3 * GRU_HIDDEN,),
    "hidden": (GRU_HIDDEN, 3 * GRU_HIDDEN),
    "hidden_bias": (3 * GRU_HIDDEN,),
    "head": (NODE_DIM, CODE_DIM),
    "layout_conv": (3, 2, 7, CODE_DIM),
    "layout_input": (CODE_DIM, 3 * GRU_HIDDEN),
    "layout_input_bias": (3 * GRU_HIDDEN,),
    "tile_conv": (3, 2, TILE_FILTERS),
    "tile_conv_bias": (TILE_FILTERS,),
    "tile_input": (TILE_FILTERS + 6, 3 * GRU_HIDDEN),
    "tile_input_bias": (3 * GRU_HIDDEN,),
}


def gru_column_names(is_tile: bool) -> list[str]:
    """The GRU's last hidden state; layout, then the mean of its states over the config
    steps (tile has one such step)."""
    aggregates = ("last",) if is_tile else ("last", "mean")
    return [f"e_gru_{agg}{i:02d}" for agg in aggregates for i in range(GRU_HIDDEN)]


def random_gru_weights(seed: int) -> GnnWeights:
    """Fixed random weights, Glorot-scaled, opcode scales near 1: the training-free
    variant."""
    rng = np.random.default_rng([seed, 0x6752])
    arrays = {}
    for key, shape in GRU_WEIGHT_SHAPES.items():
        if key == "opcode_scale":
            arrays[key] = rng.normal(1.0, 0.25, shape)
        elif len(shape) == 1:
            arrays[key] = np.zeros(shape)
        elif key == "layout_conv":
            # One-hot inputs: each code sums six taps (two per layout), so about unit scale.
            arrays[key] = rng.normal(0.0, 0.4, shape)
        else:
            fan_in = int(np.prod(shape[:-1])) * (3 if key.startswith("dep") else 1)
            arrays[key] = rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)
    return GnnWeights(arrays)


def load_gru_weights(source: str) -> GnnWeights:
    """The gru weights a spec names: "random:SEED" or a .npz path (checked against
    GRU_WEIGHT_SHAPES; saved by `save_weights`)."""
    return load_family_weights(source, "gru", GRU_WEIGHT_SHAPES, random_gru_weights)


def node_context(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray,
                 configurable: np.ndarray, weights: GnnWeights) -> np.ndarray:
    """float64 (n, NODE_DIM): parts 1 and 2 (with 3's flag) for each node. edge_index
    int64 (m, 2) of [consumer, producer]; configurable int64 (nc,) node ids."""
    n = len(node_opcode)
    consumers, producers = edge_index[:, 0].copy(), edge_index[:, 1].copy()
    raw = np.zeros((n, N_NODE_INPUTS), dtype=np.float32)
    raw[:, :-1] = node_feat[:, NODE_INPUT_COLUMNS]
    raw[configurable, -1] = 1.0
    u = opcode_scaled_input(raw, node_opcode, weights["opcode_scale"], weights["feat_proj"],
                            weights["feat_bias"])
    return gnn_message_layer(u, *csr_by_row(consumers, producers, n),
                             *csr_by_row(producers, consumers, n), weights["dep_self"],
                             weights["dep_in"], weights["dep_out"], weights["dep_bias"])


def node_sequence_state(context: np.ndarray, weights: GnnWeights) -> np.ndarray:
    """float64 (GRU_HIDDEN,): the GRU's state after the rows of context (n, NODE_DIM), in
    order."""
    return gru_sequence(context, weights["node_input"], weights["node_input_bias"],
                        weights["hidden"], weights["hidden_bias"])


def config_segments(node_config_ids: np.ndarray) -> np.ndarray:
    """int64 (nc,): each configurable node's config step, N_STEPS (or fewer, one per node)
    runs of nodes in topological (id) order."""
    nc = len(node_config_ids)
    rank = np.empty(nc, dtype=np.int64)
    rank[np.argsort(node_config_ids, kind="stable")] = np.arange(nc)
    return rank * N_STEPS // max(nc, 1)


def layout_conv_table(weights: GnnWeights) -> np.ndarray:
    """float64 (3, 49, CODE_DIM): per channel (output, input, kernel layout), the
    filter's two taps summed for each pair of dimension ids (-1..5, -1..5), row
    7 * (a + 1) + b + 1."""
    taps = weights["layout_conv"]
    return np.ascontiguousarray(
        (taps[:, 0, :, None, :] + taps[:, 1, None, :, :]).reshape(3, 49, CODE_DIM))


def _cell(weights: GnnWeights, kind: str) -> tuple:
    return (weights[f"{kind}_input"], weights[f"{kind}_input_bias"], weights["hidden"],
            weights["hidden_bias"])


class LayoutGruState:
    """A layout graph's per-graph part of the network: its config-step inputs and the
    GRU's state after the configurable nodes' contexts. Built from a graph pruned to
    CONTEXT_HOPS (see `gru_state`); edge_index int64 (m, 2) of [consumer, producer]."""

    def __init__(self, node_feat: np.ndarray, node_opcode: np.ndarray,
                 edge_index: np.ndarray, node_config_ids: np.ndarray, weights: GnnWeights):
        ids = node_config_ids
        context = node_context(node_feat, node_opcode, edge_index, ids, weights)[ids]
        self.start = node_sequence_state(context[np.argsort(ids, kind="stable")], weights)
        self.heads = np.ascontiguousarray(np.tanh(context @ weights["head"]))
        self.segment = config_segments(ids)
        self.table = layout_conv_table(weights)
        self.cell = _cell(weights, "layout")

    def columns(self, configs: np.ndarray) -> np.ndarray:
        """float32 (b, 2 * GRU_HIDDEN) for int8 configs (b, nc, 18)."""
        pairs = np.ascontiguousarray(configs, dtype=np.int8).view(np.int16)
        return layout_gru_columns(pairs, self.segment, self.heads, self.table, self.start,
                                  self.cell)


class TileGruState:
    """A tile kernel's per-graph part of the network: the GRU's state after its nodes."""

    def __init__(self, node_feat: np.ndarray, node_opcode: np.ndarray,
                 edge_index: np.ndarray, weights: GnnWeights):
        context = node_context(node_feat, node_opcode, edge_index, np.zeros(0, np.int64),
                               weights)
        self.start = node_sequence_state(context, weights)
        self.conv = (weights["tile_conv"], weights["tile_conv_bias"])
        self.cell = _cell(weights, "tile")

    def columns(self, config_feat: np.ndarray) -> np.ndarray:
        """float32 (b, GRU_HIDDEN) for float32 tile configs (b, 24)."""
        return tile_gru_columns(np.ascontiguousarray(config_feat, dtype=np.float32),
                                self.start, self.conv, self.cell)


def gru_state(graph: TileGraph | LayoutGraph, weights: GnnWeights,
              csr: tuple[np.ndarray, np.ndarray] | None = None
              ) -> LayoutGruState | TileGruState:
    """The per-graph part of the network, ready for batches of configs; ``csr`` as
    `prune_graph` takes it."""
    if isinstance(graph, TileGraph):
        return TileGruState(graph.node_feat, graph.node_opcode, graph.edge_index, weights)
    pruned, _ = prune_graph(graph, CONTEXT_HOPS, csr)
    return LayoutGruState(pruned.node_feat, pruned.node_opcode, pruned.edge_index,
                          pruned.node_config_ids, weights)

