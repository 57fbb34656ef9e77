"""In-graph ranking: "I measured some configs of my program; rank the rest."

A graph-local booster is fitted on the measured configs of one graph and scores all of
them. Within one graph, which configurable node got which layout is what decides the
runtime (FORMAT.md: per-node identity carries the signal, aggregates over nodes throw it
away), so its inputs are the raw config columns themselves (layout: every configurable
node's 18 columns; tile: the 24 config columns), the graph-local feature families, and,
given a cross-graph model, that model's score as one more column. Columns that are
constant over the graph's configs, or repeat another column, are dropped: they cannot
split these configs.

The booster regresses each measured config's rank quantile (`rank_target`: 0 the
fastest measured, 1 the slowest), not its log runtime. On the real unet3d 628 of the 681
distinct configs lie within 0.1% of each other and 44 are 3x slower: a squared loss on log
runtime spends its trees on separating the few slow configs measured, and when a split
holds only one or two of them (bench/ingraph.py, 10% measured, seed 1) it isolates them
with columns that merely happen to agree on them and loses the order inside the fast
group, which is what Kendall tau counts (tau 0.41 against 0.77-0.82 on the other seeds).
On ranks every pair weighs the same: worst of 10 seeds at 10% 0.76 instead of 0.41, at
5% 0.61 instead of 0.31. Small-sample settings (few leaves, leaves of two configs, one
config per histogram bin), because a user measures tens to hundreds of configs.

The table honours the measurements (`interleaved_scores`): a measured config's score is
minus the log of its measured median runtime; an unmeasured config's is minus the log
runtime a measured config at its predicted place would have (its score's place among the
measured configs' own predicted scores, read off their measured runtimes), so both sit
on one scale and interleave, and the measured configs keep the order of their runtimes.
"""

from __future__ import annotations

import lzma
import os
import re
import tarfile
import warnings
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.data.collections import get_collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph
from xlarank.data.origin import warn_if_synthetic_meets_real
from xlarank.errors import BadInputError, MismatchError, XlarankError, XlarankWarning
from xlarank.features.build import KEY_COLUMNS, featurize_graph
from xlarank.features.spec import FeatureSpec
from xlarank.files import input_path, open_regular
from xlarank.rank.model import load_model
from xlarank.seeds import check_seed
from xlarank.threads import chosen_threads

# The per-config families; ``graph`` is one value per graph, constant here.
IN_GRAPH_SPEC = FeatureSpec("in-graph", ("config_raw", "config_joined", "khop", "config_nodes"))
IN_GRAPH_PARAMS = {
    "objective": "regression", "learning_rate": 0.05, "num_leaves": 7,
    "min_data_in_leaf": 2, "min_data_in_bin": 1, "feature_fraction": 1.0,
    "deterministic": True, "force_row_wise": True, "verbosity": -1,
}
IN_GRAPH_ROUNDS = 300
MEASURED_COLUMNS = ("config_index", "runtime")


class MeasuredError(XlarankError):
    """Measured runtimes that cannot train an in-graph ranker."""


def read_measured(path) -> pd.DataFrame:
    """A measured-runtimes CSV with columns config_index,runtime (more columns are
    ignored): config_index int64 (n,), runtime float64 (n,) in ns."""
    table = _read_table(path)
    missing = [c for c in MEASURED_COLUMNS if c not in table.columns]
    if missing:
        raise MeasuredError(f"{path}: needs columns config_index,runtime; missing {missing}")
    return check_measured(table[list(MEASURED_COLUMNS)], str(path))


def read_measured_rows(path) -> pd.DataFrame:
    """`read_measured`, refusing a file of no rows (a header alone): ranking needs runtimes,
    and the fault is the CSV's, not the graph's."""
    table = read_measured(path)
    if table.empty:
        raise MeasuredError(f"{path}: no measured rows (a header alone); give the runtimes "
                            "of at least two configs")
    return table


