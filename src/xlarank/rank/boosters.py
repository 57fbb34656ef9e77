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

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from xlarank.errors import XlarankError


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

    @property
    @abstractmethod
    def version(self) -> str:
        """The installed library's version, for the card."""

    @abstractmethod
    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        """The library's parameters for a spec; the spec's own params win."""

    @abstractmethod
    def search_space(self) -> dict:
        """What a tuning trial may change: "objective" and "num_rounds" are spec fields,
        the rest params; values are lists or scipy distributions (ParameterSampler's)."""

    @abstractmethod
    def fit(self, x: np.ndarray, labels: np.ndarray, sizes: np.ndarray, names: list[str],
            spec: TrainingSpec, threads: int) -> object:
        """A booster trained in this process on x float32 (rows, features) and labels
        (rows,), rows contiguous per graph with sizes int64 (graphs,). ``threads`` 0 lets
        the library choose."""

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
        booster.save_model(str(path))

    @abstractmethod
    def load(self, path: Path) -> object:
        """A booster read back from the native file `save` wrote."""


class LightGBM(BoosterLibrary):
    name = "lightgbm"
    objectives = ("lambdarank", "rank_xendcg", "regression")
    pointwise = ("regression",)
    model_file = "model.txt"
    objective_only_params = {"lambdarank_truncation_level": "lambdarank"}

    @property
    def version(self) -> str:
        import lightgbm as lgb

        return lgb.__version__

    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        # LightGBM writes these into model.txt: keys and their order are part of the file.
        params = {"objective": spec.objective, "seed": spec.seed, "deterministic": True,
                  "force_row_wise": True, "verbosity": -1, "num_threads": threads}
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
        return np.asarray(booster.predict(x, num_iteration=rounds), dtype=np.float64)

    def rounds(self, booster) -> int:
        return int(booster.current_iteration())

    def importance(self, booster, names):
        gain = booster.feature_importance(importance_type="gain")
        return pd.Series(gain, index=booster.feature_name(), dtype=np.float64)

    def load(self, path):
        import lightgbm as lgb

        return lgb.Booster(model_file=str(path))


class XGBoost(BoosterLibrary):
    name = "xgboost"
    objectives = ("rank:ndcg", "rank:pairwise", "rank:map", "reg:squarederror")
    pointwise = ("reg:squarederror",)
    model_file = "model.json"

    @property
    def version(self) -> str:
        import xgboost as xgb

        return xgb.__version__

    def params(self, spec: TrainingSpec, threads: int | None) -> dict:
        """As the base class says; ``threads`` None (or a param set to None) is left out,
        so XGBoost chooses."""
        params = {"objective": spec.objective, "seed": spec.seed, "tree_method": "hist",
                  "nthread": threads}
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
        return xgb.train(self.params(spec, threads or None), data,
                         num_boost_round=spec.num_rounds)

    def fit_dask(self, client, data, names, spec, threads_per_worker):
        from xgboost import dask as xgb_dask

        matrix = xgb_dask.DaskDMatrix(client, data.x, data.labels,
                                      qid=None if spec.pointwise else data.qid,
                                      feature_names=names)
        return xgb_dask.train(client, self.params(spec, threads_per_worker), matrix,
                              num_boost_round=spec.num_rounds)["booster"]

    def predict(self, booster, x, names, rounds):
        import xgboost as xgb

        data = xgb.DMatrix(x, feature_names=names)
        upto = (0, rounds) if rounds is not None else (0, 0)
        return np.asarray(booster.predict(data, iteration_range=upto), dtype=np.float64)

    def rounds(self, booster) -> int:
        return int(booster.num_boosted_rounds())

    def importance(self, booster, names):
        scores = booster.get_score(importance_type="total_gain")
        return pd.Series(scores, dtype=np.float64).reindex(names, fill_value=0.0)

    def load(self, path):
        import xgboost as xgb

        booster = xgb.Booster()
        booster.load_model(str(path))
        return booster


# In the order error messages list them.
BOOSTERS: dict[str, BoosterLibrary] = {adapter.name: adapter
                                       for adapter in (LightGBM(), XGBoost())}


def get_library(name: str) -> BoosterLibrary:
    """The adapter of a booster library by its name in specs and cards."""
    try:
        return BOOSTERS[name]
    except KeyError:
        raise XlarankError(f"unknown booster library {name!r}; known: "
                           f"{', '.join(BOOSTERS)}") from None
