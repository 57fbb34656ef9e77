"""Training from spec files: the job of ``xlarank train``.

Booster specs or ensemble specs in, a saved model (with validation metrics in its card)
out, on the local engine or on Dask. It sits above `xlarank.rank.train` (shared
preparation, local training) and `xlarank.rank.dask` (Dask training), which both import
`train` and not this module; `xlarank.distributed` gives it the client.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlarank.atomic import check_output, locks_outputs
from xlarank.data.collections import get_collection
from xlarank.distributed import engine_client
from xlarank.errors import ArgumentTypeError, MismatchError, XlarankError, checked_type
from xlarank.evaluate import check_scores, mean_metrics
from xlarank.frame import read_frame, read_keys, read_meta
from xlarank.rank.dask import train_ranker_dask
from xlarank.rank.ensemble import load_training_plan, train_ensemble
from xlarank.rank.ingraph import check_threads
from xlarank.rank.model import Model
from xlarank.rank.ranker import CARD_FILE, Ranker
from xlarank.rank.spec import RankerSpec, check_seeds
from xlarank.rank.train import check_trainable, train_ranker_from_file, warn_few_graphs
from xlarank.specs import default_booster_spec, spec_path


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
    _check_train_arguments(frame_path, spec_paths, out_dir, seeds, valid_path, threads,
                           engine)
    return _train_from_specs(frame_path, spec_paths, out_dir, seeds, valid_path, threads,
                             engine, scheduler, workers, status)


@locks_outputs("out_dir")
def _train_from_specs(frame_path: str | Path, spec_paths: Sequence[str | Path],
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
    spec_paths : sequence of paths or packaged spec names
        Booster specs or ensemble specs (``kind = "ensemble"``, `load_training_plan`), each
        a file or a packaged spec's name (`xlarank.specs.spec_path`); none: the packaged
        default of the frame's collection. One booster spec without ``seeds`` trains one
        ranker; anything more trains an ensemble with one member per booster spec and seed.
    out_dir : path
        The model directory to write (replaced whole).
    seeds : sequence of int, optional
        Seeds of every member, one or more, none twice [the ensemble specs' own seeds,
        else each spec's seed].
    valid_path : path, optional
        A validation frame; its mean metrics (`xlarank.evaluate.mean_metrics`) go into
        the card under "validation".
    threads : int
        Booster threads; 0: the process's chosen count (`xlarank.threads`; the Dask
        engine: per worker, 0 means 1).
    engine, scheduler, workers
        ``"local"``, or ``"dask"``: the cluster at ``scheduler``, else a local one of
        ``workers`` processes (`xlarank.distributed.engine_client`).
    status : callable
        Called with a one-line description; the context it returns is held while the
        boosters train (the CLI shows a spinner).

    Raises
    ------
    XlarankError
        Bad specs, ``seeds`` empty or with a seed twice, ensemble specs that ask for
        different seeds and ``seeds`` not given, a frame this spec cannot train on, a
        validation frame of another feature spec or collection, or a bad engine choice.
    """
    frame_path = Path(frame_path)
    check_output(out_dir, "dir", marker=CARD_FILE)
    meta = read_meta(frame_path)
    if valid_path is not None:
        # Read before the work: a bad validation frame is refused before any training.
        valid_meta = read_meta(valid_path)
        if (valid_meta.collection, valid_meta.spec_hash) != (meta.collection, meta.spec_hash):
            raise MismatchError(f"{valid_path}: a {valid_meta.collection} frame of feature "
                                f"spec {valid_meta.spec['name']!r}; the training frame is "
                                f"{meta.collection}, spec {meta.spec['name']!r}")
    typed = [str(p) for p in spec_paths] or [get_collection(meta.collection).slug]
    spec_paths = ([spec_path(p, "booster") for p in spec_paths] if spec_paths
                  else [default_booster_spec(get_collection(meta.collection).slug)])
    plans = [load_training_plan(p) for p in spec_paths]
    # Checked here, before any training, so a mismatch names the spec as it was typed,
    # not by the name inside its file.
    for given, (members, _) in zip(typed, plans, strict=True):
        for member in members:
            label = repr(given) if len(members) == 1 else f"{given!r} (member {member.name!r})"
            check_trainable(meta, member, where=str(frame_path), spec_label=label)
    specs = [member for members, _ in plans for member in members]
    if seeds is not None:
        seeds = check_seeds(seeds, "seeds", XlarankError)
    plan_seeds = {tuple(seed_list) for _, seed_list in plans if seed_list}
    if len(plan_seeds) > 1 and not seeds:
        raise XlarankError("the ensemble specs ask for different seeds; give --seeds")
    seed_list = list(seeds) if seeds else list(plan_seeds.pop()) if plan_seeds else None
    single = len(specs) == 1 and not seed_list
    what = (f"{specs[0].library} {specs[0].objective}" if single
            else f"an ensemble of {len(specs) * len(seed_list or [0])}")
    with status(f"training {what} on {frame_path} ({engine})"), \
            engine_client(engine, scheduler, workers) as client:
        if client is None:
            def train_one(spec: RankerSpec) -> Ranker:
                return train_ranker_from_file(frame_path, spec, threads=threads)
        else:
            def train_one(spec: RankerSpec) -> Ranker:
                return train_ranker_dask(client, frame_path, spec, threads or 1)
        model = train_one(specs[0]) if single else train_ensemble(specs, seed_list, train_one)
    # Said once the model is trained, so a frame that cannot train says only its error.
    keys = read_keys(frame_path)
    warn_few_graphs(keys["runtime"].to_numpy(), keys["graph_id"].to_numpy(), str(frame_path))
    # A spec that leaves the boosters no split (min_data_in_leaf past the rows, say) makes
    # a model of one score for every config, which trains without an error: the warning
    # `score` gives for such scores, said here on the frames it was trained on.
    warn_flat_scores(model, frame_path, "trained on it")
    if valid_path is not None:
        valid, valid_meta = read_frame(valid_path)
        model.check_frame(valid_meta, str(valid_path))
        valid_score = model.predict(valid)
        warn_flat_scores(model, valid_path, "validated on it", valid, valid_score)
        metrics = mean_metrics(valid, valid_score, get_collection(meta.collection).is_tile)
        model.card["validation"] = {"frame": str(valid_path), **metrics}
    model.save(out_dir)
    return Trained(model=model, specs=specs, collection=meta.collection)


