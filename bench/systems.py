"""xlarank beside the published systems: one run, the same data and splits for every system.

Systems (`xlarank.systems.SYSTEMS`): xlarank (its default feature and booster specs; in-graph
its graph-local booster), tpugraphs-gnn (the TpuGraphs paper's baselines in jax: ResModel
for layout, EarlyJoinSAGE for tile), gru (the GRU runtime model with its readout) and hybrid
(graph metrics + trained gnn columns + HistGradientBoosting). Peers for scale: random order
and the config-aggregates XGBoost ranker (models/baseline.toml).

Parts:
- synthetic: an `xlarank synth` tree (the demo preset); per collection each system trains on
  the train split and scores the valid split; the collection's headline metric (layout
  Kendall tau, tile 1 - slowdown@5) mean and sd over seeds, training wall seconds, the
  peak RSS of the process that trained it (ru_maxrss: the libraries' native memory
  included; one fresh process per system and collection) and milliseconds to score 1,000
  configs. Synthetic figures show learning under our own cost model, not TpuGraphs.
- ingraph: the real unet3d sample, its distinct configs split at random, a share (0.5,
  0.2, 0.1) measured and the rest ranked; Kendall tau on the held-out distinct configs,
  training wall and CPU seconds, and (systems that checkpoint) the held-out tau at each
  checkpoint and the time to come within 0.01 of the returned model's; a PNG of those
  curves. Every system trains on the measured configs only.
- cross: the synthetic tree again, every stepped system by the cross-graph rule (the
  in-graph rule's twin: a seeded 20% of the train files, at most 25, held out as inner
  validation; the headline on them after each epoch decides the stop and the kept epoch
  by the same patience and min gain), its held-out headline at each epoch on the valid
  split (at most 25 files) for the report only, and the CPU seconds to its own plateau
  beside xlarank's one fit; a PNG of those curves. The synthetic part hands the valid
  split to fit (tpugraphs-gnn's early stopping and competition-gnn's best epoch read it);
  this part does not.
- scale: a seeded sample of the `real` synth preset's train files (drawn by index, so the
  size mix is the preset's), per GNN system and collection: one fit of a few epochs timed
  epoch by epoch, the first epoch (one-off costs included) and the marginal one, scaled to
  the whole train split, peak RSS, and each system's own epochs projected from them
  (`authors_epochs`; at most: early stopping may end sooner).

GNN epochs are cut for the synthetic part (settings in the JSON beside each row); the
scale part says what each system's own epochs would cost here. In-graph, every system with
training steps (tpugraphs-gnn, competition-gnn, gru, the hybrid's GNN) runs the one rule
of `xlarank.systems.inner` (inner validation, a learning-rate grid, early stopping) and
its held-out tau at each checkpoint is recorded against its training seconds, for the
report only.

    python bench/systems.py --data data/synth-demo --out bench/results/systems.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from provenance import write_record
from xlarank.evaluate import graph_headline
from xlarank.systems.cross import (
    CROSS_INNER_SHARE,
    CROSS_MOST_GRAPHS,
    fit_by_cross_validation,
)

ROOT = Path(__file__).resolve().parents[1]
UNET3D = "npz/layout/xla/default/train/unet3d.npz"
SHARES = (0.5, 0.2, 0.1)
THREADS = 2
# Synthetic-part settings, per kind of collection: the GNNs' official epochs (500 layout,
# 100 tile) do not fit a bench (the scale part projects what they cost); a tile epoch
# over the demo's 400 kernels is ~10 s for tpugraphs-gnn, a layout epoch ~1.5 s.
SYNTH_SETTINGS = {
    "tpugraphs-gnn": {"layout": {"epochs": 20, "early_stop": 10},
                      "tile": {"epochs": 5, "early_stop": 5}},
    "gru": {"layout": {"epochs": 10}, "tile": {"epochs": 10}},
    "hybrid": {"layout": {"gnn_epochs": 3}, "tile": {"gnn_epochs": 3}},
    # The original's 750-1,000 epochs (layout) and 100,000 steps (tile) do not fit either;
    # eval_steps at the demo's size so that its best-checkpoint rule still acts.
    "competition-gnn": {"layout": {"epochs": 20, "eval_steps": 50},
                        "tile": {"epochs": 3, "eval_steps": 400}},
}
# In-graph rows beside the defaults: (label, system, settings, shares, seeds). None now:
# the in-graph rule chooses every stepped system's learning rate and steps by inner
# validation.
INGRAPH_VARIANTS: list = []
PEERS = {"peer: config aggregates (XGBoost pairwise)": ("xlarank", {"booster_spec": "baseline"})}
# The official trainers' epoch counts (google-research-datasets/tpu_graphs): layout 50
# with early stop 25 since ddd187c (2023-11-11, HEAD), 500 with early stop 40 before
# (422a990, 2023-08-29, the version tpugraphs-gnn follows); tile 100 with early stop 20
# (unchanged since 422a990).
OFFICIAL_EPOCHS = {"tile": {"HEAD": 100},
                   "layout": {"HEAD ddd187c": 50, "422a990": 500}}
# The cross-graph rule (the curves part) is xlarank.systems.cross's, each author's
# learning rate. The epoch budget is what one core affords per system and collection; a
# curve still rising at its end says so (best_held_in_budget, last_held).
CROSS_EPOCHS = {"layout": 30, "tile": 8}
# Tile kernels of the counts part: 4x the demo's, what one core runs in about half an hour
# for the three cheaper stepped systems (the real preset's 5,709 would take 14x the demo's).
COUNTS_TILE_FILES = 1600
CROSS_AFTER_STOP = 8   # epochs run past the rule's stop, to show what going on gives
SCALE_EPOCHS = 4        # epochs timed in one fit: the first and three marginal ones
SCALE_SYSTEMS = ("tpugraphs-gnn", "gru", "hybrid", "competition-gnn")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def per_graph(metrics: list[float]) -> dict:
    """The headline over graphs (mean) and, since a few very slow tile kernels decide the
    mean of 1 - slowdown@5, the per-graph median and the share of graphs whose value is at
    least 0.95 (tile: a config within 5% of the best among the top five)."""
    values = np.asarray(metrics, np.float64)
    return {"metric": float(values.mean()), "median": float(np.median(values)),
            "within_5pct": float((values >= 0.95).mean())}


def synthetic_task(task: dict) -> dict:
    """One system on one collection, every seed, in this (fresh) process."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.data.graph import load_graph
    from xlarank.score import submission_rows
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(THREADS)
    collection = get_collection(task["collection"])
    submission: list = []
    train = split_files(task["data"], collection, "train")
    valid = split_files(task["data"], collection, "valid")
    graphs = [load_graph(f, collection) for f in valid]
    rows = []
    for seed in task["seeds"]:
        if task["system"] == "random":
            rng = np.random.default_rng(seed)
            metrics = [graph_headline(g, rng.random(g.n_configs))
                       for g in graphs]
            rows.append({"seed": seed, **per_graph(metrics), "train_s": 0.0,
                         "score_ms_per_1000": 0.0, "history": []})
            continue
        system = get_system(task["system"])(seed=seed, threads=THREADS, **task["settings"])
        started = time.perf_counter()
        system.fit(train, collection, valid)
        train_s = time.perf_counter() - started
        started = time.perf_counter()
        scores = [system.score(g) for g in graphs]
        score_s = time.perf_counter() - started
        metrics = [graph_headline(g, s) for g, s in zip(graphs, scores)]
        rows.append({"seed": seed, **per_graph(metrics),
                     "train_s": round(train_s, 2),
                     "score_ms_per_1000": round(1000 * score_s * 1000
                                                / sum(g.n_configs for g in graphs), 2),
                     "history": system.history_})
        if seed == task["seeds"][0]:
            # The test split into the competition CSV's rows, as `xlarank submit` writes.
            submission = submission_rows(split_files(task["data"], collection, "test"),
                                         collection, system)
    return {"rows": rows, "peak_rss_mb": round(peak_rss_mb(), 1),
            "submission": submission if task["system"] != "random" else []}


