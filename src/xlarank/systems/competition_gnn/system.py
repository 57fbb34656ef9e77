"""The system: `CompetitionGnn`, its settings (`OFFICIAL`), the pruned graph's inputs,
training (AdamW, warmup and cosine, global-norm clipping) across graphs and inside one,
scoring and its saved files."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.compat import jax, jnp, require_jax
from xlarank.data.collections import Collection, locate
from xlarank.data.distinct import distinct_configs
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.errors import XlarankError
from xlarank.features.jax_common import sampled_layout_configs
from xlarank.systems import (
    LEARNING_RATE,
    MOST_CONFIGS,
    MOST_EPOCHS,
    MOST_STEPS,
    EpochCallback,
    RankingSystem,
    check_scorable,
    checked_scores,
)
from xlarank.systems.competition_gnn.model import (
    LAYOUT_VALUES,
    NODE_COLUMNS,
    init_params,
    layout_forward,
    pairwise_hinge,
    param_shapes,
    tile_forward,
)
from xlarank.systems.inner import (
    IN_GRAPH,
    IN_GRAPH_FLAGS,
    IN_GRAPH_GRIDS,
    IN_GRAPH_RANGES,
    fit_by_inner_validation,
    uniform_draw,
)
from xlarank.systems.tpugraphs_gnn.batches import _bucket, _config_chunks, _configs_at
from xlarank.systems.tpugraphs_gnn.system import MOST_LAYERS, MOST_WIDTH, saved_settings

ADAMW = (0.9, 0.999, 1e-8)   # torch AdamW's betas and eps (the HF Trainer's defaults)
CLIP_EPS = 1e-6              # torch clip_grad_norm_: max_norm / (norm + 1e-6)
# A saved tile padding past this is refused: real kernels have a few to a few hundred
# nodes (FORMAT.md), and at 2^16 one activation of the largest hidden width is 64 MiB.
MOST_TILE_PAD = 1 << 16

COMMON = {"learning_rate": 1e-3, "weight_decay": 1e-5, "warmup_ratio": 0.05,
          "max_grad_norm": 1.0, "hidden": 256, "op_embed": 16, "layout_embed": 4,
          "sage_blocks": 2, "dropout": 0.2, "head_dropout": 0.2, **IN_GRAPH}
# Per collection, from the training scripts (train_<collection>.sh) and data_args.py.
OFFICIAL = {
    "layout:xla:default": {"epochs": 750, "max_steps": None, "configs": 64,
                           "eval_configs": 128, "cross_attention": True,
                           "eval_steps": 2000, **COMMON},
    "layout:xla:random": {"epochs": 750, "max_steps": None, "configs": 128,
                          "eval_configs": 512, "cross_attention": False,
                          "eval_steps": 2000, **COMMON},
    "layout:nlp:default": {"epochs": 1000, "max_steps": None, "configs": 64,
                           "eval_configs": 256, "cross_attention": True,
                           "eval_steps": 6000, **COMMON},
    "layout:nlp:random": {"epochs": 1000, "max_steps": None, "configs": 128,
                          "eval_configs": 512, "cross_attention": False,
                          "eval_steps": 6000, **COMMON},
    # configs 0: every config of the kernel per step; eval_configs 0: all at once.
    "tile:xla": {"epochs": None, "max_steps": 100000, "configs": 0, "eval_configs": 0,
                 "cross_attention": True, "eval_steps": 5000, **COMMON},
}
# In-graph on a graph whose path names no collection: the layout:xla:default settings.
FALLBACK = {"layout": "layout:xla:default", "tile": "tile:xla"}


def _saved_tile_pad(value, kind: str) -> tuple[int, int]:
    """A card's tile padding (nodes, edges): two whole numbers, each 0 or a bucket
    (a power of two from 8) of at most MOST_TILE_PAD, and (0, 0) unless the model ranks
    tile kernels; anything else raises ValueError (a padding would only allocate)."""
    if (not isinstance(value, list) or len(value) != 2
            or not all(type(v) is int for v in value)):
        raise ValueError(f"tile_pad {value!r} is not a pair of whole numbers")
    if not all(v == 0 or (8 <= v <= MOST_TILE_PAD and v & (v - 1) == 0) for v in value):
        raise ValueError(f"tile_pad {value} is not 0 or a power of two from 8 to "
                         f"{MOST_TILE_PAD}")
    if kind != "tile" and value != [0, 0]:
        raise ValueError(f"tile_pad {value} on a {kind} model")
    return value[0], value[1]


@dataclass
class Scaler:
    """sklearn's StandardScaler: mean and standard deviation (ddof 0; 1 where it is 0)."""

    mean: np.ndarray   # float64 (n_cols,)
    scale: np.ndarray  # float64 (n_cols,)

    @classmethod
    def fit(cls, rows: np.ndarray) -> Scaler:
        rows = np.asarray(rows, np.float64)
        std = rows.std(axis=0)
        return cls(rows.mean(axis=0), np.where(std > 0, std, 1.0))

    def apply(self, rows: np.ndarray) -> np.ndarray:
        return ((np.asarray(rows, np.float64) - self.mean) / self.scale).astype(np.float32)


