"""Per-graph and mean metrics of scores on a labelled frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.errors import MismatchError, XlarankError
from xlarank.files import read_structured
from xlarank.frame import group_sizes
from xlarank.metrics import kendall_tau, ordered_pair_accuracy, slowdown_at
from xlarank.target import ranking_target

TILE_KS = (1, 5, 10)
LAYOUT_KS = (1, 10, 100)


def headline_metric(is_tile: bool) -> str:
    """The competition's per-collection score: 1 - slowdown@5 (tile) or Kendall tau (layout)."""
    return "score" if is_tile else "kendall_tau"


def load_eval_indices(path: str | Path) -> dict[str, list[int]]:
    """The official validation subsets: graph name -> config indices (a JSON object)."""
    path = Path(path)
    raw = read_structured(path, "eval indices file")
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise XlarankError(f"{path}: expected a JSON object of graph name -> list of indices")
    return {str(k): [int(i) for i in v] for k, v in raw.items()}


def per_graph_metrics(frame: pd.DataFrame, score: np.ndarray, is_tile: bool,
                      eval_indices: dict[str, list[int]] | None = None) -> pd.DataFrame:
    """One row per graph: its configs, Kendall tau, OPA and slowdown@K (tile: and score).

    ``eval_indices`` restricts a listed graph to those config indices. A frame without
    runtimes (a test split) is refused.
    """
    if not (frame["runtime"].to_numpy() > 0).any():
        raise XlarankError("the frame has no runtimes (all zero: a test split?); "
                           "evaluate on a labelled split such as valid")
    target = ranking_target(frame, is_tile)
    rows, start = [], 0
    ids = frame["graph_id"].to_numpy()
    configs = frame["config_index"].to_numpy()
    for size in group_sizes(frame):
        sl = slice(start, start + size)
        start += size
        graph_id, s, t = ids[sl.start], score[sl], target[sl]
        if eval_indices and graph_id in eval_indices:
            keep = np.isin(configs[sl], eval_indices[graph_id])
            s, t = s[keep], t[keep]
        if len(t) == 0:
            continue
        row = {"graph_id": graph_id, "configs": len(t), "kendall_tau": kendall_tau(s, t),
               "opa": ordered_pair_accuracy(s, t)}
        for k in TILE_KS if is_tile else LAYOUT_KS:
            row[f"slowdown_{k}"] = slowdown_at(s, t, k)
        if is_tile:
            row["score"] = 1.0 - row["slowdown_5"]
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(per_graph: pd.DataFrame) -> dict[str, float]:
    """Mean of each metric over graphs; graphs where it is undefined (NaN) are left out."""
    summary: dict[str, float] = {"graphs": float(len(per_graph))}
    for column in per_graph.columns:
        if column not in ("graph_id", "configs"):
            summary[column] = float(per_graph[column].mean(skipna=True))
    if "kendall_tau" in per_graph:
        summary["graphs_without_tau"] = float(per_graph["kendall_tau"].isna().sum())
    return summary


def random_scores(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """float64 (n_rows,): a uniformly random order, the floor any ranker must beat."""
    return np.random.default_rng(seed).random(len(frame))


def default_layout_scores(frame: pd.DataFrame) -> np.ndarray:
    """float64 (n_rows,): the "keep the default layout" peer for layout collections.

    Configs that leave more configurable nodes on their default output layout rank first,
    which is what a compiler does without a cost model. Reads the ``c_default_out_frac``
    column of the config_joined family.
    """
    if "c_default_out_frac" not in frame:
        raise MismatchError("the default-layout peer needs the c_default_out_frac column "
                            "(a layout frame with the config_joined family)")
    return frame["c_default_out_frac"].to_numpy(dtype=np.float64)