def plateau_time(curve: list[dict], final: float, within: float = 0.01,
                 clock: str = "seconds") -> float | None:
    """Training time (``clock``: "seconds" wall, "cpu_seconds" process CPU) of the first
    checkpoint whose held-out tau is within ``within`` of ``final`` (the returned model's
    held-out tau): the time to come within 0.01 of its own plateau. None without
    checkpoints."""
    for point in curve:
        if point["held_tau"] is not None and point["held_tau"] >= final - within:
            return point[clock]
    return None


def held_tau_recorder(system, graph, rows: np.ndarray, truth: np.ndarray, curve: list,
                      aside: list) -> Callable[[dict], None]:
    """The ``on_epoch`` of an in-graph fit that appends, at each checkpoint with an inner
    tau (or of a refit), its record and the Kendall tau of the system's scores of the
    held-out configs ``rows`` against ``truth`` (float64, their runtimes) to ``curve``,
    and the wall and CPU seconds it spent to ``aside`` (so they are not training time).
    The held-out configs are scored after the checkpoint's record is made: a curve for
    the report only."""
    from xlarank.metrics import kendall_tau

    def checkpoint(record: dict) -> None:
        if record.get("inner_tau") is None and record.get("phase") != "refit":
            return
        begun, cpu = time.perf_counter(), time.process_time()
        tau = kendall_tau(system.score_rows(graph, rows), truth)
        curve.append({k: record.get(k) for k in ("epoch", "learning_rate", "phase",
                                                 "inner_tau", "seconds", "cpu_seconds")}
                     | {"held_tau": round(float(np.nan_to_num(tau)), 4)})
        aside[0] += time.perf_counter() - begun
        aside[1] += time.process_time() - cpu
    return checkpoint


def ingraph_task(task: dict) -> dict:
    """One system on unet3d, every share and seed of the task, in this (fresh) process.

    Systems that checkpoint in-graph (records with an ``inner_tau``: all but xlarank) have
    the held-out tau of each checkpoint recorded beside its training seconds: a curve for
    the report only, since the held-out configs are scored in the callback, after the
    checkpoint's record is made, and never reach the fit."""
    from xlarank.data.graph import load_graph
    from xlarank.evaluate import in_graph_split
    from xlarank.metrics import kendall_tau
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(task.get("threads", THREADS))
    graph = load_graph(task["path"])
    out = []
    for share in task["shares"]:
        for seed in task["seeds"]:
            split = in_graph_split(graph, share, seed)
            held_first, held_median = split.held_first, split.held_median
            curve: list[dict] = []
            aside = [0.0, 0.0]  # wall, CPU seconds spent scoring held-out configs (curve)
            chosen = None
            started, cpu_started = time.perf_counter(), time.process_time()
            if task["system"] == "random":
                score = np.random.default_rng(seed).random(graph.n_configs)
                history = []
                train_s = train_cpu = 0.0
            else:
                system = get_system(task["system"])(seed=seed, threads=task.get(
                    "threads", THREADS), **task.get("settings", {}))

                system.fit_graph(graph, split.measured_medians(), on_epoch=held_tau_recorder(
                    system, graph, held_first, held_median, curve, aside))
                train_s = time.perf_counter() - started - aside[0]
                train_cpu = time.process_time() - cpu_started - aside[1]
                score, history = system.score(graph), system.history_
                chosen = getattr(system, "chosen_", None)
            tau = round(float(np.nan_to_num(kendall_tau(score[held_first], held_median))), 4)
            seconds = time.perf_counter() - started - aside[0]
            if task["system"] == "xlarank":
                # Its graph-local booster trains when it first scores (BoosterSystem).
                train_s, train_cpu = seconds, time.process_time() - cpu_started
            out.append({"share": share, "seed": seed, "tau": tau,
                        "train_s": round(train_s, 2), "train_cpu_s": round(train_cpu, 2),
                        "seconds": round(seconds, 2),
                        "chosen": chosen, "curve": curve,
                        "plateau_s": plateau_time(curve, tau) if curve else round(train_s, 2),
                        "plateau_cpu_s": (plateau_time(curve, tau, clock="cpu_seconds")
                                          if curve else round(train_cpu, 2)),
                        "loss_first_last": ([history[0]["train_loss"],
                                             history[-1]["train_loss"]] if history else None)})
    return {"rows": out, "peak_rss_mb": round(peak_rss_mb(), 1)}


