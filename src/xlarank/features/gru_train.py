"""Training the gru family's weights by regressing log runtime (needs jax: ``xlarank[gnn]``).

The network here computes exactly what `xlarank.features.gru` computes with Numba (same
inputs, layers and steps), plus a linear readout of the columns used for training only.
The loss is the mean squared error of log runtime (tile: log of runtime / normalizer),
with prediction and target each centred per graph over its sampled configs: runtimes of
different graphs differ by orders of magnitude, which no per-config column should have to
explain, and a ranker only uses the order within a graph. Configs are sampled, padded,
batched and stepped by Adam with `xlarank.features.jax_common`'s helpers, in float64.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from xlarank.compat import jax, jnp, require_jax
from xlarank.data.collections import Collection
from xlarank.data.graph import TileGraph
from xlarank.features.embedding import GnnWeights
from xlarank.features.gru import (
    CONTEXT_HOPS,
    GRU_HIDDEN,
    GRU_WEIGHT_SHAPES,
    N_STEPS,
    config_segments,
    gru_column_names,
    random_gru_weights,
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

# Layout config columns the network reads: the minor-most pair of the output, input and
# kernel layouts.
LAYOUT_COLUMNS = np.array([0, 1, 6, 7, 12, 13])
# Tile config columns of the bound sums and products (after the 6 dims of each group).
TILE_EXTRA = np.array([6, 7, 14, 15, 22, 23])


def gru_tile_choice(graph: TileGraph, keep: np.ndarray) -> np.ndarray:
    """float64 (len(keep), 24): the tile configs ``keep`` as they are."""
    return graph.config_feat[keep].astype(np.float64)


def gru_batch(batch: GraphBatch) -> dict[str, np.ndarray]:
    """`padded_arrays` of a batch for this network: the configurable flag appended to the
    node inputs, configurable nodes in id (topological) order, and each one's segment."""
    flag = np.zeros((len(batch.opcode), 1))
    if batch.config_ids is not None:
        order = np.argsort(batch.config_ids, kind="stable")
        batch = dataclasses.replace(batch, config_ids=batch.config_ids[order],
                                    choice=batch.choice[:, order])
        flag[batch.config_ids] = 1.0
    arrays = padded_arrays(dataclasses.replace(batch, raw=np.hstack([batch.raw, flag])))
    if batch.config_ids is not None:
        segment = config_segments(batch.config_ids)
        arrays["segment"] = np.pad(segment, (0, len(arrays["config_ids"]) - len(segment)))
    return arrays


def _context(net: dict, arrays: dict):
    """float64 (N, NODE_DIM): `gru.node_context` on the padded nodes."""
    raw = arrays["raw"]
    x = jnp.sign(raw) * jnp.log1p(jnp.abs(raw)) / 10.0 * net["opcode_scale"][arrays["opcode"]]
    u = jnp.tanh(x @ net["feat_proj"] + net["feat_bias"])
    return message_layer(u, arrays, net["dep_self"], net["dep_in"], net["dep_out"],
                         net["dep_bias"])


def _step(net: dict, gates, h):
    """One GRU step (`kernels.sequence`'s equations) of h (..., G) given input gates
    (..., 3G)."""
    g = GRU_HIDDEN
    recurrent = h @ net["hidden"] + net["hidden_bias"]
    r = jax.nn.sigmoid(gates[..., :g] + recurrent[..., :g])
    z = jax.nn.sigmoid(gates[..., g:2 * g] + recurrent[..., g:2 * g])
    n = jnp.tanh(gates[..., 2 * g:] + r * recurrent[..., 2 * g:])
    return (1.0 - z) * n + z * h


def _run(net: dict, gates, mask, start):
    """The GRU over gates (T, ..., 3G) from start (..., G), steps where mask (T,) is False
    skipped: (last state, sum of the states after taken steps)."""
    def body(carry, step):
        h, total = carry
        gate, take = step
        new = jnp.where(take, _step(net, gate, h), h)
        return (new, total + jnp.where(take, new, 0.0)), None

    (last, total), _ = jax.lax.scan(body, (start, jnp.zeros_like(start)), (gates, mask))
    return last, total


