"""The cross-graph rule, the in-graph rule's twin (`xlarank.systems.inner`): how every
system with training steps is fit across graphs when it is compared with the others.

The official trainers fix an epoch count and keep the last (or their own validation's
best) epoch; here one rule decides for every system, as inside a graph: a seeded share
of the train files (``CROSS_INNER_SHARE``, at least one, at most ``CROSS_MOST_GRAPHS``:
a checkpoint scores each) is held out as inner validation (`cross_split`), the system
trains on the rest for its epoch budget with a checkpoint per epoch, where the
collection's headline on the inner graphs (mean over graphs, `graph_headline`) is its
inner metric; the rule stops once that metric gains less than the in-graph rule's min
gain over its patience, and keeps the checkpoint of the best inner metric
(`early_stop`). A system without training steps (xlarank's boosters, random) has nothing
to stop: it is fit once on every train file, as inside a graph it takes every measured
config.

`fit_by_cross_validation` runs the rule and returns the fitted system at its kept epoch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.errors import ArgumentTypeError, XlarankError, checked_type
from xlarank.evaluate import graph_headline
from xlarank.systems import RankingSystem
from xlarank.systems.inner import IN_GRAPH_MIN_GAIN, IN_GRAPH_PATIENCE

CROSS_INNER_SHARE = 0.2
CROSS_MOST_GRAPHS = 25


def cross_split(files: Sequence[Path], seed: int) -> tuple[list[Path], list[Path]]:
    """(inner-training, inner-validation) files of a train split: a seeded
    ``CROSS_INNER_SHARE`` of the files (at least one, at most ``CROSS_MOST_GRAPHS``) held
    out; the same files in any order give the same split."""
    files = sorted(files)
    if len(files) < 2:
        raise XlarankError(f"the cross-graph rule needs 2 train files, one to train on and "
                           f"one for inner validation: {len(files)} given")
    order = np.random.default_rng([seed, 5]).permutation(len(files))
    n_inner = min(CROSS_MOST_GRAPHS, max(1, int(round(CROSS_INNER_SHARE * len(files)))))
    inner = set(order[:n_inner].tolist())
    return ([f for i, f in enumerate(files) if i not in inner],
            [f for i, f in enumerate(files) if i in inner])


def early_stop(inner: Sequence[float]) -> tuple[int, int]:
    """(kept, stopped): positions in ``inner`` (the inner metric at each checkpoint, in
    order) of the checkpoint the rule keeps (the best up to its stop) and of the one where
    it stops (`rule_stop`; the last checkpoint when it never stops). Training is the same
    whether the rule stops it or not, so this replays the rule on a longer run too."""
    stop = rule_stop(inner)
    stopped = len(inner) - 1 if stop is None else stop
    values = np.asarray(inner[:stopped + 1], np.float64)
    kept = int(np.argmax(np.where(np.isnan(values), -np.inf, values)))  # the first best
    return kept, stopped


def rule_stop(inner: Sequence[float]) -> int | None:
    """The position in ``inner`` where the rule stops: the inner metric gained less than
    the in-graph rule's min gain over its patience; None while it goes on."""
    reference, waited = -np.inf, 0
    for i, value in enumerate(inner):
        if value >= reference + IN_GRAPH_MIN_GAIN:
            reference, waited = value, 0
        else:
            waited += 1
            if waited >= IN_GRAPH_PATIENCE:
                return i
    return None


@dataclass
class CrossFit:
    """What the rule did. system: fitted at the kept epoch (with ``refit``; else as the
    last epoch left it); curve: per checkpoint, epoch, inner (the inner metric), seconds
    and cpu_seconds of training so far (the inner checkpoints counted, the held-out
    scoring not); kept, stopped: positions in curve (`early_stop`); held_scores: per
    checkpoint, the scores (float64 (n_configs,)) of each ``held`` graph; fit_files and
    inner_files: the split. A system without training steps has an empty curve and
    kept = stopped = -1."""

    system: RankingSystem
    curve: list[dict] = field(default_factory=list)
    kept: int = -1
    stopped: int = -1
    held_scores: list[list[np.ndarray]] = field(default_factory=list)
    fit_files: list[Path] = field(default_factory=list)
    inner_files: list[Path] = field(default_factory=list)

    @property
    def kept_epoch(self) -> int | None:
        return self.curve[self.kept]["epoch"] if self.curve else None