def scale_task(task: dict) -> dict:
    """Wall and CPU seconds of a system's fit of ``SCALE_EPOCHS`` epochs over a sample of
    real-sized files: the first epoch (with the one-off costs: statistics, loading,
    compiling) and the marginal epoch (the median of the later ones). Systems that report
    no epochs (hybrid) are fitted at 1 and 2 epochs, and the difference is the marginal."""
    from xlarank.data.collections import get_collection
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(THREADS)
    collection = get_collection(task["collection"])
    files = [Path(f) for f in task["files"]]
    key = get_system(task["system"]).epoch_setting
    extra = {"early_stop": 0} if task["system"] == "tpugraphs-gnn" else {}

    def fit(epochs: int) -> tuple[list[float], list[float]]:
        """(wall, CPU) seconds from the start to each epoch's end; the fit's end last."""
        wall: list[float] = []
        cpu: list[float] = []

        def mark(_=None):
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)

        system = get_system(task["system"])(seed=0, threads=THREADS, **{key: epochs}, **extra)
        started, cpu_started = time.perf_counter(), time.process_time()
        # The hybrid fits its booster after every epoch when asked for epochs (so that
        # a checkpoint scores): its epochs are timed by whole fits instead.
        system.fit(files, collection, on_epoch=None if task["system"] == "hybrid" else mark)
        mark()
        return wall, cpu

    out = {"epochs_timed": SCALE_EPOCHS}
    wall, cpu = fit(SCALE_EPOCHS)
    for name, ends in (("", wall), ("cpu_", cpu)):
        if len(ends) == SCALE_EPOCHS + 1:
            first, marginal = ends[0], float(np.median(np.diff(ends[:-1])))
        else:
            out["epochs_timed"] = 2
            first = fit(1)[name == "cpu_"][-1]
            marginal = max(fit(2)[name == "cpu_"][-1] - first, 0.0)
        out[f"{name}first_epoch_s"] = round(first, 2)
        out[f"{name}marginal_epoch_s"] = round(marginal, 3)
    out["fit_s"] = round(wall[-1], 2)
    return {**out, "peak_rss_mb": round(peak_rss_mb(), 1)}


def held_out_files(files: list[Path]) -> list[Path]:
    """The valid split's files a curve is scored on: every one, or a fixed seeded
    ``CROSS_MOST_GRAPHS`` of them (the same for every system and seed)."""
    files = sorted(files)
    if len(files) <= CROSS_MOST_GRAPHS:
        return files
    keep = np.random.default_rng(6).choice(len(files), CROSS_MOST_GRAPHS, replace=False)
    return [files[i] for i in sorted(keep)]


def cross_fit(system, train_files: list[Path], collection, held: list, seed: int) -> dict:
    """``system`` (built with its epoch budget) fit on ``train_files`` by the cross-graph
    rule (`xlarank.systems.cross.fit_by_cross_validation`), going on ``CROSS_AFTER_STOP``
    epochs past the rule's stop for the curve, with the ``held`` graphs' headline at each
    checkpoint (mean and median over graphs; their scoring is not training time).
    Returns the curve, the kept and stopped positions, the kept epoch's held-out scores
    (one float64 array per held graph) and its figures."""
    got = fit_by_cross_validation(system, train_files, collection, seed=seed, held=held,
                                  after_stop=CROSS_AFTER_STOP, refit=False)
    curve = []
    for point, scores in zip(got.curve, got.held_scores):
        values = per_graph([graph_headline(g, s) for g, s in zip(held, scores)])
        curve.append({**point, "held": round(values["metric"], 4),
                      "held_median": round(values["median"], 4)})
    kept, stopped = got.kept, got.stopped
    figure = curve[kept]["held"]
    plateau = next(p for p in curve[:stopped + 1] if p["held"] >= figure - 0.01)
    return {"curve": curve, "kept": kept, "stopped": stopped,
            "scores": got.held_scores[kept], "metric": figure,
            "median": curve[kept]["held_median"],
            "kept_epoch": curve[kept]["epoch"], "stopped_epoch": curve[stopped]["epoch"],
            "train_s": curve[stopped]["seconds"],
            "train_cpu_s": curve[stopped]["cpu_seconds"],
            "plateau_cpu_s": plateau["cpu_seconds"],
            "best_held_in_budget": max(p["held"] for p in curve),
            "last_held": curve[-1]["held"], "fit_files": len(got.fit_files),
            "inner_files": len(got.inner_files)}