def _columns(net: dict, arrays: dict):
    """float64 (C, n_columns): the gru family's columns of the padded configs."""
    context = _context(net, arrays)
    start = jnp.zeros(GRU_HIDDEN)
    if "config_ids" not in arrays:
        gates = context @ net["node_input"] + net["node_input_bias"]
        start, _ = _run(net, gates, arrays["node_mask"], start)
        x = arrays["choice"]
        x = jnp.sign(x) * jnp.log1p(jnp.abs(x))
        windows = jnp.stack([sum(x[:, 8 * ch + p + t, None] * net["tile_conv"][ch, t]
                                 for ch in range(3) for t in range(2))
                             for p in range(5)], axis=1) + net["tile_conv_bias"]
        step_input = jnp.concatenate([jnp.tanh(windows.max(axis=1)), x[:, TILE_EXTRA]], axis=1)
        gates = step_input @ net["tile_input"] + net["tile_input_bias"]
        return _step(net, gates, jnp.broadcast_to(start, (x.shape[0], GRU_HIDDEN)))
    real = arrays["config_node_mask"]
    context = context[arrays["config_ids"]]                              # (K, NODE_DIM)
    gates = context @ net["node_input"] + net["node_input_bias"]
    start, _ = _run(net, gates, real, start)
    heads = jnp.tanh(context @ net["head"])                               # (K, CODE_DIM)
    taps = net["layout_conv"]
    table = (taps[:, 0, :, None, :] + taps[:, 1, None, :, :]).reshape(3, 49, -1)
    choice = arrays["choice"]                                    # (C, K, 6), ids + 1
    code = sum(table[ch][7 * choice[:, :, 2 * ch] + choice[:, :, 2 * ch + 1]]
               for ch in range(3))
    member = (arrays["segment"][:, None] == jnp.arange(N_STEPS)[None, :]) & real[:, None]
    count = member.sum(axis=0)                                            # (S,)
    step_input = (jnp.einsum("ckd,ks->scd", heads[None] * code, member.astype(float))
                  / jnp.maximum(count, 1)[:, None, None])                 # (S, C, CODE_DIM)
    gates = step_input @ net["layout_input"] + net["layout_input_bias"]
    n_configs = choice.shape[0]
    last, total = _run(net, gates, count > 0,
                       jnp.broadcast_to(start, (n_configs, GRU_HIDDEN)))
    taken = (count > 0).sum()
    mean = jnp.where(taken > 0, total / jnp.maximum(taken, 1), last)
    return jnp.concatenate([last, mean], axis=1)


def _centred_mse(prediction, target, valid):
    """Mean over valid configs of ((p - mean p) - (log t - mean log t))^2."""
    n = jnp.maximum(valid.sum(), 1)
    y = jnp.log(jnp.where(valid, target, 1.0))
    y = y - jnp.where(valid, y, 0.0).sum() / n
    p = prediction - jnp.where(valid, prediction, 0.0).sum() / n
    return jnp.where(valid, (p - y) ** 2, 0.0).sum() / n


def _loss(params: dict, arrays: dict):
    prediction = _columns(params["net"], arrays) @ params["score"]
    return _centred_mse(prediction, arrays["target"], arrays["config_mask"])


@functools.cache
def _compiled() -> SimpleNamespace:
    require_jax()
    return SimpleNamespace(columns=jax.jit(_columns),
                           loss_and_grads=jax.jit(jax.value_and_grad(_loss)))


class GruModel:
    """The network's parameters as float64 jax arrays keyed like GRU_WEIGHT_SHAPES, and a
    training-only linear readout (n_columns,) drawn from ``seed``."""

    def __init__(self, start: GnnWeights, n_columns: int, seed: int):
        require_jax()
        # numpy, not jax.random: its draws do not change between jax versions.
        score = np.random.default_rng([seed, 0x6C0E]).normal(0.0, 0.1, n_columns)
        with float64_context():
            self.params = {k: jax.numpy.asarray(start[k], dtype=np.float64)
                           for k in GRU_WEIGHT_SHAPES}
            self.score = jax.numpy.asarray(score)

    def columns(self, batch: GraphBatch):
        """float64 (c, n_columns): the gru family's columns of the batch's configs."""
        with float64_context():
            return _compiled().columns(self.params, gru_batch(batch))[:len(batch.target)]

    def weights(self) -> GnnWeights:
        return numpy_weights(self.params)


