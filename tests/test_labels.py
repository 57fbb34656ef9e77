"""rank/labels.py: relevance grades, percentiles and log slowdowns, by hand and by their
properties."""

from __future__ import annotations

import numpy as np
import pytest

from xlarank.rank.labels import faster_share, log_slowdown, relevance_grades


def test_relevance_grades_hand_worked():
    target = np.array([5.0, 1.0, 3.0, 3.0, 2.0, 9.0])
    grades = relevance_grades(target, np.array([4, 2]), n_grades=4)
    # Group 1: 1 is fastest (3 slower -> 3), 3s tie (1 slower -> share 1/3 -> 1), 5 -> 0.
    np.testing.assert_array_equal(grades, [0, 3, 1, 1, 3, 0])


def test_log_slowdown_is_zero_for_each_graphs_fastest():
    target = np.array([4.0, 2.0, 8.0, 10.0, 10.0])
    np.testing.assert_allclose(log_slowdown(target, np.array([3, 2])),
                               np.log([2.0, 1.0, 4.0, 1.0, 1.0]))


@pytest.mark.parametrize("n_grades", [2, 31, 100])
def test_grades_follow_runtime_order_and_ties(n_grades):
    rng = np.random.default_rng(n_grades)
    target = rng.integers(1, 50, 300).astype(float)
    grades = relevance_grades(target, np.array([300]), n_grades)
    assert grades.min() == 0 and grades.max() <= n_grades - 1
    assert grades[np.argmin(target)] == grades.max()
    # Faster never gets a lower grade, equal runtimes share a grade.
    order = np.argsort(target, kind="stable")
    assert (np.diff(grades[order]) <= 0).all()
    for value in np.unique(target):
        assert len(set(grades[target == value])) == 1


def test_faster_share_hand_worked_and_grades_follow_it():
    target = np.array([5.0, 1.0, 3.0, 3.0, 2.0, 9.0])
    sizes = np.array([4, 2])
    # Group 1: 1 has 3 slower of 3 others -> 1; each 3 has one slower (5) -> 1/3; 5 -> 0.
    np.testing.assert_allclose(faster_share(target, sizes), [0, 1, 1 / 3, 1 / 3, 1, 0])
    # A graph of one config: nothing slower, share 0.
    assert faster_share(np.array([7.0]), np.array([1])).tolist() == [0.0]
    rng = np.random.default_rng(0)
    target = rng.integers(1, 40, 200).astype(float)
    sizes = np.array([120, 80])
    np.testing.assert_array_equal(
        relevance_grades(target, sizes, 31),
        np.minimum(np.floor(faster_share(target, sizes) * 31), 30).astype(np.int32))


def test_faster_share_is_blind_to_the_runtime_scale():
    # One config 3x slower moves a log slowdown by log 3 and the percentile by one step.
    target = np.array([1.00, 1.01, 1.02, 3.0])
    scaled = np.array([1.00, 1.01, 1.02, 1.03])
    np.testing.assert_array_equal(faster_share(target, np.array([4])),
                                  faster_share(scaled, np.array([4])))
