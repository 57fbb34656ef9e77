"""Per-graph and mean metrics of scores on a labelled frame, evaluation records and the
table that compares them.

`headline` is the one number per collection that everything (evaluate, tune, report, the
benchmarks) ranks by; `headline_metric` names it and `headline_label` says it in words.
`xlarank.score.evaluate_model` scores a saved model (or a random order) on a frame file and
writes the per-graph CSV with its summary JSON beside it; `compare_runs` tables those
summaries. This module imports no ranker, so training and tuning can use its metrics.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_path, check_output
from xlarank.data.collections import COLLECTIONS, get_collection
from xlarank.data.graph import TileGraph
from xlarank.errors import (
    ArgumentTypeError,
    MismatchError,
    XlarankError,
    XlarankWarning,
    checked_type,
)
from xlarank.files import read_structured
from xlarank.frame import group_sizes
from xlarank.metrics import kendall_tau, ordered_pair_accuracy, slowdown_at
from xlarank.seeds import check_booster_seed
from xlarank.target import ranking_target

TILE_KS = (1, 5, 10)
# A frame's config_index column is int32: no config index is larger.
MAX_CONFIG_INDEX = 2**31 - 1
LAYOUT_KS = (1, 10, 100)
# The headline metric's column name -> how tables and plots name it.
HEADLINE_LABELS = {"score": "1 - slowdown@5", "kendall_tau": "Kendall tau"}
# The summary JSON that `evaluate_model` writes beside a per-graph CSV ends in this.
SUMMARY_SUFFIX = ".summary.json"


def headline_metric(is_tile: bool) -> str:
    """The competition's per-collection score: 1 - slowdown@5 (tile) or Kendall tau (layout)."""
    return "score" if is_tile else "kendall_tau"


def headline_label(is_tile: bool) -> str:
    """The headline metric in words: "1 - slowdown@5" (tile) or "Kendall tau" (layout)."""
    return HEADLINE_LABELS[headline_metric(is_tile)]


def graph_headline(graph, score: np.ndarray, runtime: np.ndarray | None = None) -> float:
    """The headline of one graph's scores: Kendall tau on a layout graph (0 where either
    side is constant), 1 - slowdown@5 on a tile graph (on runtime / normalizer). score
    float (n_configs,), higher is faster; runtime (n_configs,), the graph's own when
    None."""
    _check_graph(graph, "graph_headline")
    score = _numbers(score, "graph_headline: score")
    runtime = graph.config_runtime if runtime is None else _numbers(
        runtime, "graph_headline: runtime")
    if score.shape != (graph.n_configs,) or not np.isfinite(score).all():
        raise XlarankError(f"{graph.path}: scores must be {graph.n_configs} finite numbers, "
                           f"one per config (got shape {score.shape}"
                           f"{'' if np.isfinite(score).all() else ', not all finite'})")
    if runtime.shape != (graph.n_configs,):
        raise XlarankError(f"{graph.path}: runtimes must be {graph.n_configs} numbers, one "
                           f"per config (got shape {runtime.shape})")
    if isinstance(graph, TileGraph):
        return 1.0 - slowdown_at(score, runtime / graph.config_runtime_normalizers, 5)
    value = kendall_tau(score, runtime)
    return 0.0 if np.isnan(value) else value


