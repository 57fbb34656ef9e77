"""Ranking metrics, per graph, in plain numpy/scipy.

Convention: a model's score is higher for a config it expects to be faster. Runtimes are
int64 ns (tile: runtime / normalizer) and are compared exactly, never through float32.
"""

from __future__ import annotations

import numpy as np


def kendall_tau(score: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall's tau-b (scipy's default) between the predicted order and the runtimes.

    +1 when the highest score is the fastest config and so on down; NaN when either side
    is constant (no order to compare), as scipy returns.
    """
    if len(score) < 2:
        return float("nan")
    from scipy.stats import kendalltau  # on use: scipy.stats costs a second to import

    tau = kendalltau(-np.asarray(score, dtype=np.float64), runtime).statistic
    return float(tau)


def _tied_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def ordered_pair_accuracy(score: np.ndarray, runtime: np.ndarray) -> float:
    """Share of config pairs with different runtimes that the scores order correctly.

    A pair whose scores tie counts one half. NaN when all runtimes are equal. Computed from
    tau-b and tie counts in O(n log n), so it works on 10^5 configs; with no ties it equals
    (tau + 1) / 2.
    """
    score = -np.asarray(score, dtype=np.float64)
    runtime = np.asarray(runtime)
    n = len(score)
    n0 = n * (n - 1) // 2
    ties_score, ties_runtime = _tied_pairs(score), _tied_pairs(runtime)
    joint = _tied_pairs(np.rec.fromarrays([score, runtime])) if n else 0
    pairs = n0 - ties_runtime
    if pairs == 0:
        return float("nan")
    score_only_ties = ties_score - joint
    if ties_score == n0:
        return 0.5
    from scipy.stats import kendalltau

    tau_b = kendalltau(score, runtime).statistic
    concordant_minus_discordant = tau_b * np.sqrt(float(n0 - ties_score) * float(n0 - ties_runtime))
    concordant_plus_discordant = pairs - score_only_ties
    concordant = (concordant_plus_discordant + concordant_minus_discordant) / 2
    return float((concordant + 0.5 * score_only_ties) / pairs)


def slowdown_at(score: np.ndarray, runtime: np.ndarray, k: int) -> float:
    """min(runtime of the k best-scored configs) / min(runtime) - 1.

    Ties in score are broken by config order (stable sort), as a submission would list them.
    """
    runtime = np.asarray(runtime, dtype=np.float64)
    order = np.argsort(-np.asarray(score, dtype=np.float64), kind="stable")
    return float(runtime[order[:k]].min() / runtime.min() - 1.0)
