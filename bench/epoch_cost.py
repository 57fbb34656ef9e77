"""The systems bench's scale part: each GNN system's first and marginal epoch on a seeded
sample of the `real` synth preset's train files, scaled to the whole split, and the
system's own epochs projected from them (`authors_epochs`).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from harness import THREADS, in_fresh_process, peak_rss_mb

# The official trainers' epoch counts (google-research-datasets/tpu_graphs): layout 50
# with early stop 25 since ddd187c (2023-11-11, HEAD), 500 with early stop 40 before
# (422a990, 2023-08-29, the version tpugraphs-gnn follows); tile 100 with early stop 20
# (unchanged since 422a990).
OFFICIAL_EPOCHS = {"tile": {"HEAD": 100},
                   "layout": {"HEAD ddd187c": 50, "422a990": 500}}
SCALE_EPOCHS = 4        # epochs timed in one fit: the first and three marginal ones
SCALE_SYSTEMS = ("tpugraphs-gnn", "gru", "hybrid", "competition-gnn")


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
