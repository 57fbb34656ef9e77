"""Training the gnn family's weights with a ranking loss (needs jax: ``xlarank[gnn]``).

The network here computes exactly what `xlarank.features.embedding` computes with numpy and
Numba (same inputs, layers and joins), plus a linear score over the embedding columns that
is used for training only. The loss is pairwise logistic over the configs sampled from each
training graph: for every pair with different runtimes, softplus(-(s_fast - s_slow)),
minimized with Adam (written out below, a few lines, rather than another dependency).
Only the network's weights are saved (`save_weights`); featurizing with them needs no jax.

jax is imported on first use, so neither ``import xlarank`` nor featurizing loads it. All
of it runs in float64 under ``jax.enable_x64``, a thread-local context entered by each
public function here, rather than the process-wide ``jax_enable_x64`` flag, which would
change the dtypes of any other jax code in the process. Each graph's arrays are padded to
power-of-two sizes (masked wherever it matters), so the compiled gradient is reused
across graphs of similar size instead of being compiled again for every graph.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph
from xlarank.errors import XlarankError
from xlarank.features.embedding import (
    LAYOUT_POSITIONS,
    N_LAYERS,
    NODE_INPUT_COLUMNS,
    WEIGHT_SHAPES,
    GnnWeights,
    gnn_column_names,
    random_weights,
)
from xlarank.features.prune import prune_graph
from xlarank.features.tables import tile_joined
from xlarank.seeds import check_seed
from xlarank.threads import chosen_threads

# Adam's usual defaults (torch.optim.Adam's, which trained these weights before the port
# to jax: the same training, step for step).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def require_jax():
    """jax, imported with its CPU threads set to this process's chosen count
    (`xlarank.threads`): XLA reads them from XLA_FLAGS once, when jax starts, so a count
    chosen after jax started in this process cannot change them."""
    if "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = _xla_thread_flags(os.environ.get("XLA_FLAGS", ""),
                                                    chosen_threads())
    try:
        import jax
    except ImportError:
        raise XlarankError("training embedding weights (gnn, gru) needs jax: pip install "
                           "'xlarank[gnn]'") from None
    return jax


def _xla_thread_flags(flags: str, threads: int) -> str:
    """XLA_FLAGS with the CPU backend held to ``threads``: one thread turns off Eigen's
    multi-threading and sizes the intra-op pool to 1; more sizes that pool. Flags the user
    set already win."""
    wanted = {"--xla_cpu_multi_thread_eigen": "false" if threads == 1 else "true",
              "intra_op_parallelism_threads": str(threads)}
    given = flags.split()
    for key, value in wanted.items():
        if not any(part.lstrip("-").startswith(key.lstrip("-")) for part in given):
            given.append(f"{key}={value}")
    return " ".join(given)


def float64_context():
    """A context in which jax computes in float64 (this thread only)."""
    jax = require_jax()
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # older jax (0.4.30, say) has it in jax.experimental only
        from jax.experimental import enable_x64
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


def measured_batches(graph: TileGraph | LayoutGraph, runtime, configs_per_batch: int,
                     rng: np.random.Generator, **batch_options) -> list[GraphBatch]:
    """In-graph training batches: the measured configs of one graph (``runtime``, a pandas
    Series of medians indexed by config index) in random chunks of at most
    ``configs_per_batch``, each with two distinct runtimes or more; every measured config
    lands in one chunk. The file's own runtimes are not read."""
    index = runtime.index.to_numpy(np.int64)
    values = runtime.to_numpy(np.float64)
    order = rng.permutation(len(index))
    n_chunks = max(1, int(np.ceil(len(index) / configs_per_batch)))
    batches = []
    for chunk in np.array_split(order, n_chunks):
        chunk = chunk[np.argsort(index[chunk])]
        if len(np.unique(values[chunk])) >= 2:
            batches.append(batch_of_configs(graph, index[chunk], values[chunk],
                                            **batch_options))
    if not batches:
        raise XlarankError(f"{graph.path}: no chunk of the measured configs has two "
                           "different runtimes")
    return batches


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


def _node_embeddings(net: dict, arrays: dict):
    """float64 (N, HIDDEN): `embedding.node_embeddings` on the padded nodes, the messages
    summed by segment_sum (padding rows hold values no real row reads)."""
    import jax.numpy as jnp

    raw = arrays["raw"]
    x = jnp.sign(raw) * jnp.log1p(jnp.abs(raw)) / 10.0
    h = jnp.tanh(net["opcode_embedding"][arrays["opcode"]] + x @ net["feat_proj"])
    for layer in range(N_LAYERS):
        h = message_layer(h, arrays, net[f"self_{layer}"], net[f"in_{layer}"],
                          net[f"out_{layer}"], net[f"bias_{layer}"])
    return h


def message_layer(h, arrays: dict, w_self, w_in, w_out, bias):
    """float64 (N, d): `kernels.graph.gnn_message_layer` on the padded nodes' h (N, d),
    the messages summed by segment_sum (padding rows hold values no real row reads)."""
    import jax
    import jax.numpy as jnp

    n = h.shape[0]
    consumers, producers = arrays["consumers"], arrays["producers"]
    ones = jnp.ones(consumers.shape[0])
    # A node without operands (users) gets zero from that side: divide its zero sum by 1.
    in_count = jnp.maximum(jax.ops.segment_sum(ones, consumers, n), 1.0)[:, None]
    out_count = jnp.maximum(jax.ops.segment_sum(ones, producers, n), 1.0)[:, None]
    inbound = jax.ops.segment_sum(h[producers], consumers, n) / in_count
    outbound = jax.ops.segment_sum(h[consumers], producers, n) / out_count
    return jnp.tanh(h @ w_self + inbound @ w_in + outbound @ w_out + bias)


