"""The 15 real tile kernels of the XLA tuning record: the first cross-graph figures on real data.

The record ../shared/tpugraphs/raw/op_tuning_data.pb holds 15 fused kernels with their
measured tile configs (`xlarank import`, failed runs dropped as the official converter
drops them). Two protocols, for xlarank, each published system (`xlarank.systems`) and
random order:

- in-kernel: on each kernel with at least 10 distinct configs, a random half of the
  distinct configs is measured (median runtime per config) and the other half ranked;
  Kendall tau on the held-out half, mean over kernels, per seed.
- leave-one-kernel-out: train on the other 14 kernels' files, rank every config of the
  held-out one; 1 - slowdown@5 on runtime / default runtime (the competition's tile
  metric), over all 15 kernels and over the kernels with more than 5 configs (where the
  top 5 is not every config), with the median and the share within 5% of the best. The
  stepped systems train by bench/crossgraph.py's cross-graph rule: on 11 of the 14, with 3
  held out as inner validation for early stopping and the kept epoch.

In the kernel every stepped system trains by the in-graph rule (`xlarank.systems.inner`),
with its held-out tau at each checkpoint recorded for the curves (never read by training).
Training CPU seconds stop where a stepped system's fit ends; xlarank's graph-local booster
trains when it first scores, so its seconds take in scoring the kernel's configs. Each
system runs in a fresh process (its peak RSS is its own) on 2 threads (``--threads``).

    python bench/tile_kernels.py --out bench/results/tile_kernels_curves.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from crossgraph import CROSS_EPOCHS, cross_fit
from curves import colour_of, finish_curves, plot_rates
from harness import (
    THREADS,
    held_tau_recorder,
    in_fresh_process,
    peak_rss_mb,
    plateau_time,
    read_partial,
    summary,
)
from provenance import write_record

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT.parent / "shared" / "tpugraphs" / "raw" / "op_tuning_data.pb"
SYSTEMS = ("xlarank", "tpugraphs-gnn", "gru", "hybrid", "competition-gnn", "random")
MIN_DISTINCT_IN_KERNEL = 10


def _normalized_median(graph, split) -> np.ndarray:
    """float64 (n_distinct,): the median normalized runtime (runtime / normalizer, the
    tile target) of each of the split's distinct configs."""
    target = graph.config_runtime / graph.config_runtime_normalizers
    return np.array([np.median(target[split.group == g]) for g in range(len(split.first))])