def warn_flat_scores(model: Model, frame_path: str | Path, how: str, frame=None,
                     score=None) -> None:
    """XlarankWarning (`xlarank.evaluate.check_scores`) where the just-trained ``model``
    gives every config of a graph of the frame one score though its configs differ:
    a model that learned nothing, whose spec left its boosters no split. ``frame`` and
    ``score``: the frame's rows and the model's scores, where the caller holds them."""
    if frame is None:
        frame, _ = read_frame(frame_path)
    if score is None:
        score = model.predict(frame)
    check_scores(score, frame["graph_id"].to_numpy(), f"{frame_path} scored by the model "
                 f"{how}", lambda: frame[model.feature_names].to_numpy(np.float64))


def _check_train_arguments(frame_path, spec_paths, out_dir, seeds, valid_path, threads,
                           engine) -> None:
    """`ArgumentTypeError` (an XlarankError) for an argument of `train_from_specs` of the
    wrong type, before its output is locked."""
    path_kinds = (str, os.PathLike)
    checked_type(frame_path, path_kinds, "train_from_specs: frame_path", "a path (str or Path)")
    checked_type(out_dir, path_kinds, "train_from_specs: out_dir", "a path (str or Path)")
    if valid_path is not None:
        checked_type(valid_path, path_kinds, "train_from_specs: valid_path", "a path or None")
    if isinstance(spec_paths, str | os.PathLike) or not isinstance(spec_paths, Sequence):
        raise ArgumentTypeError(f"train_from_specs: spec_paths: expected a list of spec "
                                f"paths or names, got {type(spec_paths).__name__}")
    for spec in spec_paths:
        checked_type(spec, path_kinds, "train_from_specs: spec_paths", "spec paths or names")
    if seeds is not None and (isinstance(seeds, str) or not isinstance(seeds, Sequence)):
        raise ArgumentTypeError(f"train_from_specs: seeds: expected a list of ints, got "
                                f"{type(seeds).__name__}")
    for seed in seeds or ():
        checked_type(seed, (int, np.integer), "train_from_specs: seeds", "a list of ints")
    checked_type(threads, (int, np.integer), "train_from_specs: threads", "an int")
    check_threads(threads)
    checked_type(engine, str, "train_from_specs: engine", "'local' or 'dask'")
train_from_specs.__doc__ = _train_from_specs.__doc__
