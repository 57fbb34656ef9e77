"""The cross-graph rule as the benches run it: every stepped system fit across graphs by
`xlarank.systems.cross` (inner validation on a share of the train files, the stop and the
kept epoch by the in-graph rule's patience and min gain), its held-out headline at each
epoch for the report only; one fresh process per (collection, system, seed), rows kept as
they come. Used by bench/systems.py (the cross and counts parts), bench/tile_kernels.py
(leave-one-kernel-out) and bench/corpus.py (a family never seen).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from harness import THREADS, in_fresh_process, peak_rss_mb, per_graph, read_partial, summary
from xlarank.evaluate import graph_headline
from xlarank.systems.cross import (
    CROSS_INNER_SHARE,
    CROSS_MOST_GRAPHS,
    fit_by_cross_validation,
)

# The cross-graph rule (the curves part) is xlarank.systems.cross's, each author's
# learning rate. The epoch budget is what one core affords per system and collection; a
# curve still rising at its end says so (best_held_in_budget, last_held).
CROSS_EPOCHS = {"layout": 30, "tile": 8}
CROSS_AFTER_STOP = 8   # epochs run past the rule's stop, to show what going on gives


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
