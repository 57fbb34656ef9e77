"""Metrics against scipy, a brute-force OPA and hand-worked examples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

import naive
from xlarank.metrics import kendall_tau, ordered_pair_accuracy, slowdown_at


def test_tau_perfect_and_reversed():
    runtime = np.array([30, 10, 20, 40])
    assert kendall_tau(-runtime.astype(float), runtime) == pytest.approx(1.0)
    assert kendall_tau(runtime.astype(float), runtime) == pytest.approx(-1.0)


def test_tau_hand_worked():
    # Runtimes 1,2,3 scored so that the order is 1,3,2: pairs (1,2)+ (1,3)+ (2,3)- -> 1/3.
    assert kendall_tau(np.array([3.0, 1.0, 2.0]), np.array([1, 2, 3])) == pytest.approx(1 / 3)


@pytest.mark.parametrize("seed", range(10))
def test_tau_is_scipy_tau_b_with_ties(seed):
    rng = np.random.default_rng(seed)
    runtime = rng.integers(1, 6, 40)
    score = rng.integers(0, 5, 40).astype(float)
    assert kendall_tau(score, runtime) == pytest.approx(kendalltau(-score, runtime).statistic)


def test_tau_undefined_for_constant_runtimes():
    assert np.isnan(kendall_tau(np.array([1.0, 2.0, 3.0]), np.array([5, 5, 5])))
    assert np.isnan(kendall_tau(np.array([1.0]), np.array([5])))


@pytest.mark.parametrize("seed", range(12))
def test_opa_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    runtime = rng.integers(1, 8, n)
    score = rng.integers(0, 6, n).astype(float)
    assert ordered_pair_accuracy(score, runtime) == pytest.approx(
        naive.brute_force_opa(score, runtime), abs=1e-9)


def test_opa_no_ties_is_tau_plus_one_over_two():
    rng = np.random.default_rng(0)
    runtime = rng.permutation(50) + 1
    score = rng.normal(size=50)
    assert ordered_pair_accuracy(score, runtime) == pytest.approx(
        (kendall_tau(score, runtime) + 1) / 2)


def test_opa_edge_cases():
    assert np.isnan(ordered_pair_accuracy(np.array([1.0, 2.0]), np.array([3, 3])))
    assert ordered_pair_accuracy(np.array([1.0, 1.0, 1.0]), np.array([1, 2, 3])) == 0.5


def test_slowdown_hand_worked():
    runtime = np.array([1.5, 1.0, 3.0, 2.0])
    score = np.array([4.0, 1.0, 3.0, 2.0])  # order: 0, 2, 3, 1
    assert slowdown_at(score, runtime, 1) == pytest.approx(0.5)
    assert slowdown_at(score, runtime, 3) == pytest.approx(0.5)
    assert slowdown_at(score, runtime, 4) == pytest.approx(0.0)


def test_slowdown_ties_break_by_config_order():
    runtime = np.array([2.0, 1.0])
    assert slowdown_at(np.array([0.0, 0.0]), runtime, 1) == pytest.approx(1.0)