@dataclass
class Inputs:
    """One graph's node arrays, pruned (layout) to the configurable nodes and every node
    one edge away, keeping the edges that touch a configurable node (the original's
    data_compression.prune_graph)."""

    feat: np.ndarray       # float64 (n, 134) raw node columns (scaled at batch time)
    layout: np.ndarray     # int32 (n, 6) node_feat 134-139 + 2: layout embedding ids
    op: np.ndarray         # int32 (n,)
    src: np.ndarray        # int32 (m,) the consumer of each edge (the message's source)
    dst: np.ndarray        # int32 (m,) the producer
    cfg_node: np.ndarray   # int32 (k,) configurable nodes; empty for tile


def graph_inputs(graph: TileGraph | LayoutGraph) -> Inputs:
    edges = graph.edge_index.astype(np.int64).reshape(-1, 2)
    n = len(graph.node_opcode)
    keep = np.arange(n)
    config_ids = np.zeros(0, np.int64)
    if isinstance(graph, LayoutGraph):
        # Not features.prune.prune_graph: that keeps every edge between kept nodes, the
        # original only those touching a configurable node.
        config_ids = np.asarray(graph.node_config_ids, np.int64)
        configurable = np.zeros(n, bool)
        configurable[config_ids] = True
        edges = edges[configurable[edges[:, 0]] | configurable[edges[:, 1]]]
        keep = np.union1d(np.unique(edges), config_ids)
        new = np.full(n, -1, np.int64)
        new[keep] = np.arange(len(keep))
        edges, config_ids = new[edges], new[config_ids]
    feat = graph.node_feat[keep]
    layout = np.clip(np.rint(feat[:, NODE_COLUMNS:]).astype(np.int64) + 2, 0,
                     LAYOUT_VALUES - 1)
    return Inputs(feat[:, :NODE_COLUMNS].astype(np.float64), layout.astype(np.int32),
                  graph.node_opcode[keep].astype(np.int32), edges[:, 0].astype(np.int32),
                  edges[:, 1].astype(np.int32), config_ids.astype(np.int32))


def config_ids(raw: np.ndarray) -> np.ndarray:
    """int32 (..., 18): layout config values (-1..5) as embedding ids (value + 2)."""
    return np.clip(np.asarray(raw).astype(np.int64) + 2, 0, LAYOUT_VALUES - 1).astype(np.int32)


def lr_factor(step: int, total: int, warmup_ratio: float) -> float:
    """The HF Trainer's cosine schedule with linear warmup, at 0-based optimizer step
    ``step`` of ``total``: ceil(warmup_ratio x total) warmup steps from 0, then half a
    cosine down to 0."""
    warmup = math.ceil(warmup_ratio * total)
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def _forward(p, a, arch, key):
    kind, blocks, cross, rate, head_rate = arch
    if kind == "layout":
        return layout_forward(p, a, blocks, cross, rate, key)
    return tile_forward(p, a, blocks, cross, rate, head_rate, key)


def _loss(p, a, arch, key):
    return pairwise_hinge(_forward(p, a, arch, key), a["label"], a["config_mask"])


