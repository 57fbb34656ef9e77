"""The measured configs of one graph: what a user measured, read, checked and merged, the
graph's distinct configs, and the ranked table every in-graph ranker returns.

- the measured CSV (`read_measured`: config_index,runtime in ns) and its checks
  (`check_measured`, `check_known`), or a table given from Python (`measured_table`);
- repeats merged: each measured config's median, all measurements of exact copies of one
  config (equal in every raw config column) pooled into one median (`measured_runtimes`,
  float64 indexed by config index: the one representation of measured runtimes that
  rank-graph, the tuner and the systems pass on);
- the graph's distinct configs (`distinct_configs`: first index, group and the file's own
  median runtime per group, from `xlarank.data.distinct`, which featurizing shares;
  `config_groups`: each config's lowest copy);
- the ranked table (`ranked_table`: every config best first, copies beside the config they
  copy) on one scale of minus log runtime (`interleaved_scores`).

The in-graph booster that ranks them is `xlarank.rank.ingraph`.
"""

from __future__ import annotations

import lzma
import os
import re
import tarfile
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

# The distinct configs are the data layer's (featurizing uses them too); they are part of
# the measured configs' home, so they are named here as well.
from xlarank.data.distinct import DistinctConfigs as DistinctConfigs
from xlarank.data.distinct import config_columns as config_columns
from xlarank.data.distinct import distinct_configs
from xlarank.data.distinct import varying_columns as varying_columns
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.errors import ArgumentTypeError, BadInputError, XlarankError
from xlarank.files import input_path, open_regular

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
    checked = check_measured(table[list(MEASURED_COLUMNS)], str(path))
    # Later errors about these rows (an unknown config index) name the CSV.
    checked.attrs["source"] = str(path)
    return checked


def measured_source(measured, where: str = "measured") -> str:
    """What errors about a measured table call it: ``where`` if given, else the CSV it
    was read from (`read_measured`), else "measured"."""
    if where != "measured":
        return where
    attrs = getattr(measured, "attrs", None)
    return str(attrs.get("source", where)) if isinstance(attrs, dict) else where


def read_config_indices(path) -> list[int]:
    """The config_index column of a CSV (xlarank suggest's output, or a measured CSV):
    the configs to measure next, checked as whole numbers >= 0."""
    table = _read_table(path)
    if "config_index" not in table.columns:
        raise MeasuredError(f"{path}: needs a config_index column")
    rows = check_measured(table.assign(runtime=1.0)[list(MEASURED_COLUMNS)], str(path))
    return rows["config_index"].tolist()


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


def read_measured_state(path: str | Path | None) -> pd.DataFrame:
    """The measured table a tuner resumes from: `read_measured`'s, or an empty table
    (config_index, runtime) for no path or an empty file (a header-only CSV reads as
    empty by itself)."""
    if path is None or _blank(path):
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in
                             zip(MEASURED_COLUMNS, (np.int64, np.float64))})
    return read_measured(path)


def _blank(path: str | Path) -> bool:
    """Whether the measured CSV at ``path`` holds nothing but white space (bytes, so a
    file that is not UTF-8 is `read_measured`'s to refuse); False where it cannot be
    opened (`read_measured` says why)."""
    try:
        with open_regular(measured_path(path), "measured runtimes CSV") as handle:
            return not handle.read().strip()
    except (BadInputError, OSError):
        return False


def check_measured(measured: pd.DataFrame, where: str = "measured") -> pd.DataFrame:
    """Measured rows with whole config indices and finite positive runtimes, else
    `MeasuredError` naming ``where`` and the first bad row."""
    missing = [c for c in MEASURED_COLUMNS if c not in measured.columns]
    if missing:
        raise MeasuredError(f"{where}: needs columns config_index,runtime; missing {missing}")
    for name in MEASURED_COLUMNS:
        if int((measured.columns == name).sum()) > 1:
            raise MeasuredError(f"{where}: column {name!r} appears more than once in the "
                                "header; give each column once")
    index = _numbers(measured["config_index"])
    runtime = _numbers(measured["runtime"])
    # Past 2^53 a float index is no longer whole-number exact (and past 2^63 the cast
    # below would wrap): no graph has that many configs.
    bad_index = (~np.isfinite(index) | (index != np.round(index)) | (index < 0)
                 | (index >= 2.0**53))
    bad_runtime = ~np.isfinite(runtime) | (runtime <= 0)
    for name, bad in (("config_index is not a whole number >= 0", bad_index),
                      ("runtime is not a positive number", bad_runtime)):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            shown = {key: _short(value) for key, value in
                     zip(MEASURED_COLUMNS, measured.iloc[row][list(MEASURED_COLUMNS)])}
            raise MeasuredError(f"{where}: row {row + 1}: {name} ({shown})")
    return pd.DataFrame({"config_index": index.astype(np.int64), "runtime": runtime})


