"""A bounded random search over a booster spec's parameters, scored on a validation frame.

The budget is a number of trials (and optionally a time limit). Trial 0 is the starting
spec itself, so the chosen spec is never worse than the start on the validation frame it
was chosen on; that score is optimistic for the same reason, so judge the result on
other data. Draws come from scikit-learn's ParameterSampler, seeded.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pandas as pd
from scipy.stats import loguniform, uniform
from sklearn.model_selection import ParameterSampler

from xlarank.data.collections import get_collection
from xlarank.evaluate import headline_metric, per_graph_metrics, summarize
from xlarank.frame import FrameMeta
from xlarank.rank.model import RankerSpec, train_ranker

# What a trial may change; "num_rounds" and "objective" are spec fields, the rest params.
SEARCH_SPACE = {
    "lightgbm": {
        "objective": ["lambdarank", "rank_xendcg"],
        "num_rounds": [100, 200, 300, 500],
        "learning_rate": loguniform(0.02, 0.2),
        "num_leaves": [15, 31, 63, 127],
        "min_data_in_leaf": [5, 10, 20, 50],
        "feature_fraction": uniform(0.5, 0.5),
        "lambdarank_truncation_level": [16, 32, 64],
    },
    "xgboost": {
        "num_rounds": [100, 200, 300, 500],
        "eta": loguniform(0.02, 0.2),
        "max_depth": [4, 6, 8],
        "subsample": uniform(0.6, 0.4),
        "colsample_bytree": uniform(0.5, 0.5),
    },
}
SPEC_FIELDS = ("objective", "num_rounds")


def apply_draw(spec: RankerSpec, draw: dict) -> RankerSpec:
    """The spec with a draw's values; a LambdaRank-only parameter is dropped otherwise."""
    fields = {k: v for k, v in draw.items() if k in SPEC_FIELDS}
    params = {**spec.params, **{k: (round(float(v), 5) if isinstance(v, float) else v)
                                for k, v in draw.items() if k not in SPEC_FIELDS}}
    objective = fields.get("objective", spec.objective)
    if objective != "lambdarank":
        params.pop("lambdarank_truncation_level", None)
    return dataclasses.replace(spec, **fields, params=params)


def tune_spec(train: pd.DataFrame, meta: FrameMeta, valid: pd.DataFrame, spec: RankerSpec,
              trials: int, seed: int = 0, max_seconds: float | None = None,
              on_trial: Callable[[int, float], None] | None = None
              ) -> tuple[RankerSpec, pd.DataFrame]:
    """(best spec, one row per trial: its changes, headline metric and train seconds).

    Runs at most ``trials`` trials (the first is ``spec`` unchanged) and stops early once
    ``max_seconds`` have passed. The metric is the collection's headline one on ``valid``.
    """
    if spec.pointwise:
        space = {k: v for k, v in SEARCH_SPACE[spec.library].items() if k != "objective"}
    else:
        space = SEARCH_SPACE[spec.library]
    is_tile = get_collection(meta.collection).is_tile
    metric = headline_metric(is_tile)
    draws = [{}] + list(ParameterSampler(space, n_iter=max(trials - 1, 0), random_state=seed))
    started = time.perf_counter()
    rows, best, best_value = [], spec, float("-inf")
    for number, draw in enumerate(draws):
        candidate = apply_draw(spec, draw)
        began = time.perf_counter()
        ranker = train_ranker(train, meta, candidate)
        value = summarize(per_graph_metrics(valid, ranker.predict(valid), is_tile))[metric]
        applied = {k: v for k, v in draw.items() if k in SPEC_FIELDS or k in candidate.params}
        rows.append({"trial": number, metric: value,
                     "train_seconds": round(time.perf_counter() - began, 2),
                     **{k: (round(v, 5) if isinstance(v, float) else v)
                        for k, v in applied.items()}})
        if value > best_value:
            best, best_value = candidate, value
        if on_trial is not None:
            on_trial(number, value)
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            break
    return best, pd.DataFrame(rows)