def _train_step(p, moments, a, step, lr, weight_decay, max_norm, key, arch):
    """One AdamW step as torch writes it, after global-norm clipping; step counts from 1."""
    loss, grads = jax.value_and_grad(_loss)(p, a, arch, key)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
    coef = jnp.minimum(1.0, max_norm / (norm + CLIP_EPS))
    grads = jax.tree.map(lambda g: g * coef, grads)
    beta1, beta2, eps = ADAMW
    first = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, moments[0], grads)
    second = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, moments[1], grads)
    c1, c2 = 1 - beta1 ** step, 1 - beta2 ** step
    p = jax.tree.map(lambda w, m, v: w * (1 - lr * weight_decay)
                     - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps), p, first, second)
    return p, (first, second), loss


def _outputs(p, a, arch):
    return _forward(p, a, arch, None)


@functools.cache
def _jitted():
    require_jax()
    return (jax.jit(_train_step, static_argnames="arch"),
            jax.jit(_outputs, static_argnames="arch"))


class CompetitionGnn(RankingSystem):
    """The first-place GNN of the "Fast or Slow?" competition (see the package docstring
    for its settings beside the original's and the deviations)."""

    name = "competition-gnn"
    epoch_setting = "epochs"
    # Checked when made (`xlarank.systems.check_settings`; None: the official value):
    # epochs 1..100,000, max_steps and eval_steps 1..10,000,000, configs and eval_configs
    # 0 (all) and up, a learning rate in (0, 10], weight_decay and warmup_ratio in [0, 1],
    # max_grad_norm in (0, 1e6], widths 1..`MOST_WIDTH`, sage_blocks 0..`MOST_LAYERS`,
    # dropouts in [0, 0.95] (at 1 nothing passes), cross_attention a flag, and the
    # in-graph rule's (`IN_GRAPH_RANGES`).
    SETTING_RANGES = {"epochs": (1, MOST_EPOCHS, True, False),
                      "max_steps": (1, MOST_STEPS, True, False),
                      "eval_steps": (1, MOST_STEPS, True, False),
                      "configs": (0, MOST_CONFIGS, True, False),
                      "eval_configs": (0, MOST_CONFIGS, True, False),
                      "learning_rate": LEARNING_RATE,
                      "weight_decay": (0.0, 1.0, False, False),
                      "warmup_ratio": (0.0, 1.0, False, False),
                      "max_grad_norm": (0.0, 1e6, False, True),
                      "hidden": (1, MOST_WIDTH, True, False),
                      "op_embed": (1, MOST_WIDTH, True, False),
                      "layout_embed": (1, MOST_WIDTH, True, False),
                      "sage_blocks": (0, MOST_LAYERS, True, False),
                      "dropout": (0.0, 0.95, False, False),
                      "head_dropout": (0.0, 0.95, False, False), **IN_GRAPH_RANGES}
    FLAG_SETTINGS = ("cross_attention", *IN_GRAPH_FLAGS)
    GRID_SETTINGS = IN_GRAPH_GRIDS

    @classmethod
    def defaults(cls) -> dict:
        """None: the collection's official value (`OFFICIAL`)."""
        return {k: None for k in OFFICIAL["layout:xla:default"]}

    def _resolve(self, collection_id: str) -> dict:
        base = OFFICIAL[collection_id]
        resolved = {k: (base[k] if v is None else v) for k, v in self.settings().items()}
        # An epoch count asked for on a collection counted in steps (tile) replaces them.
        if self.overrides.get("epochs") is not None and self.overrides.get("max_steps") is None:
            resolved["max_steps"] = None
        # As saved (JSON: tuples become lists), so a loaded system resolves the same.
        return json.loads(json.dumps(resolved))

    def _arch(self) -> tuple:
        s = self.resolved_
        return (self.kind_, int(s["sage_blocks"]), bool(s["cross_attention"]),
                float(s["dropout"]), float(s["head_dropout"]))

    def _start(self, kind: str, collection_id: str, node: Scaler, config: Scaler | None):
        require_jax()
        self.kind_, self.collection_ = kind, collection_id
        self.resolved_ = self._resolve(collection_id)
        self.node_scaler_, self.config_scaler_ = node, config
        init = init_params(kind, self.resolved_, np.random.default_rng([self.seed, 1]))
        self.params_ = {k: jax.numpy.asarray(v) for k, v in init.items()}
        zeros = {k: jax.numpy.zeros_like(v) for k, v in self.params_.items()}
        self.moments_, self.step_ = (zeros, dict(zeros)), 0
        self.history_ = []

    # -- batches ----------------------------------------------------------------------

    def _arrays(self, inputs: Inputs, cfg: np.ndarray, label: np.ndarray | None = None
                ) -> dict[str, np.ndarray]:
        """The padded arrays of one graph and its configs: layout cfg int32 (c, k, 18)
        embedding ids, tile cfg float32 (c, 24) scaled; label float (c,), larger slower.
        Across graphs sizes round up to `_bucket`, so a fit compiles a few shapes only;
        tile kernels' node and edge counts round up to the largest bucket of the fit's
        train kernels (``tile_pad_``) and their config counts to a power of two: their
        node path sees no config, so this costs little, and a fit over hundreds of
        kernels compiles about ten shapes, not one per (nodes, edges, configs) bucket
        (134 on the demo's 400 kernels, which ran out of memory maps). Inside one graph
        (``exact_`` set by `fit_graph`) the node and edge counts are the graph's own plus
        one padding node (a third less work on unet3d)."""
        n, m, c = len(inputs.op), len(inputs.src), len(cfg)
        big_c = _bucket(c)
        if getattr(self, "exact_", False):
            big_n, big_m, big_k = n + 1, max(m, 1), max(len(inputs.cfg_node), 1)
        else:
            big_n, big_m = _bucket(n + 1), _bucket(max(m, 1))
            big_k = _bucket(max(len(inputs.cfg_node), 1))
            if self.kind_ == "tile":
                least_n, least_m = getattr(self, "tile_pad_", (0, 0))
                big_n, big_m = max(big_n, least_n), max(big_m, least_m)
                big_c = 1 << max(3, (c - 1).bit_length())
        pad = big_n - 1
        a = {"feat": np.zeros((big_n, NODE_COLUMNS), np.float32),
             "layout": np.zeros((big_n, inputs.layout.shape[1]), np.int32),
             "op": np.zeros(big_n, np.int32), "node_mask": np.arange(big_n) < n,
             "src": np.full(big_m, pad, np.int32), "dst": np.full(big_m, pad, np.int32),
             "edge_mask": np.arange(big_m) < m, "config_mask": np.arange(big_c) < c,
             "label": np.zeros(big_c, np.float32)}
        a["feat"][:n] = self.node_scaler_.apply(inputs.feat)
        a["layout"][:n], a["op"][:n] = inputs.layout, inputs.op
        a["src"][:m], a["dst"][:m] = inputs.src, inputs.dst
        if label is not None:
            a["label"][:c] = label
        if self.kind_ == "layout":
            k = len(inputs.cfg_node)
            a["cfg_node"] = np.full(big_k, pad, np.int32)
            a["cfg_node"][:k] = inputs.cfg_node
            a["cfg_mask"] = np.arange(big_k) < k
            a["cfg"] = np.zeros((big_k, big_c, cfg.shape[-1]), np.int32)
            a["cfg"][:k, :c] = config_ids(cfg).transpose(1, 0, 2)
        else:
            a["cfg"] = np.zeros((big_c, cfg.shape[-1]), np.float32)
            a["cfg"][:c] = self.config_scaler_.apply(cfg)
        return a

    def _train(self, a: dict, rng: np.random.Generator, learning_rate: float) -> float:
        """One optimizer step at the schedule's rate of ``step_`` of ``total_steps_``."""
        require_jax()
        train_step, _ = _jitted()
        s = self.resolved_
        lr = learning_rate * lr_factor(self.step_, self.total_steps_, float(s["warmup_ratio"]))
        key = jax.random.PRNGKey(int(rng.integers(0, 2**31 - 1)))
        self.step_ += 1
        self.params_, self.moments_, loss = train_step(
            self.params_, self.moments_, a, np.float32(self.step_), np.float32(lr),
            np.float32(s["weight_decay"]), np.float32(s["max_grad_norm"]), key,
            arch=self._arch())
        return float(loss)

    def _chunks(self, n: int) -> int:
        """Configs per inference pass: ``eval_configs`` (0: all), split evenly."""
        most = int(self.resolved_["eval_configs"]) or n
        return max(1, math.ceil(n / max(1, math.ceil(n / most))))

    def _outputs_of(self, inputs: Inputs, cfg: np.ndarray) -> np.ndarray:
        """float64 (len(cfg),): outputs (higher = slower) of raw configs ``cfg`` of one
        graph, in consecutive passes of `_chunks` configs (cross-config attention makes a
        config's output depend on the configs of its pass, as in the original)."""
        _, outputs = _jitted()
        chunk = self._chunks(len(cfg))
        out = np.empty(len(cfg))
        for start in range(0, len(cfg), chunk):
            part = cfg[start:start + chunk]
            result = outputs(self.params_, self._arrays(inputs, part), arch=self._arch())
            out[start:start + len(part)] = np.asarray(result, np.float64)[:len(part)]
        return out

    # -- across graphs ----------------------------------------------------------------

    def fit(self, files, collection: Collection, valid_files=(),
            on_epoch: EpochCallback | None = None) -> CompetitionGnn:
        """Train on the train files as the original's Trainer: one graph per step in a new
        order each epoch, ``configs`` of its distinct configs drawn uniformly (all: tile),
        the pairwise hinge loss, AdamW under warmup and cosine over every step of the fit;
        every ``eval_steps`` steps and at the end, the mean Kendall tau (tile: the
        original's top-50 score) over the valid files picks the weights kept."""
        kind = "tile" if collection.is_tile else "layout"
        files = [Path(f) for f in files]
        train = []
        for path in files:
            graph = load_graph(path, collection, configs=kind == "tile")
            distinct = distinct_configs(graph)
            # The original drops later copies of a config from train graphs (keeping the
            # first one's runtime); tile kernels keep every config.
            rows = np.sort(distinct.first) if kind == "layout" else np.arange(graph.n_configs)
            runtime = graph.config_runtime[rows].astype(np.float64)
            if kind == "tile":
                runtime = runtime / graph.config_runtime_normalizers[rows]
            if len(rows) >= 2 and len(np.unique(runtime)) > 1:
                train.append((graph, graph_inputs(graph), rows, runtime))
        if not train:
            raise XlarankError(f"system {self.name}: no train graph has two configs with "
                               "different runtimes")
        node = Scaler.fit(np.concatenate([i.feat for _, i, _, _ in train]))
        config = (Scaler.fit(np.concatenate([g.config_feat for g, _, _, _ in train]))
                  if kind == "tile" else None)
        self._start(kind, collection.id, node, config)
        self.tile_pad_ = ((max(_bucket(len(i.op) + 1) for _, i, _, _ in train),
                           max(_bucket(max(len(i.src), 1)) for _, i, _, _ in train))
                          if kind == "tile" else (0, 0))
        s = self.resolved_
        valid = [load_graph(f, collection) for f in valid_files]
        valid_inputs = [graph_inputs(g) for g in valid]
        per_epoch = len(train)
        self.total_steps_ = (int(s["max_steps"]) if s["max_steps"] is not None
                             else int(s["epochs"]) * per_epoch)
        epochs = math.ceil(self.total_steps_ / per_epoch)
        rng = np.random.default_rng([self.seed, 2])
        best, best_metric = self.params_, -np.inf
        every = int(s["eval_steps"])
        configs = int(s["configs"])
        for epoch in range(epochs):
            losses, metric = [], None
            for i in rng.permutation(per_epoch):
                if self.step_ >= self.total_steps_:
                    break
                graph, inputs, rows, runtime = train[i]
                picks = (np.sort(rng.choice(len(rows), configs, replace=False))
                         if 0 < configs < len(rows) else np.arange(len(rows)))
                cfg = (sampled_layout_configs(graph, rows[picks]) if kind == "layout"
                       else graph.config_feat[rows[picks]])
                losses.append(self._train(self._arrays(inputs, cfg, runtime[picks]), rng,
                                          float(s["learning_rate"])))
                if valid and (self.step_ % every == 0 or self.step_ == self.total_steps_):
                    metric = self._valid_metric(valid, valid_inputs)
                    if metric > best_metric:
                        best, best_metric = self.params_, metric
            record = {"epoch": epoch, "train_loss": float(np.mean(losses)),
                      "valid_loss": None, "valid_metric": metric}
            self.history_.append(record)
            if on_epoch is not None:
                on_epoch(record)
        if valid:
            self.params_ = best
        return self

    def _valid_metric(self, valid, valid_inputs) -> float:
        """Layout: mean Kendall tau over the valid graphs; tile: the original's
        score_tile_mean, the mean over kernels of 2 - (mean runtime of the 50 predicted
        fastest) / (mean of the 50 truly fastest)."""
        from xlarank.metrics import kendall_tau

        values = []
        for graph, inputs in zip(valid, valid_inputs):
            out = self._outputs_of(inputs, self._raw_configs(graph, np.arange(graph.n_configs)))
            runtime = graph.config_runtime.astype(np.float64)
            if self.kind_ == "layout":
                tau = kendall_tau(-out, runtime)
                values.append(0.0 if np.isnan(tau) else tau)
            else:
                top = np.argsort(out, kind="stable")[:50]
                values.append(2.0 - runtime[top].mean() / np.sort(runtime)[:50].mean())
        return float(np.mean(values))

    @staticmethod
    def _raw_configs(graph, rows: np.ndarray) -> np.ndarray:
        if isinstance(graph, TileGraph):
            return graph.config_feat[rows]
        if graph.node_config_feat is not None:
            return graph.node_config_feat[rows]
        return _configs_at(graph, rows)

    # -- inside one graph -------------------------------------------------------------

    def fit_graph(self, graph, runtime: pd.Series,
                  on_epoch: EpochCallback | None = None) -> CompetitionGnn:
        """Train on the measured configs ``runtime`` (float64 medians indexed by config
        index) by the in-graph recipe every GNN system follows
        (`xlarank.systems.inner.fit_by_inner_validation`: inner validation, successive
        halving over the learning-rate grid, early stopping, the best checkpoint kept).
        The settings are those of the graph's collection (read from its path; otherwise
        layout:xla:default or tile:xla); each step draws ``configs`` of the inner-training
        configs uniformly (tile: all of them); the schedule's warmup and cosine span
        ``in_graph_epochs`` steps. ``chosen_`` says what was chosen."""
        kind = "tile" if isinstance(graph, TileGraph) else "layout"
        found, _ = locate(Path(graph.path)) if getattr(graph, "path", None) else (None, None)
        collection_id = (found.id if found is not None and found.kind == kind
                         else FALLBACK[kind])
        rows = runtime.index.to_numpy(np.int64)
        measured = runtime.to_numpy(np.float64)
        inputs = graph_inputs(graph)
        raw = self._raw_configs(graph, rows)
        self._start(kind, collection_id, Scaler.fit(inputs.feat),
                    Scaler.fit(raw) if kind == "tile" else None)
        self.exact_ = True
        s = self.resolved_
        self.total_steps_ = int(s["in_graph_epochs"])
        draw = uniform_draw(int(s["configs"]))

        def step(picks: np.ndarray, rng: np.random.Generator, rate: float) -> float:
            return self._train(self._arrays(inputs, raw[picks], measured[picks]), rng, rate)

        def tau(positions: np.ndarray) -> float:
            from xlarank.metrics import kendall_tau

            value = kendall_tau(-self._outputs_of(inputs, raw[positions]), measured[positions])
            return 0.0 if np.isnan(value) else float(value)

        self.chosen_ = fit_by_inner_validation(self, measured, s, draw, step, tau, on_epoch)
        return self

    # -- scoring ----------------------------------------------------------------------

    def score(self, graph) -> np.ndarray:
        """Every config, in consecutive passes of `_chunks` configs in index order."""
        check_scorable(self, graph)
        _, outputs = _jitted()
        inputs = graph_inputs(graph)
        chunk = self._chunks(graph.n_configs)
        out = np.empty(graph.n_configs)
        for start, raw in _config_chunks(graph, chunk):
            result = outputs(self.params_, self._arrays(inputs, raw), arch=self._arch())
            out[start:start + len(raw)] = np.asarray(result, np.float64)[:len(raw)]
        return checked_scores(self, graph, -out)

    def score_rows(self, graph, rows: np.ndarray) -> np.ndarray:
        """float64 (len(rows),): the scores (higher is faster) of the configs ``rows``
        alone, passed in their order: with cross-config attention they differ a little
        from `score`'s, whose passes hold other configs."""
        check_scorable(self, graph)
        rows = np.asarray(rows, np.int64)
        return -self._outputs_of(graph_inputs(graph), self._raw_configs(graph, rows))

    # -- persistence ------------------------------------------------------------------

    def _save(self, out_dir: Path) -> None:
        if getattr(self, "params_", None) is None:
            raise XlarankError(f"system {self.name}: fit or fit_graph before saving")
        arrays = {f"param__{k}": np.asarray(v) for k, v in self.params_.items()}
        arrays["scaler__node_mean"] = self.node_scaler_.mean
        arrays["scaler__node_scale"] = self.node_scaler_.scale
        if self.config_scaler_ is not None:
            arrays["scaler__config_mean"] = self.config_scaler_.mean
            arrays["scaler__config_scale"] = self.config_scaler_.scale
        np.savez(Path(out_dir) / "weights.npz", **arrays)
        (Path(out_dir) / "gnn.json").write_text(json.dumps(
            {"kind": self.kind_, "collection": self.collection_, "resolved": self.resolved_,
             "chosen": getattr(self, "chosen_", None),
             "tile_pad": list(getattr(self, "tile_pad_", (0, 0)))}, indent=2))

    def _load(self, out_dir: Path) -> None:
        """The card, then the weights and scalers, the weights of exactly the shapes its
        settings give (XlarankError naming the file otherwise)."""
        require_jax()
        from xlarank.features.embedding import read_weight_arrays
        from xlarank.files import read_structured

        path = Path(out_dir) / "gnn.json"
        card = read_structured(path, "competition-gnn card", XlarankError)
        if not isinstance(card, dict):
            raise XlarankError(f"{path}: not a competition-gnn card (a table of kind, "
                               "collection and resolved settings)")
        kind, collection = card.get("kind"), card.get("collection")
        if kind not in FALLBACK:
            raise XlarankError(f"{path}: kind {kind!r} is not layout or tile")
        of_kind = [c for c in OFFICIAL if c.startswith("tile") == (kind == "tile")]
        if collection not in of_kind:
            raise XlarankError(f"{path}: collection {collection!r} is not one of the "
                               f"{kind} collections ({', '.join(of_kind)})")
        resolved = saved_settings(path, card.get("resolved"), SCORED_SETTINGS)
        try:
            # Saved before the tile padding: (0, 0), the buckets alone.
            tile_pad = _saved_tile_pad(card.get("tile_pad", [0, 0]), kind)
        except ValueError as exc:
            raise XlarankError(f"{path}: not a saved competition-gnn ({exc})") from None
        weights, what = Path(out_dir) / "weights.npz", "competition-gnn weights"
        widths = {"node": NODE_COLUMNS, **({"config": 24} if kind == "tile" else {})}
        scalers = {f"scaler__{part}_{end}": (width,) for part, width in widths.items()
                   for end in ("mean", "scale")}
        shapes = {f"param__{k}": v for k, v in param_shapes(kind, resolved).items()}
        arrays = read_weight_arrays(weights, what, {**scalers, **shapes}, XlarankError,
                                    exact=True)
        for part in widths:
            if (arrays[f"scaler__{part}_scale"] <= 0).any():
                raise XlarankError(f"{weights}: {what} scaler__{part}_scale holds a scale "
                                   "that is not positive")
        self.kind_, self.collection_, self.tile_pad_ = kind, collection, tile_pad
        self.resolved_, self.chosen_ = resolved, card.get("chosen")
        self.params_ = {k.removeprefix("param__"): jax.numpy.asarray(arrays[k],
                                                                     jax.numpy.float32)
                        for k in shapes}
        self.node_scaler_ = Scaler(arrays["scaler__node_mean"], arrays["scaler__node_scale"])
        self.config_scaler_ = (Scaler(arrays["scaler__config_mean"],
                                      arrays["scaler__config_scale"])
                               if kind == "tile" else None)


# What a saved model's weights and scoring read of its settings (`saved_settings`).
SCORED_SETTINGS = ({"hidden": (1, MOST_WIDTH), "op_embed": (1, MOST_WIDTH),
                    "layout_embed": (1, MOST_WIDTH),
                    "sage_blocks": (0, MOST_LAYERS), "eval_configs": (0, None)},
                   ("dropout", "head_dropout"), ("cross_attention",))
