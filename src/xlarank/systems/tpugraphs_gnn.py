"""The TpuGraphs paper's GNN baselines, reimplemented in JAX for CPU (needs ``xlarank[gnn]``).

Two models, one per kind of collection, as the official trainers build them
(google-research-datasets/tpu_graphs, TF-GNN; the architecture, loss and defaults were
read from ``baselines/layout`` and ``baselines/tiles``, the code is written anew here):

**Layout** (``ResModel``). Node inputs are the min-max normalised node_feat columns joined
with a 32-wide opcode embedding; each configurable node's normalised 18 config columns,
times 100, sit on its op node (zeros elsewhere). prenet = MLP[32, 32] on concat(config,
node) then leaky_relu; two residual graph convolutions y = leaky_relu(MLP[32, 32](A_hat @
concat(config, x))), x += y, with A_hat = D^-1/2 (A + A^T + I) D^-1/2; pooled per config
as concat(mean over nodes, l2_normalize(sum over nodes), l2_normalize(sum over the
configurable nodes)) into a bias-free MLP[32, 1]. Loss: ListMLE (temperature 1). Graphs of
more than ``keep_nodes`` nodes train on one random segment of that many consecutive node
ids: a forward pass on the whole graph with its inputs' gradients stopped, a second pass
that keeps only the segment's edges and config edges, and each node's output from the
second pass inside the segment and from the first outside (as the official
``ResModel.forward``: the first pass stops the gradient of its inputs, the opcode
embedding, not of the MLP weights).

**Tile** (``EarlyJoinSAGE``, the tile trainer's default model). Every node gets
concat(opcode embedding (64), the config's normalised 24 columns, normalised node_feat);
three SAGE layers x = l2_normalize(leaky_relu(Dense64(concat((A + A^T) @ x, x)))); sum over
nodes; MLP[64, 64, 1] with biases. Loss: ListMLE at temperature 10 on the runtime divided
by its normaliser, plus 0.02 x MSE against that label, weighted 1/1.02 and 0.02/1.02.

Both: Dense kernels carry an L2 regulariser of 1e-4 (sum of squares), the embedding an L2
activity regulariser of 1e-4 (Keras divides it by the batch's node count); Adam as Keras
writes it (epsilon 1e-7) with each gradient tensor clipped to its own L2 norm
(``clip_norm``, Keras' clipnorm); leaky_relu's slope is tf.nn.leaky_relu's 0.2; Dense
kernels start Glorot-uniform, biases at zero, the embedding uniform in +-0.05 (Keras'
initialisers), all drawn with numpy from the seed. A model's outputs grow with runtime
(the official convention); `TpuGraphsGnn.score` returns them negated, higher is faster.

Settings (``TpuGraphsGnn.defaults``): a setting left at None takes its collection's
official value below; the resolved values are kept in ``resolved_`` and saved.

==================  ========  ========  ==================================================
setting             layout    tile      note
==================  ========  ========  ==================================================
epochs              500       100       one epoch = every train graph once
early_stop          40        20        epochs without better valid OPA (0: off); best restored
learning_rate       1e-3      1e-3      Adam
clip_norm           1e-2      1e-3      per-tensor clipnorm
configs             16        10        configs per graph per step (fewer: graph skipped)
batch               8         10        graphs per step
keep_nodes          5000      (none)    segment size of layout graph-segment training
op_embed            32        64        opcode embedding width (121 opcodes, fixed)
hidden              32        64        hidden width
gnn_layers          2         3         graph convolutions (layout) / SAGE layers (tile)
mlp_layers          2         2         prenet and per-convolution MLP depth (layout),
                                        postnet hidden layers (tile)
temperature         1         10        ListMLE temperature
mse_weight          0         0.02      weight of the MSE term beside ListMLE's 1
validate_batches    10        10        valid batches per epoch (layout: official 10;
                                        tile: the same, see deviations)
infer_chunk         500       500       configs per inference pass, at most
in_graph_epochs     20        20        xlarank's choice: no official in-graph mode
==================  ========  ========  ==================================================

Deviations, each with its reason:
- ``infer_chunk`` is an upper bound: a chunk also stays within ``infer_budget_mb`` of
  float32 activations (default 256), because CPU memory here is shared and small. Each
  config is scored alone, so the chunk size does not change any score.
- Valid loss and OPA per epoch come from ``validate_batches`` batches of ``batch``
  graphs cycled over the valid files, each with a fresh sample of ``configs`` configs
  drawn as in training (layout's official ``validate_batches`` is 10; the tile trainer's
  validation loop is not reproduced, the same count is used). Without valid files no early
  stop happens and the last epoch's weights stay.
- The recorded ``train_loss``/``valid_loss`` are the ranking loss (ListMLE, plus the MSE
  term for tile) without the L2 terms, so train and valid compare; the L2 terms are
  trained on, as in Keras.
- Node arrays of the train graphs (normalised node features, opcodes, edges) are held in
  memory for the whole fit; configs are streamed from each file at each step, only the
  sampled rows kept (the official loader holds every config in memory).
- Layout nodes farther than ``gnn_layers`` hops from every configurable node get the
  same output under every config; they are computed once per step, and only the
  configs' region is computed per config (`_layout_nodes`). The same function, a few
  times less work (tests compare it with a plain per-config forward pass).
- Graphs are joined into one disjoint graph per step, padded (masked) to the sizes of the
  largest possible batch of the fit, so the step compiles once per fit (twice with
  segments); padding changes no output. The tile MSE term is the official one; on
  synthetic trees whose normalised runtimes reach 1e4 it dominates the train loss.
- In-graph training (`TpuGraphsGnn.fit_graph`, not in the paper): normalisation statistics
  come from the graph's nodes and its measured configs; each of ``in_graph_epochs``
  epochs is one step of ``batch`` lists of ``configs`` measured configs (layout: drawn
  with the fast-skewed sampling; tile: uniformly), or every measured config per list when
  fewer are measured; no early stop (no measured config is held out). 20 epochs: on the
  real unet3d (half of its distinct configs measured, seeds 0-2) a fit takes 9 s on two
  idle CPU cores (17 s with the first compile) and ranks the other half at Kendall tau
  0.13, 0.08, 0.12; 40 epochs give the same (0.13, 0.08, 0.13) in twice the time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph
from xlarank.errors import XlarankError
from xlarank.features.gnn_train import require_jax, sampled_layout_configs
from xlarank.systems import EpochCallback, RankingSystem

NUM_OPS = 121           # FORMAT.md's largest opcode id (120) plus one, fixed
L2_REG = 1e-4           # kernel and activity regularisers (models.py)
LEAKY_SLOPE = 0.2       # tf.nn.leaky_relu
CONFIG_SCALE = 100.0    # layout: config features times 100 before the prenet
LABEL_SCALE = 1e7       # layout: ListMLE labels are runtime / 1e7 (only their order counts)
ADAM = (0.9, 0.999, 1e-7)  # Keras Adam's beta_1, beta_2, epsilon
GLOROT_EMBED = 0.05     # Keras Embedding's uniform initialiser
INFER_BUDGET_MB = 256

OFFICIAL = {
    "layout": {"epochs": 500, "early_stop": 40, "learning_rate": 1e-3, "clip_norm": 1e-2,
               "configs": 16, "batch": 8, "keep_nodes": 5000, "op_embed": 32, "hidden": 32,
               "gnn_layers": 2, "mlp_layers": 2, "temperature": 1.0, "mse_weight": 0.0,
               "validate_batches": 10, "infer_chunk": 500, "in_graph_epochs": 20},
    "tile": {"epochs": 100, "early_stop": 20, "learning_rate": 1e-3, "clip_norm": 1e-3,
             "configs": 10, "batch": 10, "keep_nodes": 0, "op_embed": 64, "hidden": 64,
             "gnn_layers": 3, "mlp_layers": 2, "temperature": 10.0, "mse_weight": 0.02,
             "validate_batches": 10, "infer_chunk": 500, "in_graph_epochs": 20},
}


# --------------------------------------------------------------------------------------
# Normalisation statistics and per-graph arrays (numpy)


@dataclass
class MinMax:
    """Min-max statistics of some columns; ``keep`` are the columns that vary."""

    low: np.ndarray   # float64 (n_cols,)
    high: np.ndarray  # float64 (n_cols,)

    @classmethod
    def empty(cls, n_cols: int) -> MinMax:
        return cls(np.full(n_cols, np.inf), np.full(n_cols, -np.inf))

    def update(self, rows: np.ndarray) -> None:
        if len(rows):
            self.low = np.minimum(self.low, rows.min(axis=0))
            self.high = np.maximum(self.high, rows.max(axis=0))

    @property
    def keep(self) -> np.ndarray:
        return np.flatnonzero(self.high > self.low)

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """float32 (..., len(keep)): rows (..., n_cols) scaled so train data lies in [0, 1]."""
        keep = self.keep
        low, span = self.low[keep], (self.high - self.low)[keep]
        return ((rows[..., keep].astype(np.float64) - low) / span).astype(np.float32)


@dataclass
class Stats:
    node: MinMax
    config: MinMax

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"node_low": self.node.low, "node_high": self.node.high,
                "config_low": self.config.low, "config_high": self.config.high}

    @classmethod
    def from_arrays(cls, a) -> Stats:
        return cls(MinMax(np.asarray(a["node_low"]), np.asarray(a["node_high"])),
                   MinMax(np.asarray(a["config_low"]), np.asarray(a["config_high"])))


@dataclass
class GraphArrays:
    """One graph's node arrays: normalised features, opcodes, edges, configurable ids."""

    feat: np.ndarray       # float32 (n, F)
    op: np.ndarray         # int32 (n,)
    edges: np.ndarray      # int32 (m, 2)
    config_ids: np.ndarray  # int32 (nc,), empty for tile

    @property
    def n(self) -> int:
        return len(self.op)


