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
import time
from pathlib import Path

import numpy as np

from crossgraph import counts_tree, cross_record, run_cross
from curves import cross_curves, ingraph_curves
from epoch_cost import run_scale
from harness import (
    THREADS,
    held_tau_recorder,
    in_fresh_process,
    peak_rss_mb,
    per_graph,
    plateau_time,
    read_partial,
    summary,
)
from provenance import write_record
from xlarank.evaluate import graph_headline

ROOT = Path(__file__).resolve().parents[1]
UNET3D = "npz/layout/xla/default/train/unet3d.npz"
SHARES = (0.5, 0.2, 0.1)
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
# Tile kernels of the counts part: 4x the demo's, what one core runs in about half an hour
# for the three cheaper stepped systems (the real preset's 5,709 would take 14x the demo's).
COUNTS_TILE_FILES = 1600


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
