"""Training labels from the ranking target (`xlarank.target.ranking_target`), within each
graph: relevance grades for ranking objectives; percentiles or log slowdowns for pointwise
ones (a booster spec's ``label``)."""

from __future__ import annotations

import numpy as np

# LightGBM's default label_gain has 31 entries, so grades run 0..30.
N_GRADES = 31


def faster_share(target: np.ndarray, group_sizes: np.ndarray) -> np.ndarray:
    """float64 (n_rows,): within each graph, the share of its other configs strictly slower
    than this one: 1 for the fastest, 0 for the slowest, equal runtimes share a value.

    The pointwise "percentile" label: every graph spreads over [0, 1] whatever its size and
    runtime spread, and one config 3x slower than the rest weighs as one config, not as
    the whole loss (as it does for a log slowdown).
    """
    out = np.empty(len(target), dtype=np.float64)
    start = 0
    for size in group_sizes:
        t = target[start:start + size]
        slower = size - np.searchsorted(np.sort(t), t, side="right")
        out[start:start + size] = slower / max(size - 1, 1)
        start += size
    return out


def relevance_grades(target: np.ndarray, group_sizes: np.ndarray,
                     n_grades: int = N_GRADES) -> np.ndarray:
    """int32 (n_rows,): quantile grades within each graph, n_grades - 1 for the fastest.

    grade = floor(n_grades * `faster_share`), capped at n_grades - 1. Equal runtimes get
    equal grades, and every graph spreads over the whole grade range whatever its size, so
    large and small graphs weigh alike.
    """
    share = faster_share(target, group_sizes)
    return np.minimum((share * n_grades).astype(np.int32), n_grades - 1).astype(np.int32)


def log_slowdown(target: np.ndarray, group_sizes: np.ndarray) -> np.ndarray:
    """float64 (n_rows,): log(target / fastest target of its graph), 0 for the fastest.

    The pointwise regression label ("log normalized runtime"): dividing by the graph's best
    removes the scale that differs by orders of magnitude between graphs.
    """
    out = np.empty(len(target), dtype=np.float64)
    start = 0
    for size in group_sizes:
        t = target[start:start + size]
        out[start:start + size] = np.log(t / max(float(t.min()), 1e-300))
        start += size
    return out