def graph_arrays(graph: TileGraph | LayoutGraph, stats: Stats) -> GraphArrays:
    ids = graph.node_config_ids if isinstance(graph, LayoutGraph) else np.zeros(0)
    return GraphArrays(stats.node.apply(graph.node_feat), graph.node_opcode.astype(np.int32),
                       graph.edge_index.astype(np.int32).reshape(-1, 2),
                       np.asarray(ids, dtype=np.int32))


def layout_stats(files: Sequence[Path], collection: Collection) -> Stats:
    """Train statistics: node_feat over every node, node_config_feat over every (config,
    configurable node) row, the configs streamed block by block."""
    node, config = MinMax.empty(140), MinMax.empty(18)
    for path in files:
        graph = load_graph(path, collection, configs=False)
        node.update(graph.node_feat)
        with config_blocks(graph) as blocks:
            for block, _ in blocks:
                config.update(block.reshape(-1, 18))
    return Stats(node, config)


def label_order(label: np.ndarray, valid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int (L, C): per list, positions sorted by label descending (slowest first), ties in
    a random order, invalid positions last: ListMLE's permutation."""
    order = np.empty(label.shape, dtype=np.int32)
    for i in range(label.shape[0]):
        perm = rng.permutation(label.shape[1])
        key = np.where(valid[i, perm], -label[i, perm], np.inf)
        order[i] = perm[np.argsort(key, kind="stable")]
    return order


def skewed_sample(runtime: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of k of the configs (all when fewer), without replacement, by
    Gumbel-top-k on logits (N - r) / N where r is the rank by runtime (0 = fastest)."""
    n = len(runtime)
    if k >= n:
        return np.arange(n)
    rank = np.empty(n)
    rank[np.argsort(runtime, kind="stable")] = np.arange(n)
    logits = (n - rank) / n
    return np.sort(np.argsort(-(logits + rng.gumbel(size=n)))[:k])


def uniform_sample(runtime: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = len(runtime)
    return np.arange(n) if k >= n else np.sort(rng.choice(n, k, replace=False))


def _bucket(size: int) -> int:
    """size rounded up to a power of two from 8 to 1024, past that to one of 2^k x (1,
    1.25, 1.5, 1.75): few compiled shapes, and at most 25% padding on big graphs."""
    top = 1 << max(3, (size - 1).bit_length())
    if top <= 1024:
        return top
    for step in (top // 2 + top // 8 * i for i in range(1, 5)):
        if step >= size:
            return step
    return top


@dataclass
class Item:
    """One graph with sampled configs for a batch: layout cfg float32 (c, nc, Fc), tile
    cfg float32 (c, Fc); label float64 (c,), larger is slower."""

    graph: GraphArrays
    cfg: np.ndarray
    label: np.ndarray


def union_batch(items: Sequence[Item], n_graphs: int, n_configs: int, kind: str,
                keep_nodes: int = 0, rng: np.random.Generator | None = None,
                lists: int = 1, hops: int = 2, sizes: tuple[int, ...] = (0,) * 5
                ) -> tuple[dict, bool]:
    """The items as one padded disjoint graph with ``n_graphs`` graph slots (empty slots
    masked) of ``n_configs`` configs each; the configs of a graph form ``lists`` lists of
    n_configs / lists configs for the loss. Returns (arrays, segmented): ``segmented``
    when a graph has more than ``keep_nodes`` nodes (keep_nodes > 0) and one random
    segment of it was chosen with ``rng``. Layout: ``hops`` is the number of graph
    convolutions (`region_arrays`). ``sizes``: at least this many (nodes, edges,
    configurable nodes, local nodes, local edges) after padding (one compiled shape for a
    whole fit, `_largest_batch`)."""
    n_total = sum(it.graph.n for it in items)
    m_total = sum(len(it.graph.edges) for it in items)
    big_n, big_m = max(_bucket(n_total + 1), sizes[0]), max(_bucket(m_total), sizes[1])
    pad = big_n - 1
    feat_width = items[0].graph.feat.shape[1]
    cfg_width = items[0].cfg.shape[-1]
    a = {
        "feat": np.zeros((big_n, feat_width), np.float32),
        "op": np.zeros(big_n, np.int32),
        "node_graph": np.full(big_n, n_graphs, np.int32),
        "node_mask": np.zeros(big_n, bool),
        "src": np.full(big_m, pad, np.int32), "dst": np.full(big_m, pad, np.int32),
        "edge_mask": np.zeros(big_m, bool),
        "label": np.zeros((n_graphs, n_configs), np.float32),
        "valid": np.zeros((n_graphs, n_configs), bool),
    }
    seg_node = np.zeros(big_n, bool)
    segmented = False
    if kind == "layout":
        k_total = sum(len(it.graph.config_ids) for it in items)
        big_k = max(_bucket(k_total), sizes[2])
        a["cfg_node"] = np.full(big_k, pad, np.int32)
        a["cfg_graph"] = np.full(big_k, n_graphs, np.int32)
        a["cfg_mask"] = np.zeros(big_k, bool)
        a["cfg"] = np.zeros((big_k, n_configs, cfg_width), np.float32)
    else:
        a["cfg"] = np.zeros((n_graphs, n_configs, cfg_width), np.float32)
    node0 = edge0 = cfg0 = 0
    for g, it in enumerate(items):
        n, m, c = it.graph.n, len(it.graph.edges), len(it.label)
        a["feat"][node0:node0 + n] = it.graph.feat
        a["op"][node0:node0 + n] = it.graph.op
        a["node_graph"][node0:node0 + n] = g
        a["node_mask"][node0:node0 + n] = True
        a["src"][edge0:edge0 + m] = it.graph.edges[:, 0] + node0
        a["dst"][edge0:edge0 + m] = it.graph.edges[:, 1] + node0
        a["edge_mask"][edge0:edge0 + m] = True
        a["label"][g, :c] = it.label
        a["valid"][g, :c] = True
        if keep_nodes and n > keep_nodes:
            segmented = True
            start = int(rng.integers(0, -(-n // keep_nodes))) * keep_nodes
            seg_node[node0 + start:node0 + min(n, start + keep_nodes)] = True
        else:
            seg_node[node0:node0 + n] = True
        if kind == "layout":
            nc = len(it.graph.config_ids)
            a["cfg_node"][cfg0:cfg0 + nc] = it.graph.config_ids + node0
            a["cfg_graph"][cfg0:cfg0 + nc] = g
            a["cfg_mask"][cfg0:cfg0 + nc] = True
            a["cfg"][cfg0:cfg0 + nc, :c] = it.cfg.transpose(1, 0, 2)
            cfg0 += nc
        else:
            a["cfg"][g, :c] = it.cfg
        node0, edge0 = node0 + n, edge0 + m
    if kind == "layout":
        a.update(region_arrays(a, n_graphs, hops, sizes[3:]))
    if segmented and kind == "layout":
        a["seg_node"] = seg_node
        a["seg_edge"] = seg_node[a["src"]] & seg_node[a["dst"]] & a["edge_mask"]
        a["seg_cfg"] = seg_node[a["cfg_node"]] & a["cfg_mask"]
    per_list = n_configs // lists
    a["label"] = a["label"].reshape(n_graphs * lists, per_list)
    a["valid"] = a["valid"].reshape(n_graphs * lists, per_list)
    a["order"] = label_order(a["label"], a["valid"], rng or np.random.default_rng(0))
    return a, segmented


def region_masks(edges: np.ndarray, edge_mask: np.ndarray, config_nodes: np.ndarray,
                 n: int, hops: int) -> tuple[np.ndarray, np.ndarray]:
    """(region, local) bool (n,): the nodes within ``hops`` undirected hops of a
    configurable node, and those plus their neighbours."""
    src, dst = edges[0][edge_mask], edges[1][edge_mask]
    region = np.zeros(n, bool)
    region[config_nodes] = True
    masks = []
    for _ in range(hops + 1):
        masks.append(region)
        grown = region.copy()
        grown[dst[region[src]]] = True
        grown[src[region[dst]]] = True
        region = grown
    return masks[-1], region


def region_arrays(a: dict, n_graphs: int, hops: int, sizes: Sequence[int] = (0, 0)
                  ) -> dict[str, np.ndarray]:
    """The padded batch's local arrays for `layout_forward`: loc_node (NL,) the global id
    of each local node (region and its neighbours), loc_region, loc_graph, loc_cfg (K,)
    each configurable node's local id, the local edges (every edge touching the region:
    loc_src, loc_dst local ids, loc_edge global ids, loc_edge_mask) and node_region (N,)."""
    big_n = len(a["op"])
    region, local = region_masks((a["src"], a["dst"]), a["edge_mask"],
                                 a["cfg_node"][a["cfg_mask"]], big_n, hops)
    ids = np.flatnonzero(local & a["node_mask"])
    big_l = max(_bucket(len(ids) + 1), sizes[0])
    local_id = np.full(big_n, big_l - 1, np.int32)
    local_id[ids] = np.arange(len(ids))
    out = {"node_region": region & a["node_mask"],
           "loc_node": np.full(big_l, big_n - 1, np.int32),
           "loc_region": np.zeros(big_l, bool),
           "loc_graph": np.full(big_l, n_graphs, np.int32)}
    out["loc_node"][:len(ids)] = ids
    out["loc_region"][:len(ids)] = region[ids]
    out["loc_graph"][:len(ids)] = a["node_graph"][ids]
    touching = np.flatnonzero(a["edge_mask"] & (region[a["src"]] | region[a["dst"]]))
    big_e = max(_bucket(len(touching)), sizes[1])
    out["loc_src"] = np.full(big_e, big_l - 1, np.int32)
    out["loc_dst"] = np.full(big_e, big_l - 1, np.int32)
    out["loc_edge"] = np.zeros(big_e, np.int32)
    out["loc_edge_mask"] = np.zeros(big_e, bool)
    out["loc_src"][:len(touching)] = local_id[a["src"][touching]]
    out["loc_dst"][:len(touching)] = local_id[a["dst"][touching]]
    out["loc_edge"][:len(touching)] = touching
    out["loc_edge_mask"][:len(touching)] = True
    out["loc_cfg"] = local_id[a["cfg_node"]]
    return out


# --------------------------------------------------------------------------------------
# The networks (jax)


def _leaky(x):
    import jax.numpy as jnp

    return jnp.where(x >= 0, x, LEAKY_SLOPE * x)


def _l2_normalize(x):
    """tf.nn.l2_normalize over the last axis."""
    import jax.numpy as jnp

    return x * jax_rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


def jax_rsqrt(x):
    import jax

    return jax.lax.rsqrt(x)


def _expand(w, y):
    return w.reshape(w.shape + (1,) * (y.ndim - 1))


def normalized_adjacency(src, dst, edge_mask, n):
    """(self weight (n,), edge weight (m,)) of A_hat = D^-1/2 (A + A^T + I) D^-1/2 where
    A has one entry per kept edge (masked edges are absent)."""
    import jax

    w = edge_mask.astype("float32")
    degree = 1.0 + jax.ops.segment_sum(w, src, n) + jax.ops.segment_sum(w, dst, n)
    inv_sqrt = jax_rsqrt(degree)
    return inv_sqrt * inv_sqrt, w * inv_sqrt[src] * inv_sqrt[dst]


def apply_adjacency(y, src, dst, self_w, edge_w):
    """A_hat @ y for y (n, ...) given `normalized_adjacency`'s weights (self_w zero and
    edge_w the edge mask give (A + A^T) @ y)."""
    import jax

    n = y.shape[0]
    ew = _expand(edge_w, y)
    return (_expand(self_w, y) * y + jax.ops.segment_sum(ew * y[dst], src, n)
            + jax.ops.segment_sum(ew * y[src], dst, n))


def _dense(p, name, x):
    y = x @ p[f"{name}_w"]
    bias = p.get(f"{name}_b")
    return y if bias is None else y + bias


def _mlp(p, prefix, x, depth):
    """Keras _mlp: Dense, then (leaky_relu, Dense) for each further layer."""
    for i in range(depth):
        if i:
            x = _leaky(x)
        x = _dense(p, f"{prefix}{i}", x)
    return x


def _layout_nodes(p, x0, a, edge_mask, cfg_mask, gnn_layers, mlp_layers):
    """(static (N, hidden), local (NL, C, hidden)): the node outputs of prenet and the
    residual convolutions, split exactly by where configs can reach.

    A node farther than ``gnn_layers`` hops from every configurable node (outside the
    region) has an output that no config changes: it is computed once, on all nodes with
    the configs zero (``static``). Only the region's nodes are computed per config
    (``local``, on the region and its neighbours, whose inputs at every layer are taken
    from the static pass). The same function as computing every node per config; the
    per-config arrays are a few times smaller. x0 (N, D): the config-free node inputs.
    """
    import jax.numpy as jnp

    cfg = a["cfg"]
    n_local, fc = a["loc_node"].shape[0], cfg.shape[-1]
    values = CONFIG_SCALE * cfg * cfg_mask[:, None, None]
    cfg_local = jnp.zeros((n_local,) + cfg.shape[1:], values.dtype).at[a["loc_cfg"]].add(values)
    w = p["pre0_w"]
    # Dense(concat(cfg, broadcast x0)) without materialising the (NL, C, Fc + D) join.
    static = x0 @ w[fc:] + p["pre0_b"]
    local = cfg_local @ w[:fc] + static[a["loc_node"]][:, None, :]
    for i in range(1, mlp_layers):
        static = _dense(p, f"pre{i}", _leaky(static))
        local = _dense(p, f"pre{i}", _leaky(local))
    static, local = _leaky(static), _leaky(local)
    self_w, edge_w = normalized_adjacency(a["src"], a["dst"], edge_mask, x0.shape[0])
    local_self = self_w[a["loc_node"]]
    local_edge = edge_w[a["loc_edge"]] * a["loc_edge_mask"]
    region = a["loc_region"][:, None, None]
    for layer in range(gnn_layers):
        local = jnp.where(region, local, static[a["loc_node"]][:, None, :])
        y = apply_adjacency(jnp.concatenate([cfg_local, local], -1), a["loc_src"],
                            a["loc_dst"], local_self, local_edge)
        local = local + _leaky(_mlp(p, f"gc{layer}_", y, mlp_layers))
        # The static pass: its config columns are zero, so only the rows of x count.
        ys = apply_adjacency(static, a["src"], a["dst"], self_w, edge_w)
        first = ys @ p[f"gc{layer}_0_w"][fc:] + p[f"gc{layer}_0_b"]
        rest = first
        for i in range(1, mlp_layers):
            rest = _dense(p, f"gc{layer}_{i}", _leaky(rest))
        static = static + _leaky(rest)
    return static, local


def layout_forward(p, a, gnn_layers, mlp_layers, segmented):
    """(outputs (G, C), activity): ResModel's output per graph slot and config (higher =
    slower) and the embedding's mean squared norm over real nodes."""
    import jax
    import jax.numpy as jnp

    emb = p["op_embedding"][a["op"]]
    x0 = jnp.concatenate([a["feat"], emb], axis=-1)
    if segmented:
        full = _layout_nodes(p, jax.lax.stop_gradient(x0), a, a["edge_mask"], a["cfg_mask"],
                             gnn_layers, mlp_layers)
        part = _layout_nodes(p, x0, a, a["seg_edge"], a["seg_cfg"], gnn_layers, mlp_layers)
        static = jnp.where(a["seg_node"][:, None], part[0], full[0])
        local = jnp.where(a["seg_node"][a["loc_node"]][:, None, None], part[1], full[1])
    else:
        static, local = _layout_nodes(p, x0, a, a["edge_mask"], a["cfg_mask"], gnn_layers,
                                      mlp_layers)
    g = a["valid"].shape[0] * a["valid"].shape[1] // a["cfg"].shape[1]
    mask = a["node_mask"].astype(static.dtype)
    outside = mask * (1.0 - a["node_region"].astype(static.dtype))
    inside = a["loc_region"].astype(static.dtype)[:, None, None]
    total = (jax.ops.segment_sum(static * outside[:, None], a["node_graph"], g + 1)[:g, None]
             + jax.ops.segment_sum(local * inside, a["loc_graph"], g + 1)[:g])
    count = jax.ops.segment_sum(mask, a["node_graph"], g + 1)[:g]
    mean = total / jnp.maximum(count, 1.0)[:, None, None]
    at_config = local[a["loc_cfg"]] * a["cfg_mask"][:, None, None]
    config_sum = jax.ops.segment_sum(at_config, a["cfg_graph"], g + 1)[:g]
    pooled = jnp.concatenate([mean, _l2_normalize(total), _l2_normalize(config_sum)], -1)
    out = _mlp(p, "post", pooled, 2)[..., 0]
    activity = jnp.sum(emb * emb * mask[:, None]) / jnp.maximum(mask.sum(), 1.0)
    return out, activity


