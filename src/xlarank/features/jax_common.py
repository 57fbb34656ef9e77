"""The JAX plumbing the gnn and gru families' training and the systems share (needs jax:
``xlarank[gnn]``, taken at the top from `xlarank.compat`, imported on first use through
`xlarank.compat.require_jax`).

Training graphs as numpy batches (`GraphBatch`: `graph_batch` samples a file's configs,
`batch_of_configs` holds given configs of one graph with given runtimes, such as its
measured ones, `configs_at` takes rows of it, `sampled_layout_configs` reads rows of a
streamed config tensor), their arrays padded to power-of-two sizes
(`padded_arrays`: masked wherever it matters, so a compiled gradient is reused across
graphs of similar size), the message layer both networks use, a network bundled for
training (`Network`), and Adam (`adam_step`, and its loop over graphs `fit`, written
out, a few lines, rather than another dependency). All of it runs in float64
under ``jax.enable_x64`` (`float64_context`), a thread-local context entered by each
public function of the training modules, rather than the process-wide
``jax_enable_x64`` flag, which would change the dtypes of any other jax code in the
process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from xlarank.compat import jax, jax_module, jnp, require_jax
from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph
from xlarank.errors import XlarankError
from xlarank.features.embedding import LAYOUT_POSITIONS, NODE_INPUT_COLUMNS, GnnWeights
from xlarank.features.prune import prune_graph
from xlarank.features.tables import tile_joined

# Adam's usual defaults (torch.optim.Adam's, which trained these weights before the port
# to jax: the same training, step for step).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def float64_context():
    """A context in which jax computes in float64 (this thread only)."""
    require_jax()
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # older jax (0.4.30, say) has it in jax.experimental only
        enable_x64 = jax_module("jax.experimental").enable_x64
    return enable_x64(True)


@dataclass
class GraphBatch:
    """One training graph as numpy arrays: node inputs, edges, and sampled configs."""

    raw: np.ndarray        # float64 (n, len(NODE_INPUT_COLUMNS)) node_feat columns
    opcode: np.ndarray     # int64 (n,)
    consumers: np.ndarray  # int64 (m,)
    producers: np.ndarray  # int64 (m,)
    config_ids: np.ndarray | None  # layout: int64 (nc,) configurable nodes of the pruned graph
    choice: np.ndarray     # layout: int64 (c, nc, 2) dimension ids + 1; tile: float64 (c, T)
    target: np.ndarray     # float64 (c,), smaller is faster


def gnn_tile_choice(graph: TileGraph, keep: np.ndarray) -> np.ndarray:
    """float64 (len(keep), len(TILE_JOINED_NAMES)): the gnn's tile inputs of the configs
    ``keep``, scaled in float32 before widening, as `embedding.tile_columns` scales them."""
    return (tile_joined(graph, graph.config_feat[keep]) / 10.0).astype(np.float64)


@dataclass
class Network:
    """A family's network (gnn or gru) ready for Adam: ``params`` {"net": its weights,
    "score": a training-only linear readout (n_columns,)} as float64 jax arrays,
    ``to_arrays`` (a GraphBatch padded into the network's input arrays),
    ``loss_and_grads(params, arrays)`` and ``columns(net, arrays)`` (C, n_columns), both
    jitted. Used inside `float64_context`."""

    params: dict
    to_arrays: Callable[[GraphBatch], dict]
    loss_and_grads: Callable
    columns: Callable

    def readout(self, params: dict, batch: GraphBatch) -> np.ndarray:
        """float64 (c,): the readout (columns @ score) of the batch's configs."""
        columns = self.columns(params["net"], self.to_arrays(batch))[:len(batch.target)]
        return np.asarray(columns @ params["score"], dtype=np.float64)


def graph_batch(path: Path, collection: Collection, k: int, configs_per_graph: int,
                rng: np.random.Generator, allowed: np.ndarray | None = None,
                layout_columns: np.ndarray = LAYOUT_POSITIONS,
                tile_choice: Callable[[TileGraph, np.ndarray], np.ndarray] = gnn_tile_choice
                ) -> GraphBatch | None:
    """Arrays of one graph with at most ``configs_per_graph`` configs sampled from
    ``allowed`` (config indices; all when None), or None when they hold fewer than two
    distinct runtimes. ``layout_columns`` are the config columns a layout batch keeps,
    ``tile_choice`` makes a tile batch's config inputs (the gnn's by default)."""
    # Layout configs are streamed, keeping only the sampled rows: a graph's whole config
    # tensor can be gigabytes.
    graph = load_graph(path, collection, configs=False)
    pool = np.arange(graph.n_configs) if allowed is None else np.asarray(allowed)
    keep = np.sort(rng.choice(pool, min(len(pool), configs_per_graph), replace=False))
    target = graph.config_runtime[keep].astype(np.float64)
    if isinstance(graph, TileGraph):
        target = target / graph.config_runtime_normalizers[keep]
    if len(np.unique(target)) < 2:
        return None
    return batch_of_configs(graph, keep, target, k, layout_columns, tile_choice)


def batch_of_configs(graph: TileGraph | LayoutGraph, keep: np.ndarray, target: np.ndarray,
                     k: int, layout_columns: np.ndarray = LAYOUT_POSITIONS,
                     tile_choice: Callable[[TileGraph, np.ndarray], np.ndarray]
                     = gnn_tile_choice) -> GraphBatch:
    """The batch of the configs ``keep`` (sorted int64 (c,)) of a graph with the targets
    ``target`` float64 (c,), smaller is faster (the file's runtimes or measured ones)."""
    if isinstance(graph, LayoutGraph):
        pruned, _ = prune_graph(graph, k)
        choice = (sampled_layout_configs(graph, keep)[:, :, layout_columns]
                  .astype(np.int64) + 1)
        config_ids = pruned.node_config_ids.astype(np.int64)
        source = pruned
    else:
        choice = tile_choice(graph, keep)
        config_ids, source = None, graph
    return GraphBatch(
        raw=source.node_feat[:, NODE_INPUT_COLUMNS].astype(np.float64),
        opcode=source.node_opcode.astype(np.int64),
        consumers=source.edge_index[:, 0].astype(np.int64),
        producers=source.edge_index[:, 1].astype(np.int64),
        config_ids=config_ids, choice=choice, target=np.asarray(target, dtype=np.float64))


def sampled_layout_configs(graph: LayoutGraph, keep: np.ndarray) -> np.ndarray:
    """int8 (len(keep), nc, 18): the configs at the sorted indices ``keep``, read block by
    block."""
    parts, start = [], 0
    with config_blocks(graph) as blocks:
        for block, _ in blocks:
            inside = keep[(keep >= start) & (keep < start + len(block))]
            if len(inside):
                parts.append(block[inside - start])
            start += len(block)
    return np.concatenate(parts)


def _bucket(size: int) -> int:
    return max(8, 1 << (size - 1).bit_length())


def padded_arrays(batch: GraphBatch) -> dict[str, np.ndarray]:
    """The batch's arrays padded to power-of-two sizes N > n nodes, M >= m edges, C >= c
    configs (and K >= nc configurable nodes), with masks of the real rows.

    Padding edges join node n (a padding node) to itself, so no real node's messages or
    counts change; padding configurable nodes point at node 0 and padding configs choose
    row 0 of each table, both masked out of the joins and the loss.
    """
    n, m, c = len(batch.opcode), len(batch.consumers), len(batch.target)
    big_n, big_m, big_c = _bucket(n + 1), _bucket(m), _bucket(c)
    raw = np.zeros((big_n, batch.raw.shape[1]))
    raw[:n] = batch.raw
    arrays = {
        "raw": raw,
        "opcode": np.pad(batch.opcode, (0, big_n - n)),
        "consumers": np.pad(batch.consumers, (0, big_m - m), constant_values=n),
        "producers": np.pad(batch.producers, (0, big_m - m), constant_values=n),
        "node_mask": np.arange(big_n) < n,
        "target": np.pad(batch.target, (0, big_c - c)),
        "config_mask": np.arange(big_c) < c,
    }
    if batch.config_ids is None:
        arrays["choice"] = np.pad(batch.choice, ((0, big_c - c), (0, 0)))
    else:
        nc = len(batch.config_ids)
        big_k = _bucket(nc)
        arrays["config_ids"] = np.pad(batch.config_ids, (0, big_k - nc))
        arrays["config_node_mask"] = np.arange(big_k) < nc
        arrays["choice"] = np.pad(batch.choice, ((0, big_c - c), (0, big_k - nc), (0, 0)))
    return arrays


def message_layer(h, arrays: dict, w_self, w_in, w_out, bias):
    """float64 (N, d): `kernels.graph.gnn_message_layer` on the padded nodes' h (N, d),
    the messages summed by segment_sum (padding rows hold values no real row reads)."""
    n = h.shape[0]
    consumers, producers = arrays["consumers"], arrays["producers"]
    ones = jnp.ones(consumers.shape[0])
    # A node without operands (users) gets zero from that side: divide its zero sum by 1.
    in_count = jnp.maximum(jax.ops.segment_sum(ones, consumers, n), 1.0)[:, None]
    out_count = jnp.maximum(jax.ops.segment_sum(ones, producers, n), 1.0)[:, None]
    inbound = jax.ops.segment_sum(h[producers], consumers, n) / in_count
    outbound = jax.ops.segment_sum(h[consumers], producers, n) / out_count
    return jnp.tanh(h @ w_self + inbound @ w_in + outbound @ w_out + bias)


def _adam_step(params: dict, grads: dict, moments: tuple, step, learning_rate):
    """One bias-corrected Adam step; ``step`` counts from 1. Compiled apart from the
    gradient: its shapes never change, so it is compiled once, while the gradient is
    compiled for each padded size."""
    beta1, beta2 = ADAM_BETAS
    first = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, moments[0], grads)
    second = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, moments[1], grads)
    params = jax.tree.map(
        lambda p, m, v: p - learning_rate * (m / (1 - beta1 ** step))
        / (jnp.sqrt(v / (1 - beta2 ** step)) + ADAM_EPS), params, first, second)
    return params, (first, second)


