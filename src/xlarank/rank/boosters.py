"""One adapter per booster library, and the registry that names them.

An adapter is everything xlarank knows about one library: its objectives (and which of
them are pointwise), its parameters for a booster spec, its tuning search space, how it
fits locally and on Dask, predicts, counts rounds, reports importance, and the native file
it saves to and loads from. Everything else (specs, sampling, labels, cards, ensembles)
is library-agnostic and asks `get_library(name)`.

The libraries themselves are imported inside the methods that need them, so importing
xlarank costs neither of them, and a model of one library loads without the other.
"""

from __future__ import annotations

import math
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from xlarank.errors import BadModelError, SpecError, XlarankError
from xlarank.threads import chosen_threads

# The most leaves a tree may have: LightGBM's documented maximum of num_leaves (2^17).
# XGBoost's max_leaves gets the same bound, and its max_depth one that keeps a depthwise
# tree's 2^max_depth leaves within it.
MAX_LEAVES = 131_072
MAX_DEPTH = 17


class TrainingSpec(Protocol):
    """What an adapter reads from a booster spec (`xlarank.rank.spec.RankerSpec`)."""

    @property
    def objective(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def num_rounds(self) -> int: ...

    @property
    def grades(self) -> int: ...

    @property
    def params(self) -> dict: ...

    @property
    def pointwise(self) -> bool: ...


@dataclass(frozen=True)
class DaskArrays:
    """Sampled, labelled training rows as dask arrays whose partitions hold whole graphs.

    x float32 (rows, features); labels (rows,), int32 grades or float64 for pointwise
    objectives; group int64 (graphs,), each graph's row count in row order; qid int64
    (rows,), each row's graph number, non-decreasing. Each library takes the grouping it
    knows (LightGBM group sizes, XGBoost qid); the other is never computed.
    """

    x: object
    labels: object
    group: object
    qid: object


@dataclass(frozen=True)
class Param:
    """What one booster parameter accepts: ``test`` of a value, ``wanted`` in words."""

    test: Callable[[object], bool]
    wanted: str


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def integer(low: int | None = None, high: int | None = None) -> Param:
    """An integer in low..high (either end open when None)."""
    if low is None and high is None:
        wanted = "an integer"
    elif high is None:
        wanted = f"an integer >= {low}"
    elif low is None:
        wanted = f"an integer <= {high}"
    else:
        wanted = f"an integer in {low}..{high}"
    return Param(lambda v: _is_integer(v) and (low is None or v >= low)
                 and (high is None or v <= high), wanted)


def number(low: float | None = None, high: float | None = None,
           low_open: bool = False) -> Param:
    """A finite number (int or float) >= low (> low when ``low_open``) and <= high."""
    if low is None:
        wanted = "a finite number"
    elif high is None:
        wanted = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        wanted = f"a number in {'(' if low_open else '['}{low:g}, {high:g}]"
    return Param(lambda v: _is_number(v)
                 and (low is None or (v > low if low_open else v >= low))
                 and (high is None or v <= high), wanted)


def flag() -> Param:
    return Param(lambda v: isinstance(v, bool), "true or false")


def choice(*options: str) -> Param:
    return Param(lambda v: v in options and isinstance(v, str),
                 f"one of {', '.join(repr(o) for o in options)}")


def gains() -> Param:
    return Param(lambda v: isinstance(v, list) and len(v) > 0
                 and all(_is_number(g) and g >= 0 for g in v),
                 "a list of numbers >= 0")


class BoosterLibrary(ABC):
    """The adapter of one booster library; `BOOSTERS` holds one instance per library."""

    name: str
    objectives: tuple[str, ...]
    # Objectives that regress one label per row (-log slowdown); the others rank graded
    # configs per graph.
    pointwise: tuple[str, ...]
    # The native file a trained booster is saved to, beside card.json.
    model_file: str
    # Tuning: parameters that only one objective accepts, dropped under any other.
    objective_only_params: dict[str, str] = {}
    # The [params] a spec may set, each with the values it accepts (`check_params`).
    known_params: dict[str, Param] = {}
    # Names of spec fields (and their aliases) under which the library would read a
    # [params] value in place of the field's: [params] may not set them.
    spec_field_params: dict[str, str] = {}
    # Other names of known params, so the error can say which name to write.
    param_aliases: dict[str, str] = {}
    # Names under which the library reads its thread count. Threads belong to the machine
    # a model trains on, not to the spec: xlarank sets them (`xlarank.threads`).
    thread_params: tuple[str, ...] = ()

    def check_params(self, params: dict, where: str, grades: int | None = None) -> None:
        """Raise SpecError, prefixed ``where`` (the spec file), unless every [params]
        key is a known param of this library and its value one it accepts. None leaves a
        param to the library's default. ``grades`` is the spec's: a label_gain needs one
        gain per grade."""
        for key, value in params.items():
            if key in self.thread_params:
                raise SpecError(f"{where}: [params] may not set {key}; threads are chosen "
                                "per run (--threads), not per spec")
            if key in self.spec_field_params:
                raise SpecError(f"{where}: [params] may not set {key}; use the spec's own "
                                f"field {self.spec_field_params[key]}")
            if key in self.param_aliases:
                raise SpecError(f"{where}: [params] {key} is another name of "
                                f"{self.param_aliases[key]}; write {self.param_aliases[key]}")
            if key not in self.known_params:
                raise SpecError(f"{where}: [params] {key} is not a known {self.name} "
                                f"parameter; known: {', '.join(sorted(self.known_params))}")
            if value is None:
                continue
            param = self.known_params[key]
            if not param.test(value):
                raise SpecError(f"{where}: [params] {key} must be {param.wanted}, "
                                f"not {value!r}")
            if key == "label_gain" and grades is not None and len(value) < grades:
                raise SpecError(f"{where}: [params] label_gain needs at least one gain per "
                                f"grade ({grades}), not {len(value)}")

    @property
    @abstractmethod
    def version(self) -> str:
        """The installed library's version, for the card."""

    @abstractmethod
    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        """The library's parameters for a spec; the spec's own params win. ``threads``
        None or 0: the process's chosen count (`xlarank.threads.chosen_threads`)."""

    @abstractmethod
    def search_space(self) -> dict:
        """What a tuning trial may change: "objective" and "num_rounds" are spec fields,
        the rest params; values are lists or scipy distributions (ParameterSampler's)."""

    @abstractmethod
    def fit(self, x: np.ndarray, labels: np.ndarray, sizes: np.ndarray, names: list[str],
            spec: TrainingSpec, threads: int) -> object:
        """A booster trained in this process on x float32 (rows, features) and labels
        (rows,), rows contiguous per graph with sizes int64 (graphs,), on ``threads``
        (0: the process's chosen count)."""

    @abstractmethod
    def fit_dask(self, client, data: DaskArrays, names: list[str], spec: TrainingSpec,
                 threads_per_worker: int) -> object:
        """A booster trained data-parallel on the workers of a Dask ``client``, returned
        as a local booster like `fit`'s."""

    @abstractmethod
    def predict(self, booster, x: np.ndarray, names: list[str],
                rounds: int | None) -> np.ndarray:
        """float64 (rows,): scores of x float32 (rows, features) from the first ``rounds``
        boosting rounds (all when None)."""

    @abstractmethod
    def rounds(self, booster) -> int:
        """Boosting rounds in a trained booster."""

    @abstractmethod
    def importance(self, booster, names: list[str]) -> pd.Series:
        """float64 total split gain per feature name (0 for unused ones), unsorted."""

    def save(self, booster, path: Path) -> None:
        """Write a booster to its native file."""
        # XGBoost picks its format from the suffix: model.json is JSON.
        native(booster).save_model(str(path))

    @abstractmethod
    def load(self, path: Path, raw: bytes | None = None) -> object:
        """A booster read back from the native file `save` wrote (``raw``: its bytes, when
        read already); BadModelError if the file is not one the adapter wrote. The file's
        structure is checked in Python before the library sees it
        (`xlarank.rank.booster_files`): a cut or crafted file can crash a library."""

    @abstractmethod
    def feature_names(self, booster) -> list[str]:
        """The feature names a booster was trained with, in column order."""


class WalkedBooster:
    """A saved LightGBM or XGBoost booster scored by xlarank's own forest walk
    (`xlarank.rank.forest_walk`, to the library's predict bit for bit), so that scoring
    never imports the library; the library's own booster is read from the same checked
    bytes on first need (``native``: importance, saving, rows the walk cannot take)."""

    def __init__(self, forest, read: Callable[[], object]):
        self.forest = forest
        self._read = read
        self._native = None

    @property
    def native(self):
        if self._native is None:
            self._native = self._read()
        return self._native


# (library, feature) of the models the walk has left to their library in this process:
# each is said once.
_FALLBACKS_SAID: set[tuple[str, str]] = set()


def walked_or_native(library: str, where, checked, read: Callable[[], object]):
    """A `WalkedBooster` of a checked model file's text or bytes, or, for a model the walk
    does not score (`ForestWalkUnsupported`), the library's own booster (``read()``),
    saying so once per kind of model."""
    import warnings

    from xlarank.errors import XlarankWarning
    from xlarank.rank.forest_walk import ForestWalkUnsupported, parse_lightgbm, parse_xgboost

    parse = parse_lightgbm if library == "lightgbm" else parse_xgboost
    try:
        return WalkedBooster(parse(checked, where), read)
    except ForestWalkUnsupported as why:
        if (why.library, why.feature) not in _FALLBACKS_SAID:
            _FALLBACKS_SAID.add((why.library, why.feature))
            warnings.warn(XlarankWarning(f"{where}: {why}"), stacklevel=3)
        return read()


def native(booster):
    """The library's own booster behind a `WalkedBooster` (or the booster itself)."""
    return booster.native if isinstance(booster, WalkedBooster) else booster


class LightGBM(BoosterLibrary):
    name = "lightgbm"
    objectives = ("lambdarank", "rank_xendcg", "regression")
    pointwise = ("regression",)
    model_file = "model.txt"
    objective_only_params = {"lambdarank_truncation_level": "lambdarank"}
    # LightGBM's documented parameters (docs/Parameters.rst) that a booster spec may need,
    # with their documented constraints; the seeds of single steps are not the spec's seed.
    known_params = {
        "learning_rate": number(0, low_open=True),
        "num_leaves": integer(2, MAX_LEAVES),
        "max_depth": integer(),
        "min_data_in_leaf": integer(0),
        "min_sum_hessian_in_leaf": number(0),
        "feature_fraction": number(0, 1, low_open=True),
        "feature_fraction_bynode": number(0, 1, low_open=True),
        "bagging_fraction": number(0, 1, low_open=True),
        "bagging_freq": integer(0),
        "lambda_l1": number(0),
        "lambda_l2": number(0),
        "min_gain_to_split": number(0),
        "max_delta_step": number(),
        "path_smooth": number(0),
        "extra_trees": flag(),
        "boosting": choice("gbdt", "rf", "dart"),
        "data_sample_strategy": choice("bagging", "goss"),
        "top_rate": number(0, 1),
        "other_rate": number(0, 1),
        "drop_rate": number(0, 1),
        "skip_drop": number(0, 1),
        "max_drop": integer(),
        "max_bin": integer(2),
        "min_data_in_bin": integer(1),
        "bagging_seed": integer(),
        "feature_fraction_seed": integer(),
        "data_random_seed": integer(),
        "drop_seed": integer(),
        "extra_seed": integer(),
        "lambdarank_truncation_level": integer(1),
        "lambdarank_norm": flag(),
        "label_gain": gains(),
        "sigmoid": number(0, low_open=True),
        "deterministic": flag(),
        "force_row_wise": flag(),
        "force_col_wise": flag(),
        "verbosity": integer(),
    }
    spec_field_params = {
        **dict.fromkeys(("objective", "objective_type", "app", "application"), "objective"),
        **dict.fromkeys(("num_iterations", "num_iteration", "n_iter", "num_tree", "num_trees",
                         "num_round", "num_rounds", "nrounds", "num_boost_round",
                         "n_estimators", "max_iter"), "num_rounds"),
        **dict.fromkeys(("seed", "random_seed", "random_state"), "seed"),
    }
    param_aliases = {
        "eta": "learning_rate", "shrinkage_rate": "learning_rate",
        "num_leaf": "num_leaves", "max_leaves": "num_leaves", "max_leaf": "num_leaves",
        "min_child_samples": "min_data_in_leaf", "min_data_per_leaf": "min_data_in_leaf",
        "min_child_weight": "min_sum_hessian_in_leaf",
        "colsample_bytree": "feature_fraction", "sub_feature": "feature_fraction",
        "subsample": "bagging_fraction", "sub_row": "bagging_fraction",
        "subsample_freq": "bagging_freq",
        "reg_alpha": "lambda_l1", "l1_regularization": "lambda_l1",
        "reg_lambda": "lambda_l2", "lambda": "lambda_l2", "l2_regularization": "lambda_l2",
        "min_split_gain": "min_gain_to_split",
        "boosting_type": "boosting", "extra_tree": "extra_trees",
        "verbose": "verbosity",
    }
    thread_params = ("num_threads", "num_thread", "nthread", "nthreads", "n_jobs")

    @property
    def version(self) -> str:
        import lightgbm as lgb

        return lgb.__version__

    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        # LightGBM writes these into model.txt: keys and their order are part of the file.
        params = {"objective": spec.objective, "seed": spec.seed, "deterministic": True,
                  "force_row_wise": True, "verbosity": -1,
                  "num_threads": threads or chosen_threads()}
        if not spec.pointwise:
            params["label_gain"] = list(range(spec.grades))
        return {**params, **spec.params}

    def search_space(self) -> dict:
        from scipy.stats import loguniform, uniform

        return {
            "objective": ["lambdarank", "rank_xendcg"],
            "num_rounds": [100, 200, 300, 500],
            "learning_rate": loguniform(0.02, 0.2),
            "num_leaves": [15, 31, 63, 127],
            "min_data_in_leaf": [5, 10, 20, 50],
            "feature_fraction": uniform(0.5, 0.5),
            "lambdarank_truncation_level": [16, 32, 64],
        }

    def fit(self, x, labels, sizes, names, spec, threads):
        import lightgbm as lgb

        data = lgb.Dataset(x, label=labels, group=None if spec.pointwise else sizes,
                           feature_name=names)
        return lgb.train(self.params(spec, threads), data, num_boost_round=spec.num_rounds)

    def fit_dask(self, client, data, names, spec, threads_per_worker):
        # LightGBM's Dask interface uses each worker's own threads.
        import lightgbm as lgb

        params = self.params(spec, 0)
        # The scikit-learn style estimators name these differently.
        params.pop("num_threads")
        params.pop("verbosity")
        params.update(random_state=params.pop("seed"), n_estimators=spec.num_rounds,
                      verbose=-1)
        if spec.pointwise:
            model = lgb.DaskLGBMRegressor(client=client, **params)
            model.fit(data.x, data.labels, feature_name=names)
        else:
            model = lgb.DaskLGBMRanker(client=client, **params)
            model.fit(data.x, data.labels, group=data.group, feature_name=names)
        return model.to_local().booster_

    def predict(self, booster, x, names, rounds):
        if isinstance(booster, WalkedBooster):
            return booster.forest.predict(x, rounds)
        return np.asarray(booster.predict(x, num_iteration=rounds,
                                          num_threads=chosen_threads()), dtype=np.float64)

    def rounds(self, booster) -> int:
        if isinstance(booster, WalkedBooster):
            return booster.forest.rounds
        return int(booster.current_iteration())

    def importance(self, booster, names):
        booster = native(booster)
        gain = booster.feature_importance(importance_type="gain")
        return pd.Series(gain, index=booster.feature_name(), dtype=np.float64)

    def save(self, booster, path):
        # The thread count belongs to the machine, not the model: it is written as 0 ("not
        # set"), so a model's bytes do not depend on where or beside what it trained.
        text = native(booster).model_to_string()
        path.write_text(re.sub(r"^\[num_threads: \d+\]$", "[num_threads: 0]", text,
                               flags=re.MULTILINE))

    def load(self, path, raw=None):
        from xlarank.rank.booster_files import check_lightgbm_text

        text = check_lightgbm_text(Path(path).read_bytes() if raw is None else raw, path,
                                   self.objectives)

        def read():
            import lightgbm as lgb

            try:
                return lgb.Booster(model_str=text)
            except (lgb.basic.LightGBMError, ValueError) as exc:
                raise BadModelError(f"{path}: LightGBM cannot read it ({exc})") from None

        return walked_or_native("lightgbm", path, text, read)

    def feature_names(self, booster) -> list[str]:
        if isinstance(booster, WalkedBooster):
            return list(booster.forest.feature_names)
        return list(booster.feature_name())


class XGBoost(BoosterLibrary):
    name = "xgboost"
    objectives = ("rank:ndcg", "rank:pairwise", "rank:map", "reg:squarederror")
    pointwise = ("reg:squarederror",)
    model_file = "model.json"
    # XGBoost's documented tree booster and ranking parameters (doc/parameter.rst) that a
    # booster spec may need, with their documented ranges; eta must be > 0 here (0 learns
    # nothing).
    known_params = {
        "eta": number(0, low_open=True),
        "max_depth": integer(0, MAX_DEPTH),
        "max_leaves": integer(0, MAX_LEAVES),
        "min_child_weight": number(0),
        "max_delta_step": number(0),
        "subsample": number(0, 1, low_open=True),
        "sampling_method": choice("uniform", "gradient_based"),
        "colsample_bytree": number(0, 1, low_open=True),
        "colsample_bylevel": number(0, 1, low_open=True),
        "colsample_bynode": number(0, 1, low_open=True),
        "lambda": number(0),
        "alpha": number(0),
        "gamma": number(0),
        "max_bin": integer(2),
        "grow_policy": choice("depthwise", "lossguide"),
        "tree_method": choice("hist", "approx", "exact", "auto"),
        "lambdarank_pair_method": choice("topk", "mean"),
        "lambdarank_num_pair_per_sample": integer(1),
        "lambdarank_unbiased": flag(),
        "lambdarank_bias_norm": number(0),
        "ndcg_exp_gain": flag(),
        "base_score": number(),
        "verbosity": integer(0, 3),
    }
    spec_field_params = {
        "objective": "objective",
        **dict.fromkeys(("seed", "random_state"), "seed"),
        **dict.fromkeys(("num_boost_round", "num_round", "num_rounds", "n_estimators"),
                        "num_rounds"),
    }
    param_aliases = {
        "learning_rate": "eta", "reg_lambda": "lambda", "reg_alpha": "alpha",
        "min_split_loss": "gamma",
    }
    thread_params = ("nthread", "n_jobs")

    @property
    def version(self) -> str:
        import xgboost as xgb

        return xgb.__version__

    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        """As the base class says; a param set to None is left out, so XGBoost chooses."""
        params = {"objective": spec.objective, "seed": spec.seed, "tree_method": "hist",
                  "nthread": threads or chosen_threads()}
        if spec.objective == "rank:ndcg":
            # Linear gains as for LightGBM; exponential ones overflow past 31 grades.
            params["ndcg_exp_gain"] = False
        return {k: v for k, v in {**params, **spec.params}.items() if v is not None}

    def search_space(self) -> dict:
        from scipy.stats import loguniform, uniform

        return {
            "num_rounds": [100, 200, 300, 500],
            "eta": loguniform(0.02, 0.2),
            "max_depth": [4, 6, 8],
            "subsample": uniform(0.6, 0.4),
            "colsample_bytree": uniform(0.5, 0.5),
        }

    def fit(self, x, labels, sizes, names, spec, threads):
        import xgboost as xgb

        qid = np.repeat(np.arange(len(sizes)), sizes)
        data = xgb.DMatrix(x, label=labels, qid=None if spec.pointwise else qid,
                           feature_names=names)
        return xgb.train(self.params(spec, threads), data,
                         num_boost_round=spec.num_rounds)

    def fit_dask(self, client, data, names, spec, threads_per_worker):
        from xgboost import dask as xgb_dask

        matrix = xgb_dask.DaskDMatrix(client, data.x, data.labels,
                                      qid=None if spec.pointwise else data.qid,
                                      feature_names=names)
        return xgb_dask.train(client, self.params(spec, threads_per_worker), matrix,
                              num_boost_round=spec.num_rounds)["booster"]

    def predict(self, booster, x, names, rounds):
        if isinstance(booster, WalkedBooster):
            if list(names) == list(booster.forest.feature_names):
                return booster.forest.predict(x, rounds)
            booster = booster.native  # XGBoost's own check of the names says what differs
        import xgboost as xgb

        data = xgb.DMatrix(x, feature_names=names, nthread=chosen_threads())
        booster.set_param({"nthread": chosen_threads()})
        upto = (0, rounds) if rounds is not None else (0, 0)
        return np.asarray(booster.predict(data, iteration_range=upto), dtype=np.float64)

    def rounds(self, booster) -> int:
        if isinstance(booster, WalkedBooster):
            return booster.forest.rounds
        return int(booster.num_boosted_rounds())

    def importance(self, booster, names):
        scores = native(booster).get_score(importance_type="total_gain")
        return pd.Series(scores, dtype=np.float64).reindex(names, fill_value=0.0)

    def load(self, path, raw=None):
        from xlarank.rank.booster_files import check_xgboost_json

        raw = check_xgboost_json(Path(path).read_bytes() if raw is None else raw, path,
                                 self.objectives)

        def read():
            import xgboost as xgb

            booster = xgb.Booster()
            try:
                booster.load_model(bytearray(raw))
            except xgb.core.XGBoostError as exc:
                first = (str(exc).strip().splitlines()[0] if str(exc).strip()
                         else "no reason given")
                raise BadModelError(f"{path}: XGBoost cannot read it ({first})") from None
            return booster

        return walked_or_native("xgboost", path, raw, read)

    def feature_names(self, booster) -> list[str]:
        if isinstance(booster, WalkedBooster):
            return list(booster.forest.feature_names)
        return list(booster.feature_names or [])


class SKLearn(BoosterLibrary):
    """scikit-learn's HistGradientBoostingRegressor, pointwise on log slowdown: the booster
    of the published "GNN vs trees" hybrid. It has no ranking objective and no Dask
    training; its OpenMP threads are set with threadpoolctl around fit. The fitted trees
    are copied out of the estimator into an `xlarank.rank.hgb.HgbForest` (the booster
    object here, trained or loaded), saved as plain arrays (``model.npz``) and scored by
    xlarank's own tree walk: never a pickle, which would run code from the model folder
    (`xlarank.rank.hgb` says why)."""

    name = "sklearn"
    objectives = ("squared_error",)
    pointwise = ("squared_error",)
    model_file = "model.npz"
    # HistGradientBoostingRegressor's documented parameters that a booster spec may need.
    # Early stopping is off: it would hold out a random tenth of the rows, not whole graphs.
    known_params = {
        "learning_rate": number(0, low_open=True),
        "max_leaf_nodes": integer(2, MAX_LEAVES),
        "max_depth": integer(1, MAX_DEPTH),
        "min_samples_leaf": integer(1),
        "l2_regularization": number(0),
        "max_features": number(0, 1, low_open=True),
        "max_bins": integer(2, 255),
    }
    spec_field_params = {"loss": "objective", "max_iter": "num_rounds",
                         "random_state": "seed"}
    param_aliases = {"num_leaves": "max_leaf_nodes", "min_data_in_leaf": "min_samples_leaf",
                     "lambda_l2": "l2_regularization"}

    @property
    def version(self) -> str:
        import sklearn

        return sklearn.__version__

    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        """As the base class says; the thread count is not a parameter here (`fit`)."""
        return {"loss": spec.objective, "max_iter": spec.num_rounds,
                "random_state": spec.seed, "early_stopping": False, **spec.params}

    def search_space(self) -> dict:
        from scipy.stats import loguniform, uniform

        return {
            "num_rounds": [100, 200, 300, 500],
            "learning_rate": loguniform(0.02, 0.2),
            "max_leaf_nodes": [15, 31, 63, 127],
            "min_samples_leaf": [5, 10, 20, 50],
            "l2_regularization": uniform(0.0, 1.0),
            "max_features": uniform(0.5, 0.5),
        }

    @staticmethod
    def _threads(threads: int | None):
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=threads or chosen_threads(), user_api="openmp")

    def fit(self, x, labels, sizes, names, spec, threads):
        from sklearn.ensemble import HistGradientBoostingRegressor

        from xlarank.rank.hgb import HgbForest

        model = HistGradientBoostingRegressor(**self.params(spec, threads))
        with self._threads(threads):
            # A frame with column names, so the model keeps them (feature_names_in_).
            model.fit(pd.DataFrame(x, columns=names, copy=False), labels)
        return HgbForest.from_estimator(model)

    def fit_dask(self, client, data, names, spec, threads_per_worker):
        raise XlarankError("the sklearn booster trains in one process: use --engine local")

    def predict(self, booster, x, names, rounds):
        return booster.predict(x, rounds)

    def rounds(self, booster) -> int:
        return booster.n_trees

    def importance(self, booster, names):
        return booster.importance()

    def save(self, booster, path):
        booster.save(path)

    def load(self, path, raw=None):
        from xlarank.rank.hgb import HgbForest

        return HgbForest.load(path)

    def feature_names(self, booster) -> list[str]:
        return list(booster.feature_names)


# In the order error messages list them.
BOOSTERS: dict[str, BoosterLibrary] = {adapter.name: adapter
                                       for adapter in (LightGBM(), XGBoost(), SKLearn())}


def get_library(name: str) -> BoosterLibrary:
    """The adapter of a booster library by its name in specs and cards."""
    try:
        return BOOSTERS[name]
    except KeyError:
        raise XlarankError(f"unknown booster library {name!r}; known: "
                           f"{', '.join(BOOSTERS)}") from None