def tile_forward(p, a, gnn_layers, mlp_layers, segmented=False):
    """(outputs (G, C), activity): EarlyJoinSAGE's output per graph slot and config."""
    import jax
    import jax.numpy as jnp

    emb = p["op_embedding"][a["op"]]
    mask = a["node_mask"].astype(emb.dtype)
    src, dst = a["src"], a["dst"]
    edge_w = a["edge_mask"].astype(emb.dtype)
    zero = jnp.zeros(emb.shape[0], emb.dtype)
    e, fc = emb.shape[1], a["cfg"].shape[-1]
    d0 = e + fc + a["feat"].shape[1]
    w = p["sage0_w"]
    # Rows of w: [(A+A^T) x ; x], x = [op_e, config, feats]. A config is the same on every
    # node of its graph, so ((A+A^T) x)'s config part is the node's degree times it.
    node_x = jnp.concatenate([emb, a["feat"]], axis=-1)
    node_ax = apply_adjacency(node_x, src, dst, zero, edge_w)
    rows_y = jnp.concatenate([w[:e], w[e + fc:d0]])
    rows_x = jnp.concatenate([w[d0:d0 + e], w[d0 + e + fc:]])
    degree = jax.ops.segment_sum(edge_w, src, emb.shape[0]) + jax.ops.segment_sum(
        edge_w, dst, emb.shape[0])
    graph_of = jnp.minimum(a["node_graph"], a["cfg"].shape[0] - 1)
    cfg_y = (a["cfg"] @ w[e:e + fc])[graph_of]          # (N, C, H)
    cfg_x = (a["cfg"] @ w[d0 + e:d0 + e + fc])[graph_of]
    base = node_ax @ rows_y + node_x @ rows_x + p["sage0_b"]
    x = _l2_normalize(_leaky(base[:, None, :] + degree[:, None, None] * cfg_y + cfg_x))
    for layer in range(1, gnn_layers):
        y = apply_adjacency(x, src, dst, zero, edge_w)
        x = _l2_normalize(_leaky(_dense(p, f"sage{layer}", jnp.concatenate([y, x], -1))))
    g = a["cfg"].shape[0]
    pooled = jax.ops.segment_sum(x * mask[:, None, None], a["node_graph"], g + 1)[:g]
    out = _mlp(p, "post", pooled, mlp_layers + 1)[..., 0]
    activity = jnp.sum(emb * emb * mask[:, None]) / jnp.maximum(mask.sum(), 1.0)
    return out, activity