def _numbers(column: pd.Series) -> np.ndarray:
    """float64 (n,) of one measured column: NaN where a value is no real number (text
    that is none, a complex number with an imaginary part, any other object), infinite
    where it is past the float64 range (a Python int of 400 digits), for
    `check_measured` to refuse by row."""
    try:
        values = pd.to_numeric(column, errors="coerce")
    except (OverflowError, TypeError, ValueError):
        # One value past float64 fails the whole column: each is read alone.
        return np.array([_number(value) for value in column], np.float64)
    if values.dtype.kind == "c":
        # A complex runtime is no runtime: its imaginary part would be dropped silently.
        values = np.asarray(values)
        return np.where(values.imag == 0, values.real, np.nan)
    return pd.Series(values).to_numpy(np.float64, na_value=np.nan)


def _number(value) -> float:
    """One value of a column `_numbers` could not read whole: infinite for a whole number
    past float64, NaN for anything else it cannot read."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return np.inf
    try:
        number = pd.to_numeric(pd.Series([value], dtype=object), errors="coerce")
    except (OverflowError, TypeError, ValueError):
        return np.nan
    return float(number.iloc[0]) if number.dtype.kind in "fiub" else np.nan


# An error echoes at most this much of one value (a row can hold megabytes).
_SHOWN_CHARS = 40


def _short(value) -> object:
    """``value`` as an error shows it: text (or any other value's repr, such as a whole
    number of 400 digits) past `_SHOWN_CHARS` characters cut, with "..."."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return value[:_SHOWN_CHARS] + "..."
    if not isinstance(value, str) and len(shown := repr(value)) > _SHOWN_CHARS:
        return shown[:_SHOWN_CHARS] + "..."
    return value


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
    raise ArgumentTypeError(f"graph: expected an npz path (str or Path) or a graph from "
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
    raise ArgumentTypeError("measured: expected a DataFrame (or a dict of columns) with "
                    "config_index and runtime, or a CSV path, got "
                    f"{type(measured).__name__}")


def config_groups(graph: TileGraph | LayoutGraph) -> np.ndarray:
    """int64 (n_configs,): for each config, the lowest index of the configs whose raw
    columns are exactly its own (its own index when it has no copy)."""
    return distinct_configs(graph).lowest


def check_known(graph: TileGraph | LayoutGraph, measured: pd.DataFrame,
                where: str = "measured") -> None:
    """`MeasuredError` naming ``where`` and the graph unless every config_index of the
    (checked) measured table is one of the graph's configs."""
    where = measured_source(measured, where)
    unknown = measured["config_index"] >= graph.n_configs
    if unknown.any():
        first_unknown = int(measured["config_index"][unknown].iloc[0])
        raise MeasuredError(f"{where}: config_index {first_unknown} is not among the "
                            f"{graph.n_configs} configs of the graph {graph.path}")


def measured_runtimes(graph: TileGraph | LayoutGraph, measured: pd.DataFrame,
                      groups: np.ndarray | None = None, where: str = "measured"
                      ) -> pd.Series:
    """float64 runtimes (ns) indexed by config index: the median of each measured config,
    all measurements of exact copies of one config pooled into one median (`config_groups`),
    after refusing (`MeasuredError`) a graph without configs, unknown config indices,
    fewer than two distinct measured configs, or runtimes that are all equal; ``where``
    names the measurements in those errors."""
    if graph.n_configs == 0:
        raise MeasuredError(f"{graph.path}: the graph has no configs to rank")
    where = measured_source(measured, where)
    measured = check_measured(measured, where)
    check_known(graph, measured, where)
    groups = config_groups(graph) if groups is None else groups
    # Exact copies of one config are one config: all their measurements pool into one
    # median, which each measured copy gets (conflicting repeats ranked them far apart).
    pooled = group_medians(measured, groups)
    if len(pooled) < 2 and _configurable_nodes(graph) == 0:
        raise MeasuredError(f"{graph.path}: the graph has no configurable nodes "
                            "(node_config_ids is empty): its configs are all one, nothing "
                            f"to rank ({where})")
    rows = np.unique(measured["config_index"].to_numpy(np.int64))
    runtime = pd.Series(pooled.loc[groups[rows]].to_numpy(np.float64),
                        index=pd.Index(rows, name="config_index"), name="runtime")
    if len(pooled) < 2:
        raise MeasuredError(f"{graph.path}: fewer than 2 distinct configs measured; an "
                            "order needs at least two")
    if runtime.nunique() < 2:
        raise MeasuredError(f"{graph.path}: every measured runtime is equal; nothing to learn")
    return runtime


def _configurable_nodes(graph: TileGraph | LayoutGraph) -> int | None:
    """How many configurable nodes a layout graph has (None for a tile graph)."""
    ids = getattr(graph, "node_config_ids", None)
    return None if ids is None else len(ids)


def group_medians(measured: pd.DataFrame, groups: np.ndarray) -> pd.Series:
    """float64 median runtime of each measured group (groups: int64 (n_configs,), a group
    id per config: `config_groups` or `DistinctConfigs.group`), indexed by the group,
    sorted: all measurements of one config and of its exact copies are one median."""
    group = groups[measured["config_index"].to_numpy(np.int64)]
    return measured["runtime"].groupby(group).median().sort_index()


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