# pandas picks a decompressor from these endings of a file name.
_COMPRESSED = (".gz", ".bz2", ".zip", ".xz", ".zst", ".tar", ".tgz", ".tbz2", ".txz")
# What the decompressors and the parser raise on a file that is not what its name says.
_READ_FAULTS = (OSError, ValueError, EOFError, ImportError, lzma.LZMAError,
                zipfile.BadZipFile, zlib.error, tarfile.TarError)


def measured_path(path) -> Path:
    """The file a measured-runtimes path names, as `read_measured` opens it
    (`xlarank.files.input_path`: ``~`` expanded, as pandas does, never a URL)."""
    return input_path(path)


def _read_table(path) -> pd.DataFrame:
    """The CSV's rows as text, columns named by its first line, or MeasuredError naming
    the file and the fault: a row with more fields than the header (which pandas would
    otherwise take for an index column, shifting every value), or a file whose name's
    compression ending does not match its content."""
    from pandas.io.common import infer_compression

    # Opened here, as pandas would resolve the name (~ expanded), but never as a URL and
    # never a FIFO or a device; the compression follows the name's ending, as in pandas.
    where = measured_path(path)
    try:
        with open_regular(where, "measured runtimes CSV") as handle:
            raw = pd.read_csv(handle, header=None, dtype=str, index_col=False,
                              compression=infer_compression(str(where), "infer"))
    except BadInputError as exc:
        fault = str(exc).split(": measured runtimes CSV ", 1)[-1]
        raise MeasuredError(f"{path}: cannot read measured runtimes ({fault})") from None
    except pd.errors.EmptyDataError:
        raise MeasuredError(f"{path}: cannot read measured runtimes (the file is empty)"
                            ) from None
    except pd.errors.ParserError as exc:
        found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if found is None:
            raise MeasuredError(f"{path}: cannot read measured runtimes ({exc})") from None
        header, line, saw = map(int, found.groups())
        raise MeasuredError(f"{path}: row {line - 1} (line {line}) has extra fields: {saw}, "
                            f"the header has {header}") from None
    except _READ_FAULTS as exc:
        ending = next((e for e in _COMPRESSED if str(path).lower().endswith(e)), None)
        how = (f"; its name ends in {ending}, so it is read as {ending[1:]}-compressed: "
               "rename a plain CSV to .csv" if ending else "")
        # Some decompressors explain over several lines; the error is one.
        reason = ("not UTF-8 text: save it as UTF-8" if isinstance(exc, UnicodeDecodeError)
                  else " ".join(str(getattr(exc, "strerror", None) or exc).split()))
        raise MeasuredError(f"{path}: cannot read measured runtimes ({reason}){how}"
                            ) from None
    header = [str(name) for name in raw.iloc[0]] if len(raw) else []
    table = raw.iloc[1:].reset_index(drop=True)
    table.columns = header
    return table


def check_measured(measured: pd.DataFrame, where: str = "measured") -> pd.DataFrame:
    """Measured rows with whole config indices and finite positive runtimes, else
    `MeasuredError` naming ``where`` and the first bad row."""
    missing = [c for c in MEASURED_COLUMNS if c not in measured.columns]
    if missing:
        raise MeasuredError(f"{where}: needs columns config_index,runtime; missing {missing}")
    index = pd.to_numeric(measured["config_index"], errors="coerce").to_numpy(np.float64)
    runtime = pd.to_numeric(measured["runtime"], errors="coerce").to_numpy(np.float64)
    # Past 2^53 a float index is no longer whole-number exact (and past 2^63 the cast
    # below would wrap): no graph has that many configs.
    bad_index = (~np.isfinite(index) | (index != np.round(index)) | (index < 0)
                 | (index >= 2.0**53))
    bad_runtime = ~np.isfinite(runtime) | (runtime <= 0)
    for name, bad in (("config_index is not a whole number >= 0", bad_index),
                      ("runtime is not a positive number", bad_runtime)):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise MeasuredError(f"{where}: row {row + 1}: {name} "
                                f"({measured.iloc[row].to_dict()})")
    return pd.DataFrame({"config_index": index.astype(np.int64), "runtime": runtime})