@functools.cache
def _compiled_adam():
    require_jax()
    return jax.jit(_adam_step)


def adam_step(params: dict, moments: tuple, step: int, learning_rate: float, arrays: dict,
              loss_and_grads: Callable) -> tuple[dict, tuple, float]:
    """One Adam step on one padded graph: (params, moments, the loss before the step);
    ``step`` counts from 1. Called inside `float64_context`."""
    loss, grads = loss_and_grads(params, arrays)
    params, moments = _compiled_adam()(params, grads, moments, float(step), learning_rate)
    return params, moments, float(loss)


def configs_at(batch: GraphBatch, positions: np.ndarray) -> GraphBatch:
    """The batch of the configs at ``positions`` (int64 (p,), into ``batch.target``) of
    one graph's batch: its nodes and edges shared, its choice and target rows taken."""
    return replace(batch, choice=batch.choice[positions], target=batch.target[positions])


def numpy_weights(net: dict) -> GnnWeights:
    """A network's jax weights ({name: array}) as the float64 numpy `GnnWeights` that the
    families' Numba inference and `save_weights` take."""
    return GnnWeights({k: np.array(v, dtype=np.float64) for k, v in net.items()})


def fit(params: dict, padded: list[dict], loss_and_grads: Callable, epochs: int,
        learning_rate: float, rng: np.random.Generator,
        on_epoch: Callable[[int, float], None] | None = None,
        valid: list[dict] | None = None, valid_history: list[float] | None = None,
        on_params: Callable[[dict], None] | None = None) -> tuple[dict, list[float]]:
    """Adam from ``params`` over the padded graphs, one step per graph, in a new order
    drawn from ``rng`` each epoch; ``loss_and_grads(params, arrays)`` jitted. Returns the
    params and each epoch's mean loss. Given ``valid`` padded graphs, their mean loss after
    each epoch is appended to ``valid_history``. ``on_params`` gets each epoch's params
    before ``on_epoch`` is called, for a caller that scores with them (the systems'
    checkpoints). Called inside `float64_context`."""
    require_jax()
    padded = [jax.device_put(p) for p in padded]
    valid = [jax.device_put(p) for p in valid or []]
    zeros = jax.tree.map(jax.numpy.zeros_like, params)
    moments = (zeros, zeros)
    history: list[float] = []
    step = 0
    for epoch in range(epochs):
        losses = []
        for index in rng.permutation(len(padded)):
            step += 1
            params, moments, loss = adam_step(params, moments, step, learning_rate,
                                              padded[index], loss_and_grads)
            losses.append(loss)
        history.append(float(np.mean(losses)))
        if valid and valid_history is not None:
            valid_history.append(float(np.mean([float(loss_and_grads(params, arrays)[0])
                                                for arrays in valid])))
        if on_params is not None:
            on_params(params)
        if on_epoch is not None:
            on_epoch(epoch, history[-1])
    return params, history


def sampled_batches(files: list[Path], collection: Collection, k: int, configs_per_graph: int,
                    rng: np.random.Generator, allowed: dict[Path, np.ndarray] | None,
                    **batch_options) -> list[GraphBatch]:
    """`graph_batch` of each file that has configs to learn from (refused when none has)."""
    batches = [b for b in (graph_batch(f, collection, k, configs_per_graph, rng,
                                       None if allowed is None else allowed.get(f),
                                       **batch_options)
                           for f in files) if b is not None]
    if not batches:
        raise XlarankError("no training graph has two configs with different runtimes")
    return batches