def listmle(scores, order, valid, temperature=1.0):
    """Mean over lists of sum_i [logsumexp(s_order[i:]) - s_order[i]] on scores (L, C) /
    temperature, order (L, C) from `label_order`; invalid positions take no part."""
    import jax
    import jax.numpy as jnp

    s = jnp.take_along_axis(scores / temperature, order, axis=1)
    v = jnp.take_along_axis(valid, order, axis=1)
    c = s.shape[1]
    later = jnp.arange(c)[None, :] >= jnp.arange(c)[:, None]        # (i, j): j >= i
    masked = jnp.where(later[None] & v[:, None, :], s[:, None, :], -1e9)
    per = jnp.where(v, jax.nn.logsumexp(masked, axis=-1) - s, 0.0).sum(1)
    has = v.any(1)
    return jnp.sum(jnp.where(has, per, 0.0)) / jnp.maximum(has.sum(), 1)


def ranking_loss(out, a, temperature, mse_weight):
    """The official loss without L2 terms: (ListMLE + w MSE) / (1 + w)."""
    import jax.numpy as jnp

    scores = out.reshape(a["order"].shape)
    loss = listmle(scores, a["order"], a["valid"], temperature)
    if mse_weight:
        err = jnp.where(a["valid"], (scores - a["label"]) ** 2, 0.0)
        mse = err.sum() / jnp.maximum(a["valid"].sum(), 1)
        loss = (loss + mse_weight * mse) / (1.0 + mse_weight)
    return loss


