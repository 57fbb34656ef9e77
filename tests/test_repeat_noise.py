"""Repeat noise of a graph's configs (`xlarank.data.distinct`), against hand-computed
examples and a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from xlarank.data.distinct import first_two_runs, repeat_noise, repeat_tau, within_noise


def test_repeat_noise_is_the_median_gap_of_each_repeated_configs_first_two_runs():
    # Config 0: 100, 104 (then 150, not counted); config 2: 200, 190; 1 and 3 once.
    runtime = np.array([100, 110, 200, 104, 300, 190, 150], np.int64)
    group = np.array([0, 1, 2, 0, 3, 2, 0])
    assert repeat_noise(runtime, group) == (7.0, 2)  # median of 4 and 10


def test_repeat_noise_without_repeats_is_unknown_not_zero():
    assert repeat_noise(np.array([5.0, 6.0]), np.array([0, 1])) == (None, 0)


def test_repeat_tau_orders_each_repeated_configs_two_runs():
    # Configs 0, 1, 2 measured twice: first runs 1, 2, 3, second runs 1, 3, 2: of the 3
    # pairs, 2 agree and 1 does not.
    runtime = np.array([1.0, 2.0, 3.0, 1.0, 3.0, 2.0])
    group = np.array([0, 1, 2, 0, 1, 2])
    assert repeat_tau(runtime, group) == pytest.approx(1 / 3)
    assert repeat_tau(runtime[:4], group[:4]) is None  # one config twice


def test_within_noise_keeps_the_best_and_its_ties_when_the_noise_is_unknown():
    runtime = np.array([100.0, 107.0, 108.0, 100.0])
    assert within_noise(runtime, 7.0).tolist() == [True, True, False, True]
    assert within_noise(runtime, None).tolist() == [True, False, False, True]


def test_first_two_runs_equal_a_plain_loop_on_random_repeats():
    rng = np.random.default_rng(3)
    for _ in range(20):
        group = rng.integers(0, 12, 40)
        runtime = rng.random(40)
        seen: dict[int, list[float]] = {}
        for g, r in zip(group.tolist(), runtime.tolist()):
            seen.setdefault(g, []).append(r)
        pairs = [v[:2] for _, v in sorted(seen.items()) if len(v) >= 2]
        first, second = first_two_runs(runtime, group)
        assert first.tolist() == [a for a, _ in pairs]
        assert second.tolist() == [b for _, b in pairs]
        tau = repeat_tau(runtime, group)
        expected = kendalltau(first, second).statistic if len(pairs) >= 3 else None
        assert tau == (None if expected is None else pytest.approx(expected))