def _numbers(values, what: str) -> np.ndarray:
    """``values`` as float64; `ArgumentTypeError` naming ``what`` where they are not an
    array of numbers (text, objects, integers past float64, ragged lists)."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{what}: expected an array of numbers, got "
                                f"{type(values).__name__}"
                                f"{'' if array is None else f' of {array.dtype}'}")
    return array.astype(np.float64)


class InGraphSplit:
    """One graph's distinct configs split at random into measured and held-out ones: the
    in-graph protocol (train on some configs of a graph, rank the rest), drawn one way.

    The distinct configs are numbered by first appearance, as a deduplicated frame orders
    them: first int64 (d,) ascending config indices, group int64 (n_configs,) each
    config's distinct config, median float64 (d,) its median runtime. measured and held
    are int64 ascending positions into first: ``max(2, round(share * d))`` measured
    (Python's round, halves to even), at most d - 1, the rest held out; every run of a
    config lands on its side.
    """

    def __init__(self, graph, share: float, seed: int):
        from xlarank.data.distinct import distinct_configs

        if not 0.0 < share < 1.0:
            raise XlarankError(f"the measured share must lie between 0 and 1, not {share}")
        distinct = distinct_configs(graph)
        self.first, self.group = distinct.in_config_order()
        d = len(self.first)
        if d < 3:
            raise XlarankError(f"{graph.path}: {d} distinct config(s); an in-graph split "
                               "needs 3 or more")
        self.runtime = distinct.runtime
        # The same medians, in config order (in_config_order sorts the firsts).
        self.median = distinct.median[np.argsort(distinct.first, kind="stable")]
        order = np.random.default_rng(seed).permutation(d)
        m = min(d - 1, max(2, round(share * d)))
        self.measured, self.held = np.sort(order[:m]), np.sort(order[m:])

    @property
    def held_first(self) -> np.ndarray:
        """int64 (held,): the held-out configs' first config indices."""
        return self.first[self.held]

    @property
    def held_median(self) -> np.ndarray:
        """float64 (held,): the held-out configs' median runtimes."""
        return self.median[self.held]

    def measured_runs(self) -> pd.DataFrame:
        """Every run of a measured config: config_index, runtime (the measured-runtimes
        table that `rank_graph` reads), in config order."""
        rows = np.flatnonzero(np.isin(self.group, self.measured))
        return pd.DataFrame({"config_index": rows, "runtime": self.runtime[rows]})

    def measured_medians(self) -> pd.Series:
        """float64 median runtime of each measured config, indexed by its first config
        index (ascending): what a system's ``fit_graph`` takes."""
        return pd.Series(self.median[self.measured], index=self.first[self.measured])


def in_graph_split(graph, share: float, seed: int) -> InGraphSplit:
    """`InGraphSplit` of ``graph``: ``share`` of its distinct configs measured, drawn by
    ``seed``."""
    _check_graph(graph, "in_graph_split")
    checked_type(share, (int, float, np.integer, np.floating), "in_graph_split: share",
                 "a number in (0, 1)")
    seed = check_booster_seed(seed, "in_graph_split: seed")
    return InGraphSplit(graph, share, seed)


def _check_graph(graph, what: str) -> None:
    from xlarank.data.graph import Graph

    checked_type(graph, Graph, f"{what}: graph", "a graph from xlarank.load_graph")


def check_scores(score: np.ndarray, graph_ids: np.ndarray | None, where: str,
                 inputs=None) -> None:
    """Refuse a model's scores that are not finite (`BadModelError`), and warn where it
    gives every config of a graph one score though the graph's configs differ (its order
    is then the file's, not the model's: a model that learned nothing). score float (n,);
    graph_ids (n,) the graph of each row, None for one graph; inputs (n, k) what the
    model saw of each row (configs equal there must score equal), or a callable giving
    it; ``where`` names the model and the data."""
    from xlarank.errors import BadModelError

    score = np.asarray(score, dtype=np.float64)
    if not np.isfinite(score).all():
        raise BadModelError(f"{where}: the model scores {int((~np.isfinite(score)).sum())} "
                            "config(s) NaN or infinite; it is broken, retrain it")
    ids = np.zeros(len(score), np.int64) if graph_ids is None else np.asarray(graph_ids)
    sizes = pd.Series(score).groupby(ids).agg(["size", "nunique"])
    flat = sizes[(sizes["size"] > 1) & (sizes["nunique"] == 1)]
    if len(flat) and inputs is not None:
        rows = inputs() if callable(inputs) else inputs
        flat = flat[[len(np.unique(np.asarray(rows)[ids == g], axis=0)) > 1
                     for g in flat.index]]
    if len(flat):
        warnings.warn(f"{where}: the model gives every config one score on {len(flat)} of "
                      f"{len(sizes)} graph(s); their order is the file's, not a ranking "
                      "(a model that learned nothing: check its spec and training data)",
                      XlarankWarning, stacklevel=3)


def load_eval_indices(path: str | Path) -> dict[str, list[int]]:
    """The official validation subsets: graph name -> config indices (a JSON object)."""
    path = Path(path)
    raw = read_structured(path, "eval indices file")
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise XlarankError(f"{path}: expected a JSON object of graph name -> list of indices")
    for graph, indices in raw.items():
        bad = [i for i in indices if isinstance(i, bool) or not isinstance(i, int) or i < 0]
        if bad:
            raise XlarankError(f"{path}: graph {graph}: {bad[0]!r} is not a config index "
                               "(a whole number >= 0)")
        past = [i for i in indices if i > MAX_CONFIG_INDEX]
        if past:
            raise XlarankError(f"{path}: graph {graph}: config index {past[0]} is out of "
                               f"range (a frame's config indices stop at {MAX_CONFIG_INDEX})")
        seen: set[int] = set()
        twice = next((i for i in indices if i in seen or seen.add(i)), None)
        if twice is not None:
            raise XlarankError(f"{path}: graph {graph}: config index {twice} is listed "
                               "more than once; each config is evaluated once")
    return {str(k): list(v) for k, v in raw.items()}


def check_eval_indices(path: str | Path, eval_indices: dict[str, list[int]],
                       frame: pd.DataFrame, dedup: bool = False) -> None:
    """Refuse (XlarankError naming the eval indices file ``path`` and the graph) an index
    that names no config of its graph in ``frame``, which holds every config of a graph
    unless it is deduplicated (``dedup``): there a missing index may be a copy of a kept
    config, and such indices are left out with an `XlarankWarning`."""
    configs = pd.Series(frame["config_index"].to_numpy(np.int64),
                        index=frame["graph_id"].to_numpy())
    unknown: dict[str, int] = {}
    for graph_id, held in configs.groupby(level=0, sort=False):
        listed = eval_indices.get(str(graph_id))
        if not listed:
            continue
        missing = np.setdiff1d(np.asarray(listed, np.int64), held.to_numpy())
        if len(missing) and not dedup:
            raise XlarankError(f"{path}: graph {graph_id}: config index {missing[0]} is out "
                               f"of range (the frame holds its configs "
                               f"{held.min()}..{held.max()})")
        if len(missing):
            unknown[str(graph_id)] = len(missing)
    if unknown:
        named = ", ".join(list(unknown)[:5]) + (f" and {len(unknown) - 5} more"
                                               if len(unknown) > 5 else "")
        warnings.warn(f"{path}: {sum(unknown.values())} listed config index(es) of "
                      f"{len(unknown)} graph(s) name no config of the deduplicated frame "
                      f"(copies of kept configs, or out of range), left out: {named}",
                      XlarankWarning, stacklevel=2)


def per_graph_metrics(frame: pd.DataFrame, score: np.ndarray, is_tile: bool,
                      eval_indices: dict[str, list[int]] | None = None,
                      where: str = "the frame") -> pd.DataFrame:
    """One row per graph: its configs, Kendall tau, OPA and slowdown@K (tile: and score).

    ``eval_indices`` restricts a listed graph to those config indices; a graph of which
    they keep fewer than 2 configs (no order to measure) is left out with an
    `XlarankWarning` naming it, and if that leaves no graph it is an XlarankError. A frame
    without runtimes (a test split) is refused; ``where`` names the frame in messages.
    """
    if not (frame["runtime"].to_numpy() > 0).any():
        raise XlarankError(f"{where}: the frame has no runtimes (all zero: a test split?); "
                           "evaluate on a labelled split such as valid")
    target = ranking_target(frame, is_tile)
    rows, start = [], 0
    ids = frame["graph_id"].to_numpy()
    if eval_indices is not None:
        missing = len(set(ids) - set(eval_indices))
        if missing:
            warnings.warn(f"{where}: the eval indices list no configs for {missing} of the frame's "
                          f"{len(set(ids))} graphs; those are evaluated on all their configs",
                          XlarankWarning, stacklevel=2)
    configs = frame["config_index"].to_numpy()
    emptied = []
    for size in group_sizes(frame):
        sl = slice(start, start + size)
        start += size
        graph_id, s, t = ids[sl.start], score[sl], target[sl]
        if eval_indices and graph_id in eval_indices:
            keep = np.isin(configs[sl], np.asarray(eval_indices[graph_id], np.int64))
            s, t = s[keep], t[keep]
            if len(t) < 2:
                emptied.append(str(graph_id))
                continue
        row = {"graph_id": graph_id, "configs": len(t), "kendall_tau": kendall_tau(s, t),
               "opa": ordered_pair_accuracy(s, t)}
        for k in TILE_KS if is_tile else LAYOUT_KS:
            row[f"slowdown_{k}"] = slowdown_at(s, t, k)
        if is_tile:
            row["score"] = 1.0 - row["slowdown_5"]
        rows.append(row)
    if emptied:
        named = ", ".join(emptied[:5]) + (f" and {len(emptied) - 5} more" if len(emptied) > 5
                                          else "")
        if not rows:
            raise XlarankError(f"{where}: the eval indices keep fewer than 2 configs of "
                               f"every graph ({named}); no order is left to evaluate")
        warnings.warn(f"{where}: the eval indices keep fewer than 2 configs (no order to "
                      f"evaluate) of {len(emptied)} graph(s), left out of the means: "
                      f"{named}", XlarankWarning, stacklevel=2)
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


def mean_metrics(frame: pd.DataFrame, score: np.ndarray, is_tile: bool,
                 eval_indices: dict[str, list[int]] | None = None) -> dict[str, float]:
    """`summarize` of `per_graph_metrics`: each metric's mean over the frame's graphs.

    Parameters
    ----------
    frame : DataFrame
        A labelled frame (graph_id, config_index, runtime, ...), rows contiguous per graph.
    score : ndarray of shape (n_rows,)
        Higher means predicted faster.
    is_tile : bool
        The frame's collection is tile (slowdown@K and score) rather than layout.
    eval_indices : dict, optional
        Graph name -> the config indices to evaluate (`load_eval_indices`).
    """
    return summarize(per_graph_metrics(frame, score, is_tile, eval_indices))


def headline(frame: pd.DataFrame, score: np.ndarray, is_tile: bool,
             eval_indices: dict[str, list[int]] | None = None) -> float:
    """The collection's headline metric (`headline_metric`) of ``score`` on ``frame``: the
    mean over graphs of Kendall tau (layout) or 1 - slowdown@5 (tile). Arguments as
    `mean_metrics`."""
    return mean_metrics(frame, score, is_tile, eval_indices)[headline_metric(is_tile)]


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


def _summary_record(path: Path) -> dict:
    """One summary JSON as `evaluate_model` writes it, XlarankError naming the file if it
    is not: an object with run, collection, headline and the headline's number."""
    record = read_structured(path, "summary")
    if not isinstance(record, dict):
        raise XlarankError(f"{path}: summary is a JSON {type(record).__name__}, expected an "
                           "object (written by 'xlarank evaluate --out')")
    missing = [k for k in ("run", "collection", "headline") if k not in record]
    if missing:
        raise XlarankError(f"{path}: summary lacks {', '.join(missing)}")
    headline_name = record["headline"]
    if not all(isinstance(record[k], str) for k in ("run", "collection", "headline")):
        raise XlarankError(f"{path}: summary's run, collection and headline must be text")
    value = record.get(headline_name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise XlarankError(f"{path}: summary's headline metric {headline_name!r} is not a "
                           "number")
    if not np.isfinite(value):
        raise XlarankError(f"{path}: summary's headline metric {headline_name!r} is "
                           f"{value}, not a finite number: the run has no score to compare; "
                           "evaluate it again or move the file out")
    try:
        record["collection"] = get_collection(record["collection"]).id
    except XlarankError as exc:
        raise XlarankError(f"{path}: summary names an {exc}") from None
    return record


def compare_runs(folder: str | Path, out: str | Path | None = None) -> pd.DataFrame:
    """Each collection's headline metric across runs, from the summary JSON files that
    `evaluate_model` wrote anywhere under ``folder``.

    Returns a DataFrame indexed by (collection, headline metric name), in the official
    collection order, with one column per run; ``out`` also writes it as CSV.

    Raises
    ------
    XlarankError
        No summary file under ``folder``.
    """
    folder = Path(folder)
    if out is not None:
        check_output(out)
    records = [_summary_record(p) for p in sorted(folder.rglob("*" + SUMMARY_SUFFIX))]
    if not records:
        raise XlarankError(f"{folder}: no *{SUMMARY_SUFFIX} (run 'xlarank evaluate --out')")
    table = pd.DataFrame(records)
    table["value"] = [r[r["headline"]] for r in records]
    wide = table.pivot_table(index=["collection", "headline"], columns="run",
                             values="value", aggfunc="first")
    order = [c.id for c in COLLECTIONS if c.id in wide.index.get_level_values(0)]
    wide = wide.reindex(order, level=0)
    if out is not None:
        with atomic_path(out) as tmp:
            wide.to_csv(tmp)
    return wide