def _objective(p, a, arch):
    kind, gnn_layers, mlp_layers, temperature, mse_weight, segmented = arch
    forward = layout_forward if kind == "layout" else tile_forward
    out, activity = forward(p, a, gnn_layers, mlp_layers, segmented)
    loss = ranking_loss(out, a, temperature, mse_weight)
    l2 = sum((w * w).sum() for k, w in p.items() if k.endswith("_w"))
    return loss + L2_REG * (l2 + activity), loss


def clip_by_norm(g, clip):
    """Keras clipnorm for one tensor: g * clip / max(||g||, clip)."""
    import jax.numpy as jnp

    return g * clip / jnp.maximum(jnp.sqrt(jnp.sum(g * g)), clip)


def _train_step(p, moments, a, step, lr, clip, arch):
    import jax
    import jax.numpy as jnp

    (_, loss), grads = jax.value_and_grad(_objective, has_aux=True)(p, a, arch)
    grads = {k: clip_by_norm(g, clip) for k, g in grads.items()}
    beta1, beta2, eps = ADAM
    first = {k: m + (grads[k] - m) * (1 - beta1) for k, m in moments[0].items()}
    second = {k: v + (grads[k] ** 2 - v) * (1 - beta2) for k, v in moments[1].items()}
    rate = lr * jnp.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    p = {k: w - rate * first[k] / (jnp.sqrt(second[k]) + eps) for k, w in p.items()}
    return p, (first, second), loss


