"""Training the gnn family's weights with a ranking loss (needs jax: ``xlarank[gnn]``).

The network here computes exactly what `xlarank.features.embedding` computes with numpy and
Numba (same inputs, layers and joins), plus a linear score over the embedding columns that
is used for training only. The loss is pairwise logistic over the configs sampled from each
training graph: for every pair with different runtimes, softplus(-(s_fast - s_slow)),
minimized with Adam (`xlarank.features.jax_common.fit`). Only the network's weights are
saved (`save_weights`); featurizing with them needs no jax.

jax is imported on first use (`xlarank.compat.require_jax`), so neither ``import xlarank``
nor featurizing loads it. Batches, padding, float64 and the training loop are
`xlarank.features.jax_common`'s, shared with the gru family and the systems.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from xlarank.compat import jax, jnp, require_jax
from xlarank.data.collections import Collection
from xlarank.features.embedding import (
    N_LAYERS,
    WEIGHT_SHAPES,
    GnnWeights,
    gnn_column_names,
    random_weights,
)
from xlarank.features.jax_common import (
    GraphBatch,
    Network,
    fit,
    float64_context,
    message_layer,
    numpy_weights,
    padded_arrays,
    sampled_batches,
)
from xlarank.seeds import check_seed


def _node_embeddings(net: dict, arrays: dict):
    """float64 (N, HIDDEN): `embedding.node_embeddings` on the padded nodes, the messages
    summed by segment_sum (padding rows hold values no real row reads)."""
    raw = arrays["raw"]
    x = jnp.sign(raw) * jnp.log1p(jnp.abs(raw)) / 10.0
    h = jnp.tanh(net["opcode_embedding"][arrays["opcode"]] + x @ net["feat_proj"])
    for layer in range(N_LAYERS):
        h = message_layer(h, arrays, net[f"self_{layer}"], net[f"in_{layer}"],
                          net[f"out_{layer}"], net[f"bias_{layer}"])
    return h


def _columns(net: dict, arrays: dict):
    """float64 (C, n_columns): the gnn family's columns of the padded configs."""
    h = _node_embeddings(net, arrays)
    if "config_ids" not in arrays:
        mask = arrays["node_mask"]
        mean_h = jnp.where(mask[:, None], h, 0.0).sum(0) / mask.sum()
        return jnp.tanh(arrays["choice"] @ net["tile_config"] + mean_h @ net["tile_graph"])
    heads = jnp.tanh(h[arrays["config_ids"]] @ net["head"])          # (K, d)
    table, choice = net["layout_table"], arrays["choice"]
    mix = sum(table[q][choice[:, :, q]] for q in range(choice.shape[2]))
    values = heads[None, :, :] * mix                                  # (C, K, d)
    real = arrays["config_node_mask"][None, :, None]
    nc = real.sum()
    mean = jnp.where(real, values, 0.0).sum(1) / jnp.maximum(nc, 1)
    # Zero, as layout_embedding_join gives, when the graph has no configurable node.
    best = jnp.where(nc > 0, jnp.where(real, values, -jnp.inf).max(1), 0.0)
    return jnp.concatenate([mean, best], axis=1)


def _pairwise_loss(score, target, valid):
    faster = (target[:, None] < target[None, :]) & valid[:, None] & valid[None, :]
    diff = score[:, None] - score[None, :]
    total = jnp.where(faster, jax.nn.softplus(-diff), 0.0).sum()
    return total / jnp.maximum(faster.sum(), 1)


def _loss(params: dict, arrays: dict):
    score = _columns(params["net"], arrays) @ params["score"]
    return _pairwise_loss(score, arrays["target"], arrays["config_mask"])


@functools.cache
def _compiled() -> SimpleNamespace:
    require_jax()
    return SimpleNamespace(embeddings=jax.jit(_node_embeddings), columns=jax.jit(_columns),
                           loss_and_grads=jax.jit(jax.value_and_grad(_loss)))


class GnnModel:
    """The network's parameters as float64 jax arrays keyed like WEIGHT_SHAPES, and a
    training-only linear score (n_columns,) drawn from ``seed``."""

    def __init__(self, start: GnnWeights, n_columns: int, seed: int):
        require_jax()
        # numpy, not jax.random: its draws do not change between jax versions.
        score = np.random.default_rng([seed, 0x5C0E]).normal(0.0, 0.1, n_columns)
        with float64_context():
            self.params = {k: jax.numpy.asarray(start[k], dtype=np.float64)
                           for k in WEIGHT_SHAPES}
            self.score = jax.numpy.asarray(score)

    def node_embeddings(self, batch: GraphBatch):
        """float64 (n, HIDDEN): the last layer for each node of the batch's graph."""
        with float64_context():
            return _compiled().embeddings(self.params, padded_arrays(batch))[:len(batch.opcode)]

    def columns(self, batch: GraphBatch):
        """float64 (c, n_columns): the gnn family's columns of the batch's configs."""
        with float64_context():
            return _compiled().columns(self.params, padded_arrays(batch))[:len(batch.target)]

    def weights(self) -> GnnWeights:
        return numpy_weights(self.params)


def gnn_network(is_tile: bool, seed: int) -> Network:
    """The network from random:SEED and its training score (`GnnModel`), bundled for
    Adam; the score is higher for faster configs. Call inside `float64_context`."""
    model = GnnModel(random_weights(seed), len(gnn_column_names(is_tile)), seed)
    compiled = _compiled()
    return Network({"net": model.params, "score": model.score}, padded_arrays,
                   compiled.loss_and_grads, compiled.columns)


def pairwise_loss(score, target):
    """Mean softplus(-(s_i - s_j)) over pairs where config i is faster than config j (zero
    when there is none); score and target (c,)."""
    with float64_context():
        target = jnp.asarray(target)
        return _pairwise_loss(jnp.asarray(score), target, jnp.ones(target.shape, dtype=bool))


def train_gnn_weights(files: list[Path], collection: Collection, k: int = 2, seed: int = 0,
                      epochs: int = 5, configs_per_graph: int = 64, learning_rate: float = 0.01,
                      on_epoch: Callable[[int, float], None] | None = None,
                      allowed: dict[Path, np.ndarray] | None = None,
                      on_params: Callable[[dict], None] | None = None
                      ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the files' graphs (each file's configs sampled
    once, from ``allowed[file]`` when given); returns them and the mean training loss of
    each epoch. The same arguments give the same weights. ``on_params``: as
    `xlarank.features.jax_common.fit`'s."""
    seed = check_seed(seed, "seed")
    require_jax()
    rng = np.random.default_rng(seed)
    batches = sampled_batches(files, collection, k, configs_per_graph, rng, allowed)
    return fit_gnn(batches, collection.is_tile, seed, epochs, learning_rate, rng, on_epoch,
                   on_params)


def fit_gnn(batches: list[GraphBatch], is_tile: bool, seed: int, epochs: int,
            learning_rate: float, rng: np.random.Generator,
            on_epoch: Callable[[int, float], None] | None = None,
            on_params: Callable[[dict], None] | None = None
            ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the batches (`sampled_batches`) and each
    epoch's mean training loss."""
    require_jax()
    model = GnnModel(random_weights(seed), len(gnn_column_names(is_tile)), seed)
    with float64_context():
        params, history = fit({"net": model.params, "score": model.score},
                              [padded_arrays(b) for b in batches], _compiled().loss_and_grads,
                              epochs, learning_rate, rng, on_epoch, on_params=on_params)
    model.params, model.score = params["net"], params["score"]
    return model.weights(), history