def kernel_task(task: dict) -> dict:
    """One system, both protocols, every seed, in this (fresh) process."""
    import pandas as pd

    from xlarank.data.collections import get_collection
    from xlarank.data.distinct import distinct_configs
    from xlarank.data.graph import load_graph
    from xlarank.evaluate import in_graph_split
    from xlarank.metrics import kendall_tau, slowdown_at
    from xlarank.systems import get_system
    from xlarank.threads import use_threads

    use_threads(task["threads"])
    # Three kernels have one distinct config or equal runtimes; training says so each fold.
    warnings.filterwarnings("ignore", message=".*teach the ranker nothing")
    files = [Path(f) for f in task["files"]]
    graphs = [load_graph(f) for f in files]
    collection = get_collection("tile:xla")

    def make(seed, **settings):
        return get_system(task["system"])(seed=seed, threads=task["threads"], **settings)

    # random is the order to beat, no system: nothing to set.
    key = None if task["system"] == "random" else get_system(task["system"]).epoch_setting
    in_kernel = []
    started = time.perf_counter()
    for seed in task["seeds"]:
        taus, costs = {}, {}
        for graph in graphs:
            if len(distinct_configs(graph)) < MIN_DISTINCT_IN_KERNEL:
                continue
            split = in_graph_split(graph, 0.5, seed)
            first, median = split.first, _normalized_median(graph, split)
            measured, held = split.measured, split.held
            curve: list[dict] = []
            aside = [0.0, 0.0]
            fit_ended = None
            cpu_started = time.process_time()
            if task["system"] == "random":
                score = np.random.default_rng(seed).random(graph.n_configs)
            else:
                runtime = pd.Series(median[measured] * graph.config_runtime_normalizers[0],
                                    index=first[measured]).sort_index()
                system = make(seed)
                system.fit_graph(graph, runtime, on_epoch=held_tau_recorder(
                    system, graph, first[held], median[held], curve, aside))
                # As in bench/systems.py's in-graph part: the stepped systems' clock stops
                # where their fit ends; xlarank's graph-local booster trains when it first
                # scores, so its clock takes in that scoring (the count favours the others).
                fit_ended = time.process_time() if key is not None else None
                score = system.score(graph)
            taus[graph.graph_id] = float(np.nan_to_num(kendall_tau(score[first[held]],
                                                                   median[held])))
            cpu = (fit_ended or time.process_time()) - cpu_started - aside[1]
            plateau = plateau_time(curve, taus[graph.graph_id], clock="cpu_seconds")
            costs[graph.graph_id] = {"cpu_s": round(cpu, 2),
                                     "plateau_cpu_s": round(cpu if plateau is None
                                                            else plateau, 2),
                                     "curve": curve}
        in_kernel.append({"seed": seed, "tau_mean": float(np.mean(list(taus.values()))),
                          "per_kernel": taus, "costs": costs})
    in_kernel_s = time.perf_counter() - started
    loko = []
    started = time.perf_counter()
    for seed in task["seeds"]:
        per_kernel = {}
        for i, graph in enumerate(graphs):
            target = graph.config_runtime / graph.config_runtime_normalizers
            rule: dict = {}
            cpu_started = time.process_time()
            if task["system"] == "random":
                score = np.random.default_rng(seed + 1000 * i).random(graph.n_configs)
            elif key is None:
                system = make(seed).fit(files[:i] + files[i + 1:], collection)
                rule = {"train_cpu_s": round(time.process_time() - cpu_started, 2)}
                score = system.score(graph)
            else:
                # The cross-graph rule on the other 14 kernels (bench/crossgraph.py).
                got = cross_fit(make(seed, **{key: CROSS_EPOCHS["tile"]}),
                                files[:i] + files[i + 1:], collection, [graph], seed)
                score = got["scores"][0]
                rule = {k: got[k] for k in ("kept_epoch", "stopped_epoch", "train_cpu_s")}
            per_kernel[graph.graph_id] = {
                "configs": int(graph.n_configs),
                "slowdown_at_5": float(slowdown_at(score, target, 5)),
                "slowdown_at_1": float(slowdown_at(score, target, 1)),
                "cpu_s": round(rule.get("train_cpu_s", time.process_time() - cpu_started),
                               2), **rule}
        loko.append({"seed": seed, "per_kernel": per_kernel})
    return {"in_kernel": in_kernel, "in_kernel_s": round(in_kernel_s, 1), "loko": loko,
            "loko_s": round(time.perf_counter() - started, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1)}


def _loko_summary(runs: list[dict]) -> dict:
    def per_seed(keep) -> list[float]:
        return [float(np.mean([1 - k["slowdown_at_5"] for k in r["per_kernel"].values()
                               if keep(k)])) for r in runs]

    everything = [1 - k["slowdown_at_5"] for r in runs for k in r["per_kernel"].values()]
    return {"all_kernels": summary(per_seed(lambda k: True)),
            "kernels_over_5_configs": summary(per_seed(lambda k: k["configs"] > 5)),
            "median": round(float(np.median(everything)), 4),
            "share_within_5pct": round(float(np.mean([1 - v <= 0.05 for v in everything])), 4),
            "one_minus_slowdown_at_1": summary(
                [float(np.mean([1 - k["slowdown_at_1"] for k in r["per_kernel"].values()]))
                 for r in runs])}


def _cost_summary(runs: list[dict]) -> dict:
    """In-kernel CPU seconds, mean over seeds of the sum over kernels: the whole fit, and
    until each kernel's held-out tau first came within 0.01 of its returned model's."""
    return {key: round(float(np.mean([sum(c[key] for c in r["costs"].values())
                                      for r in runs])), 2)
            for key in ("cpu_s", "plateau_cpu_s")}