def _eval(p, a, arch):
    kind, gnn_layers, mlp_layers, temperature, mse_weight, _ = arch
    forward = layout_forward if kind == "layout" else tile_forward
    out, _ = forward(p, a, gnn_layers, mlp_layers, False)
    return out, ranking_loss(out, a, temperature, mse_weight)


@functools.cache
def _jitted():
    jax = require_jax()
    return (jax.jit(_train_step, static_argnames="arch"),
            jax.jit(_eval, static_argnames="arch"))


def init_params(kind: str, feat_width: int, cfg_width: int, s: dict,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float32 weights: Glorot-uniform kernels, zero biases, embedding uniform +-0.05."""
    e, h, depth = s["op_embed"], s["hidden"], s["mlp_layers"]
    shapes: list[tuple[str, tuple]] = [("op_embedding", (NUM_OPS, e))]
    if kind == "layout":
        widths = [cfg_width + feat_width + e] + [h] * depth
        shapes += [(f"pre{i}", (widths[i], h)) for i in range(depth)]
        for layer in range(s["gnn_layers"]):
            widths = [cfg_width + h] + [h] * depth
            shapes += [(f"gc{layer}_{i}", (widths[i], h)) for i in range(depth)]
        shapes += [("post0_nb", (3 * h, h)), ("post1_nb", (h, 1))]
    else:
        width = e + cfg_width + feat_width
        for layer in range(s["gnn_layers"]):
            shapes.append((f"sage{layer}", (2 * width, h)))
            width = h
        dims = [h] * depth + [1]
        shapes += [(f"post{i}", (h, dims[i])) for i in range(len(dims))]
    params = {}
    for name, shape in shapes:
        if name == "op_embedding":
            params[name] = rng.uniform(-GLOROT_EMBED, GLOROT_EMBED, shape)
            continue
        limit = np.sqrt(6.0 / (shape[0] + shape[1]))
        base = name.removesuffix("_nb")
        params[f"{base}_w"] = rng.uniform(-limit, limit, shape)
        if not name.endswith("_nb"):
            params[f"{base}_b"] = np.zeros(shape[1])
    return {k: v.astype(np.float32) for k, v in params.items()}


# --------------------------------------------------------------------------------------
# The system


class TpuGraphsGnn(RankingSystem):
    """The TpuGraphs paper's baselines: ResModel for layout, EarlyJoinSAGE for tile (see
    the module docstring for settings and deviations)."""

    name = "tpugraphs-gnn"

    @classmethod
    def defaults(cls) -> dict:
        """None: the collection's official value (`OFFICIAL`)."""
        return {**{k: None for k in OFFICIAL["layout"]}, "infer_budget_mb": INFER_BUDGET_MB}

    def _resolve(self, kind: str) -> dict:
        resolved = {k: (OFFICIAL[kind][k] if v is None else v)
                    for k, v in self.settings().items() if k in OFFICIAL[kind]}
        resolved["infer_budget_mb"] = self.settings()["infer_budget_mb"]
        return resolved

    def _arch(self, segmented: bool = False) -> tuple:
        s = self.resolved_
        return (self.kind_, int(s["gnn_layers"]), int(s["mlp_layers"]),
                float(s["temperature"]), float(s["mse_weight"]), bool(segmented))

    def _start(self, kind: str, stats: Stats) -> np.random.Generator:
        jax = require_jax()
        self.kind_, self.stats_ = kind, stats
        self.resolved_ = self._resolve(kind)
        init = init_params(kind, len(stats.node.keep), len(stats.config.keep),
                           self.resolved_, np.random.default_rng([self.seed, 1]))
        self.params_ = {k: jax.numpy.asarray(v) for k, v in init.items()}
        self.history_ = []
        return np.random.default_rng([self.seed, 2])

    # -- items ------------------------------------------------------------------------

    def _item(self, arrays: GraphArrays, graph, runtime: np.ndarray, keep: np.ndarray,
              configs: np.ndarray | None = None) -> Item:
        """An Item of the configs ``keep`` (sorted) of graph; configs: their raw rows."""
        if self.kind_ == "layout":
            raw = sampled_layout_configs(graph, keep) if configs is None else configs
            cfg = self.stats_.config.apply(raw)
            label = runtime[keep] / LABEL_SCALE
        else:
            cfg = self.stats_.config.apply(graph.config_feat[keep])
            label = runtime[keep]
        return Item(arrays, cfg, np.asarray(label, np.float64))

    def _sample(self, runtime, k, rng):
        return (skewed_sample if self.kind_ == "layout" else uniform_sample)(runtime, k, rng)

    # -- training ---------------------------------------------------------------------

    def _step(self, items, n_graphs, n_configs, rng, lists=1, sizes=(0,) * 5):
        train_step, _ = _jitted()
        s = self.resolved_
        a, segmented = union_batch(items, n_graphs, n_configs, self.kind_,
                                   int(s["keep_nodes"] or 0), rng, lists,
                                   int(s["gnn_layers"]), sizes)
        self.step_ += 1
        self.params_, self.moments_, loss = train_step(
            self.params_, self.moments_, a, np.float32(self.step_),
            np.float32(s["learning_rate"]), np.float32(s["clip_norm"]),
            arch=self._arch(segmented))
        return float(loss)

    def _reset_optimizer(self):
        import jax.numpy as jnp

        zeros = {k: jnp.zeros_like(v) for k, v in self.params_.items()}
        self.moments_ = (zeros, dict(zeros))
        self.step_ = 0

    def fit(self, files, collection: Collection, valid_files=(),
            on_epoch: EpochCallback | None = None) -> TpuGraphsGnn:
        kind = "tile" if collection.is_tile else "layout"
        files = [Path(f) for f in files]
        if kind == "layout":
            stats = layout_stats(files, collection)
            graphs = [load_graph(f, collection, configs=False) for f in files]
        else:
            graphs = [load_graph(f, collection) for f in files]
            node, config = MinMax.empty(140), MinMax.empty(24)
            for g in graphs:
                node.update(g.node_feat)
                config.update(g.config_feat)
            stats = Stats(node, config)
        rng = self._start(kind, stats)
        s = self.resolved_
        train = self._prepared(graphs, int(s["configs"]))
        if not train:
            raise XlarankError(f"system {self.name}: no train graph has {s['configs']} "
                               "configs with two distinct runtimes")
        valid = self._prepared([load_graph(f, collection, configs=kind == "tile")
                                for f in valid_files], 2)
        valid_rng = np.random.default_rng([self.seed, 3])
        self._reset_optimizer()
        best, best_opa, waited = self.params_, -np.inf, 0
        batch, configs = int(s["batch"]), int(s["configs"])
        # Every batch padded to the largest possible one: the step is compiled once (per-
        # config arrays cover the configs' regions only, so this stays small).
        hops = int(s["gnn_layers"])
        train_sizes = _largest_batch(train, batch, hops)
        self.valid_sizes_ = _largest_batch(valid, batch, hops)
        for epoch in range(int(s["epochs"])):
            losses = []
            order = rng.permutation(len(train))
            for start in range(0, len(order), batch):
                items = [self._item(arrays, g, runtime,
                                    self._sample(runtime, configs, rng))
                         for g, arrays, runtime in (train[i] for i in order[start:start + batch])]
                losses.append(self._step(items, batch, configs, rng, sizes=train_sizes))
            record = {"epoch": epoch, "train_loss": float(np.mean(losses)),
                      "valid_loss": None, "valid_opa": None}
            if valid:
                record["valid_loss"], record["valid_opa"] = self._validate(valid, valid_rng)
                if record["valid_opa"] > best_opa:
                    best, best_opa, waited = self.params_, record["valid_opa"], 0
                else:
                    waited += 1
            self.history_.append(record)
            if on_epoch is not None:
                on_epoch(record)
            # As the official loop: early_stop 0 turns early stopping off.
            if valid and int(s["early_stop"]) > 0 and waited >= int(s["early_stop"]):
                break
        if valid:
            self.params_ = best
        return self

    def _prepared(self, graphs, min_configs: int) -> list:
        """(graph, arrays, runtime) of the graphs with at least min_configs configs and two
        distinct runtimes; runtime float64 (c,), normalised for tile."""
        out = []
        for g in graphs:
            runtime = g.config_runtime.astype(np.float64)
            if isinstance(g, TileGraph):
                runtime = runtime / g.config_runtime_normalizers
            if len(runtime) >= min_configs and len(np.unique(runtime)) > 1:
                out.append((g, graph_arrays(g, self.stats_), runtime))
        return out

    def _validate(self, valid, rng) -> tuple[float, float]:
        """(mean ranking loss, OPA) over validate_batches batches of valid graphs."""
        _, evaluate = _jitted()
        s = self.resolved_
        batch, configs = int(s["batch"]), int(s["configs"])
        losses, right, pairs = [], 0.0, 0.0
        slot = 0
        for _ in range(int(s["validate_batches"])):
            chosen = [valid[(slot + i) % len(valid)] for i in range(batch)]
            slot += batch
            items = [self._item(arrays, g, runtime, self._sample(runtime, configs, rng))
                     for g, arrays, runtime in chosen]
            a, _ = union_batch(items, batch, configs, self.kind_, 0, rng,
                               hops=int(s["gnn_layers"]), sizes=self.valid_sizes_)
            out, loss = evaluate(self.params_, a, arch=self._arch())
            losses.append(float(loss))
            out = np.asarray(out)
            for g, it in enumerate(items):
                c = len(it.label)
                slower = it.label[:, None] > it.label[None, :]
                right += (slower & (out[g, :c, None] > out[g, None, :c])).sum()
                pairs += slower.sum()
        return float(np.mean(losses)), float(right / max(pairs, 1.0))

    def fit_graph(self, graph, runtime: pd.Series,
                  on_epoch: EpochCallback | None = None) -> TpuGraphsGnn:
        kind = "tile" if isinstance(graph, TileGraph) else "layout"
        rows = runtime.index.to_numpy(np.int64)
        measured = runtime.to_numpy(np.float64)
        node = MinMax.empty(140)
        node.update(graph.node_feat)
        if kind == "layout":
            raw = (graph.node_config_feat[rows] if graph.node_config_feat is not None
                   else _configs_at(graph, rows))
            config = MinMax.empty(18)
            config.update(raw.reshape(-1, 18))
        else:
            raw = graph.config_feat[rows]
            config = MinMax.empty(24)
            config.update(raw)
        rng = self._start(kind, Stats(node, config))
        s = self.resolved_
        arrays = graph_arrays(graph, self.stats_)
        lists, per_list = int(s["batch"]), min(int(s["configs"]), len(rows))
        # The lists are drawn from one graph: one forward pass over lists x per_list
        # configs pools exactly as `lists` copies of the graph would.
        cfg_all = self.stats_.config.apply(raw)
        label_all = measured / LABEL_SCALE if kind == "layout" else measured
        self._reset_optimizer()
        for epoch in range(int(s["in_graph_epochs"])):
            picks = np.concatenate([self._sample(measured, per_list, rng)
                                    for _ in range(lists)])
            item = Item(arrays, cfg_all[picks], label_all[picks])
            loss = self._step([item], 1, lists * per_list, rng, lists=lists)
            record = {"epoch": epoch, "train_loss": loss, "valid_loss": None,
                      "valid_opa": None}
            self.history_.append(record)
            if on_epoch is not None:
                on_epoch(record)
        return self

    # -- scoring ----------------------------------------------------------------------

    def _chunk(self, arrays: GraphArrays) -> int:
        s = self.resolved_
        width = len(self.stats_.config.keep) + 2 * max(s["hidden"], s["op_embed"])
        if self.kind_ == "tile":
            width += len(self.stats_.node.keep)
        rows = _bucket(arrays.n + 1) + 2 * _bucket(len(arrays.edges))
        if self.kind_ == "layout":
            # Per-config arrays cover the configs' region and its neighbours only.
            _, local = region_masks((arrays.edges[:, 0], arrays.edges[:, 1]),
                                    np.ones(len(arrays.edges), bool), arrays.config_ids,
                                    arrays.n, int(s["gnn_layers"]))
            rows = 3 * _bucket(int(local.sum()) + 1)
        budget = int(s["infer_budget_mb"]) * (1 << 20) // 4
        fit = max(1, budget // (rows * width))
        return int(min(int(s["infer_chunk"]), fit))

    def _chunk_for(self, arrays: GraphArrays, n_configs: int) -> int:
        """The chunk, no bigger than the graph's configs rounded up to a bucket."""
        return min(self._chunk(arrays), _bucket(n_configs))

    def score(self, graph) -> np.ndarray:
        if getattr(self, "params_", None) is None:
            raise XlarankError(f"system {self.name}: fit or fit_graph first")
        kind = "tile" if isinstance(graph, TileGraph) else "layout"
        if kind != self.kind_:
            raise XlarankError(f"system {self.name}: trained on {self.kind_} graphs, "
                               f"given a {kind} graph")
        _, evaluate = _jitted()
        arrays = graph_arrays(graph, self.stats_)
        chunk = self._chunk_for(arrays, graph.n_configs)
        zero = np.zeros(graph.n_configs)
        out = np.empty(graph.n_configs)
        for start, raw in _config_chunks(graph, chunk):
            keep = np.arange(start, start + len(raw))
            item = Item(arrays, self.stats_.config.apply(raw), zero[keep])
            a, _ = union_batch([item], 1, chunk, kind, hops=int(self.resolved_["gnn_layers"]))
            result, _ = evaluate(self.params_, a, arch=self._arch())
            out[keep] = np.asarray(result, dtype=np.float64)[0, :len(raw)]
        return -out

    # -- persistence ------------------------------------------------------------------

    def _save(self, out_dir: Path) -> None:
        if getattr(self, "params_", None) is None:
            raise XlarankError(f"system {self.name}: fit or fit_graph before saving")
        arrays = {f"param__{k}": np.asarray(v) for k, v in self.params_.items()}
        arrays.update({f"stats__{k}": v for k, v in self.stats_.to_arrays().items()})
        arrays["stats__node_keep"] = self.stats_.node.keep
        arrays["stats__config_keep"] = self.stats_.config.keep
        np.savez(Path(out_dir) / "weights.npz", **arrays)
        (Path(out_dir) / "gnn.json").write_text(json.dumps(
            {"kind": self.kind_, "resolved": self.resolved_}, indent=2))

    def _load(self, out_dir: Path) -> None:
        jax = require_jax()
        card = json.loads((Path(out_dir) / "gnn.json").read_text())
        self.kind_, self.resolved_ = card["kind"], card["resolved"]
        with np.load(Path(out_dir) / "weights.npz", allow_pickle=False) as z:
            self.params_ = {k.removeprefix("param__"): jax.numpy.asarray(z[k])
                            for k in z.files if k.startswith("param__")}
            self.stats_ = Stats.from_arrays({k.removeprefix("stats__"): z[k]
                                             for k in z.files if k.startswith("stats__")})


def _largest_batch(prepared: list, batch: int, hops: int) -> tuple[int, ...]:
    """Padded sizes (nodes, edges, configurable nodes, local nodes, local edges) that hold
    any ``batch`` of the prepared graphs (`union_batch`'s ``sizes``)."""
    if not prepared:
        return (0,) * 5
    counts = []
    for _, arrays, _ in prepared:
        src, dst = arrays.edges[:, 0], arrays.edges[:, 1]
        region, local = region_masks((src, dst), np.ones(len(src), bool), arrays.config_ids,
                                     arrays.n, hops)
        counts.append((arrays.n, len(src), len(arrays.config_ids), int(local.sum()),
                       int((region[src] | region[dst]).sum())))
    top = [sum(sorted(column, reverse=True)[:batch]) for column in zip(*counts)]
    return (_bucket(top[0] + 1), _bucket(top[1]), _bucket(top[2]), _bucket(top[3] + 1),
            _bucket(top[4]))


def _configs_at(graph: LayoutGraph, rows: np.ndarray) -> np.ndarray:
    """int8 (len(rows), nc, 18): the configs at ``rows`` (any order) of a streamed graph."""
    unique, inverse = np.unique(rows, return_inverse=True)
    return sampled_layout_configs(graph, unique)[inverse.ravel()]


def _config_chunks(graph, chunk: int):
    """(first index, raw configs) of consecutive chunks of at most ``chunk`` configs: tile
    float32 (b, 24), layout int8 (b, nc, 18) from memory or streamed."""
    if isinstance(graph, TileGraph):
        for start in range(0, graph.n_configs, chunk):
            yield start, graph.config_feat[start:start + chunk]
        return
    held, start = [], 0
    with config_blocks(graph) as blocks:
        for block, _ in blocks:
            held.append(block)
            while sum(len(b) for b in held) >= chunk:
                joined = np.concatenate(held)
                yield start, joined[:chunk]
                start += chunk
                held = [joined[chunk:]]
    rest = np.concatenate(held) if held else np.zeros((0, graph.n_configurable, 18))
    if len(rest):
        yield start, rest