def gru_network(is_tile: bool, seed: int) -> Network:
    """The network from random:SEED and its readout (`GruModel`), bundled for Adam; the
    readout predicts centred log runtime (higher is slower). Call inside
    `float64_context`."""
    model = GruModel(random_gru_weights(seed), len(gru_column_names(is_tile)), seed)
    compiled = _compiled()
    return Network({"net": model.params, "score": model.score}, gru_batch,
                   compiled.loss_and_grads, compiled.columns)


def centred_mse(prediction, target) -> float:
    """The training loss of predictions (c,) for runtimes target (c,)."""
    with float64_context():
        target = jnp.asarray(target)
        return float(_centred_mse(jnp.asarray(prediction), target,
                                  jnp.ones(target.shape, dtype=bool)))


def gru_graph_batch_options() -> dict:
    """`graph_batch`'s options for this network's inputs."""
    return {"layout_columns": LAYOUT_COLUMNS, "tile_choice": gru_tile_choice}


def train_gru_weights(files: list[Path], collection: Collection, seed: int = 0,
                      epochs: int = 5, configs_per_graph: int = 64,
                      learning_rate: float = 0.01,
                      on_epoch: Callable[[int, float], None] | None = None,
                      allowed: dict[Path, np.ndarray] | None = None
                      ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the files' graphs (each file's configs sampled
    once, from ``allowed[file]`` when given; layout graphs pruned to CONTEXT_HOPS, as the
    family prunes them); returns them and the mean training loss of each epoch. The same
    arguments give the same weights."""
    seed = check_seed(seed, "seed")
    rng = np.random.default_rng(seed)
    batches = gru_batches(files, collection, configs_per_graph, rng, allowed)
    fitted = fit_gru(batches, collection.is_tile, seed, epochs, learning_rate, rng, on_epoch)
    return fitted.weights, fitted.history


@dataclasses.dataclass
class FittedGru:
    """The trained network (weights), its readout float64 (n_columns,): columns @ readout
    predicts centred log runtime, and the mean train (and valid) loss of each epoch."""

    weights: GnnWeights
    readout: np.ndarray
    history: list[float]
    valid_history: list[float]


def gru_batches(files: list[Path], collection: Collection, configs_per_graph: int,
                rng: np.random.Generator, allowed: dict[Path, np.ndarray] | None = None
                ) -> list[GraphBatch]:
    """`sampled_batches` with this network's inputs and pruning."""
    require_jax()
    return sampled_batches(files, collection, CONTEXT_HOPS, configs_per_graph, rng, allowed,
                           **gru_graph_batch_options())


def fit_gru(batches: list[GraphBatch], is_tile: bool, seed: int, epochs: int,
            learning_rate: float, rng: np.random.Generator,
            on_epoch: Callable[[int, float], None] | None = None,
            valid: list[GraphBatch] = (),
            on_params: Callable[[dict], None] | None = None) -> FittedGru:
    """The network and its readout trained end to end from random:SEED on the batches
    (`gru_batches`); ``on_params``: as `xlarank.features.jax_common.fit`'s."""
    require_jax()
    model = GruModel(random_gru_weights(seed), len(gru_column_names(is_tile)), seed)
    valid_history: list[float] = []
    with float64_context():
        params, history = fit({"net": model.params, "score": model.score},
                              [gru_batch(b) for b in batches], _compiled().loss_and_grads,
                              epochs, learning_rate, rng, on_epoch,
                              valid=[gru_batch(b) for b in valid],
                              valid_history=valid_history, on_params=on_params)
    model.params, model.score = params["net"], params["score"]
    return FittedGru(model.weights(), np.array(model.score, dtype=np.float64), history,
                     valid_history)