def cross_task(task: dict) -> dict:
    """One system on one collection and seed by the cross-graph rule (`cross_fit`), in this
    (fresh) process: systems with epochs train on the inner-training files for the whole
    epoch budget. Systems without epochs (xlarank, random) train once on the whole train
    split, as in-graph, where they take every measured config."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.data.graph import load_graph
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(task["threads"])
    collection = get_collection(task["collection"])
    kind = "tile" if collection.is_tile else "layout"
    seed = task["seed"]
    train = split_files(task["data"], collection, "train")
    held = [load_graph(f, collection) for f in held_out_files(
        split_files(task["data"], collection, "valid"))]
    out = {"collection": collection.id, "system": task["system"], "seed": seed,
           "fit_files": len(train), "inner_files": 0, "held_files": len(held),
           "curve": []}
    if task["system"] == "random":
        rng = np.random.default_rng(seed)
        values = [graph_headline(g, rng.random(g.n_configs)) for g in held]
        return {**out, **per_graph(values), "train_s": 0.0, "train_cpu_s": 0.0,
                "peak_rss_mb": round(peak_rss_mb(), 1)}
    key = get_system(task["system"]).epoch_setting
    settings = {key: CROSS_EPOCHS[kind]} if key else {}
    system = get_system(task["system"])(seed=seed, threads=task["threads"], **settings)
    if key is None:
        started, cpu_started = time.perf_counter(), time.process_time()
        system.fit(train, collection)
        train_s = time.perf_counter() - started
        train_cpu = time.process_time() - cpu_started
        return {**out, **per_graph([graph_headline(g, system.score(g))
                                    for g in held]),
                "train_s": round(train_s, 2), "train_cpu_s": round(train_cpu, 2),
                "peak_rss_mb": round(peak_rss_mb(), 1)}
    got = cross_fit(system, train, collection, held, seed)
    got.pop("scores")
    return {**out, **got, "settings": settings, "peak_rss_mb": round(peak_rss_mb(), 1)}


def cross_record(data: str, seeds: list[int], threads: int, results: list[dict],
                 not_run: list | None) -> dict:
    """A cross-graph part's record: its data, seeds and the rule's settings beside the rows
    (`run_cross`) and the units it did not run."""
    return {"data": data, "seed_list": seeds, "threads": threads, "epochs": CROSS_EPOCHS,
            "inner_share": CROSS_INNER_SHARE, "most_graphs": CROSS_MOST_GRAPHS,
            "results": results, "not_run": not_run or []}


def read_partial(partial: Path | None, keys: tuple[str, ...]) -> dict:
    """The rows a cut-short run appended to ``partial`` (JSON lines), by the tuple of
    their ``keys`` values; {} without the file."""
    done = {}
    if partial is not None and partial.exists():
        for line in partial.read_text().splitlines():
            row = json.loads(line)
            done[tuple(row[k] for k in keys)] = row
    return done


def run_cross(data: Path, seeds: list[int], systems: list[str], collections: list[str],
              partial: Path | None = None, threads: int = THREADS,
              not_run: list | None = None, leave_out: list | None = None) -> list[dict]:
    """Every collection x system x seed by `cross_task`, each in a fresh process; rows go
    to ``partial`` (JSON lines) as they come, and units already there are not run again.
    With a ``not_run`` list, units missing from ``partial`` are not run but appended there
    as [collection, system, seed], so a record can be built from the rows a run made.
    Units in ``leave_out`` (as ``not_run`` lists them) are neither run nor read."""
    from xlarank.data.collections import COLLECTIONS, get_collection

    wanted = [get_collection(c).id for c in collections] if collections else [
        c.id for c in COLLECTIONS]
    done = read_partial(partial, ("collection", "system", "seed"))
    left_out = {tuple(unit) for unit in leave_out or []}
    rows = []
    for collection in wanted:
        for system in [*systems, "random"]:
            for seed in seeds:
                if (collection, system, seed) in left_out:
                    continue
                if (collection, system, seed) in done:
                    rows.append(done[collection, system, seed])
                    continue
                if not_run is not None:
                    not_run.append([collection, system, seed])
                    continue
                row = in_fresh_process(cross_task, {
                    "data": str(data), "collection": collection, "system": system,
                    "seed": seed, "threads": threads})
                rows.append(row)
                if partial is not None:
                    with open(partial, "a") as handle:
                        handle.write(json.dumps(row) + "\n")
                print(f"cross-graph {collection:20s} {system:16s} seed {seed} "
                      f"{row['metric']:+.4f} (kept epoch {row.get('kept_epoch')}, stopped "
                      f"{row.get('stopped_epoch')}, best in budget "
                      f"{row.get('best_held_in_budget')}) train {row['train_cpu_s']:.1f} "
                      "CPU s", flush=True)
    return cross_summary(rows)


def cross_summary(rows: list[dict]) -> list[dict]:
    """Per (collection, system): the metric over seeds, CPU seconds to the rule's stop and
    to the system's own plateau, and xlarank's CPU seconds where its one fit reaches
    that plateau (less 0.01; None where it does not) with the ratio of the two."""
    out = []
    keys = list(dict.fromkeys((r["collection"], r["system"]) for r in rows))
    for collection, system in keys:
        mine = [r for r in rows if (r["collection"], r["system"]) == (collection, system)]
        ours = [r for r in rows if (r["collection"], r["system"]) == (collection, "xlarank")]
        entry = {"collection": collection, "system": system,
                 "seeds": [r["seed"] for r in mine],
                 "metric": summary([r["metric"] for r in mine]),
                 "median": summary([r["median"] for r in mine]),
                 "train_cpu_s": round(float(np.mean([r["train_cpu_s"] for r in mine])), 2),
                 "plateau_cpu_s": round(float(np.mean([r.get("plateau_cpu_s",
                                                             r["train_cpu_s"])
                                                       for r in mine])), 2),
                 "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
                 "per_seed": [{k: r.get(k) for k in
                               ("seed", "metric", "kept_epoch", "stopped_epoch",
                                "best_held_in_budget", "last_held", "train_cpu_s",
                                "plateau_cpu_s", "fit_files", "inner_files", "held_files")}
                              for r in mine],
                 "curves": {str(r["seed"]): r["curve"] for r in mine if r["curve"]}}
        if ours and system not in ("xlarank", "random"):
            ours_metric = float(np.mean([r["metric"] for r in ours]))
            ours_cpu = float(np.mean([r["train_cpu_s"] for r in ours]))
            reached = ours_metric >= entry["metric"]["mean"] - 0.01
            entry["xlarank_cpu_s_to_plateau"] = round(ours_cpu, 2) if reached else None
            entry["plateau_ratio"] = (round(entry["plateau_cpu_s"] / max(ours_cpu, 0.01), 1)
                                      if reached else None)
        out.append(entry)
    return out


# One colour per system in every curve figure (a system's learning rates share it).
SYSTEM_COLOURS = {"xlarank": "C0", "tpugraphs-gnn": "C1", "gru": "C2", "hybrid": "C3",
                  "competition-gnn": "C4", "random": "C7"}


def colour_of(name: str) -> str:
    return SYSTEM_COLOURS.get(name, "C9")


def plot_rates(ax, curve: list[dict], name: str, floor: float = 0.1) -> None:
    """One line per learning rate of an in-graph curve, in the system's colour with a
    style per rate: held-out tau against CPU s."""
    styles = ["-", "--", ":", "-."]
    for i, rate in enumerate(dict.fromkeys(p["learning_rate"] for p in curve)):
        points = [p for p in curve if p["learning_rate"] == rate]
        ax.plot([max(p.get("cpu_seconds", p.get("seconds", 0.0)), floor) for p in points],
                [p["held_tau"] for p in points], marker=".", color=colour_of(name),
                linestyle=styles[i % len(styles)], label=f"{name} lr {rate:g}")


def finish_curves(fig, axes, title: str, path: Path) -> str:
    """Log time axes, grid and legends, the title, and the figure saved at ``path``."""
    for ax in axes:
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def cross_curves(results: list[dict], out_dir: Path, stem: str) -> str | None:
    """bench/results/<stem>-cross-curve.png: per collection, the held-out headline at each
    epoch of seed 0's run (the first seed's) against its training CPU seconds (log axis),
    the rule's kept checkpoint starred; systems without epochs are a point per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    collections = list(dict.fromkeys(r["collection"] for r in results))
    if not collections:
        return None
    fig, axes = plt.subplots(1, len(collections), figsize=(max(6.4, 4.2 * len(collections)),
                                                          3.8), squeeze=False)
    for ax, collection in zip(axes[0], collections):
        for row in (r for r in results if r["collection"] == collection):
            curve = next(iter(row["curves"].values()), None)
            if curve:
                line, = ax.plot([max(p["cpu_seconds"], 0.1) for p in curve],
                                [p["held"] for p in curve], marker=".", label=row["system"],
                                color=colour_of(row["system"]))
                first = row["per_seed"][0]
                kept = curve[first["kept_epoch"] - 1]
                ax.scatter([max(kept["cpu_seconds"], 0.1)], [kept["held"]], marker="*",
                           s=120, color=line.get_color(), zorder=4)
            else:
                ax.scatter([max(p["train_cpu_s"], 0.1) for p in row["per_seed"]],
                           [p["metric"] for p in row["per_seed"]], label=row["system"],
                           color=colour_of(row["system"]), zorder=3)
        ax.set_title(f"{collection}", fontsize=9)
        ax.set_xlabel("training CPU seconds (1 core)")
    axes[0][0].set_ylabel("held-out headline (tau; tile 1 - slowdown@5)")
    return finish_curves(fig, axes[0], "Cross-graph: held-out headline at each epoch against "
                         "training time; star: the rule's kept checkpoint\n(for the report "
                         "only: it never steers training)", out_dir / f"{stem}-cross-curve.png")


