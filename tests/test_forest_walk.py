"""rank/forest_walk.py and kernels/booster_walk.py: saved LightGBM and XGBoost boosters
scored by xlarank's own tree walk, against each library's own predict(), on random data
(NaN, zeros, values on and beside every threshold), on frames of the real samples, on the
models xlarank's training writes, and on every packaged booster spec."""

from __future__ import annotations

import dataclasses
import json
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from conftest import REPO_SPECS, sample_files, small
from xlarank.data.collections import get_collection
from xlarank.errors import BadModelError, XlarankError
from xlarank.frame import read_frame
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.forest_walk import (
    ForestWalkUnsupported,
    float32_of,
    load_forest,
    parse_lightgbm,
    parse_xgboost,
)
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker, training_arrays

lgb = pytest.importorskip("lightgbm")
xgb = pytest.importorskip("xgboost")

THREADS = 2
RNG_SEED = 11


def assert_matches(expected: np.ndarray, walked: np.ndarray, what: str = "") -> None:
    """The walk's scores within 1e-6 * max(1, |score|) of the library's, row by row."""
    expected = np.asarray(expected, dtype=np.float64)
    assert walked.dtype == np.float64 and walked.shape == expected.shape, what
    assert np.isfinite(expected).all(), what
    error = np.abs(walked - expected)
    allowed = 1e-6 * np.maximum(1.0, np.abs(expected))
    worst = int(np.argmax(error - allowed))
    assert (error <= allowed).all(), (f"{what}: row {worst} walked {walked[worst]!r}, "
                                      f"library {expected[worst]!r}")


