"""Training one ranker: the preparation and the card that every engine shares.

Both engines refuse the same frames (`check_trainable`), draw and label the same rows
(`training_arrays`: local on the whole frame, `xlarank.distributed` per partition of whole
graphs) and write the same card (`build_card`); they differ only in the adapter's fit call
(`fit` here, `fit_dask` there).

`train_from_specs` is what ``xlarank train`` runs: booster or ensemble spec files, either
engine, a validation frame's metrics in the card, the model directory written.
"""

from __future__ import annotations

import contextlib
import platform
import time
import zlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank import __version__
from xlarank.data.collections import Collection, get_collection
from xlarank.errors import MismatchError, XlarankError
from xlarank.evaluate import mean_metrics
from xlarank.frame import FrameMeta, group_sizes, read_frame, read_meta
from xlarank.rank.boosters import get_library
from xlarank.rank.ensemble import load_training_plan, train_ensemble
from xlarank.rank.labels import log_slowdown, relevance_grades
from xlarank.rank.model import Model
from xlarank.rank.ranker import MODEL_FORMAT, Ranker
from xlarank.rank.spec import RankerSpec
from xlarank.target import ranking_target


def check_trainable(meta: FrameMeta, spec: RankerSpec,
                    runtime: np.ndarray | None = None) -> Collection:
    """The frame's collection, after refusing frames this spec cannot train on: frames of
    another feature spec and, given the frame's runtimes (n_rows,), frames without rows
    or without runtimes (a test split)."""
    if meta.spec["name"] != spec.features:
        raise MismatchError(f"frame has feature spec {meta.spec['name']!r}, booster spec "
                            f"{spec.name!r} wants {spec.features!r}")
    collection = get_collection(meta.collection)
    if runtime is not None:
        if len(runtime) == 0:
            raise XlarankError("the training frame has no rows")
        if not (runtime > 0).any():
            raise MismatchError("the training frame has no runtimes (all zero: a test split?)")
    return collection


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

    Labels are int32 relevance grades (higher is faster) for ranking objectives, and
    float64 -log_slowdown (0 for the fastest, higher is faster) for pointwise ones.
    """
    rows = sample_configs(frame, group_sizes(frame), spec.max_configs_per_graph, spec.seed)
    train = frame.iloc[rows]
    sizes = group_sizes(train)
    target = ranking_target(train, is_tile)
    labels = (-log_slowdown(target, sizes) if spec.pointwise
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
                          "skipped_files": len(meta.skipped)},
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
    collection = check_trainable(meta, spec, frame["runtime"].to_numpy())
    names = meta.feature_names
    x, labels, sizes = training_arrays(frame, names, collection.is_tile, spec)
    started = time.perf_counter()
    booster = get_library(spec.library).fit(x, labels, sizes, names, spec, threads)
    card = build_card(meta, spec, collection, graphs=len(group_sizes(frame)), rows=len(frame),
                      rows_used=len(x), seconds=time.perf_counter() - started)
    return Ranker(card=card, booster=booster)


@dataclass
class Trained:
    """What `train_from_specs` made: the saved ``model``, the booster ``specs`` it was
    trained from (an ensemble's members before seeding) and the frame's ``collection``."""

    model: Model
    specs: list[RankerSpec]
    collection: str


def train_from_specs(frame_path: str | Path, spec_paths: Sequence[str | Path],
                     out_dir: str | Path, seeds: Sequence[int] | None = None,
                     valid_path: str | Path | None = None, threads: int = 0,
                     engine: str = "local", scheduler: str | None = None, workers: int = 2,
                     status: Callable[[str], AbstractContextManager] = contextlib.nullcontext
                     ) -> Trained:
    """Train a ranker, or an ensemble of them, on a frame file and save it with its card.

    Parameters
    ----------
    frame_path : path
        The training frame (parquet from featurize).
    spec_paths : sequence of paths
        Booster specs or ensemble specs (``kind = "ensemble"``, `load_training_plan`). One
        booster spec without ``seeds`` trains one ranker; anything more trains an ensemble
        with one member per booster spec and seed.
    out_dir : path
        The model directory to write (replaced whole).
    seeds : sequence of int, optional
        Seeds of every member [the ensemble specs' own seeds, else each spec's seed].
    valid_path : path, optional
        A validation frame; its mean metrics (`xlarank.evaluate.mean_metrics`) go into
        the card under "validation".
    threads : int
        Booster threads; 0 lets the booster choose (the Dask engine: per worker, 0 means 1).
    engine, scheduler, workers
        ``"local"``, or ``"dask"``: the cluster at ``scheduler``, else a local one of
        ``workers`` processes (`xlarank.distributed.engine_client`).
    status : callable
        Called with a one-line description; the context it returns is held while the
        boosters train (the CLI shows a spinner).

    Raises
    ------
    XlarankError
        Bad specs, ensemble specs that ask for different seeds and ``seeds`` not given, a
        frame this spec cannot train on, a validation frame of another feature spec or
        collection, or a bad engine choice.
    """
    from xlarank.distributed import engine_client  # imports this module

    frame_path = Path(frame_path)
    plans = [load_training_plan(p) for p in spec_paths]
    specs = [member for members, _ in plans for member in members]
    plan_seeds = {tuple(seed_list) for _, seed_list in plans if seed_list}
    if len(plan_seeds) > 1 and not seeds:
        raise XlarankError("the ensemble specs ask for different seeds; give --seeds")
    seed_list = list(seeds) if seeds else list(plan_seeds.pop()) if plan_seeds else None
    meta = read_meta(frame_path)
    single = len(specs) == 1 and not seed_list
    what = (f"{specs[0].library} {specs[0].objective}" if single
            else f"an ensemble of {len(specs) * len(seed_list or [0])}")
    with status(f"training {what} on {frame_path} ({engine})"), \
            engine_client(engine, scheduler, workers) as client:
        if client is None:
            table, meta = read_frame(frame_path)

            def train_one(spec: RankerSpec) -> Ranker:
                return train_ranker(table, meta, spec, threads=threads)
        else:
            from xlarank.distributed import train_ranker_dask

            def train_one(spec: RankerSpec) -> Ranker:
                return train_ranker_dask(client, frame_path, spec, threads or 1)
        model = train_one(specs[0]) if single else train_ensemble(specs, seed_list, train_one)
    if valid_path is not None:
        valid, valid_meta = read_frame(valid_path)
        model.check_frame(valid_meta, str(valid_path))
        metrics = mean_metrics(valid, model.predict(valid),
                               get_collection(meta.collection).is_tile)
        model.card["validation"] = {"frame": str(valid_path), **metrics}
    model.save(out_dir)
    return Trained(model=model, specs=specs, collection=meta.collection)