def in_fresh_process(fn, task: dict) -> dict:
    """fn(task) in a new spawned process, so its peak RSS is its own."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(fn, (task,))


def summary(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(a.mean()), 4),
            "sd": round(float(a.std(ddof=1)), 4) if len(a) > 1 else 0.0,
            "min": round(float(a.min()), 4), "per_seed": [round(float(v), 4) for v in a]}


def run_synthetic(data: Path, seeds: list[int], systems: list[str],
                  collections: list[str] | None = None) -> list[dict]:
    from xlarank.data.collections import COLLECTIONS, get_collection

    wanted = [get_collection(c) for c in collections] if collections else list(COLLECTIONS)

    named = {name: (name, SYNTH_SETTINGS.get(name)) for name in systems}
    named.update(PEERS)
    named["random"] = ("random", {})
    results = []
    for collection in wanted:
        kind = "tile" if collection.is_tile else "layout"
        for label, (system, by_kind) in named.items():
            settings = by_kind[kind] if by_kind and kind in by_kind else (by_kind or {})
            task = {"data": str(data), "collection": collection.id, "system": system,
                    "settings": settings, "seeds": seeds}
            got = in_fresh_process(synthetic_task, task)
            rows = got["rows"]
            results.append({"collection": collection.id, "system": label,
                            "settings": settings,
                            "metric": summary([r["metric"] for r in rows]),
                            "median": summary([r["median"] for r in rows]),
                            "within_5pct": summary([r["within_5pct"] for r in rows]),
                            "train_s": round(float(np.mean([r["train_s"] for r in rows])), 2),
                            "peak_rss_mb": got["peak_rss_mb"],
                            "score_ms_per_1000": round(float(np.mean(
                                [r["score_ms_per_1000"] for r in rows])), 2),
                            "history_seed0": rows[0]["history"],
                            "submission_rows": got["submission"]})
            print(f"synthetic {collection.id:20s} {label:45s} "
                  f"{results[-1]['metric']['mean']:+.4f} ± {results[-1]['metric']['sd']:.4f}"
                  f"  train {results[-1]['train_s']:7.1f} s  rss {got['peak_rss_mb']:7.0f} MB",
                  flush=True)
    return results


def run_ingraph(samples: Path, seeds: list[int], systems: list[str],
                shares: tuple[float, ...] = SHARES, partial: Path | None = None,
                threads: int = THREADS) -> list[dict]:
    """Every system x share x seed in a fresh process of its own (its peak RSS, its
    compiles); each row is appended to ``partial`` (JSON lines) as it comes, so a long run
    cut short keeps what it measured, and a unit already there is not run again (the
    same code made it: `ingraph_task`)."""
    done = read_partial(partial, ("system", "share", "seed"))
    results = []
    runs = [(name, name, {}, shares, seeds) for name in [*systems, "random"]]
    runs += [v for v in INGRAPH_VARIANTS if v[1] in systems]
    for label, system, settings, run_shares, run_seeds in runs:
        for share in run_shares:
            rows, rss = [], []
            for seed in run_seeds:
                if (label, share, seed) in done:
                    row = done[label, share, seed]
                    rows.append(row)
                    rss.append(row["peak_rss_mb"])
                    continue
                task = {"path": str(samples / UNET3D), "system": system, "shares": [share],
                        "seeds": [seed], "settings": settings, "threads": threads}
                got = in_fresh_process(ingraph_task, task)
                rows += got["rows"]
                rss.append(got["peak_rss_mb"])
                if partial is not None:
                    with open(partial, "a") as handle:
                        handle.write(json.dumps({"system": label, "peak_rss_mb":
                                                 got["peak_rss_mb"], **got["rows"][0]}) + "\n")
                print(f"in-graph unet3d {label:25s} share {share:.1f} seed {seed} "
                      f"tau {rows[-1]['tau']:+.4f} train {rows[-1]['train_s']:.1f} s "
                      f"chosen {rows[-1]['chosen']}", flush=True)
            results.append(ingraph_row(label, share, settings, rows, max(rss)))
    return results


def ingraph_row(label: str, share: float, settings: dict, rows: list[dict],
                rss: float) -> dict:
    row = {"system": label, "share": share, "settings": settings,
           "tau": summary([r["tau"] for r in rows]),
           "seconds": round(float(np.mean([r["seconds"] for r in rows])), 2),
           "train_s": round(float(np.mean([r["train_s"] for r in rows])), 2),
           "train_cpu_s": round(float(np.mean([r["train_cpu_s"] for r in rows])), 2),
           "plateau_s": round(float(np.mean([r["plateau_s"] or r["train_s"]
                                             for r in rows])), 2),
           "plateau_cpu_s": round(float(np.mean([r["plateau_cpu_s"] or r["train_cpu_s"]
                                                 for r in rows])), 2),
           "peak_rss_mb": rss, "chosen": [r["chosen"] for r in rows],
           "per_seed": [{k: r[k] for k in ("seed", "tau", "train_s", "train_cpu_s",
                                            "plateau_s", "plateau_cpu_s")} for r in rows],
           "curves": {str(r["seed"]): r["curve"] for r in rows if r["curve"]},
           "loss_first_last_seed0": rows[0]["loss_first_last"]}
    print(f"in-graph unet3d {label:25s} share {share:.1f} "
          f"{row['tau']['mean']:+.4f} ± {row['tau']['sd']:.4f} "
          f"(worst {row['tau']['min']:+.4f})  train {row['train_s']:.1f} s "
          f"({row['train_cpu_s']:.1f} s CPU), within 0.01 of its plateau at "
          f"{row['plateau_s']:.1f} s ({row['plateau_cpu_s']:.1f} s CPU)", flush=True)
    return row


def ingraph_curves(results: list[dict], out_dir: Path, stem: str = "systems"
                   ) -> str | None:
    """bench/results/<stem>-ingraph-curve.png (stem: the record's, so records do not
    overwrite each other's): per share, the held-out tau of each
    checkpoint of seed 0's run against its training CPU seconds (log axis), one line per
    learning rate tried; systems without checkpoints are a point per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = sorted({r["share"] for r in results}, reverse=True)
    if not shares:
        return None
    fig, axes = plt.subplots(1, len(shares), figsize=(max(6.4, 4.2 * len(shares)), 3.8),
                             squeeze=False, sharey=True)
    for ax, share in zip(axes[0], shares):
        for row in (r for r in results if r["share"] == share):
            curve = row["curves"].get("0") or next(iter(row["curves"].values()), None)
            if curve:
                plot_rates(ax, curve, row["system"])
            else:
                ax.scatter([max(p.get("train_cpu_s", p["train_s"]), 0.1)
                            for p in row["per_seed"]],
                           [p["tau"] for p in row["per_seed"]], label=row["system"],
                           color=colour_of(row["system"]), zorder=3)
        ax.set_title(f"unet3d, {share:.0%} measured", fontsize=9)
        ax.set_xlabel("training CPU seconds (1 core)")
    axes[0][0].set_ylabel("Kendall tau, held-out configs")
    return finish_curves(fig, axes[0], "In-graph: held-out tau at each checkpoint against "
                         "training time\n(for the report only: it never steers training)",
                         out_dir / f"{stem}-ingraph-curve.png")


def scale_sample(work: Path, per_collection: int, seed: int,
                 only: list[str] | None = None) -> dict:
    """{collection id: (sampled train files, train files in the real preset)}: a seeded
    draw of the real preset's train jobs, written under ``work`` once (``only``: these
    collections' files alone are written and returned; the draw is the same)."""
    from xlarank.data.synth import PRESETS, synth_jobs, write_synth_file

    jobs = [j for j in synth_jobs(work, 0, PRESETS["real"]) if j.split == "train"]
    rng = np.random.default_rng(seed)
    sample = {}
    for collection_id in sorted({j.collection.id for j in jobs}):
        mine = [j for j in jobs if j.collection.id == collection_id]
        drawn = [mine[i] for i in sorted(rng.choice(len(mine), per_collection, replace=False))]
        if only and collection_id not in only:
            continue
        for job in drawn:
            if not (work / job.rel).exists():
                write_synth_file(job)
        sample[collection_id] = ([str(work / j.rel) for j in drawn], len(mine))
    return sample


def counts_tree(work: Path, tile_train: int, base: str = "demo",
                counts: str = "real") -> Path:
    """A synthetic tree under ``work``, written once: the ``base`` preset's graph sizes and
    cost model (seed 0) at the ``counts`` preset's train-file counts per layout collection,
    ``tile_train`` tile kernels, and the base preset's valid files (no test split).

    Every file is made from its own seeded stream, so the valid files are the base tree's
    and its train files are the first ones here: only the number of training graphs
    differs from `xlarank synth --preset base`."""
    from dataclasses import replace

    from xlarank.data.collections import COLLECTIONS
    from xlarank.data.synth import PRESETS, synth_jobs, write_synth_file

    base_size, count_size = PRESETS[base], PRESETS[counts]
    size = replace(base_size, tile_files=(tile_train, base_size.tile_files[1], 0),
                   layout_files_each=tuple((count_size.files(c)[0], base_size.files(c)[1], 0)
                                           for c in COLLECTIONS if not c.is_tile))
    for job in synth_jobs(work, 0, size):
        if not (work / job.rel).exists():
            write_synth_file(job)
    return work


def authors_epochs(system: str, collection_id: str, train_files: int) -> dict[str, float]:
    """{version: epochs over a train split of ``train_files`` files} of the system's own
    recipe: tpugraphs-gnn's official versions, competition-gnn's training scripts (tile
    counted in steps of one kernel, so its epochs are the steps over the files), gru's and
    the hybrid's defaults (no published epoch count)."""
    from xlarank.data.collections import get_collection
    from xlarank.systems import get_system

    if system == "tpugraphs-gnn":
        return dict(OFFICIAL_EPOCHS["tile" if get_collection(collection_id).is_tile
                                    else "layout"])
    if system == "competition-gnn":
        from xlarank.systems.competition_gnn.system import OFFICIAL

        settings = OFFICIAL[collection_id]
        return {"original": settings["epochs"] if settings["epochs"] is not None
                else round(settings["max_steps"] / train_files, 1)}
    return {"default": get_system(system).defaults()[get_system(system).epoch_setting]}


def run_scale(work: Path, per_collection: int, systems: list[str] | None = None,
              only: list[str] | None = None) -> list[dict]:
    results = []
    for collection_id, (files, total) in scale_sample(work, per_collection, 0, only).items():
        for system in (s for s in SCALE_SYSTEMS if not systems or s in systems):
            got = in_fresh_process(scale_task, {"collection": collection_id, "files": files,
                                                "system": system})
            scale = total / len(files)
            # From CPU seconds (a busy machine stretches wall time): the system's own
            # epochs at the marginal epoch's cost over the whole split, the one-off costs aside
            # (the sample's first epoch minus its marginal one, reported beside it: part
            # of it, compiling, does not grow with the files); early stopping may end
            # sooner.
            epochs_by_version = authors_epochs(system, collection_id, total)
            projected = {version: round(got["cpu_marginal_epoch_s"] * scale * epochs / 3600, 2)
                         for version, epochs in epochs_by_version.items()}
            results.append({"collection": collection_id, "system": system,
                            "sample_files": len(files), "train_files": total, **got,
                            "epoch_s": round(got["cpu_marginal_epoch_s"] * scale, 1),
                            "one_off_s": round(max(got["cpu_first_epoch_s"]
                                                   - got["cpu_marginal_epoch_s"], 0.0), 2),
                            # The key predates gru's and the hybrid's defaults in it:
                            # published records and the page read it by this name.
                            "official_epochs": epochs_by_version,
                            "projected_h": projected})
            print(f"scale {collection_id:20s} {system:15s} first epoch "
                  f"{got['cpu_first_epoch_s']:.2f} s CPU ({got['first_epoch_s']:.2f} wall), "
                  f"marginal {got['cpu_marginal_epoch_s']:.3f} s CPU "
                  f"({got['marginal_epoch_s']:.3f} wall) "
                  f"({len(files)}/{total} files) -> {projected} h, "
                  f"rss {got['peak_rss_mb']:.0f} MB", flush=True)
    return results


def loss_plots(synthetic: list[dict], out_dir: Path) -> list[str]:
    """One PNG per GNN system: train and valid loss per epoch (seed 0), a line per
    collection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for system in ("tpugraphs-gnn", "gru", "hybrid", "competition-gnn"):
        rows = [r for r in synthetic if r["system"] == system and r["history_seed0"]]
        if not rows:
            continue
        # One panel per collection: their losses differ by orders of magnitude.
        fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.2), squeeze=False)
        for ax, row in zip(axes[0], rows):
            epochs = [h["epoch"] + 1 for h in row["history_seed0"]]
            ax.plot(epochs, [h["train_loss"] for h in row["history_seed0"]], label="train")
            valid = [h.get("valid_loss") for h in row["history_seed0"]]
            if any(v is not None for v in valid):
                ax.plot(epochs, [np.nan if v is None else v for v in valid], "--",
                        label="valid")
            ax.set_title(row["collection"], fontsize=9)
            ax.set_xlabel("epoch")
            ax.legend(fontsize=7)
        axes[0][0].set_ylabel("loss (the system's own)")
        fig.suptitle(f"{system}: loss per epoch, synthetic demo data, seed 0", fontsize=10)
        path = out_dir / f"systems-loss-{system}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(str(path))
    return written


def write_submissions(synthetic: list[dict], out_dir: Path) -> list[str]:
    """One competition CSV (ID,TopConfigs) per system, its seed-0 models on the test split
    of the synthetic tree; the rows leave the JSON record."""
    import csv

    written = []
    for system in dict.fromkeys(r["system"] for r in synthetic):
        rows = [row for r in synthetic if r["system"] == system
                for row in r.pop("submission_rows")]
        if not rows:
            continue
        path = out_dir / f"systems-submission-{system.split(':')[0].replace(' ', '-')}.csv"
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["ID", "TopConfigs"])
            writer.writerows(rows)
        written.append(str(path))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/synth-demo"))
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    parser.add_argument("--out", type=Path, default=Path("bench/results/systems.json"))
    parser.add_argument("--work", type=Path, default=Path("bench/results/systems-scale"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ingraph-seeds", type=int, default=5)
    parser.add_argument("--ingraph-seed-list", default="",
                        help="comma-separated seeds of the ingraph part, in place of "
                             "0..ingraph-seeds-1")
    parser.add_argument("--shares", default=",".join(map(str, SHARES)),
                        help="comma-separated measured shares of the ingraph part")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="threads per system in the ingraph part")
    parser.add_argument("--partial", type=Path, default=None,
                        help="ingraph rows appended here (JSON lines) as they come; "
                             "units already there are not run again")
    parser.add_argument("--cross-seed-list", default="0",
                        help="comma-separated seeds of the cross part")
    parser.add_argument("--cross-partial", type=Path, default=None,
                        help="cross rows appended here (JSON lines) as they come; units "
                             "already there are not run again")
    parser.add_argument("--cross-no-run", action="store_true",
                        help="build the cross part from --cross-partial's rows alone; the "
                             "units not there are listed in the record as not run")
    parser.add_argument("--counts-tile-files", type=int, default=COUNTS_TILE_FILES,
                        help="tile train kernels of the counts part's tree (the real "
                             "preset's 5,709 take about 14x the demo's time)")
    parser.add_argument("--counts-partial", type=Path, default=None,
                        help="the counts part's rows, as --cross-partial's")
    parser.add_argument("--scale-files", type=int, default=4,
                        help="sampled train files per collection for the scale part")
    parser.add_argument("--scale-collections", default="",
                        help="comma-separated collections of the scale part [all five]")
    parser.add_argument("--parts", default="synthetic,ingraph,scale",
                        help="comma-separated (synthetic, ingraph, cross, counts, scale); "
                             "'plots' redraws the loss plots from --out")
    parser.add_argument("--systems", default="xlarank,tpugraphs-gnn,gru,hybrid,competition-gnn")
    parser.add_argument("--collections", default="",
                        help="comma-separated collections of the synthetic part [all five]")
    args = parser.parse_args()
    parts = args.parts.split(",")
    systems = args.systems.split(",")
    started = time.perf_counter()
    record: dict = {"threads": THREADS, "systems": systems}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if parts == ["plots"]:
        saved = json.loads(args.out.read_text())
        print("\n".join(loss_plots(saved["synthetic"]["results"], args.out.parent)))
        return
    if "synthetic" in parts:
        record["synthetic"] = {"data": f"synthetic: {args.data} (xlarank synth), valid split",
                               "seeds": args.seeds,
                               "results": run_synthetic(
                                   args.data, list(range(args.seeds)), systems,
                                   [c for c in args.collections.split(",") if c])}
        record["loss_plots"] = loss_plots(record["synthetic"]["results"], args.out.parent)
        record["submissions"] = write_submissions(record["synthetic"]["results"],
                                                  args.out.parent)
    if "ingraph" in parts:
        seeds = ([int(x) for x in args.ingraph_seed_list.split(",")]
                 if args.ingraph_seed_list else list(range(args.ingraph_seeds)))
        results = run_ingraph(args.samples, seeds, systems,
                              tuple(float(x) for x in args.shares.split(",")),
                              args.partial, args.threads)
        record["ingraph"] = {"data": f"real TpuGraphs sample {UNET3D}, split by distinct "
                                     "config", "seeds": len(seeds), "seed_list": seeds,
                             "threads": args.threads, "results": results}
        record["ingraph_curve"] = ingraph_curves(results, args.out.parent, args.out.stem)
    cross_seeds = [int(x) for x in args.cross_seed_list.split(",")]
    if "cross" in parts:
        not_run = [] if args.cross_no_run else None
        results = run_cross(args.data, cross_seeds, systems,
                            [c for c in args.collections.split(",") if c],
                            args.cross_partial, args.threads, not_run)
        record["cross"] = cross_record(f"synthetic: {args.data} (xlarank synth), valid split",
                                       cross_seeds, args.threads, results, not_run)
        record["cross_curve"] = cross_curves(results, args.out.parent, args.out.stem)
    if "counts" in parts:
        wanted = [c for c in args.collections.split(",") if c]
        tree = counts_tree(args.work / "cross-counts", args.counts_tile_files)
        not_run = [] if args.cross_no_run else None
        results = run_cross(tree, cross_seeds, systems, wanted, args.counts_partial,
                            args.threads, not_run)
        from xlarank.data.collections import COLLECTIONS, split_files

        record["counts"] = {
            **cross_record("synthetic: the demo preset's graphs at the real preset's "
                           f"train-file counts (tile {args.counts_tile_files}), the demo's "
                           "valid files", cross_seeds, args.threads, results, not_run),
            "train_files": {c.id: len(split_files(tree, c, "train")) for c in COLLECTIONS},
            "demo_train_files": {c.id: len(split_files(args.data, c, "train"))
                                 for c in COLLECTIONS},
            # The demo count's rows of the same units, read from --cross-partial (none run):
            # a unit the larger count lacks is left out on both sides of the comparison.
            "demo_results": run_cross(args.data, cross_seeds, systems, wanted,
                                      args.cross_partial, args.threads, [], not_run)
            if args.cross_partial else []}
        record["counts_curve"] = cross_curves(results, args.out.parent,
                                              f"{args.out.stem}-counts")
    if "scale" in parts:
        record["scale"] = {"data": "synthetic, a seeded sample of the real preset's train "
                                   "files, scaled to the whole split",
                           "results": run_scale(
                               args.work, args.scale_files, systems,
                               [c for c in args.scale_collections.split(",") if c])}
    record["seconds"] = round(time.perf_counter() - started, 1)
    write_record(args.out, record)
    print(f"wrote {args.out} in {record['seconds']} s")


if __name__ == "__main__":
    main()
