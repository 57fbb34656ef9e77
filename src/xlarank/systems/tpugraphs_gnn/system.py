"""The system: `TpuGraphsGnn`, its settings (`OFFICIAL`), fitting across graphs and inside
one, scoring and its saved files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.compat import jax, jnp, require_jax
from xlarank.data.collections import Collection
from xlarank.data.graph import TileGraph, load_graph
from xlarank.errors import XlarankError
from xlarank.features.jax_common import sampled_layout_configs
from xlarank.systems import (
    LEARNING_RATE,
    MOST_CONFIGS,
    MOST_EPOCHS,
    EpochCallback,
    RankingSystem,
    check_scorable,
    checked_scores,
)
from xlarank.systems.inner import (
    IN_GRAPH,
    IN_GRAPH_FLAGS,
    IN_GRAPH_GRIDS,
    IN_GRAPH_RANGES,
    fit_by_inner_validation,
)
from xlarank.systems.tpugraphs_gnn.batches import (
    Item,
    _bucket,
    _config_chunks,
    _configs_at,
    _largest_batch,
    region_masks,
    skewed_sample,
    uniform_sample,
    union_batch,
)
from xlarank.systems.tpugraphs_gnn.model import init_params, param_shapes
from xlarank.systems.tpugraphs_gnn.stats import (
    GraphArrays,
    MinMax,
    Stats,
    graph_arrays,
    layout_stats,
)
from xlarank.systems.tpugraphs_gnn.train import _jitted

LABEL_SCALE = 1e7       # layout: ListMLE labels are runtime / 1e7 (only their order counts)
INFER_BUDGET_MB = 256
# Layer counts and widths are bounded far past any model's: a count is a loop, and a
# width a shape, before any weight is read (the settings' ranges, a saved card's).
MOST_LAYERS = 100
MOST_WIDTH = 1 << 16

# The in-graph recipe (`xlarank.systems.inner`, the same for every GNN system): IN_GRAPH.

OFFICIAL = {
    "layout": {"epochs": 500, "early_stop": 40, "learning_rate": 1e-3, "clip_norm": 1e-2,
               "configs": 16, "batch": 8, "keep_nodes": 5000, "op_embed": 32, "hidden": 32,
               "gnn_layers": 2, "mlp_layers": 2, "temperature": 1.0, "mse_weight": 0.0,
               "validate_batches": 10, "infer_chunk": 500, **IN_GRAPH},
    "tile": {"epochs": 100, "early_stop": 20, "learning_rate": 1e-3, "clip_norm": 1e-3,
             "configs": 10, "batch": 10, "keep_nodes": 0, "op_embed": 64, "hidden": 64,
             "gnn_layers": 3, "mlp_layers": 2, "temperature": 10.0, "mse_weight": 0.02,
             "validate_batches": 10, "infer_chunk": 500, **IN_GRAPH},
}


class TpuGraphsGnn(RankingSystem):
    """The TpuGraphs paper's baselines: ResModel for layout, EarlyJoinSAGE for tile (see
    the package docstring for settings and deviations)."""

    name = "tpugraphs-gnn"
    epoch_setting = "epochs"
    # Checked when made (`xlarank.systems.check_settings`; None: the official value):
    # epochs 1..100,000, early_stop 0 (off) and up, a learning rate in (0, 10], clip_norm
    # and temperature in (0, 1e6], mse_weight in [0, 1e6], configs 2 and up, batch and
    # validate_batches 1..10,000, keep_nodes 0 (none) and up, widths 1..`MOST_WIDTH`,
    # layers 0..`MOST_LAYERS`, infer_chunk 1 and up, infer_budget_mb 1..1,048,576 (1 TiB),
    # and the in-graph rule's (`IN_GRAPH_RANGES`).
    SETTING_RANGES = {"epochs": (1, MOST_EPOCHS, True, False),
                      "early_stop": (0, MOST_EPOCHS, True, False),
                      "learning_rate": LEARNING_RATE,
                      "clip_norm": (0.0, 1e6, False, True),
                      "configs": (2, MOST_CONFIGS, True, False),
                      "batch": (1, 10_000, True, False),
                      "keep_nodes": (0, MOST_CONFIGS, True, False),
                      "op_embed": (1, MOST_WIDTH, True, False),
                      "hidden": (1, MOST_WIDTH, True, False),
                      "gnn_layers": (0, MOST_LAYERS, True, False),
                      "mlp_layers": (0, MOST_LAYERS, True, False),
                      "temperature": (0.0, 1e6, False, True),
                      "mse_weight": (0.0, 1e6, False, False),
                      "validate_batches": (1, 10_000, True, False),
                      "infer_chunk": (1, MOST_CONFIGS, True, False),
                      "infer_budget_mb": (1, 1 << 20, True, False), **IN_GRAPH_RANGES}
    FLAG_SETTINGS = IN_GRAPH_FLAGS
    GRID_SETTINGS = IN_GRAPH_GRIDS

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
        require_jax()
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

    def _step(self, items, n_graphs, n_configs, rng, lists=1, sizes=(0,) * 5,
              learning_rate=None):
        train_step, _ = _jitted()
        s = self.resolved_
        a, segmented = union_batch(items, n_graphs, n_configs, self.kind_,
                                   int(s["keep_nodes"] or 0), rng, lists,
                                   int(s["gnn_layers"]), sizes)
        self.step_ += 1
        self.params_, self.moments_, loss = train_step(
            self.params_, self.moments_, a, np.float32(self.step_),
            np.float32(s["learning_rate"] if learning_rate is None else learning_rate),
            np.float32(s["clip_norm"]),
            arch=self._arch(segmented))
        return float(loss)

    def _reset_optimizer(self):
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
        """Train on the measured configs ``runtime`` (float64 medians indexed by config
        index) by the in-graph recipe (`IN_GRAPH`): inner validation on a seeded share of
        the measured configs, successive halving over the learning-rate grid, early
        stopping, the best checkpoint kept (or, with ``in_graph_refit``, the chosen rate
        trained again on every measured config for the chosen step count).

        ``history_`` holds one record per checkpoint and ``on_epoch`` gets each while the
        model holds that checkpoint's weights, so it may score with them (`score`,
        `score_rows`): `xlarank.systems.inner.fit_by_inner_validation`, which also says
        what happens with too few measured configs; ``chosen_`` says what was chosen."""
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
        self._start(kind, Stats(node, config))
        s = self.resolved_
        arrays = graph_arrays(graph, self.stats_)
        cfg_all = self.stats_.config.apply(raw)
        label_all = measured / LABEL_SCALE if kind == "layout" else measured
        lists = int(s["batch"])

        def draw(part_runtime: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            # The lists are drawn from one graph: one forward pass over lists x
            # per_list configs pools exactly as `lists` copies of the graph would.
            per_list = min(int(s["configs"]), len(part_runtime))
            return np.concatenate([self._sample(part_runtime, per_list, rng)
                                   for _ in range(lists)])

        def step(picks: np.ndarray, rng: np.random.Generator, rate: float) -> float:
            item = Item(arrays, cfg_all[picks], label_all[picks])
            return self._step([item], 1, len(picks), rng, lists=lists, learning_rate=rate)

        def tau(positions: np.ndarray) -> float:
            return self._inner_tau(arrays, cfg_all[positions], measured[positions])

        self.chosen_ = fit_by_inner_validation(self, measured, s, draw, step, tau, on_epoch)
        return self

    def _inner_tau(self, arrays: GraphArrays, cfg: np.ndarray, runtime: np.ndarray) -> float:
        """Kendall tau of the current weights on normalised configs cfg against runtime;
        0 where it is undefined."""
        from xlarank.metrics import kendall_tau

        tau = kendall_tau(-self._outputs(arrays, cfg), runtime)
        return 0.0 if np.isnan(tau) else float(tau)

    def _outputs(self, arrays: GraphArrays, cfg: np.ndarray) -> np.ndarray:
        """float64 (len(cfg),): the model's outputs (higher = slower) for the normalised
        configs cfg (layout (b, nc, Fc), tile (b, Fc)) of one graph."""
        _, evaluate = _jitted()
        chunk = self._chunk_for(arrays, len(cfg))
        out = np.empty(len(cfg))
        for start in range(0, len(cfg), chunk):
            part = cfg[start:start + chunk]
            item = Item(arrays, part, np.zeros(len(part)))
            a, _ = union_batch([item], 1, chunk, self.kind_,
                               hops=int(self.resolved_["gnn_layers"]))
            result, _ = evaluate(self.params_, a, arch=self._arch())
            out[start:start + len(part)] = np.asarray(result, np.float64)[0, :len(part)]
        return out

    def score_rows(self, graph, rows: np.ndarray) -> np.ndarray:
        """float64 (len(rows),): the scores (higher is faster) of the configs ``rows`` of
        graph only, as `score` gives them."""
        rows = np.asarray(rows, np.int64)
        if isinstance(graph, TileGraph):
            raw = graph.config_feat[rows]
        else:
            raw = (graph.node_config_feat[rows] if graph.node_config_feat is not None
                   else _configs_at(graph, rows))
        return -self._outputs(graph_arrays(graph, self.stats_), self.stats_.config.apply(raw))

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
        check_scorable(self, graph)
        kind = self.kind_
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
        return checked_scores(self, graph, -out)

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
            {"kind": self.kind_, "resolved": self.resolved_,
             "chosen": getattr(self, "chosen_", None)}, indent=2))

    def _load(self, out_dir: Path) -> None:
        """The card, then the statistics, then the weights, each checked against what
        the one before says (XlarankError naming the file): weights of exactly the
        shapes the settings and statistics give, read after their headers are."""
        require_jax()
        from xlarank.features.embedding import read_weight_arrays
        from xlarank.files import read_structured

        path = Path(out_dir) / "gnn.json"
        card = read_structured(path, "tpugraphs-gnn card", XlarankError)
        kind = card.get("kind") if isinstance(card, dict) else None
        if kind not in ("layout", "tile"):
            raise XlarankError(f"{path}: not a tpugraphs-gnn card (kind {kind!r}, not "
                               "layout or tile)")
        resolved = saved_settings(path, card.get("resolved"), SCORED_SETTINGS)
        weights, what = Path(out_dir) / "weights.npz", "tpugraphs-gnn weights"
        widths = {"node": 140, "config": 24 if kind == "tile" else 18}
        bounds = {f"stats__{part}_{end}": (width,) for part, width in widths.items()
                  for end in ("low", "high")}
        stats = Stats.from_arrays({k.removeprefix("stats__"): v for k, v in
                                   read_weight_arrays(weights, what, bounds, XlarankError,
                                                      finite=False).items()})
        for part, minmax in (("node", stats.node), ("config", stats.config)):
            keep = minmax.keep
            if (np.isnan(minmax.low).any() or np.isnan(minmax.high).any()
                    or not np.isfinite(minmax.low[keep]).all()
                    or not np.isfinite(minmax.high[keep]).all()):
                raise XlarankError(f"{weights}: {what} stats__{part}_low/high hold a value "
                                   "that is not finite (NaN, or inf where a column varies)")
        shapes = param_shapes(kind, len(stats.node.keep), len(stats.config.keep),
                              {k: int(resolved[k]) for k in SCORED_SETTINGS[0]})
        params = read_weight_arrays(weights, what, {f"param__{k}": v for k, v in shapes.items()},
                                    XlarankError, exact=True,
                                    others=(*bounds, "stats__node_keep", "stats__config_keep"))
        self.kind_, self.resolved_, self.chosen_ = kind, resolved, card.get("chosen")
        self.stats_ = stats
        self.params_ = {k.removeprefix("param__"): jax.numpy.asarray(v, jax.numpy.float32)
                        for k, v in params.items()}


# What a saved model's scoring reads of its settings: (whole numbers with the range each
# may lie in, numbers, flags); the bounds are `MOST_LAYERS` and `MOST_WIDTH`.
SCORED_SETTINGS = ({"op_embed": (1, MOST_WIDTH), "hidden": (1, MOST_WIDTH),
                    "gnn_layers": (0, MOST_LAYERS), "mlp_layers": (0, MOST_LAYERS),
                    "infer_chunk": (1, None), "infer_budget_mb": (1, None)},
                   ("temperature", "mse_weight"), ())


def saved_settings(path: Path, resolved, scored: tuple[dict, tuple, tuple]) -> dict:
    """A GNN card's ``resolved`` settings (from ``path``) if it is a table in which each
    setting of ``scored`` (whole numbers in their range, finite numbers, flags) is of its
    kind; XlarankError naming the file and the setting otherwise."""
    if not isinstance(resolved, dict):
        raise XlarankError(f"{path}: resolved is not a table of settings")
    whole, numbers, flags = scored

    def number(value) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)
                or isinstance(value, float) and math.isfinite(value))

    for key, (least, most) in whole.items():
        value = resolved.get(key)
        if (not number(value) or isinstance(value, float) and not value.is_integer()
                or value < least or most is not None and value > most):
            span = f"in {least}..{most}" if most is not None else f">= {least}"
            raise XlarankError(f"{path}: resolved {key} {value!r} is not a whole number "
                               f"{span}")
    for key in numbers:
        if not number(resolved.get(key)):
            raise XlarankError(f"{path}: resolved {key} {resolved.get(key)!r} is not a "
                               "finite number")
    for key in flags:
        if not isinstance(resolved.get(key), bool):
            raise XlarankError(f"{path}: resolved {key} {resolved.get(key)!r} is not true "
                               "or false")
    return resolved

