"""What every bench shares: fresh processes, rows kept as they come, peak RSS, summaries
over seeds and the training curves' plateaus.

A library of bench/, not a bench: the scripts (bench/<name>.py, declared in
bench/benches.py) import it, never each other. Provenance (the stamp on each record) is
bench/provenance.py's.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Threads per system fit in the systems benches (bench/systems.py, bench/tile_kernels.py).
THREADS = 2


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def per_graph(metrics: list[float]) -> dict:
    """The headline over graphs (mean) and, since a few very slow tile kernels decide the
    mean of 1 - slowdown@5, the per-graph median and the share of graphs whose value is at
    least 0.95 (tile: a config within 5% of the best among the top five)."""
    values = np.asarray(metrics, np.float64)
    return {"metric": float(values.mean()), "median": float(np.median(values)),
            "within_5pct": float((values >= 0.95).mean())}


def summary(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(a.mean()), 4),
            "sd": round(float(a.std(ddof=1)), 4) if len(a) > 1 else 0.0,
            "min": round(float(a.min()), 4), "per_seed": [round(float(v), 4) for v in a]}


def in_fresh_process(fn, task: dict) -> dict:
    """fn(task) in a new spawned process, so its peak RSS is its own."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(fn, (task,))


def read_partial(partial: Path | None, keys: tuple[str, ...]) -> dict:
    """The rows a cut-short run appended to ``partial`` (JSON lines), by the tuple of
    their ``keys`` values; {} without the file."""
    done = {}
    if partial is not None and partial.exists():
        for line in partial.read_text().splitlines():
            row = json.loads(line)
            done[tuple(row[k] for k in keys)] = row
    return done


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
