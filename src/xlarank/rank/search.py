"""A bounded random search over a booster spec's parameters, scored on a validation frame.

The budget is a number of trials (and optionally a time limit). Trial 0 is the starting
spec itself, so the chosen spec is never worse than the start on the validation frame it
was chosen on; that score is optimistic for the same reason, so judge the result on
other data. Draws come from scikit-learn's ParameterSampler, seeded, over the search space
of the spec's library (`xlarank.rank.boosters`). `tune_spec_file` is what ``xlarank tune``
runs: frames and spec from files, the chosen spec written as TOML with a header that says
how it was chosen.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sklearn.model_selection import ParameterSampler

from xlarank import specs
from xlarank.atomic import atomic_path, check_output, locks_outputs, write_text_atomic
from xlarank.data.collections import get_collection
from xlarank.errors import XlarankError
from xlarank.evaluate import headline, headline_metric
from xlarank.files import toml_text
from xlarank.frame import FrameMeta, read_frame
from xlarank.rank.boosters import get_library
from xlarank.rank.spec import RankerSpec, load_ranker_spec
from xlarank.rank.train import check_trainable, train_ranker
from xlarank.seeds import check_seed

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


# More trials than a search ever runs.
MAX_TRIALS = 100_000


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
    # Drawn as the trials run, not all up front (a budget of 10**12 trials asked for
    # terabytes before the first).
    draws = itertools.chain([{}], ParameterSampler(space, n_iter=max(trials - 1, 0),
                                                   random_state=seed))
    started = time.perf_counter()
    rows, best, best_value = [], spec, float("-inf")
    for number, draw in enumerate(draws):
        candidate = apply_draw(spec, draw)
        began = time.perf_counter()
        ranker = train_ranker(train, meta, candidate)
        value = headline(valid, ranker.predict(valid), is_tile)
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


@dataclass
class Tuned:
    """What `tune_spec_file` found: the ``best`` spec, one row per trial (``trials``, as
    `tune_spec` returns) and the name of the headline ``metric`` they were scored by."""

    best: RankerSpec
    trials: pd.DataFrame
    metric: str

    def best_trials(self, n: int = 5) -> pd.DataFrame:
        """The ``n`` best trials, best first: trial, the metric, train_seconds and changes
        (what the trial drew, as "name=value" words; empty for the starting spec)."""
        table = self.trials.sort_values(self.metric, ascending=False).head(n)
        drawn = [c for c in table.columns if c not in ("trial", self.metric, "train_seconds")]
        changes = [" ".join(f"{k}={row[k]:g}" if isinstance(row[k], float) else f"{k}={row[k]}"
                            for k in drawn if not pd.isna(row[k]))
                   for _, row in table.iterrows()]
        return table[["trial", self.metric, "train_seconds"]].assign(changes=changes)


@locks_outputs("out", "log")
def tune_spec_file(train_path: str | Path, valid_path: str | Path, spec_path: str | Path,
                   out: str | Path, trials: int, seed: int = 0,
                   max_minutes: float | None = None, log: str | Path | None = None,
                   on_trial: Callable[[int, float], None] | None = None) -> Tuned:
    """`tune_spec` on frame files; write the best spec as TOML, and the trials as CSV.

    Parameters
    ----------
    train_path, valid_path : path
        The training frame, and the validation frame the trials are scored on (same
        collection and feature spec).
    spec_path : path or packaged spec name
        The starting booster spec (trial 0), a file or a packaged spec
        (`xlarank.specs.spec_path`).
    out : path
        Where to write the chosen spec; its comment header names the date, the budget,
        the frames and the best and starting scores.
    trials, seed, on_trial
        As `tune_spec`.
    max_minutes : float, optional
        Stop after this long (the running trial finishes).
    log : path, optional
        CSV of every trial.

    Raises
    ------
    XlarankError
        A bad spec, or frames that the spec cannot train on or that do not match.
    """
    check_seed(seed, "seed")
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS:
        raise XlarankError(f"--trials {trials!r}: give a whole number in 1..{MAX_TRIALS:,}")
    if max_minutes is not None and not max_minutes >= 0:  # NaN too: it would never stop
        raise XlarankError(f"--max-minutes {max_minutes!r}: give a number of minutes >= 0")
    for output in (out, log):
        if output is not None:
            check_output(output)
    start_spec = load_ranker_spec(specs.spec_path(spec_path, "booster"))
    train_table, meta = read_frame(train_path)
    valid_table, valid_meta = read_frame(valid_path)
    check_trainable(meta, start_spec, where=str(train_path), spec_label=repr(str(spec_path)))
    if valid_meta.spec_hash != meta.spec_hash or valid_meta.collection != meta.collection:
        raise XlarankError(f"{valid_path}: not the training frame's collection and "
                           "feature spec")
    metric = headline_metric(get_collection(meta.collection).is_tile)
    best, table = tune_spec(train_table, meta, valid_table, start_spec, trials, seed,
                            None if max_minutes is None else 60 * max_minutes, on_trial=on_trial)
    header = (f"{best.name} for {meta.collection}, chosen by xlarank tune on "
              f"{datetime.date.today()}:\n"
              f"{len(table)} trials (budget {trials}"
              f"{f', {max_minutes} min' if max_minutes else ''}, seed {seed}), "
              f"trained on {train_path}, scored on {valid_path}.\n"
              f"{metric}: best {table[metric].max():.4f}, starting spec "
              f"{table[metric].iloc[0]:.4f} (optimistic: chosen on that frame).")
    write_text_atomic(out, toml_text(dataclasses.asdict(best), header))
    if log is not None:
        with atomic_path(log) as tmp:
            table.to_csv(tmp, index=False)
    return Tuned(best=best, trials=table, metric=metric)
