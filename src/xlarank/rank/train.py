"""Training one ranker: the preparation and the card that every engine shares.

Both engines refuse the same frames (`check_trainable`), draw and label the same rows
(`training_arrays`: locally on a frame in memory or on a frame file one row group at a time,
`xlarank.rank.dask` per partition of whole graphs) and write the same card
(`build_card`); they differ only in the adapter's fit call (`fit` here, `fit_dask` there).

`train_from_specs` is what ``xlarank train`` runs: booster or ensemble spec files, either
engine, a validation frame's metrics in the card, the model directory written.
"""

from __future__ import annotations

import platform
import time
import warnings
import zlib
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank import __version__
from xlarank.data.collections import Collection, get_collection
from xlarank.errors import MismatchError, XlarankError, XlarankWarning
from xlarank.files import input_path
from xlarank.frame import FrameMeta, check_columns, check_rows, group_sizes, read_keys, read_meta
from xlarank.rank.boosters import get_library
from xlarank.rank.labels import faster_share, log_slowdown, relevance_grades
from xlarank.rank.ranker import MODEL_FORMAT, Ranker
from xlarank.rank.spec import RankerSpec, check_seed
from xlarank.target import ranking_target

# Fewer graphs than this teach a cross-graph ranker little: a ranker trained on one real
# record scored 32 candidates of another program with 17 distinct scores, its top 4 tied.
MIN_TRAINING_GRAPHS = 5


def check_trainable(meta: FrameMeta, spec: RankerSpec, runtime: np.ndarray | None = None,
                    graph_ids: np.ndarray | None = None, *, where: str = "frame",
                    spec_label: str | None = None) -> Collection:
    """The frame's collection, after refusing frames this spec cannot train on: frames of
    another feature spec or of a collection the spec is not made for and, given the
    frame's runtimes (n_rows,), frames without rows or without runtimes (a test split).
    Given also each row's graph id (n_rows,), a frame where no graph has two configs of
    different runtimes is refused, and one where some graphs have none gets an
    `XlarankWarning`: such a graph teaches no ranking. ``where`` names the frame and
    ``spec_label`` the spec (as the user gave it; the spec's own name by default) in the
    messages."""
    label = spec_label or repr(spec.name)
    check_seed(spec.seed, f"booster spec {label}", XlarankError)
    if meta.spec["name"] != spec.features:
        raise MismatchError(f"{where} has feature spec {meta.spec['name']!r}, booster spec "
                            f"{label} wants {spec.features!r}")
    collection = get_collection(meta.collection)
    if spec.collections and collection.id not in spec.collections:
        raise MismatchError(f"{where} is of {collection.id}, booster spec {label} is made "
                            f"for {', '.join(spec.collections)}")
    if runtime is not None:
        if len(runtime) == 0:
            raise XlarankError(f"{where}: the training frame has no rows")
        if not (runtime > 0).any():
            raise MismatchError(f"{where}: the training frame has no runtimes (all zero: a "
                                "test split?)")
    if runtime is not None and graph_ids is not None:
        distinct = pd.Series(runtime).groupby(graph_ids, sort=False).nunique()
        flat = int((distinct < 2).sum())
        if flat == len(distinct):
            raise XlarankError(
                f"{where}: the training frame's {len(distinct)} graph(s) each have one "
                "distinct config or all-equal runtimes: there is no ranking to learn; "
                "featurize more graphs (or --no-dedup if duplicates were merged)")
        if flat:
            warnings.warn(f"{flat} of {len(distinct)} training graphs have one distinct "
                          "config or all-equal runtimes; they teach the ranker nothing",
                          XlarankWarning, stacklevel=2)
    return collection


def warn_few_graphs(runtime: np.ndarray, graph_ids: np.ndarray, where: str) -> None:
    """An `XlarankWarning` when fewer than MIN_TRAINING_GRAPHS graphs of the frame (rows'
    runtime and graph id, (n_rows,) each) have two configs of different runtimes: `xlarank
    train` fits a cross-graph ranker, one meant for graphs it has not seen."""
    teaching = int((pd.Series(runtime).groupby(graph_ids, sort=False).nunique() >= 2).sum())
    if teaching < MIN_TRAINING_GRAPHS:
        warnings.warn(f"{where}: a cross-graph ranker fit on {teaching} graph(s), fewer than "
                      f"{MIN_TRAINING_GRAPHS}: it sees too few programs to rank others well "
                      "and may tie many configs; to rank one graph's configs from some of "
                      "them measured, use xlarank rank-graph", XlarankWarning, stacklevel=2)


def sample_configs(frame: pd.DataFrame, sizes: np.ndarray, limit: int,
                   seed: int) -> np.ndarray:
    """int64 row ids keeping at most ``limit`` random configs of each graph, in order.

    Each graph's draw is seeded by (seed, its id), so it is the same whichever engine or
    partition reads the graph.
    """
    ids = frame["graph_id"].to_numpy()
    keep, start = [], 0
    for size in sizes:
        rows = np.arange(start, start + size)
        if size > limit:
            rng = np.random.default_rng([seed, zlib.crc32(str(ids[start]).encode())])
            rows = np.sort(rng.choice(rows, limit, replace=False))
        keep.append(rows)
        start += size
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


