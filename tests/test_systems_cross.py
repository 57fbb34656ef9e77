"""The cross-graph rule (`xlarank.systems.cross`): the inner split, the early-stopping
replay, and a fit by the rule with a stand-in system whose every epoch is known."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import XlarankError
from xlarank.systems import RankingSystem
from xlarank.systems.cross import (
    CROSS_MOST_GRAPHS,
    cross_split,
    early_stop,
    fit_by_cross_validation,
)


def burn(cpu_seconds: float) -> None:
    """Spin until this process has used ``cpu_seconds`` more CPU time."""
    until = time.process_time() + cpu_seconds
    while time.process_time() < until:
        sum(range(1000))


def layout_train(tiny_data):
    collection = get_collection("layout:xla:random")
    files = split_files(tiny_data, collection, "train")
    return collection, files, [load_graph(f, collection) for f in files]


class Stepped(RankingSystem):
    """A stand-in whose epoch e orders a graph's configs by runtime from epoch 3 on (the
    inner headline rises, then holds) and scores any graph e everywhere before; scoring
    an inner graph costs 0.03 CPU s, a held one (scored as a constant) 0.2."""

    name = "stepped"
    epoch_setting = "epochs"
    epoch_ = 0
    fits: list = []
    held_ids: set = set()  # id() of the held graphs (graphs are frozen: no flag on them)

    @classmethod
    def defaults(cls) -> dict:
        return {"epochs": 7, "inner_cost": 0.0, "held_cost": 0.0}

    def fit(self, files, collection, valid_files=(), on_epoch=None):
        Stepped.fits.append(self.settings()["epochs"])
        for epoch in range(1, self.settings()["epochs"] + 1):
            self.epoch_ = epoch
            if on_epoch is not None:
                on_epoch({"epoch": epoch})
        return self

    def fit_graph(self, graph, runtime, on_epoch=None):
        raise NotImplementedError

    def score(self, graph):
        runtime = graph.config_runtime.astype(float)
        held = id(graph) in Stepped.held_ids
        burn(self.settings()["held_cost" if held else "inner_cost"])
        if held:
            return np.full(graph.n_configs, float(self.epoch_))
        return -runtime if self.epoch_ >= 3 else runtime * (3 - self.epoch_)


def test_the_inner_split_is_seeded_disjoint_and_capped():
    files = [Path(f"f{i:03d}.npz") for i in range(30)]
    fit, inner = cross_split(files, 0)
    assert len(inner) == 6 and len(fit) == 24
    assert set(fit) | set(inner) == set(files) and not set(fit) & set(inner)
    assert cross_split(list(reversed(files)), 0) == (fit, inner)
    assert cross_split(files, 1)[1] != inner
    many = [Path(f"k{i:03d}.npz") for i in range(400)]
    assert len(cross_split(many, 0)[1]) == CROSS_MOST_GRAPHS
    assert len(cross_split(files[:2], 0)[1]) == 1
    with pytest.raises(XlarankError, match="2 train files"):
        cross_split(files[:1], 0)


def test_early_stopping_replays_the_in_graph_rule():
    # Gains of at least 0.005 reset the wait; three checkpoints without one stop.
    inner = [0.10, 0.20, 0.203, 0.21, 0.30, 0.301, 0.302, 0.303, 0.50]
    # The reference is 0.30 (epoch 5); 0.301, 0.302, 0.303 gain less: stop at epoch 8,
    # keeping the best so far (epoch 8's 0.303), never seeing the 0.50 after it.
    assert early_stop(inner) == (7, 7)
    # 0.203 gains less than 0.005 over 0.20, but 0.21 does over the reference 0.20.
    assert early_stop(inner[:4]) == (3, 3)
    assert early_stop([0.4, 0.3, 0.2, 0.1, 0.5]) == (0, 3)
    # Ties keep the first best; a NaN checkpoint is never the best.
    assert early_stop([0.1, float("nan"), 0.3, 0.3, 0.3, 0.3]) == (2, 5)


def test_the_rule_keeps_the_best_inner_epoch_and_refits_to_it(tiny_data):
    collection, files, graphs = layout_train(tiny_data)
    held = graphs[:1]
    Stepped.held_ids = {id(g) for g in held}
    Stepped.fits = []
    got = fit_by_cross_validation(Stepped(seed=0, epochs=7, inner_cost=0.03,
                                          held_cost=0.2), files, collection, seed=0,
                                  held=held)
    inner_curve = [p["inner"] for p in got.curve]
    assert inner_curve[2:] == [1.0] * 4 and inner_curve[0] < 0
    # Epoch 3 is the best; epochs 4, 5, 6 gain nothing: stopped at 6 (after_stop 0).
    assert (got.kept_epoch, got.stopped) == (3, 5) and len(got.curve) == 6
    assert len(got.held_scores[got.kept]) == 1 and (got.held_scores[got.kept][0] == 3).all()
    # Refitted for the kept epoch's count, with the same settings otherwise.
    assert Stepped.fits == [7, 3] and got.system.settings()["epochs"] == 3
    assert got.system.settings()["inner_cost"] == 0.03
    assert sorted(got.fit_files + got.inner_files) == sorted(files)
    cpu = [p["cpu_seconds"] for p in got.curve]
    assert cpu == sorted(cpu)
    # Inner scoring (0.03 CPU s a graph an epoch) counts; held scoring (0.2) does not.
    n_inner = len(got.inner_files)
    assert 6 * n_inner * 0.03 - 0.02 <= cpu[-1] < 6 * n_inner * 0.03 + 0.5


def test_the_fit_goes_on_after_the_stop_only_when_asked(tiny_data):
    collection, files, _ = layout_train(tiny_data)
    Stepped.fits = []
    long = fit_by_cross_validation(Stepped(seed=0, epochs=30), files, collection,
                                   after_stop=8, refit=False)
    assert len(long.curve) == 6 + 8 and (long.kept_epoch, long.stopped) == (3, 5)
    assert Stepped.fits == [30]  # no refit: the caller reads the kept scores
    short = fit_by_cross_validation(Stepped(seed=0, epochs=4), files, collection)
    assert len(short.curve) == 4 and short.kept_epoch == 3  # the budget ends it


def test_a_system_without_epochs_is_fit_once_on_every_file(tiny_data):
    collection, files, _ = layout_train(tiny_data)
    seen = []

    class Once(Stepped):
        epoch_setting = None

        def fit(self, files, collection, valid_files=(), on_epoch=None):
            seen.append((list(files), on_epoch))
            return self

    got = fit_by_cross_validation(Once(), files, collection)
    assert seen == [(list(files), None)] and got.curve == [] and got.kept_epoch is None