def _columns(net: dict, arrays: dict):
    """float64 (C, n_columns): the gnn family's columns of the padded configs."""
    import jax.numpy as jnp

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
    import jax
    import jax.numpy as jnp

    faster = (target[:, None] < target[None, :]) & valid[:, None] & valid[None, :]
    diff = score[:, None] - score[None, :]
    total = jnp.where(faster, jax.nn.softplus(-diff), 0.0).sum()
    return total / jnp.maximum(faster.sum(), 1)


def _loss(params: dict, arrays: dict):
    score = _columns(params["net"], arrays) @ params["score"]
    return _pairwise_loss(score, arrays["target"], arrays["config_mask"])


def _adam_step(params: dict, grads: dict, moments: tuple, step, learning_rate):
    """One bias-corrected Adam step; ``step`` counts from 1. Compiled apart from the
    gradient: its shapes never change, so it is compiled once, while the gradient is
    compiled for each padded size."""
    import jax
    import jax.numpy as jnp

    beta1, beta2 = ADAM_BETAS
    first = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, moments[0], grads)
    second = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, moments[1], grads)
    params = jax.tree.map(
        lambda p, m, v: p - learning_rate * (m / (1 - beta1 ** step))
        / (jnp.sqrt(v / (1 - beta2 ** step)) + ADAM_EPS), params, first, second)
    return params, (first, second)


@functools.cache
def _compiled() -> SimpleNamespace:
    jax = require_jax()
    return SimpleNamespace(embeddings=jax.jit(_node_embeddings), columns=jax.jit(_columns),
                           loss_and_grads=jax.jit(jax.value_and_grad(_loss)))


@functools.cache
def _compiled_adam():
    jax = require_jax()
    return jax.jit(_adam_step)


def fit(params: dict, padded: list[dict], loss_and_grads: Callable, epochs: int,
        learning_rate: float, rng: np.random.Generator,
        on_epoch: Callable[[int, float], None] | None = None,
        valid: list[dict] | None = None, valid_history: list[float] | None = None
        ) -> tuple[dict, list[float]]:
    """Adam from ``params`` over the padded graphs, one step per graph, in a new order
    drawn from ``rng`` each epoch; ``loss_and_grads(params, arrays)`` jitted. Returns the
    params and each epoch's mean loss. Given ``valid`` padded graphs, their mean loss after
    each epoch is appended to ``valid_history``. Called inside `float64_context`."""
    jax = require_jax()
    adam = _compiled_adam()
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
            loss, grads = loss_and_grads(params, padded[index])
            params, moments = adam(params, grads, moments, float(step), learning_rate)
            losses.append(float(loss))
        history.append(float(np.mean(losses)))
        if valid and valid_history is not None:
            valid_history.append(float(np.mean([float(loss_and_grads(params, arrays)[0])
                                                for arrays in valid])))
        if on_epoch is not None:
            on_epoch(epoch, history[-1])
    return params, history


class GnnModel:
    """The network's parameters as float64 jax arrays keyed like WEIGHT_SHAPES, and a
    training-only linear score (n_columns,) drawn from ``seed``."""

    def __init__(self, start: GnnWeights, n_columns: int, seed: int):
        jax = require_jax()
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
        return GnnWeights({k: np.array(v, dtype=np.float64) for k, v in self.params.items()})


def pairwise_loss(score, target):
    """Mean softplus(-(s_i - s_j)) over pairs where config i is faster than config j (zero
    when there is none); score and target (c,)."""
    import jax.numpy as jnp

    with float64_context():
        target = jnp.asarray(target)
        return _pairwise_loss(jnp.asarray(score), target, jnp.ones(target.shape, dtype=bool))


def train_gnn_weights(files: list[Path], collection: Collection, k: int = 2, seed: int = 0,
                      epochs: int = 5, configs_per_graph: int = 64, learning_rate: float = 0.01,
                      on_epoch: Callable[[int, float], None] | None = None,
                      allowed: dict[Path, np.ndarray] | None = None
                      ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the files' graphs (each file's configs sampled
    once, from ``allowed[file]`` when given); returns them and the mean training loss of
    each epoch. The same arguments give the same weights."""
    seed = check_seed(seed, "seed")
    require_jax()
    rng = np.random.default_rng(seed)
    batches = sampled_batches(files, collection, k, configs_per_graph, rng, allowed)
    return fit_gnn(batches, collection.is_tile, seed, epochs, learning_rate, rng, on_epoch)


def fit_gnn(batches: list[GraphBatch], is_tile: bool, seed: int, epochs: int,
            learning_rate: float, rng: np.random.Generator,
            on_epoch: Callable[[int, float], None] | None = None
            ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the batches (`sampled_batches`, or
    `measured_batches` inside one graph) and each epoch's mean training loss."""
    require_jax()
    model = GnnModel(random_weights(seed), len(gnn_column_names(is_tile)), seed)
    with float64_context():
        params, history = fit({"net": model.params, "score": model.score},
                              [padded_arrays(b) for b in batches], _compiled().loss_and_grads,
                              epochs, learning_rate, rng, on_epoch)
    model.params, model.score = params["net"], params["score"]
    return model.weights(), history


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