def config_columns(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """float32 (n_configs, n_raw): the raw config columns, one row per config."""
    if isinstance(graph, TileGraph):
        return graph.config_feat.astype(np.float32)
    if graph.node_config_feat is None:  # loaded with configs=False: read them block by block
        with config_blocks(graph) as blocks:
            parts = [block.reshape(len(block), -1) for block, _ in blocks]
        return np.concatenate(parts).astype(np.float32)
    return graph.node_config_feat.reshape(graph.n_configs, -1).astype(np.float32)


def _informative(x: np.ndarray) -> np.ndarray:
    """int64 ids of the columns of x (n, m) that vary over the rows, first of each set of
    identical columns."""
    varying = np.flatnonzero((x != x[:1]).any(axis=0))
    # Identical columns have identical random projections; distinct ones differ with
    # probability 1 (a sort of m numbers instead of m columns of n values).
    weights = np.random.default_rng(0).random(len(x))
    _, first = np.unique(weights @ x[:, varying].astype(np.float64), return_index=True)
    return varying[np.sort(first)]


def in_graph_inputs(graph: TileGraph | LayoutGraph, prior=None,
                    spec: FeatureSpec = IN_GRAPH_SPEC) -> tuple[np.ndarray, list[str]]:
    """The booster's inputs for every config: float32 (n_configs, n_inputs) and names."""
    raw = config_columns(graph)
    frame = featurize_graph(graph, spec)
    features = frame.iloc[:, len(KEY_COLUMNS):]
    blocks = [raw, features.to_numpy(np.float32)]
    names = [f"raw{i}" for i in range(raw.shape[1])] + list(features.columns)
    if prior is not None:
        prior_block = featurize_graph(graph, prior.feature_spec)
        blocks.append(prior.predict(prior_block).astype(np.float32)[:, None])
        names.append("prior_score")
    x = np.hstack(blocks)
    keep = _informative(x)
    return np.ascontiguousarray(x[:, keep]), [names[i] for i in keep]


def checked_prior(graph: TileGraph | LayoutGraph, prior):
    """``prior`` loaded (a model directory, or a ranker as is; None stays None), after
    refusing (`MismatchError`) a model of another collection than the graph's."""
    if prior is not None and not hasattr(prior, "predict"):
        if not isinstance(prior, str | os.PathLike):
            raise TypeError(f"prior: expected a model directory (str or Path) or a loaded "
                            f"model (xlarank.load_model), got {type(prior).__name__}")
        prior = load_model(prior)
    if prior is not None:
        trained_on = prior.card["collection"]
        if (graph.collection.id != trained_on if graph.collection is not None
                else get_collection(trained_on).is_tile != isinstance(graph, TileGraph)):
            kind = (graph.collection.id if graph.collection is not None
                    else "tile" if isinstance(graph, TileGraph) else "layout")
            raise MismatchError(f"{graph.path}: collection {kind}, but the prior model was "
                                f"trained on {trained_on}")
        if graph.path is not None:
            warn_if_synthetic_meets_real(prior.card, [graph.path], "the --prior model")
    return prior


def rank_graph(graph, measured: pd.DataFrame, prior=None, seed: int = 0,
               threads: int | None = None, spec: FeatureSpec = IN_GRAPH_SPEC) -> pd.DataFrame:
    """Rank every config of one graph from the runtimes of some of them.

    graph: a TileGraph or LayoutGraph (with its configs or ``configs=False``: then they
    are read again), or an npz path; measured: a DataFrame (or a dict of columns) with
    config_index and runtime (ns), or a CSV path (`read_measured`); the file's own
    runtimes are never read, so a test file (runtimes all zero) is the normal case.
    Repeats of one config index are combined by their median. prior: a model directory
    or a loaded ranker of the graph's collection, whose score becomes one more input.
    spec: the feature families beside the raw columns (for ablations; the default is
    IN_GRAPH_SPEC). threads: the booster's (None or 0: the process's chosen count,
    `xlarank.threads`).

    Returns a DataFrame of n_configs rows, best first: rank (1 = predicted fastest),
    config_index, score (higher is faster: minus the log runtime, measured where measured,
    else predicted: `interleaved_scores`), measured (bool), runtime (the measured
    median, NaN where not measured) and copy_of (`ranked_table`: exact copies of a config
    share its place). Measured configs appear in the order of their runtimes, unmeasured
    ones between them where the booster places them; the rank column keeps the booster's
    order where scores tie (beyond the measured range). A booster that gives every
    unmeasured config one score (too few measured) is warned about (XlarankWarning) and
    replaced by each config's nearest measured config (`nearest_measured_scores`).
    Raises `MeasuredError` for unknown config indices, fewer than two distinct measured
    configs, or runtimes that are all equal; `MismatchError` for a prior of another
    collection; TypeError for arguments of the wrong type, XlarankError for negative
    threads.
    """
    import lightgbm as lgb

    graph = graph_with_configs(graph)
    measured = measured_table(measured)
    seed, threads = check_seed(seed, "seed"), _threads(threads)
    groups = config_groups(graph)
    runtime = measured_runtimes(graph, measured, groups)
    rows = runtime.index.to_numpy(np.int64)
    prior = checked_prior(graph, prior)
    x, names = in_graph_inputs(graph, prior, spec)
    threads = threads or chosen_threads()
    params = {**IN_GRAPH_PARAMS, "seed": seed, "num_threads": threads}
    data = lgb.Dataset(x[rows], label=rank_target(runtime.to_numpy()), feature_name=names,
                       params={"min_data_in_bin": 1, "verbosity": -1})
    booster = lgb.train(params, data, num_boost_round=IN_GRAPH_ROUNDS)
    score = -booster.predict(x, num_threads=threads)
    if constant_unmeasured(score, runtime, groups):
        warnings.warn(XlarankWarning(
            f"{graph.path}: the graph-local booster gave every unmeasured config one score "
            f"from {len(runtime)} measured configs; they are ordered by their nearest "
            "measured config instead: measure more configs for a model's order"),
            stacklevel=2)
        score = nearest_measured_scores(graph, runtime)
    return ranked_table(interleaved_scores(score, runtime), runtime, tiebreak=score,
                        groups=groups)


def rank_target(runtime: np.ndarray) -> np.ndarray:
    """float64 (n,): each runtime's rank quantile, (rank - 0.5) / n with rank 1 the
    fastest; equal runtimes share their mean rank."""
    from scipy.stats import rankdata

    return (rankdata(runtime) - 0.5) / len(runtime)


def interleaved_scores(score: np.ndarray, runtime: pd.Series) -> np.ndarray:
    """Scores of every config on one scale, minus log runtime (higher is faster).

    score: float64 (n_configs,), any model's score (higher is predicted faster);
    runtime: measured medians indexed by config index. A measured config gets minus the
    log of its runtime. An unmeasured one gets the measured log runtime found at its
    score's place among the measured configs' own scores (the k-th lowest measured score
    maps to the k-th slowest measured runtime, linear in between, the nearest end
    beyond). The map is flat beyond the ends (and where measured runtimes are equal), so
    `ranked_table` breaks such ties by the model's own score. Returns float64 (n_configs,).
    """
    rows = runtime.index.to_numpy(np.int64)
    measured_score = -np.log(runtime.to_numpy(np.float64))
    mapped = np.interp(score, np.sort(score[rows]), np.sort(measured_score))
    mapped[rows] = measured_score
    return mapped


def graph_with_configs(graph) -> TileGraph | LayoutGraph:
    """``graph`` (a TileGraph, a LayoutGraph, or an npz path) with its configs in memory: a
    layout graph loaded with ``configs=False`` (the scoring form) is read again whole."""
    if isinstance(graph, LayoutGraph) and graph.node_config_feat is None:
        return load_graph(graph.path, collection=graph.collection)
    if isinstance(graph, TileGraph | LayoutGraph):
        return graph
    if isinstance(graph, str | os.PathLike):
        return load_graph(graph)
    raise TypeError(f"graph: expected an npz path (str or Path) or a graph from "
                    f"xlarank.load_graph, got {type(graph).__name__}")


def measured_table(measured) -> pd.DataFrame:
    """Measured runtimes as a DataFrame: one given, a dict of columns (config_index,
    runtime), or a CSV path (`read_measured`); TypeError for anything else."""
    if isinstance(measured, pd.DataFrame):
        return measured
    if isinstance(measured, Mapping):
        try:
            return pd.DataFrame(dict(measured))
        except ValueError as exc:
            raise MeasuredError(f"measured: the dict's columns do not make a table ({exc})"
                                ) from None
    if isinstance(measured, str | os.PathLike):
        return read_measured(measured)
    raise TypeError("measured: expected a DataFrame (or a dict of columns) with "
                    "config_index and runtime, or a CSV path, got "
                    f"{type(measured).__name__}")


def _whole(value, name: str) -> int:
    # bool is an int to Python, but seed=True is a mistake, not a seed.
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def _threads(threads) -> int | None:
    if threads is None:
        return None
    threads = _whole(threads, "threads")
    if threads < 0:
        raise XlarankError(f"threads={threads}: give 0 or None (the chosen count) or a "
                           "positive number")
    return threads


def config_groups(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """int64 (n_configs,): for each config, the lowest index of the configs whose raw
    columns are exactly its own (its own index when it has no copy)."""
    x = config_columns(graph)
    _, first, inverse = np.unique(x, axis=0, return_index=True, return_inverse=True)
    return first.astype(np.int64)[inverse.reshape(-1)]


def measured_runtimes(graph: TileGraph | LayoutGraph, measured: pd.DataFrame,
                      groups: np.ndarray | None = None) -> pd.Series:
    """float64 runtimes (ns) indexed by config index: the median of each measured config,
    all measurements of exact copies of one config pooled into one median (`config_groups`),
    after refusing (`MeasuredError`) a graph without configs, unknown config indices,
    fewer than two distinct measured configs, or runtimes that are all equal."""
    if graph.n_configs == 0:
        raise MeasuredError(f"{graph.path}: the graph has no configs to rank")
    measured = check_measured(measured)
    unknown = measured["config_index"] >= graph.n_configs
    if unknown.any():
        first_unknown = int(measured["config_index"][unknown].iloc[0])
        raise MeasuredError(f"{graph.path}: config_index {first_unknown} is not among its "
                            f"{graph.n_configs} configs")
    groups = config_groups(graph) if groups is None else groups
    # Exact copies of one config are one config: all their measurements pool into one
    # median, which each measured copy gets (conflicting repeats ranked them far apart).
    group = groups[measured["config_index"].to_numpy(np.int64)]
    pooled = measured["runtime"].groupby(group).median()
    rows = np.unique(measured["config_index"].to_numpy(np.int64))
    runtime = pd.Series(pooled.loc[groups[rows]].to_numpy(np.float64),
                        index=pd.Index(rows, name="config_index"), name="runtime")
    if len(pooled) < 2:
        raise MeasuredError(f"{graph.path}: fewer than 2 distinct configs measured; an "
                            "order needs at least two")
    if runtime.nunique() < 2:
        raise MeasuredError(f"{graph.path}: every measured runtime is equal; nothing to learn")
    return runtime


def ranked_table(score: np.ndarray, runtime: pd.Series,
                 tiebreak: np.ndarray | None = None,
                 groups: np.ndarray | None = None) -> pd.DataFrame:
    """Every config best first: rank (1 = predicted fastest), config_index, score (higher
    is faster), measured (bool), runtime (the measured median, NaN where not measured)
    and copy_of. score: float64 (n_configs,); runtime: measured medians indexed by config
    index; tiebreak: float64 (n_configs,) or None, higher first among equal scores;
    groups: `config_groups` or None (no copies known). Equal scores put measured configs
    first (known beats predicted), then follow tiebreak, then config order.

    Exact copies of a config share its place: each takes the score, tiebreak and
    runtime of its representative (the lowest measured index among the copies, else the
    lowest index), so they sit together, right after it, and copy_of names it (-1 for
    a config that is no copy)."""
    n_configs = len(score)
    score = np.asarray(score, np.float64)
    second = np.zeros(n_configs) if tiebreak is None else -np.asarray(tiebreak, np.float64)
    measured_runtime = np.full(n_configs, np.nan)
    measured_runtime[runtime.index.to_numpy(np.int64)] = runtime.to_numpy()
    measured = ~np.isnan(measured_runtime)
    rep = np.arange(n_configs) if groups is None else representatives(groups, measured)
    score, second, shown_runtime = score[rep], second[rep], measured_runtime[rep]
    order = np.lexsort((np.arange(n_configs), second, ~measured, -score))
    copy_of = np.where(rep != np.arange(n_configs), rep, -1)
    return pd.DataFrame({
        "rank": np.arange(1, n_configs + 1),
        "config_index": order,
        "score": score[order],
        "measured": measured[order],
        "runtime": shown_runtime[order],
        "copy_of": copy_of[order],
    })


def representatives(groups: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """int64 (n_configs,): each config's representative among its exact copies (groups:
    `config_groups`): the lowest measured index of the group, else its lowest index."""
    n = len(groups)
    order = np.lexsort((np.arange(n), ~measured, groups))
    ordered = groups[order]
    firsts = order[np.r_[True, ordered[1:] != ordered[:-1]]]
    chosen = np.full(n, -1, np.int64)
    chosen[groups[firsts]] = firsts
    return chosen[groups]


def constant_unmeasured(score: np.ndarray, runtime: pd.Series,
                        groups: np.ndarray) -> bool:
    """Whether a model gave every distinct unmeasured config (at least two) one score:
    then its order says nothing, and `ranked_table` would list them in index order."""
    measured = np.zeros(len(score), bool)
    measured[runtime.index.to_numpy(np.int64)] = True
    free = np.unique(groups)
    free = free[~measured[representatives(groups, measured)[free]]]
    if len(free) < 2:
        return False
    values = np.asarray(score, np.float64)[free]
    return bool(np.ptp(values) <= 1e-9 * max(1.0, float(np.abs(values).max())))


def nearest_measured_scores(graph: TileGraph | LayoutGraph, runtime: pd.Series
                            ) -> np.ndarray:
    """float64 (n_configs,): minus the log runtime of each config's nearest measured
    config (L1 over the raw config columns that vary, each scaled to its range), minus a
    small share of that distance, so nearer configs come first among those of one
    neighbour. The fallback order where a model predicts one score for all."""
    x = config_columns(graph)
    varying = np.flatnonzero((x != x[:1]).any(axis=0))
    x = x[:, varying].astype(np.float32)
    span = x.max(axis=0) - x.min(axis=0) if len(varying) else np.ones(0, np.float32)
    x = x / np.where(span > 0, span, 1)
    rows = runtime.index.to_numpy(np.int64)
    measured_score = -np.log(runtime.to_numpy(np.float64))
    best = np.full(len(x), np.inf)
    score = np.zeros(len(x))
    for row, value in zip(rows, measured_score):
        distance = np.abs(x - x[row]).sum(axis=1, dtype=np.float64)
        nearer = distance < best
        best[nearer], score[nearer] = distance[nearer], value
    spread = np.ptp(measured_score) or 1.0
    return score - 1e-3 * spread * best / max(1.0, float(best.max()))
