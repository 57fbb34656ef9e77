"""The gnn family: a small message-passing network used as a feature extractor.

Two layers over the graph (layout: pruned to the configurable nodes' k-hop neighbourhoods),
messages along edges in both directions:

    h0 = tanh(opcode_embedding[opcode] + node_inputs @ feat_proj)
    h(l+1) = tanh(h(l) @ self_l + mean over operands of h(l) @ in_l
                  + mean over users of h(l) @ out_l + bias_l)

Layout: each configurable node's embedding is projected to HEAD_DIM values and, per
config, multiplied by a learned mix of the dimension ids the config puts in the node's
minor and second-minor output layout slots; the mean and max over configurable
nodes vary between configs of one graph (2 x HEAD_DIM columns). (Pooling over the nodes
whose layout differs from node_feat's alone was tried first: on the real unet3d sample
almost no config keeps that layout, so those columns were nearly constant.)
Tile: the kernel's mean node embedding and the config's tile features (the config_joined
kernel's, scaled by 1/10) meet in one tanh layer (TILE_DIM columns).

Weights are fixed random projections ("random:SEED", no training) or a weights .npz
written by `save_weights`. Inference runs in Numba kernels (`gnn_input_layer`,
`gnn_message_layer`, `layout_embedding_join`); node inputs are the chosen node_feat
columns' signed log1p, / 10, so products of dims (up to ~1e12) stay within a few units.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlarank.atomic import atomic_path
from xlarank.data.graph import MAX_OPCODE, LayoutGraph, TileGraph
from xlarank.errors import BadGraphError, BadInputError, SpecError, XlarankError
from xlarank.features.prune import prune_graph
from xlarank.files import open_regular
from xlarank.kernels.configs import TILE_JOINED_NAMES
from xlarank.kernels.graph import csr_by_row, gnn_input_layer, gnn_message_layer
from xlarank.seeds import random_seed

HIDDEN = 16
HEAD_DIM = 8
# Config columns whose dimension ids modulate each node's embedding, in pairs: the output
# layout's minor and second-minor dims. (Adding the input layout's pair doubled the join's
# cost, past the 30% budget on the benchmark graph.)
LAYOUT_POSITIONS = np.array([0, 1])
TILE_DIM = 24
N_LAYERS = 2
# node_feat columns fed to the network (signed log1p, scaled): is-root, element types,
# shape dims with their sum and product, window, convolution groups, layout.
NODE_INPUT_COLUMNS = np.array([0, *range(2, 21), *range(21, 30), 43, 44, 107, 108,
                               *range(134, 140)])
WEIGHT_SHAPES = {
    "opcode_embedding": (MAX_OPCODE + 1, HIDDEN),
    "feat_proj": (len(NODE_INPUT_COLUMNS), HIDDEN),
    **{f"{part}_{layer}": (HIDDEN, HIDDEN) for layer in range(N_LAYERS)
       for part in ("self", "in", "out")},
    **{f"bias_{layer}": (HIDDEN,) for layer in range(N_LAYERS)},
    "head": (HIDDEN, HEAD_DIM),
    "layout_table": (len(LAYOUT_POSITIONS), 7, HEAD_DIM),
    "tile_config": (len(TILE_JOINED_NAMES), TILE_DIM),
    "tile_graph": (HIDDEN, TILE_DIM),
}


def gnn_column_names(is_tile: bool) -> list[str]:
    if is_tile:
        return [f"e_gnn{i:02d}" for i in range(TILE_DIM)]
    return [f"e_gnn_{agg}{i:02d}" for agg in ("mean", "max") for i in range(HEAD_DIM)]


@dataclass(frozen=True)
class GnnWeights:
    """The network's arrays, keyed as WEIGHT_SHAPES (the gru family's, as
    `xlarank.features.gru.GRU_WEIGHT_SHAPES`, use the same container)."""

    arrays: dict

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]


def random_weights(seed: int) -> GnnWeights:
    """Fixed random projections, scaled so each layer's pre-activations stay near unit
    variance (Glorot-style): the training-free variant."""
    rng = np.random.default_rng([seed, 0x6E6E])
    arrays = {}
    for key, shape in WEIGHT_SHAPES.items():
        if key.startswith("bias"):
            arrays[key] = np.zeros(shape)
        elif key in ("opcode_embedding", "layout_table"):
            arrays[key] = rng.normal(0.0, 1.0, shape)
        else:
            fan_in = shape[0] * (3 if key.split("_")[0] in ("self", "in", "out") else 1)
            arrays[key] = rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)
    return GnnWeights(arrays)


def save_weights(weights: GnnWeights, path: str | Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **weights.arrays)


_CACHE: dict[tuple, GnnWeights] = {}


def load_weights(source: str) -> GnnWeights:
    """The gnn weights a spec names: "random:SEED" or a .npz path (checked against
    WEIGHT_SHAPES)."""
    return load_family_weights(source, "gnn", WEIGHT_SHAPES, random_weights)


def load_family_weights(source: str, family: str, shapes: dict,
                        make_random: Callable[[int], GnnWeights]) -> GnnWeights:
    """A family's weights: "random:SEED" (``make_random(SEED)``) or a .npz path checked
    against ``shapes``. Cached per process by family, source and, for files, the file's
    identity (inode, size, mtime), so featurizing graph after graph does not read it
    again."""
    if source.startswith("random:"):
        key: tuple = (family, source)
    else:
        try:
            stat = Path(source).stat()
        except OSError as exc:
            raise SpecError(f"{source}: {family} weights cannot be read ({exc.strerror})"
                            ) from None
        key = (family, source, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _CACHE:
        _CACHE[key] = (make_random(random_seed(source, f"--{family}-weights"))
                       if source.startswith("random:")
                       else _read_weights(Path(source), family, shapes))
    return _CACHE[key]


def _read_weights(path: Path, family: str, shapes: dict) -> GnnWeights:
    try:
        # Never a FIFO or a device, which would hang the read.
        with open_regular(path, f"{family} weights") as handle:
            if not handle.read(1):
                raise SpecError(f"{path}: {family} weights file is empty, expected a .npz "
                                f"(from xlarank gnn-train --embedding {family})")
    except BadInputError as exc:
        raise SpecError(str(exc)) from None
    except OSError as exc:
        raise SpecError(f"{path}: {family} weights cannot be read ({exc.strerror})") from None
    return GnnWeights(read_weight_arrays(path, f"{family} weights", shapes))


def read_weight_arrays(path: Path, what: str, shapes: dict[str, tuple[int, ...]],
                       error: type[XlarankError] = SpecError, *, exact: bool = False,
                       others: tuple[str, ...] = (), finite: bool = True
                       ) -> dict[str, np.ndarray]:
    """The arrays of the .npz at ``path`` that ``shapes`` names (key: shape), float64,
    each present, of its shape and numeric by its .npy header (checked before anything
    is inflated, so a header cannot make the read allocate) and, with ``finite``, free of
    NaN and inf. With ``exact`` the file holds no array beyond these and ``others``.
    Anything else is ``error`` naming the file, ``what`` it is ("gnn weights") and the
    array."""
    from xlarank.data.npzstream import NpzStream

    path = Path(path)
    try:
        with NpzStream(path) as npz:
            extra = sorted(npz.keys - set(shapes) - set(others)) if exact else []
            if extra:
                raise error(f"{path}: {what} hold {extra[0]}, which no saved one has")
            for key, shape in shapes.items():
                found, dtype = npz.header(key) if key in npz.keys else (None, None)
                if found != tuple(shape) or dtype.kind not in "fiu":
                    raise error(f"{path}: {what} need {key} of shape {tuple(shape)}, found "
                                + ("none" if found is None else f"{dtype} of shape {found}"))
            arrays = {key: npz.read(key).astype(np.float64) for key in shapes}
    except BadGraphError as exc:
        # EOFError and the like are this already: click would read one as "Aborted.".
        raise error(f"{path}: not a {what} .npz ({exc.fault})") from None
    if finite:
        for key, array in arrays.items():
            if not np.isfinite(array).all():
                raise error(f"{path}: {what} {key} holds a value that is not finite "
                            "(NaN or inf)")
    return arrays


def node_embeddings(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray,
                    weights: GnnWeights) -> np.ndarray:
    """float64 (n, HIDDEN): the network's last layer for each node of a graph.
    edge_index int64 (m, 2) of [consumer, producer]."""
    n = len(node_opcode)
    consumers, producers = edge_index[:, 0].copy(), edge_index[:, 1].copy()
    operands = csr_by_row(consumers, producers, n)   # each node's inputs
    users = csr_by_row(producers, consumers, n)      # each node's consumers
    raw = np.ascontiguousarray(node_feat[:, NODE_INPUT_COLUMNS], dtype=np.float32)
    h = gnn_input_layer(raw, node_opcode, weights["opcode_embedding"], weights["feat_proj"])
    for layer in range(N_LAYERS):
        h = gnn_message_layer(h, *operands, *users, weights[f"self_{layer}"],
                              weights[f"in_{layer}"], weights[f"out_{layer}"],
                              weights[f"bias_{layer}"])
    return h


def layout_node_heads(graph: LayoutGraph, k: int, weights: GnnWeights) -> np.ndarray:
    """float64 (nc, HEAD_DIM): each configurable node's projected embedding, computed on
    the graph pruned to the configurable nodes' k-hop neighbourhoods."""
    pruned, _ = prune_graph(graph, k)
    h = node_embeddings(pruned.node_feat, pruned.node_opcode, pruned.edge_index, weights)
    return np.ascontiguousarray(np.tanh(h[pruned.node_config_ids] @ weights["head"]))


def tile_columns(graph: TileGraph, joined: np.ndarray, weights: GnnWeights) -> np.ndarray:
    """float32 (n_configs, TILE_DIM) for a tile kernel, given its configs' config_joined
    columns joined float (n_configs, len(TILE_JOINED_NAMES))."""
    h = node_embeddings(graph.node_feat, graph.node_opcode, graph.edge_index, weights)
    # A fixed scale, not per-graph statistics: a config's columns must not depend on
    # which other configs its file holds.
    out = np.tanh(joined / 10.0 @ weights["tile_config"] + h.mean(axis=0) @ weights["tile_graph"])
    return out.astype(np.float32)