def kernel_curves(results: dict, kernels: list[dict], out_dir: Path, stem: str,
                  threads: int = THREADS) -> str | None:
    """<stem>-kernel-curve.png beside the record: on the kernel with the most distinct
    configs, each system's held-out tau at each checkpoint of seed 0's in-kernel fit
    against its training CPU seconds (log axis), one line per learning rate; systems
    without checkpoints are a point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not results:
        return None
    biggest = max(kernels, key=lambda k: k["distinct_configs"])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for name, r in results.items():
        graph_id = biggest["graph_id"]
        curve = r["in_kernel_curves_seed0"].get(graph_id)
        if curve:
            plot_rates(ax, curve, name, floor=0.01)
        elif graph_id in r["in_kernel_per_kernel_seed0"]:
            ax.scatter([max(r["in_kernel_cpu_s_seed0"][graph_id], 0.01)],
                       [r["in_kernel_per_kernel_seed0"][graph_id]], label=name,
                       color=colour_of(name), zorder=3)
    ax.set_xlabel(f"training CPU seconds ({threads} thread{'s' if threads > 1 else ''})")
    ax.set_ylabel("Kendall tau, held-out configs")
    return finish_curves(fig, [ax], f"In-kernel on the real kernel {biggest['name']} "
                         f"({biggest['distinct_configs']} distinct configs), seed 0\n(for "
                         "the report only: it never steers training)",
                         out_dir / f"{stem}-kernel-curve.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="threads per fit (each system runs alone in its process)")
    parser.add_argument("--partial", type=Path, default=None,
                        help="each system's results appended here (JSON lines) as they come; "
                             "systems already there are not run again")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seeds))
    done = {}
    for (system,), row in read_partial(args.partial, ("system",)).items():
        if (row.get("seeds"), row.get("threads")) != (seeds, args.threads):
            parser.error(f"{args.partial}: {system}'s row has seeds {row.get('seeds')} and "
                         f"threads {row.get('threads')}, not {seeds} and {args.threads}: "
                         "start a new --partial")
        done[system] = row["results"]

    from xlarank.data.distinct import distinct_configs
    from xlarank.data.graph import load_graph
    from xlarank.data.xla import import_records
    from xlarank.systems import get_system

    with tempfile.TemporaryDirectory() as tmp:
        graphs = import_records([args.record], Path(tmp) / "kernels", drop_failed_runs=True)
        files = [str(Path(tmp) / "kernels" / g.relative_path) for g in graphs]
        kernels = [{"name": g.name, "graph_id": Path(f).stem,
                    "configs": int(g.arrays["config_runtime"].size),
                    "distinct_configs": len(distinct_configs(load_graph(f))),
                    "max_over_default": round(float(
                        (g.arrays["config_runtime"] / g.arrays["config_runtime_normalizers"])
                        .max()), 3)} for g, f in zip(graphs, files, strict=True)]
        results = {}
        for system in args.systems.split(","):
            if system in done:
                results[system] = done[system]
                continue
            key = None if system == "random" else get_system(system).epoch_setting
            settings = {key: CROSS_EPOCHS["tile"]} if key else {}
            got = in_fresh_process(kernel_task, {"system": system, "files": files,
                                                 "seeds": seeds, "threads": args.threads})
            results[system] = {
                "settings": settings,
                "in_kernel_tau": summary([r["tau_mean"] for r in got["in_kernel"]]),
                "in_kernel_per_kernel_seed0": got["in_kernel"][0]["per_kernel"],
                "in_kernel_costs": _cost_summary(got["in_kernel"]),
                "in_kernel_cpu_s_seed0": {k: c["cpu_s"] for k, c in
                                          got["in_kernel"][0]["costs"].items()},
                "in_kernel_curves_seed0": {k: c["curve"] for k, c in
                                           got["in_kernel"][0]["costs"].items()
                                           if c["curve"]},
                "loko": _loko_summary(got["loko"]),
                "loko_per_kernel_seed0": got["loko"][0]["per_kernel"],
                "in_kernel_s": got["in_kernel_s"], "loko_s": got["loko_s"],
                "peak_rss_mb": got["peak_rss_mb"]}
            r = results[system]
            if args.partial is not None:
                with open(args.partial, "a") as handle:
                    handle.write(json.dumps({"system": system, "seeds": seeds,
                                             "threads": args.threads, "results": r}) + "\n")
            print(f"{system:15s} in-kernel tau {r['in_kernel_tau']['mean']:+.4f} ± "
                  f"{r['in_kernel_tau']['sd']:.4f}   LOKO 1-slowdown@5 "
                  f"{r['loko']['kernels_over_5_configs']['mean']:.4f} (kernels >5 configs), "
                  f"{r['loko']['all_kernels']['mean']:.4f} (all)   "
                  f"{got['in_kernel_s'] + got['loko_s']:.0f} s", flush=True)
    write_record(args.out, {
        "data": f"real XLA tuning record {args.record.name} (15 tile kernels), imported "
                "with failed runs dropped",
        "seeds": len(seeds), "threads": args.threads, "kernels": kernels,
        "min_distinct_in_kernel": MIN_DISTINCT_IN_KERNEL, "systems": results,
        "kernel_curve": kernel_curves(results, kernels, args.out.parent, args.out.stem,
                                      args.threads)})


if __name__ == "__main__":
    main()