class _Enough(Exception):
    """The rule stopped ``after_stop`` epochs ago: the fit goes no further."""


def fit_by_cross_validation(system: RankingSystem, files: Sequence[Path],
                            collection: Collection, seed: int = 0,
                            held: Sequence[TileGraph | LayoutGraph] = (),
                            after_stop: int = 0, refit: bool = True) -> CrossFit:
    """Fit ``system`` on the labelled ``files`` of ``collection`` by the cross-graph rule.

    The system's epoch budget is its own ``epoch_setting`` (build it with the budget); the
    fit goes on ``after_stop`` epochs past the rule's stop (or to the budget), so that a
    curve shows what going on would have given, and ``held`` graphs (never trained or
    validated on) are scored at every checkpoint for such a report. With ``refit`` the
    returned system is fitted again, same seed and settings, for the kept epoch's count
    on the same files: training is deterministic given the seed, so that is the kept
    checkpoint; without it the caller reads the kept checkpoint's ``held_scores`` only.
    """
    checked_type(system, RankingSystem, "fit_by_cross_validation: system",
                 "a system (xlarank.get_system(name)(...))")
    if isinstance(files, str | os.PathLike) or not isinstance(files, Sequence):
        raise ArgumentTypeError(f"fit_by_cross_validation: files: expected a list of npz "
                                f"paths, got {type(files).__name__}")
    for path in files:
        checked_type(path, (str, os.PathLike), "fit_by_cross_validation: files",
                     "a list of npz paths (str or Path)")
    checked_type(collection, Collection, "fit_by_cross_validation: collection",
                 "a Collection (xlarank.get_collection)")
    if system.epoch_setting is None:
        system.fit(list(files), collection)
        return CrossFit(system, fit_files=sorted(files))
    fit_files, inner_files = cross_split(files, seed)
    inner = [load_graph(f, collection) for f in inner_files]
    budget = int(system.settings()[system.epoch_setting])
    curve: list[dict] = []
    held_scores: list[list[np.ndarray]] = []
    aside = [0.0, 0.0]
    started, cpu_started = time.perf_counter(), time.process_time()

    def checkpoint(_record: dict) -> None:
        value = float(np.mean([graph_headline(g, system.score(g)) for g in inner]))
        begun, cpu = time.perf_counter(), time.process_time()
        held_scores.append([system.score(g) for g in held])
        aside[0] += time.perf_counter() - begun
        aside[1] += time.process_time() - cpu
        curve.append({"epoch": len(curve) + 1, "inner": value,
                      "seconds": round(time.perf_counter() - started - aside[0], 2),
                      "cpu_seconds": round(time.process_time() - cpu_started - aside[1], 2)})
        stop = rule_stop([p["inner"] for p in curve])
        if stop is not None and len(curve) < budget and len(curve) - 1 - stop >= after_stop:
            raise _Enough

    try:
        system.fit(fit_files, collection, on_epoch=checkpoint)
    except _Enough:
        pass
    kept, stopped = early_stop([p["inner"] for p in curve])
    if len(curve) != min(budget, stopped + 1 + after_stop):
        raise RuntimeError(f"{system.name}: {len(curve)} checkpoints of a {budget}-epoch fit")
    result = CrossFit(system, curve, kept, stopped, held_scores, fit_files, inner_files)
    if refit and kept != len(curve) - 1:
        settings = {**system.overrides, system.epoch_setting: curve[kept]["epoch"]}
        result.system = type(system)(seed=system.seed, threads=system.threads, **settings)
        result.system.fit(fit_files, collection)
    return result
