"""The config tuner: "which configs of my program should I measure next?", again and again.

`Tuner` is an ask/tell loop over one graph's configs, built on the in-graph ranker
(`xlarank.rank.ingraph`): the same inputs (raw config columns, graph-local families, a
prior's score) and the same rank-quantile target. The tuner holds the loop and the
measured table (`xlarank.rank.measured`); a strategy (`xlarank.rank.strategies`:
`TunerStrategy`, registered by name in `STRATEGIES`) picks the configs, as Optuna's
samplers pick trials.

Each `Tuner.suggest` (or `Tuner.ask`) proposes configs that are distinct and are not
duplicates (identical config rows) of any measured one: a config measured under one index
is measured under all. With fewer than two distinct measured configs (or all measured
runtimes equal) there is nothing to fit, and the strategy's cold start answers. The
default strategy (`BoosterStrategy`, "booster"):

- cold start: the prior's best configs when a prior is given, else on a layout graph a
  diverse batch (greedy max-min Hamming distance on the raw config columns, from the
  measured configs and a seeded first pick, ties drawn at random), on a tile graph a
  random one;
- prediction: a booster fitted on every measured distinct config (its median runtime's
  rank quantile), predicting each unmeasured one;
- uncertainty: ``bootstraps`` more boosters, each on a bootstrap sample of the measured
  distinct configs; their spread is the uncertainty;
- exploration: a lower confidence bound on the predicted rank quantile (prediction minus
  ``kappa`` sd: an uncertain config may be faster than predicted), and a share
  ``random_share`` of each batch drawn at random;
- diversity: a config that agrees, on the raw columns the boosters found important, with
  a config already in the batch is pushed back by ``diversity`` per such config (on the
  quantile scale), so one batch does not spend itself on near copies.

Its defaults exploit the prediction after that cold start, with the uncertainty
reported, not acted on (chosen on bench/autotune.py's replay; docs/rank-graph.md).
`RandomStrategy` ("random") is random search.

The state is the measured table alone: a tuner built again from the same measurements
and seed suggests the same configs (the random draws are seeded by the seed and the count
of distinct configs measured, never by how many batches were asked before).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.data.distinct import row_groups
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.errors import ArgumentTypeError, XlarankWarning, checked_type
from xlarank.features.build import featurize_graph
from xlarank.rank.ingraph import (
    IN_GRAPH_BOOSTER,
    booster_gain,
    check_threads,
    checked_prior,
    fit_booster,
    in_graph_inputs,
    predict_booster,
)
from xlarank.rank.measured import (
    MeasuredError,
    check_known,
    check_measured,
    config_columns,
    distinct_configs,
    group_medians,
    measured_table,
    read_measured_state,
    varying_columns,
)
from xlarank.rank.strategies import TunerStrategy, checked_strategy, suggestions
from xlarank.seeds import MAX_BOOSTER_SEED, check_booster_seed

# A tuner refits every batch, and several boosters at that: fewer, larger steps than
# rank-graph's 300 x 0.05 (the same small-sample leaves).
TUNER_BOOSTER = dataclasses.replace(
    IN_GRAPH_BOOSTER, name="tuner", num_rounds=100,
    params={**IN_GRAPH_BOOSTER.params, "learning_rate": 0.1})


class Tuner:
    """Ask/tell config tuner for one graph (layout or tile).

    graph: a TileGraph or LayoutGraph, or an npz path (its own runtimes are never read);
    prior: a cross-graph model directory or loaded ranker of the graph's collection (its
    score is one more input, and orders the cold start); seed: every random draw, a
    whole number in 0..2^31 - 1 (the boosters' range, as ``xlarank suggest --seed``);
    threads: the boosters' (None: the process's chosen count); strategy: a
    `TunerStrategy` (None: `BoosterStrategy()`).

    What strategies read: ``distinct`` (`xlarank.rank.measured.DistinctConfigs`: first
    index and group of each distinct config), ``raw`` (n_configs, m) the raw config
    columns that vary, ``prior_score`` float64 (n_configs,) or None, ``input_names``,
    `fit_predict`, `signature` and `log_runtimes`.
    """

    def __init__(self, graph, prior=None, seed: int = 0, threads: int | None = None,
                 strategy: TunerStrategy | None = None):
        # The boosters' range, as the command's (`check_booster_seed`): a larger seed
        # would wrap onto another one in LightGBM and in XGBoost's 31-bit random_state.
        seed = check_booster_seed(seed)
        threads = check_threads(threads)
        if not isinstance(graph, (TileGraph, LayoutGraph)):
            if not isinstance(graph, str | os.PathLike):
                raise ArgumentTypeError(f"Tuner: graph: expected an npz path (str or Path) "
                                        f"or a graph from xlarank.load_graph, got "
                                        f"{type(graph).__name__}")
            graph = load_graph(graph)
        if graph.n_configs == 0:
            raise MeasuredError(f"{graph.path}: the graph has no configs to tune")
        self.graph = graph
        self.prior = checked_prior(graph, prior)
        self.seed = seed
        self.threads = threads
        self.strategy = checked_strategy(strategy)
        raw = config_columns(graph)
        self._x, self.input_names = in_graph_inputs(graph, self.prior, raw=raw)
        varying = varying_columns(raw)
        self.raw = raw[:, varying]
        self._raw_names = {f"raw{i}": j for j, i in enumerate(varying)}
        # The lowest index of each distinct config stands for it in suggestions.
        self.distinct = distinct_configs(graph)
        self.prior_score = None
        if self.prior is not None:
            block = featurize_graph(graph, self.prior.feature_spec)
            self.prior_score = np.asarray(self.prior.predict(block), np.float64)
        self._rows: list[tuple[int, float]] = []

    def with_seed(self, seed: int, strategy: TunerStrategy | None = None) -> Tuner:
        """A fresh tuner on the same graph and prior (inputs shared, nothing measured),
        with another seed and, given one, another strategy."""
        other = object.__new__(Tuner)
        other.__dict__.update(self.__dict__)
        other.seed = check_booster_seed(seed)
        other.strategy = self.strategy if strategy is None else checked_strategy(strategy)
        other._rows = []
        return other

    @property
    def n_distinct(self) -> int:
        """Distinct configs of the graph (identical config rows counted once)."""
        return len(self.distinct)

    @property
    def measured(self) -> pd.DataFrame:
        """Every measurement told, in order: config_index int64, runtime float64 (ns)."""
        index, runtime = zip(*self._rows) if self._rows else ((), ())
        return pd.DataFrame({"config_index": np.array(index, np.int64),
                             "runtime": np.array(runtime, np.float64)})

    def tell(self, config_indices, runtimes) -> None:
        """Record measurements: config_indices int (n,), runtimes float (n,) in ns; a
        config may be told more than once (its median counts). `MeasuredError` for
        columns of two lengths, or of more than one dimension, as `rank_graph` refuses
        such a dict of columns (`measured_table`)."""
        try:
            columns = {"config_index": np.atleast_1d(np.asarray(config_indices)),
                       "runtime": np.atleast_1d(np.asarray(runtimes))}
        except (ValueError, TypeError) as exc:
            # Nested lists of unequal lengths make no array.
            raise MeasuredError(f"measured: config indices and runtimes must each be a "
                                f"flat sequence of numbers ({exc})") from None
        self.tell_table(measured_table(columns))

    def tell_table(self, measured: pd.DataFrame, where: str = "measured") -> None:
        """Record a table of measurements (columns config_index, runtime)."""
        checked_type(measured, pd.DataFrame, "measured", "a DataFrame of config_index, "
                     "runtime")
        checked_type(where, str, "where", "a str")
        table = check_measured(measured, where)
        check_known(self.graph, table, where)
        self._rows += list(zip(table["config_index"].tolist(), table["runtime"].tolist()))

    def _medians(self) -> pd.Series:
        """float64 median runtime of each measured distinct config, indexed by its group
        (sorted, so the fit never depends on the order of the measurements)."""
        return group_medians(self.measured, self.distinct.group)

    def best(self) -> tuple[int, float]:
        """(config_index, median runtime) of the fastest measured config; the index is the
        first one it was measured under."""
        if not self._rows:
            raise MeasuredError(f"{self.graph.path}: nothing measured yet")
        medians = self._medians()
        group = int(medians.idxmin())
        table = self.measured
        indices = table["config_index"].to_numpy()
        index = indices[self.distinct.group[indices] == group][0]
        return int(index), float(medians.min())

    def ask(self, k: int) -> np.ndarray:
        """int64 (<= k,): the next configs to measure, best first (fewer when fewer
        unmeasured distinct configs remain)."""
        return self.suggest(k)["config_index"].to_numpy(np.int64)

    def suggest(self, k: int) -> pd.DataFrame:
        """The next k configs to measure with why: config_index, score (minus the
        predicted log runtime; at a cold start the prior's score, or NaN without prior),
        uncertainty (sd of the prediction in log runtime; NaN at a cold start) and
        reason (exploit: among the k best predicted; explore: picked for its
        uncertainty, its difference from the batch, or at random; cold-start)."""
        checked_type(k, (int, np.integer), "batch size k", "a whole number >= 1 (int)")
        if k < 1:
            raise MeasuredError(f"batch size {k}: ask for at least one config")
        medians = self._medians()
        free = np.setdiff1d(np.arange(self.n_distinct), medians.index.to_numpy(np.int64))
        k = min(k, len(free))
        rng = np.random.default_rng([self.seed, len(medians)])
        if k == 0:
            return suggestions([], [], [], [])
        if len(medians) < 2 or medians.nunique() < 2:
            return self.strategy.cold_start(self, free, medians.index.to_numpy(np.int64),
                                            k, rng)
        return self.strategy.batch(self, free, medians, k, rng)

    def fit_predict(self, groups: np.ndarray, target: np.ndarray, candidates: np.ndarray,
                    salt: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """One booster (`TUNER_BOOSTER`, seeded by the tuner's seed and ``salt``) fitted on
        the distinct configs ``groups`` int64 (n,) against target (n,) (rank quantiles:
        0 the fastest), and its prediction float64 (len(candidates),) of the distinct
        configs ``candidates`` with its split gain float64 (len(input_names),)."""
        first = self.distinct.first
        booster = fit_booster(self._x[first[groups]], target, self.input_names,
                              # A step's seed derives from the tuner's, kept within the
                              # 32-bit int that LightGBM's seed parameter is.
                              (self.seed * 1009 + salt) % (MAX_BOOSTER_SEED + 1),
                              self.threads, TUNER_BOOSTER)
        prediction = predict_booster(booster, self._x[first[candidates]], self.input_names,
                                     TUNER_BOOSTER)
        return prediction, booster_gain(booster, self.input_names, TUNER_BOOSTER)

    def log_runtimes(self, quantile: np.ndarray, sd: np.ndarray, medians: pd.Series
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Predicted rank quantiles (and their sd) read as log runtimes off the measured
        medians: (centre, half the spread of quantile +- sd), float64 each."""
        log_runtime = np.sort(np.log(medians.to_numpy()))
        place = (np.arange(len(log_runtime)) + 0.5) / len(log_runtime)
        centre = np.interp(quantile, place, log_runtime)
        spread = (np.interp(quantile + sd, place, log_runtime)
                  - np.interp(quantile - sd, place, log_runtime)) / 2
        return centre, spread

    def signature(self, gain: np.ndarray, important: float) -> np.ndarray:
        """int64 (n_configs,): one id per combination of values on the raw columns holding
        ``important`` of the raw-column gain (all 0 when no raw column gained)."""
        names = self.input_names
        raw_gain = np.array([gain[i] if name in self._raw_names else 0.0
                             for i, name in enumerate(names)])
        if raw_gain.sum() <= 0:
            return np.zeros(self.graph.n_configs, np.int64)
        order = np.argsort(-raw_gain, kind="stable")
        share = np.cumsum(raw_gain[order]) / raw_gain.sum()
        top = order[: int(np.searchsorted(share, important)) + 1]
        columns = [self._raw_names[names[i]] for i in top]
        return row_groups(self.raw[:, columns])[1]


def suggest_next(graph, measured_path: str | Path | None, batch: int, prior=None,
                 seed: int = 0, threads: int | None = None,
                 strategy: TunerStrategy | None = None) -> pd.DataFrame:
    """The next ``batch`` configs of ``graph`` given the measurements in a CSV (the whole
    state: a run resumes by reading it again): `Tuner.suggest`'s table. strategy: a
    `TunerStrategy` (None: the default, `BoosterStrategy()`)."""
    check_booster_seed(seed)
    strategy = checked_strategy(strategy)
    measured = read_measured_state(measured_path)
    tuner = Tuner(graph, prior=prior, seed=seed, threads=threads, strategy=strategy)
    tuner.tell_table(measured, str(measured_path or "measured"))
    table = tuner.suggest(batch)
    if table.empty:
        warnings.warn(XlarankWarning(
            f"{measured_path}: every config of {tuner.graph.path} is measured "
            f"({tuner.n_distinct} distinct); nothing is left to suggest"), stacklevel=2)
    return table


def expected_random_best(runtime: np.ndarray, budget: int) -> float:
    """Exact expected best (lowest) runtime among ``budget`` configs drawn uniformly
    without replacement from a pool: runtime float (n,), one per distinct config.

    From the order statistics: with r_1 <= ... <= r_n, the sample's minimum is r_i or
    later with probability C(n - i + 1, b) / C(n, b) (every draw from the n - i + 1
    slowest), so E[min] = sum_i r_i (P(min >= r_i) - P(min >= r_(i+1))).
    """
    from scipy.special import gammaln

    ordered = np.sort(np.asarray(runtime, np.float64))
    n = len(ordered)
    if not 1 <= budget <= n:
        raise ValueError(f"budget {budget} outside 1..{n}")
    rest = n - np.arange(n)  # configs from rank i on: n, n - 1, ..., 1
    log_choose = np.where(rest >= budget, gammaln(rest + 1) - gammaln(rest - budget + 1),
                          -np.inf) - (gammaln(n + 1) - gammaln(n - budget + 1))
    at_least = np.exp(log_choose)
    exactly = at_least - np.append(at_least[1:], 0.0)
    return float(exactly @ ordered)


def expected_random_draws(n: int, k: int) -> float:
    """Expected draws without replacement from n configs until one of k given ones:
    (n + 1) / (k + 1)."""
    return (n + 1) / (k + 1)