def random_data(rows=600, features=6, nan=0.0, zeros=0.0, seed=RNG_SEED):
    """x float32 (rows, features) with a share of NaN and of exact zeros; labels int grades
    0-3 that depend on the features; 30 groups of rows//30."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    x[:, 0] = np.round(x[:, 0] * 3)  # few distinct values: many ties at the thresholds
    signal = x[:, 0] + 2 * x[:, 1] - x[:, 2] * x[:, 3] + rng.normal(0, 0.3, rows)
    x[rng.random(x.shape) < zeros] = 0.0
    x[rng.random(x.shape) < nan] = np.nan
    labels = np.digitize(signal, np.quantile(signal, [0.25, 0.5, 0.75])).astype(np.int32)
    groups = np.full(30, rows // 30)
    return x, labels, groups


def splits(forest) -> np.ndarray:
    """bool (nodes,): which nodes are splits."""
    return forest.arrays["feature"] >= 0


def default_left(forest) -> np.ndarray:
    return (forest.arrays["flags"] >> 1) & 1


def missing_type(forest) -> np.ndarray:
    return (forest.arrays["flags"] >> 2) & 3


def edge_rows(forest, x: np.ndarray) -> np.ndarray:
    """float64 rows that put each split's feature on its threshold and on the numbers
    beside it, plus NaN, signed zeros, LightGBM's zero threshold and its neighbours, tiny
    and huge values; the other columns from rows of x."""
    a = forest.arrays
    split = np.flatnonzero(splits(forest))
    rng = np.random.default_rng(RNG_SEED)
    k0 = float(np.float32(1e-35))
    specials = [np.nan, 0.0, -0.0, k0, -k0, np.nextafter(k0, 1), -np.nextafter(k0, 1),
                np.nextafter(k0, 0), 1e-36, -1e-36, 1e-300, 5e-324, 1e-45, 3e38, -3e38]
    rows = []
    for i in split[:400]:
        t = float(a["threshold"][i])
        for v in (t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf),
                  float(np.nextafter(np.float32(t), np.float32(np.inf))),
                  float(np.nextafter(np.float32(t), np.float32(-np.inf)))):
            row = x[rng.integers(len(x))].astype(np.float64)
            row[a["feature"][i]] = v
            rows.append(row)
    for v in specials:
        for f in range(forest.n_features):
            row = x[rng.integers(len(x))].astype(np.float64)
            row[f] = v
            rows.append(row)
    return np.array(rows)


# ---------------------------------------------------------------- LightGBM


def lgb_train(params: dict, x, labels, groups=None, rounds=20, init_model=None, **data):
    base = {"verbosity": -1, "num_threads": THREADS, "seed": 3, "min_data_in_leaf": 2,
            "min_sum_hessian_in_leaf": 0.0, "num_leaves": 15, "deterministic": True}
    if params.get("objective") in ("lambdarank", "rank_xendcg"):
        base["label_gain"] = [0, 1, 2, 3]
    dataset = lgb.Dataset(x, label=labels, group=groups, **data)
    return lgb.train({**base, **params}, dataset, num_boost_round=rounds,
                     init_model=init_model)


def check_lightgbm(booster, x: np.ndarray, what: str):
    """The walk of the booster's model text against booster.predict on x, float32 and
    float64, on edge rows, for all rounds and for a few; returns the forest."""
    forest = parse_lightgbm(booster.model_to_string())
    assert forest.rounds == booster.current_iteration()
    edges = edge_rows(forest, x)
    for data in (x, x.astype(np.float64), edges, edges.astype(np.float32)):
        assert_matches(booster.predict(data, num_threads=THREADS), forest.predict(data), what)
        for rounds in (1, forest.rounds // 2, forest.rounds + 5):
            if rounds:
                assert_matches(booster.predict(data, num_iteration=rounds,
                                               num_threads=THREADS),
                               forest.predict(data, rounds), f"{what}, {rounds} rounds")
    return forest


@pytest.mark.parametrize("objective", ["lambdarank", "rank_xendcg", "regression"])
@pytest.mark.parametrize("nan", [0.0, 0.15])
def test_lightgbm_matches_on_random_data(objective, nan):
    x, labels, groups = random_data(nan=nan, zeros=0.05)
    booster = lgb_train({"objective": objective}, x, labels,
                        None if objective == "regression" else groups)
    forest = check_lightgbm(booster, x, f"{objective}, nan {nan}")
    split = splits(forest)
    assert split.sum() > 100  # small leaves: many splits
    if nan:
        nan_splits = split & (missing_type(forest) == 2)
        assert set(default_left(forest)[nan_splits]) == {0, 1}


@pytest.mark.parametrize("params, kind", [
    ({"zero_as_missing": True}, 1), ({"use_missing": False}, 0), ({}, 2)])
def test_lightgbm_missing_types(params, kind):
    """Missing type Zero (zero_as_missing), None (use_missing off: NaN is 0) and NaN, with
    both default directions where there is one."""
    x, labels, _ = random_data(nan=0.15, zeros=0.15)
    booster = lgb_train({"objective": "regression", **params}, x, labels.astype(float))
    forest = check_lightgbm(booster, x, str(params))
    split = splits(forest)
    assert kind in set(missing_type(forest)[split])
    if kind:
        typed = split & (missing_type(forest) == kind)
        assert set(default_left(forest)[typed]) == {0, 1}


def test_lightgbm_single_leaf_trees():
    """A model of one one-leaf tree (nothing to split), and one whose first tree has one
    leaf and whose later trees split."""
    x, labels, _ = random_data()
    constant = lgb_train({"objective": "regression"}, x, np.full(len(x), 2.5), rounds=5)
    forest = check_lightgbm(constant, x, "constant labels")
    assert forest.n_trees == 1 and forest.arrays["feature"].tolist() == [-1]
    assert forest.predict(x[:3]).tolist() == [2.5] * 3
    grown = lgb_train({"objective": "regression"}, x, labels.astype(float), rounds=10,
                      init_model=constant, free_raw_data=False)
    forest = check_lightgbm(grown, x, "a one-leaf tree then split trees")
    sizes = np.diff(forest.arrays["starts"])
    assert sizes[0] == 1 and (sizes[1:] > 1).all()


@pytest.mark.parametrize("boosting", ["rf", "dart", "goss"])
def test_lightgbm_other_boosting(boosting):
    """Random forest (average_output: the mean of the rounds), DART (its trees rescaled in
    the file) and GOSS."""
    x, labels, _ = random_data(nan=0.1)
    params = {"objective": "regression", "boosting": boosting}
    if boosting == "rf":
        params.update(bagging_fraction=0.7, bagging_freq=1)
    if boosting == "goss":
        params = {"objective": "regression", "data_sample_strategy": "goss"}
    booster = lgb_train(params, x, labels.astype(float))
    forest = check_lightgbm(booster, x, boosting)
    assert forest.average_output == (boosting == "rf")


def test_lightgbm_crafted_thresholds_and_decisions():
    """A model text edited as LightGBM still reads it: thresholds at 0, within and at
    kZeroThreshold, and every (missing type, default direction) pair on every feature, so
    the rules that random training seldom reaches (tiny inputs read as 0, NaN read as 0
    under missing type None or Zero) are compared with the library too."""
    x, labels, _ = random_data(nan=0.1, zeros=0.1)
    text = lgb_train({"objective": "regression"}, x, labels.astype(float),
                     rounds=8).model_to_string()
    k0 = float(np.float32(1e-35))
    thresholds = [0.0, 5e-36, -5e-36, 1e-40, -1e-40, k0, -k0, 2e-35, -0.0]
    decisions = [0, 2, 4, 6, 8, 10]
    counter = iter(range(10**6))

    def threshold_line(match):
        return "threshold=" + " ".join(repr(thresholds[next(counter) % len(thresholds)])
                                       for _ in match.group(1).split(" "))

    def decision_line(match):
        return "decision_type=" + " ".join(str(decisions[next(counter) % len(decisions)])
                                           for _ in match.group(1).split(" "))

    # tree_sizes are byte counts of the trees, which the edits change: without them
    # LightGBM reads the trees one after another.
    text = re.sub(r"^tree_sizes=.*\n", "", text, flags=re.MULTILINE)
    text = re.sub(r"^threshold=(.+)$", threshold_line, text, flags=re.MULTILINE)
    text = re.sub(r"^decision_type=(.+)$", decision_line, text, flags=re.MULTILINE)
    booster = lgb.Booster(model_str=text)
    forest = parse_lightgbm(text)
    split = splits(forest)
    pairs = set(zip(missing_type(forest)[split], default_left(forest)[split]))
    assert pairs == {(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)}
    tiny = np.array([0.0, -0.0, np.nan, 1e-36, -1e-36, 1e-40, 5e-36, k0, -k0,
                     np.nextafter(k0, 1), -np.nextafter(k0, 1), 2e-35, 1.0, -1.0])
    rng = np.random.default_rng(RNG_SEED)
    rows = tiny[rng.integers(len(tiny), size=(3000, x.shape[1]))]
    for data in (rows, rows.astype(np.float32), edge_rows(forest, x)):
        assert_matches(booster.predict(data), forest.predict(data), "crafted")


def test_lightgbm_unsupported_models_raise_naming_the_feature():
    x, labels, groups = random_data()
    cats = x.copy()
    cats[:, 0] = np.abs(cats[:, 0])
    cases = [
        ({"objective": "regression"}, cats, labels.astype(float),
         {"categorical_feature": [0]}, "categorical splits"),
        ({"objective": "regression", "linear_tree": True}, x, labels.astype(float), {},
         "linear trees"),
        ({"objective": "binary"}, x, (labels > 1).astype(float), {}, "objective 'binary'"),
        ({"objective": "multiclass", "num_class": 4}, x, labels, {}, "num_class 4"),
        ({"objective": "regression", "reg_sqrt": True}, x, labels.astype(float), {}, "sqrt"),
    ]
    for params, data, y, extra, phrase in cases:
        booster = lgb_train(params, data, y, rounds=5, **extra)
        text = booster.model_to_string()
        with pytest.raises(ForestWalkUnsupported, match=re.escape(phrase)) as caught:
            parse_lightgbm(text)
        assert caught.value.library == "lightgbm" and isinstance(caught.value, XlarankError)
        # The fallback still has its library.
        assert np.isfinite(lgb.Booster(model_str=text).predict(data[:5])).all()
    # A categorical model really has categorical splits (the walk did not just give up).
    booster = lgb_train({"objective": "regression"}, cats, labels.astype(float), rounds=5,
                        categorical_feature=[0])
    assert re.search(r"^num_cat=[1-9]", booster.model_to_string(), re.MULTILINE)


def test_lightgbm_broken_files_are_bad_models():
    x, labels, _ = random_data()
    text = lgb_train({"objective": "regression"}, x, labels.astype(float),
                     rounds=3).model_to_string()
    with pytest.raises(BadModelError, match="end of trees"):
        parse_lightgbm(text.split("end of trees")[0])
    with pytest.raises(BadModelError, match="tree 1"):
        parse_lightgbm(text[: text.index("Tree=1")] + "Tree=1\nnum_leaves=3\n")
    with pytest.raises(BadModelError, match="child"):
        parse_lightgbm(re.sub(r"left_child=(-?\d+)", "left_child=40", text, count=1))
    with pytest.raises(BadModelError, match="feature it does not have"):
        parse_lightgbm(re.sub(r"split_feature=(\d+)", "split_feature=6", text, count=1))
    with pytest.raises(BadModelError, match="not a number"):
        parse_lightgbm(re.sub(r"threshold=\S+", "threshold=x", text, count=1))
    with pytest.raises(BadModelError, match="UTF-8"):
        parse_lightgbm(b"\xff")
    with pytest.raises(BadModelError, match="first line"):
        parse_lightgbm("model")


# ---------------------------------------------------------------- XGBoost


def xgb_train(params: dict, x, labels, groups=None, rounds=20, **data):
    qid = None if groups is None else np.repeat(np.arange(len(groups)), groups)
    base = {"tree_method": "hist", "seed": 3, "nthread": THREADS, "max_depth": 6,
            "min_child_weight": 0.0}
    matrix = xgb.DMatrix(x, label=labels, qid=qid, **data)
    return xgb.train({**base, **params}, matrix, num_boost_round=rounds)


def xgb_predict(booster, data, rounds=None):
    return booster.predict(xgb.DMatrix(data, nthread=THREADS),
                           iteration_range=(0, rounds or 0))


def check_xgboost(booster, x: np.ndarray, what: str):
    """The walk of the booster's model JSON against booster.predict on x, float32 and
    float64, on edge rows, for all rounds and for a few; returns the forest."""
    forest = parse_xgboost(bytes(booster.save_raw("json")))
    assert forest.rounds == booster.num_boosted_rounds()
    edges = edge_rows(forest, x)
    edges = edges[~np.isinf(edges.astype(np.float32)).any(axis=1)]  # DMatrix refuses inf
    for data in (x, x.astype(np.float64), edges, edges.astype(np.float32)):
        assert_matches(xgb_predict(booster, data), forest.predict(data), what)
        for rounds in (1, forest.rounds // 2):
            assert_matches(xgb_predict(booster, data, rounds), forest.predict(data, rounds),
                           f"{what}, {rounds} rounds")
    with pytest.raises(XlarankError, match="more than"):
        forest.predict(x, forest.rounds + 1)
    return forest


@pytest.mark.parametrize("objective", ["rank:pairwise", "rank:ndcg", "rank:map",
                                       "reg:squarederror"])
@pytest.mark.parametrize("nan", [0.0, 0.15])
def test_xgboost_matches_on_random_data(objective, nan):
    x, labels, groups = random_data(nan=nan, zeros=0.05)
    params = {"objective": objective}
    if objective == "rank:ndcg":
        params["ndcg_exp_gain"] = False
    if objective == "rank:map":
        labels = (labels > 1).astype(np.int32)
    booster = xgb_train(params, x, labels,
                        None if objective == "reg:squarederror" else groups)
    forest = check_xgboost(booster, x, f"{objective}, nan {nan}")
    split = splits(forest)
    assert split.sum() > 100
    if nan:
        assert set(default_left(forest)[split]) == {0, 1}
    if objective == "reg:squarederror":
        assert abs(forest.base_score - labels.mean()) < 0.5  # the fitted intercept


def test_scores_are_the_libraries_to_the_bit():
    """Beyond the tolerance: XGBoost adds its float32 leaves in float32 from the base score,
    LightGBM its float64 leaves in float64, tree by tree, and the walk adds them so too (a
    float64 sum of XGBoost's leaves is off in the last float32 bits here)."""
    x, labels, groups = random_data(rows=3000, nan=0.1)
    target = labels * 1000.0 + np.random.default_rng(RNG_SEED).normal(0, 77, len(x))
    booster = xgb_train({"objective": "reg:squarederror", "eta": 0.3}, x, target, rounds=150)
    forest = parse_xgboost(bytes(booster.save_raw("json")))
    np.testing.assert_array_equal(forest.predict(x), xgb_predict(booster, x))
    booster = lgb_train({"objective": "regression", "learning_rate": 0.3}, x, target,
                        rounds=150)
    forest = parse_lightgbm(booster.model_to_string())
    np.testing.assert_array_equal(forest.predict(x), booster.predict(x, num_threads=THREADS))


def test_xgboost_base_score_matters_and_old_format_reads():
    """A set base_score is added once; the pre-3.0 form "5E-1" (no brackets) reads as
    "[5E-1]" does; a lossguide tree of many leaves walks too."""
    x, labels, _ = random_data(nan=0.1)
    booster = xgb_train({"objective": "reg:squarederror", "base_score": 7.25,
                         "grow_policy": "lossguide", "max_leaves": 64, "max_depth": 0},
                        x, labels.astype(float))
    forest = check_xgboost(booster, x, "base_score 7.25")
    assert forest.base_score == 7.25
    model = json.loads(bytes(booster.save_raw("json")))
    param = model["learner"]["learner_model_param"]
    assert param["base_score"].startswith("[")
    param["base_score"] = param["base_score"].strip("[]")
    old = parse_xgboost(json.dumps(model).encode())
    np.testing.assert_array_equal(old.predict(x), forest.predict(x))


def test_xgboost_parallel_trees_count_rounds_as_the_library_does():
    x, labels, groups = random_data(nan=0.1)
    booster = xgb_train({"objective": "rank:pairwise", "num_parallel_tree": 3,
                         "subsample": 0.7, "colsample_bynode": 0.7}, x, labels, groups,
                        rounds=6)
    forest = check_xgboost(booster, x, "3 parallel trees")
    assert forest.n_trees == 18 and forest.rounds == 6


def test_xgboost_unsupported_models_raise_naming_the_feature():
    x, labels, groups = random_data()
    frame = pd.DataFrame(x[:, 1:], columns=[f"c{j}" for j in range(5)])
    frame["cat"] = pd.Categorical(np.abs(x[:, 0]).astype(int))
    cases = [
        (xgb_train({"objective": "binary:logistic"}, x, labels > 1, rounds=3),
         "objective 'binary:logistic'"),
        (xgb_train({"objective": "multi:softprob", "num_class": 4}, x, labels, rounds=3),
         "num_class 4"),
        (xgb_train({"objective": "reg:squarederror", "booster": "dart"}, x, labels,
                   rounds=3), "booster 'dart'"),
        (xgb_train({"objective": "reg:squarederror", "max_cat_to_onehot": 1}, frame,
                   labels.astype(float), rounds=3, enable_categorical=True), "categorical"),
        (xgb_train({"objective": "reg:squarederror", "multi_strategy": "multi_output_tree"},
                   x, np.stack([labels, -labels], axis=1).astype(float), rounds=3),
         "num_target 2"),
    ]
    for booster, phrase in cases:
        with pytest.raises(ForestWalkUnsupported, match=re.escape(phrase)) as caught:
            parse_xgboost(bytes(booster.save_raw("json")))
        assert caught.value.library == "xgboost"


def test_xgboost_odd_and_broken_files():
    x, labels, groups = random_data()
    raw = bytes(xgb_train({"objective": "rank:pairwise"}, x, labels, groups,
                          rounds=3).save_raw("json"))
    model = json.loads(raw)
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
    # XGBoost walks right to left + 1: a file that says otherwise is the library's to score.
    split = [i for i, c in enumerate(tree["left_children"]) if c != -1]
    odd = json.loads(raw)
    t = odd["learner"]["gradient_booster"]["model"]["trees"][0]
    t["left_children"][split[0]], t["right_children"][split[0]] = (
        t["right_children"][split[0]], t["left_children"][split[0]])
    with pytest.raises(ForestWalkUnsupported, match="left sibling"):
        parse_xgboost(json.dumps(odd))
    broken = json.loads(raw)
    broken["learner"]["gradient_booster"]["model"]["trees"][0]["split_indices"][0] = 99
    with pytest.raises(BadModelError, match="feature it does not have"):
        parse_xgboost(json.dumps(broken))
    broken = json.loads(raw)
    t = broken["learner"]["gradient_booster"]["model"]["trees"][0]
    t["left_children"][split[-1]], t["right_children"][split[-1]] = 0, 1
    with pytest.raises(ForestWalkUnsupported, match="before their parent"):
        parse_xgboost(json.dumps(broken))
    broken = json.loads(raw)
    t = broken["learner"]["gradient_booster"]["model"]["trees"][0]
    t["left_children"][split[-1]], t["right_children"][split[-1]] = 500, 501
    with pytest.raises(BadModelError, match="outside its tree"):
        parse_xgboost(json.dumps(broken))
    broken = json.loads(raw)
    broken["learner"]["gradient_booster"]["model"]["trees"][0]["split_conditions"][0] = "x"
    with pytest.raises(BadModelError, match="not a number"):
        parse_xgboost(json.dumps(broken))
    with pytest.raises(BadModelError, match="JSON"):
        parse_xgboost(raw[: len(raw) // 2])
    with pytest.raises(BadModelError, match="lacks"):
        parse_xgboost(b'{"learner": {}}')


def test_float32_of_rounds_decimals_once():
    """Through float64 a decimal just above a float32 midpoint lands on the midpoint and
    ties to even, the wrong way; float32_of rounds it as a float32 parser does."""
    for low in (np.float32(1.0), np.float32(3.0e-7), np.float32(-123.25)):
        high = np.nextafter(low, np.float32(np.inf))
        even, odd = (low, high) if int(low.view(np.int32)) % 2 == 0 else (high, low)
        middle = (Fraction(float(low)) + Fraction(float(high))) / 2
        past = middle + (Fraction(float(odd)) - middle) / 10**12  # odd side, a hair
        digits = 40
        text = f"{past.numerator * 10**digits // past.denominator}E-{digits}"
        assert float(text) == float(middle)  # float64 lands on the midpoint...
        assert np.float32(float(text)) == even  # ...which ties to the even neighbour
        assert float32_of([text])[0] == odd  # the nearest float32
        assert float32_of([str(Decimal(float(middle)))])[0] == even  # a true tie: even
    assert float32_of(["0.1", 2, "-0E0", "1E-45"]).tolist() == [
        float(np.float32(0.1)), 2.0, 0.0, float(np.float32(1e-45))]


def test_walk_checks_are_not_vacuous():
    """Tests above would fail on a walk that got the default direction or the threshold's
    side wrong: flipping one or nudging the other changes the scores of these rows."""
    x, labels, groups = random_data(nan=0.15)
    booster = lgb_train({"objective": "lambdarank"}, x, labels, groups)
    forest = parse_lightgbm(booster.model_to_string())
    expected = booster.predict(x, num_threads=THREADS)
    flipped = dataclasses.replace(forest, arrays={**forest.arrays, "flags":
                                                  forest.arrays["flags"] ^ 2})
    assert np.abs(flipped.predict(x) - expected).max() > 1e-3
    edges = edge_rows(forest, x)
    # Split thresholds only: a leaf's value sits in the same array.
    lower = np.where(splits(forest), np.nextafter(forest.arrays["threshold"], -np.inf),
                     forest.arrays["threshold"])
    nudged = dataclasses.replace(forest, arrays={**forest.arrays, "threshold": lower})
    assert np.abs(nudged.predict(edges) - booster.predict(edges)).max() > 1e-3

    xgb_booster = xgb_train({"objective": "rank:pairwise"}, x, labels, groups)
    walk = parse_xgboost(bytes(xgb_booster.save_raw("json")))
    edges = edge_rows(walk, x)
    edges = edges[~np.isinf(edges.astype(np.float32)).any(axis=1)]
    higher = np.where(splits(walk), np.nextafter(walk.arrays["threshold"], np.float32(np.inf)),
                      walk.arrays["threshold"])
    nudged = dataclasses.replace(walk, arrays={**walk.arrays, "threshold": higher})
    assert np.abs(nudged.predict(edges) - xgb_predict(xgb_booster, edges)).max() > 1e-4
    flipped = dataclasses.replace(walk, arrays={**walk.arrays, "flags":
                                                walk.arrays["flags"] ^ 2})
    assert np.abs(flipped.predict(x) - xgb_predict(xgb_booster, x)).max() > 1e-4


def test_predict_refuses_other_shapes_and_reads_other_dtypes():
    x, labels, groups = random_data()
    booster = lgb_train({"objective": "lambdarank"}, x, labels, groups, rounds=3)
    forest = parse_lightgbm(booster.model_to_string())
    with pytest.raises(XlarankError, match="6 feature columns"):
        forest.predict(x[:, :5])
    with pytest.raises(XlarankError, match="at least 1"):
        forest.predict(x, -1)
    ints = np.round(x * 4).astype(np.int64)
    assert_matches(booster.predict(ints), forest.predict(ints), "int64 input")
    assert_matches(booster.predict(np.asfortranarray(x)), forest.predict(np.asfortranarray(x)))
    assert forest.predict(x[:0]).shape == (0,)
    np.testing.assert_array_equal(forest.predict(x, 0), forest.predict(x))


# ---------------------------------------------------------------- xlarank's own models


@pytest.mark.filterwarnings("ignore:.*teach the ranker nothing")
def test_saved_files_of_xlarank_models(models, tile_frames, frames):
    """The conftest models, trained and saved by xlarank (LightGBM lambdarank, XGBoost
    pairwise), read back from their folders: the walk scores what Ranker.predict does."""
    cases = {"lightgbm": tile_frames["default"], "xgboost": tile_frames["baseline"],
             "tile-xla": frames["default", "tile-xla", "valid"],
             "layout-xla-default": frames["default", "layout-xla-default", "valid"]}
    for kind, frame_path in cases.items():
        ranker = load_model(models[kind])
        table, _ = read_frame(frame_path)
        forest = load_forest(models[kind] / ranker.card["model_file"])
        assert forest.feature_names == ranker.feature_names
        x = table[ranker.feature_names].to_numpy(np.float32)
        assert_matches(ranker.predict(table), forest.predict(x), kind)


PACKAGED_SPECS = sorted(
    path for folder in ("", "objectives", "tuned")
    for path in (REPO_SPECS.root / "models" / folder).glob("*.toml")
    if load_ranker_spec(path).library in ("lightgbm", "xgboost"))


@pytest.mark.filterwarnings("ignore:.*teach the ranker nothing")
def test_every_packaged_spec(frames, tmp_path):
    """Each packaged LightGBM or XGBoost spec, cut to 10 rounds, trained by xlarank on the
    tiny dataset of its collection and saved: its model file walks to Ranker.predict."""
    assert len(PACKAGED_SPECS) >= 10
    for path in PACKAGED_SPECS:
        spec = small(load_ranker_spec(path), rounds=10)
        slug = get_collection(spec.collections[0]).slug if spec.collections else "tile-xla"
        table, meta = read_frame(frames[spec.features, slug, "train"])
        folder = train_ranker(table, meta, spec, threads=THREADS).save(
            tmp_path / f"{path.parent.name}-{path.stem}")
        ranker = load_model(folder)
        forest = load_forest(folder / ranker.card["model_file"])
        valid, _ = read_frame(frames[spec.features, slug, "valid"])
        x = valid[ranker.feature_names].to_numpy(np.float32)
        assert_matches(ranker.predict(valid), forest.predict(x), str(path))


# ---------------------------------------------------------------- real samples


@pytest.fixture(scope="module")
def real_frame():
    """Default-spec features of the real layout:xla samples (rows contiguous per graph),
    their names, and the graph ids of the training files (the test files have no
    runtimes to learn from)."""
    from xlarank.data.graph import load_graph
    from xlarank.features import featurize_graph, load_feature_spec

    files = [p for p in sample_files() if "/layout/xla/" in p.as_posix()]
    if not files:
        pytest.skip("no real layout:xla samples")
    spec = load_feature_spec(REPO_SPECS.features("default"))
    blocks = [featurize_graph(load_graph(p), spec) for p in files]
    frame = pd.concat(blocks, ignore_index=True)
    trained = [b["graph_id"].iloc[0] for b, p in zip(blocks, files) if "/train/" in p.as_posix()]
    assert trained
    return frame, list(frame.columns[4:]), trained


@pytest.mark.parametrize("spec_name", ["layout-xla-default", "objectives/lambdarank",
                                       "objectives/xendcg", "baseline",
                                       "objectives/xgb-ndcg"])
def test_real_frames(real_frame, spec_name, tmp_path):
    """Boosters fit by xlarank's adapters with packaged specs' parameters (30 rounds) on
    the real samples' features, saved to their native files, walked on those rows and on
    a copy with NaN and zeros in it."""
    frame, names, trained = real_frame
    spec = dataclasses.replace(load_ranker_spec(REPO_SPECS.models(spec_name)), num_rounds=30)
    library = BOOSTERS[spec.library]
    train = frame[frame["graph_id"].isin(trained)]
    x, labels, sizes = training_arrays(train, names, False, spec)
    booster = library.fit(x, labels, sizes, names, spec, THREADS)
    path = tmp_path / library.model_file
    library.save(booster, path)
    forest = load_forest(path)
    booster = library.load(path)
    rows = frame[names].to_numpy(np.float32)
    holes = rows.copy()
    rng = np.random.default_rng(RNG_SEED)
    holes[rng.random(holes.shape) < 0.1] = np.nan
    holes[rng.random(holes.shape) < 0.1] = 0.0
    assert splits(forest).sum() > 50
    for data in (rows, holes):
        assert_matches(library.predict(booster, data, names, None),
                       forest.predict(data), spec_name)
        assert_matches(library.predict(booster, data, names, 7), forest.predict(data, 7),
                       f"{spec_name}, 7 rounds")
