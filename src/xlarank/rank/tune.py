"""A bounded random search over a booster spec's parameters, scored on a validation frame.

The budget is a number of trials (and optionally a time limit). Trial 0 is the starting
spec itself, so the chosen spec is never worse than the start on the validation frame it
was chosen on; that score is optimistic for the same reason, so judge the result on
other data. Draws come from scikit-learn's ParameterSampler, seeded, over the search space
of the spec's library (`xlarank.rank.boosters`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pandas as pd
from sklearn.model_selection import ParameterSampler

from xlarank.data.collections import get_collection
from xlarank.evaluate import headline_metric, per_graph_metrics, summarize
from xlarank.frame import FrameMeta
from xlarank.rank.boosters import get_library
from xlarank.rank.spec import RankerSpec
from xlarank.rank.train import train_ranker

# Spec fields a trial may change (the library's search space says which); the rest of a
# draw are params.
SPEC_FIELDS = ("objective", "num_rounds")


def apply_draw(spec: RankerSpec, draw: dict) -> RankerSpec:
    """The spec with a draw's values; a parameter that only one objective accepts (the
    library's ``objective_only_params``) is dropped under any other."""
    fields = {k: v for k, v in draw.items() if k in SPEC_FIELDS}
    params = {**spec.params, **{k: (round(float(v), 5) if isinstance(v, float) else v)
                                for k, v in draw.items() if k not in SPEC_FIELDS}}
    objective = fields.get("objective", spec.objective)
    for name, only in get_library(spec.library).objective_only_params.items():
        if objective != only:
            params.pop(name, None)
    return dataclasses.replace(spec, **fields, params=params)


def tune_spec(train: pd.DataFrame, meta: FrameMeta, valid: pd.DataFrame, spec: RankerSpec,
              trials: int, seed: int = 0, max_seconds: float | None = None,
              on_trial: Callable[[int, float], None] | None = None
              ) -> tuple[RankerSpec, pd.DataFrame]:
    """(best spec, one row per trial: its changes, headline metric and train seconds).

    Runs at most ``trials`` trials (the first is ``spec`` unchanged) and stops early once
    ``max_seconds`` have passed. The metric is the collection's headline one on ``valid``.
    """
    space = get_library(spec.library).search_space()
    if spec.pointwise:
        space = {k: v for k, v in space.items() if k != "objective"}
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
