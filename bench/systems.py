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
  0.2, 0.1) measured and the rest ranked; Kendall tau on the held-out distinct configs.
  Every system trains on the measured configs only.
- scale: a seeded sample of the `real` synth preset's train files (drawn by index, so the
  size mix is the preset's), per GNN system and collection: seconds per epoch over the
  sample scaled to the whole train split, peak RSS, and the official recipe's epochs
  projected (layout 500, tile 100, at most: early stopping may end sooner).

GNN epochs are cut for the synthetic part (settings in the JSON beside each row); the
scale part says what the official epochs would cost here.

    python bench/systems.py --data data/synth-demo --out bench/results/systems.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path

import numpy as np

from provenance import write_record

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
}
# In-graph rows beside the defaults: (label, system, settings, shares, seeds). The official
# layout recipe takes ~4,000 Adam steps (500 epochs of 8 batches on xla); 20 in-graph
# epochs are 20 steps, so the same system with ten times the steps shows what steps buy.
INGRAPH_VARIANTS = [("tpugraphs-gnn, 200 steps", "tpugraphs-gnn", {"in_graph_epochs": 200},
                     (0.5,), [0, 1, 2])]
PEERS = {"peer: config aggregates (XGBoost pairwise)": ("xlarank", {"booster_spec": "baseline"})}
OFFICIAL_EPOCHS = {"tile": 100, "layout": 500}
SCALE_SYSTEMS = ("tpugraphs-gnn", "gru", "hybrid")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def headline_of(graph, score: np.ndarray, runtime: np.ndarray) -> float:
    """Layout: Kendall tau; tile: 1 - slowdown@5 (on runtime / normalizer)."""
    from xlarank.data.graph import TileGraph
    from xlarank.metrics import kendall_tau, slowdown_at

    if isinstance(graph, TileGraph):
        return 1.0 - slowdown_at(score, runtime / graph.config_runtime_normalizers, 5)
    value = kendall_tau(score, runtime)
    return 0.0 if np.isnan(value) else value


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
            metrics = [headline_of(g, rng.random(g.n_configs), g.config_runtime)
                       for g in graphs]
            rows.append({"seed": seed, "metric": float(np.mean(metrics)), "train_s": 0.0,
                         "score_ms_per_1000": 0.0, "history": []})
            continue
        system = get_system(task["system"])(seed=seed, threads=THREADS, **task["settings"])
        started = time.perf_counter()
        system.fit(train, collection, valid)
        train_s = time.perf_counter() - started
        started = time.perf_counter()
        scores = [system.score(g) for g in graphs]
        score_s = time.perf_counter() - started
        metrics = [headline_of(g, s, g.config_runtime) for g, s in zip(graphs, scores)]
        rows.append({"seed": seed, "metric": float(np.mean(metrics)),
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
    """One system on unet3d, every share and seed, in this (fresh) process."""
    import pandas as pd

    from xlarank.data.graph import load_graph
    from xlarank.features import featurize_graph, load_feature_spec
    from xlarank.metrics import kendall_tau
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(THREADS)
    graph = load_graph(task["path"])
    # One row per distinct config: its first appearance and median runtime.
    block = featurize_graph(graph, load_feature_spec(ROOT / "features" / "baseline.toml"),
                            dedup=True)
    first = block["config_index"].to_numpy()
    median = block["runtime"].to_numpy(np.float64)
    n = len(first)
    out = []
    for share in task["shares"]:
        for seed in task["seeds"]:
            order = np.random.default_rng(seed).permutation(n)
            m = int(round(share * n))
            measured, held = order[:m], order[m:]
            started = time.perf_counter()
            if task["system"] == "random":
                score = np.random.default_rng(seed).random(graph.n_configs)
                history = []
            else:
                runtime = pd.Series(median[measured], index=first[measured]).sort_index()
                system = get_system(task["system"])(seed=seed, threads=THREADS,
                                                    **task.get("settings", {}))
                system.fit_graph(graph, runtime)
                score, history = system.score(graph), system.history_
            out.append({"share": share, "seed": seed,
                        "tau": round(float(np.nan_to_num(
                            kendall_tau(score[first[held]], median[held]))), 4),
                        "seconds": round(time.perf_counter() - started, 2),
                        "loss_first_last": ([history[0]["train_loss"],
                                             history[-1]["train_loss"]] if history else None)})
    return {"rows": out, "peak_rss_mb": round(peak_rss_mb(), 1)}


def scale_task(task: dict) -> dict:
    """Seconds of one training epoch of a system over a sample of real-sized files."""
    from xlarank.data.collections import get_collection
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(THREADS)
    collection = get_collection(task["collection"])
    files = [Path(f) for f in task["files"]]
    one_epoch = {"tpugraphs-gnn": {"epochs": 1, "early_stop": 0}, "gru": {"epochs": 1},
                 "hybrid": {"gnn_epochs": 1}}[task["system"]]
    system = get_system(task["system"])(seed=0, threads=THREADS, **one_epoch)
    started = time.perf_counter()
    system.fit(files, collection)
    return {"seconds": round(time.perf_counter() - started, 2),
            "peak_rss_mb": round(peak_rss_mb(), 1)}


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


def run_ingraph(samples: Path, seeds: list[int], systems: list[str]) -> list[dict]:
    results = []
    runs = [(name, name, {}, SHARES, seeds) for name in [*systems, "random"]]
    runs += [v for v in INGRAPH_VARIANTS if v[1] in systems]
    for label, system, settings, shares, run_seeds in runs:
        task = {"path": str(samples / UNET3D), "system": system, "shares": shares,
                "seeds": run_seeds, "settings": settings}
        got = in_fresh_process(ingraph_task, task)
        for share in shares:
            rows = [r for r in got["rows"] if r["share"] == share]
            results.append({"system": label, "share": share, "settings": settings,
                            "tau": summary([r["tau"] for r in rows]),
                            "seconds": round(float(np.mean([r["seconds"] for r in rows])), 2),
                            "peak_rss_mb": got["peak_rss_mb"],
                            "loss_first_last_seed0": rows[0]["loss_first_last"]})
            print(f"in-graph unet3d {label:25s} share {share:.1f} "
                  f"{results[-1]['tau']['mean']:+.4f} ± {results[-1]['tau']['sd']:.4f} "
                  f"(worst {results[-1]['tau']['min']:+.4f})  {results[-1]['seconds']:.1f} s",
                  flush=True)
    return results


def scale_sample(work: Path, per_collection: int, seed: int) -> dict:
    """{collection id: (sampled train files, train files in the real preset)}: a seeded
    draw of the real preset's train jobs, written under ``work`` once."""
    from xlarank.data.synth import PRESETS, synth_jobs, write_synth_file

    jobs = [j for j in synth_jobs(work, 0, PRESETS["real"]) if j.split == "train"]
    rng = np.random.default_rng(seed)
    sample = {}
    for collection_id in sorted({j.collection.id for j in jobs}):
        mine = [j for j in jobs if j.collection.id == collection_id]
        drawn = [mine[i] for i in sorted(rng.choice(len(mine), per_collection, replace=False))]
        for job in drawn:
            if not (work / job.rel).exists():
                write_synth_file(job)
        sample[collection_id] = ([str(work / j.rel) for j in drawn], len(mine))
    return sample


def run_scale(work: Path, per_collection: int) -> list[dict]:
    results = []
    for collection_id, (files, total) in scale_sample(work, per_collection, 0).items():
        kind = "tile" if collection_id.startswith("tile") else "layout"
        for system in SCALE_SYSTEMS:
            got = in_fresh_process(scale_task, {"collection": collection_id, "files": files,
                                                "system": system})
            epoch_s = got["seconds"] * total / len(files)
            results.append({"collection": collection_id, "system": system,
                            "sample_files": len(files), "train_files": total,
                            "sample_epoch_s": got["seconds"], "epoch_s": round(epoch_s, 1),
                            "official_epochs": OFFICIAL_EPOCHS[kind],
                            "projected_h": round(epoch_s * OFFICIAL_EPOCHS[kind] / 3600, 2),
                            "peak_rss_mb": got["peak_rss_mb"]})
            print(f"scale {collection_id:20s} {system:15s} epoch {epoch_s:9.1f} s "
                  f"(sample {got['seconds']} s for {len(files)}/{total} files) -> "
                  f"{OFFICIAL_EPOCHS[kind]} epochs {results[-1]['projected_h']:.2f} h, "
                  f"rss {got['peak_rss_mb']:.0f} MB", flush=True)
    return results


def loss_plots(synthetic: list[dict], out_dir: Path) -> list[str]:
    """One PNG per GNN system: train and valid loss per epoch (seed 0), a line per
    collection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for system in ("tpugraphs-gnn", "gru", "hybrid"):
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
    parser.add_argument("--scale-files", type=int, default=4,
                        help="sampled train files per collection for the scale part")
    parser.add_argument("--parts", default="synthetic,ingraph,scale",
                        help="comma-separated; 'plots' redraws the loss plots from --out")
    parser.add_argument("--systems", default="xlarank,tpugraphs-gnn,gru,hybrid")
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
        record["ingraph"] = {"data": f"real TpuGraphs sample {UNET3D}, split by distinct "
                                     "config", "seeds": args.ingraph_seeds,
                             "results": run_ingraph(args.samples,
                                                    list(range(args.ingraph_seeds)), systems)}
    if "scale" in parts:
        record["scale"] = {"data": "synthetic, a seeded sample of the real preset's train "
                                   "files, scaled to the whole split",
                           "results": run_scale(args.work, args.scale_files)}
    record["seconds"] = round(time.perf_counter() - started, 1)
    write_record(args.out, record)
    print(f"wrote {args.out} in {record['seconds']} s")


if __name__ == "__main__":
    main()