def training_arrays(frame: pd.DataFrame, names: list[str], is_tile: bool, spec: RankerSpec
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sampled rows of a frame of whole graphs: x float32 (rows, features), labels (rows,),
    group sizes int64 (graphs,).

    Labels (higher is faster) follow the spec's `label_scheme`: int32 relevance grades for
    ranking objectives; for pointwise ones float64 `faster_share` (1 for the fastest) or
    -log_slowdown (0 for the fastest).
    """
    rows = sample_configs(frame, group_sizes(frame), spec.max_configs_per_graph, spec.seed)
    train = frame.iloc[rows]
    sizes = group_sizes(train)
    target = ranking_target(train, is_tile)
    scheme = spec.label_scheme
    labels = (faster_share(target, sizes) if scheme == "percentile"
              else -log_slowdown(target, sizes) if scheme == "log_slowdown"
              else relevance_grades(target, sizes, spec.grades))
    return train[names].to_numpy(dtype=np.float32), labels, sizes


def build_card(meta: FrameMeta, spec: RankerSpec, collection: Collection, graphs: int,
               rows: int, rows_used: int, seconds: float | None,
               engine: dict | None = None) -> dict:
    """The card of a ranker trained on a frame: ``graphs`` and ``rows`` of the frame,
    ``rows_used`` after sampling; ``engine`` None is the local one."""
    library = get_library(spec.library)
    return {
        "format": MODEL_FORMAT,
        "collection": collection.id,
        "library": spec.library,
        "objective": spec.objective,
        "model_file": library.model_file,
        "spec": asdict(spec),
        "features": {**meta.spec, "names": meta.feature_names},
        "training_data": {"split": meta.split, "graphs": int(graphs), "rows": int(rows),
                          "rows_used": int(rows_used), "deduplicated": meta.dedup,
                          "skipped_files": len(meta.skipped), "origin": meta.data_origin},
        "seed": spec.seed,
        "train_seconds": None if seconds is None else round(seconds, 3),
        "engine": engine or {"name": "local"},
        "versions": {"xlarank": __version__, spec.library: library.version,
                     "numpy": np.__version__, "python": platform.python_version()},
    }


def train_ranker(frame: pd.DataFrame, meta: FrameMeta, spec: RankerSpec,
                 threads: int = 0) -> Ranker:
    """Fit one booster on a frame; groups are graphs, labels are within-graph grades.

    At most ``spec.max_configs_per_graph`` configs per graph are drawn (seeded) for
    training. ``threads`` 0 lets the booster choose.
    """
    check_columns("the training frame", meta, frame)
    check_rows("the training frame", frame["graph_id"].to_numpy(),
               frame["runtime"].to_numpy())
    collection = check_trainable(meta, spec, frame["runtime"].to_numpy(),
                                 frame["graph_id"].to_numpy(), where="the training frame")
    x, labels, sizes = training_arrays(frame, meta.feature_names, collection.is_tile, spec)
    check_features(x, "the training frame")
    return _fit(meta, spec, collection, x, labels, sizes, len(group_sizes(frame)), len(frame),
                threads)


def train_ranker_from_file(path: str | Path, spec: RankerSpec, threads: int = 0) -> Ranker:
    """`train_ranker` of a frame file, read one row group (whole graphs) at a time: only
    the drawn configs are held, so a frame larger than memory trains. Each graph's draw is
    seeded by the graph alone (`sample_configs`), so the booster equals the one
    `train_ranker` fits on the whole frame."""
    import pyarrow.parquet as pq

    meta = read_meta(path)
    keys = read_keys(path)
    graph_ids = keys["graph_id"].to_numpy()
    collection = check_trainable(meta, spec, keys["runtime"].to_numpy(), graph_ids,
                                 where=str(path))
    del keys
    columns = ["graph_id", "runtime", "normalizer", *meta.feature_names]
    parquet = pq.ParquetFile(input_path(path))
    parts = [training_arrays(parquet.read_row_group(group, columns=columns).to_pandas(),
                             meta.feature_names, collection.is_tile, spec)
             for group in range(parquet.metadata.num_row_groups)]
    x, labels, sizes = (np.concatenate([part[k] for part in parts]) for k in range(3))
    check_features(x, str(path))
    return _fit(meta, spec, collection, x, labels, sizes, len(pd.unique(graph_ids)),
                len(graph_ids), threads)


def check_features(x: np.ndarray, where: str) -> None:
    """Refuse training rows whose features are all NaN: a booster fits one leaf to them,
    a model that ranks nothing."""
    if x.size and np.isnan(x).all():
        raise XlarankError(f"{where}: every feature value of the training rows is NaN; "
                           "there is nothing to learn from: featurize again")


def _fit(meta: FrameMeta, spec: RankerSpec, collection: Collection, x: np.ndarray,
         labels: np.ndarray, sizes: np.ndarray, graphs: int, rows: int,
         threads: int) -> Ranker:
    """The booster fitted on `training_arrays` output, with its card (``graphs`` and
    ``rows`` of the whole frame)."""
    started = time.perf_counter()
    booster = get_library(spec.library).fit(x, labels, sizes, meta.feature_names, spec,
                                            threads)
    card = build_card(meta, spec, collection, graphs=graphs, rows=rows, rows_used=len(x),
                      seconds=time.perf_counter() - started)
    return Ranker(card=card, booster=booster)
