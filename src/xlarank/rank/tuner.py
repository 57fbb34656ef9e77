"""The config tuner: "which configs of my program should I measure next?", again and again.

`Tuner` is an ask/tell loop over one graph's configs, built on the in-graph ranker
(`xlarank.rank.ingraph`): the same inputs (raw config columns, graph-local families, a
prior's score) and the same rank-quantile target. Not to be confused with the
hyperparameter search of `xlarank.rank.tune` (``xlarank tune``).

Each `Tuner.suggest` (or `Tuner.ask`) proposes configs that are distinct and are not
duplicates (identical config rows) of any measured one: a config measured under one index
is measured under all. With fewer than two distinct measured configs (or all measured
runtimes equal) there is nothing to fit, and the batch is a cold start: the prior's best
configs when a prior is given, else a diverse batch (greedy max-min Hamming distance on
the raw config columns, from the measured configs and a seeded first pick). Past that:

- prediction: a booster fitted on every measured distinct config (its median runtime's
  rank quantile), predicting each unmeasured one;
- uncertainty: `Strategy.bootstraps` more boosters, each on a bootstrap sample of the
  measured distinct configs; their spread is the uncertainty;
- exploration: a lower confidence bound on the predicted rank quantile (prediction minus
  `Strategy.kappa` sd: an uncertain config may be faster than predicted), and a share
  `Strategy.random_share` of each batch drawn at random;
- diversity: a config that agrees, on the raw columns the boosters found important, with
  a config already in the batch is pushed back by `Strategy.diversity` per such config
  (on the quantile scale), so one batch does not spend itself on near copies.

The defaults were chosen on the replay of bench/autotune.py (real unet3d beside synthetic
files of every collection; `Strategy` says what each part did there): exploitation of
the prediction after a diverse cold start, with the uncertainty reported, not acted on.

The state is the measured table alone: a tuner built again from the same measurements
and seed suggests the same configs (the random draws are seeded by the seed and the count
of distinct configs measured, never by how many batches were asked before).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.errors import BadInputError, XlarankError
from xlarank.features.build import featurize_graph
from xlarank.files import open_regular
from xlarank.rank.ingraph import (
    IN_GRAPH_PARAMS,
    MEASURED_COLUMNS,
    MeasuredError,
    check_measured,
    checked_prior,
    config_columns,
    in_graph_inputs,
    measured_path,
    rank_target,
    read_measured,
)
from xlarank.seeds import check_seed
from xlarank.threads import chosen_threads

# A tuner refits every batch, and several boosters at that: fewer, larger steps than
# rank-graph's 300 x 0.05 (the same small-sample leaves).
TUNER_PARAMS = {**IN_GRAPH_PARAMS, "learning_rate": 0.1}
TUNER_ROUNDS = 100
SUGGESTION_COLUMNS = ("config_index", "score", "uncertainty", "reason")
EXPLOIT, EXPLORE, COLD_START = "exploit", "explore", "cold-start"


@dataclass(frozen=True)
class Strategy:
    """How a batch is chosen once a model can be fitted.

    bootstraps: boosters on bootstrap samples of the measured configs, whose spread is
    the uncertainty (0: none); kappa: weight of that sd in the lower confidence bound on
    the predicted rank quantile; random_share: expected share of each batch drawn at
    random; diversity: penalty (rank-quantile units) per config already in the batch with
    the same values on the important raw columns; important: the share of the boosters'
    raw-column gain whose columns make up that signature; cold: the first batch without a
    prior, "diverse" (max-min Hamming) or "random".

    The defaults, chosen on bench/autotune.py's replay (10 seeds, batch 8; README): pure
    exploitation of the booster fitted on every measured config. On real unet3d the
    lower confidence bound (kappa 0.25 / 0.5: 23 / 20 measurements to the top 1%, median),
    diversity 0.02 (21) and a bagged mean (26) all came later than exploitation (19), and
    on the synthetic files they were level within the seeds' spread; the diverse cold
    start was what mattered there (random first batches missed the top 1% of synthetic
    layout:xla:default within 20% in most seeds).
    """

    bootstraps: int = 4
    kappa: float = 0.0
    random_share: float = 0.0
    diversity: float = 0.0
    important: float = 0.9
    cold: str = "diverse"

    def __post_init__(self):
        if self.cold not in ("diverse", "random"):
            raise XlarankError(f"cold start {self.cold!r}: 'diverse' or 'random'")
        numbers = {"kappa": self.kappa, "random_share": self.random_share,
                   "diversity": self.diversity, "important": self.important}
        for name, value in {"bootstraps": self.bootstraps, **numbers}.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise XlarankError(f"{self}: {name} must be a number, got "
                                   f"{type(value).__name__}")
        # NaN fails every comparison, so each range is stated as what must hold.
        bad = [name for name, value in numbers.items() if not np.isfinite(value)]
        if bad:
            raise XlarankError(f"{self}: {', '.join(bad)} must be finite numbers")
        if (not float(self.bootstraps).is_integer() or not self.bootstraps >= 0
                or not 0 <= self.random_share <= 1 or not self.kappa >= 0
                or not self.diversity >= 0 or not 0 <= self.important <= 1):
            raise XlarankError(f"{self}: bootstraps a whole number >= 0, kappa >= 0, "
                               "diversity >= 0, and a random share and important in [0, 1]")


class Tuner:
    """Ask/tell config tuner for one graph (layout or tile).

    graph: a TileGraph or LayoutGraph, or an npz path (its own runtimes are never read);
    prior: a cross-graph model directory or loaded ranker of the graph's collection (its
    score is one more input, and orders the cold start); seed: every random draw;
    threads: the boosters' (None: the process's chosen count); strategy: `Strategy`.
    """

    def __init__(self, graph, prior=None, seed: int = 0, threads: int | None = None,
                 strategy: Strategy | None = None):
        seed = check_seed(seed, "seed")
        if not isinstance(graph, (TileGraph, LayoutGraph)):
            graph = load_graph(graph)
        if graph.n_configs == 0:
            raise MeasuredError(f"{graph.path}: the graph has no configs to tune")
        self.graph = graph
        self.prior = checked_prior(graph, prior)
        self.seed = seed
        self.threads = threads
        self.strategy = strategy or Strategy()
        self._x, self._names = in_graph_inputs(graph, self.prior)
        raw = config_columns(graph)
        varying = np.flatnonzero((raw != raw[:1]).any(axis=0))
        self._raw = raw[:, varying]
        self._raw_names = {f"raw{i}": j for j, i in enumerate(varying)}
        _, first, group = np.unique(self._raw, axis=0, return_index=True,
                                    return_inverse=True)
        # group: int64 (n_configs,) the distinct config of each index; first: the lowest
        # index of each distinct config, which stands for it in suggestions.
        self._group = group.ravel().astype(np.int64)
        self._first = first.astype(np.int64)
        self._prior_score = None
        if self.prior is not None:
            block = featurize_graph(graph, self.prior.feature_spec)
            self._prior_score = np.asarray(self.prior.predict(block), np.float64)
        self._rows: list[tuple[int, float]] = []

    def with_seed(self, seed: int, strategy: Strategy | None = None) -> Tuner:
        """A fresh tuner on the same graph and prior (inputs shared, nothing measured),
        with another seed and, given one, another strategy."""
        other = object.__new__(Tuner)
        other.__dict__.update(self.__dict__)
        other.seed = seed
        other.strategy = strategy or self.strategy
        other._rows = []
        return other

    @property
    def n_distinct(self) -> int:
        """Distinct configs of the graph (identical config rows counted once)."""
        return len(self._first)

    @property
    def measured(self) -> pd.DataFrame:
        """Every measurement told, in order: config_index int64, runtime float64 (ns)."""
        index, runtime = zip(*self._rows) if self._rows else ((), ())
        return pd.DataFrame({"config_index": np.array(index, np.int64),
                             "runtime": np.array(runtime, np.float64)})

    def tell(self, config_indices, runtimes) -> None:
        """Record measurements: config_indices int (n,), runtimes float (n,) in ns; a
        config may be told more than once (its median counts)."""
        table = pd.DataFrame({"config_index": np.atleast_1d(np.asarray(config_indices)),
                              "runtime": np.atleast_1d(np.asarray(runtimes))})
        self.tell_table(table)

    def tell_table(self, measured: pd.DataFrame, where: str = "measured") -> None:
        """Record a table of measurements (columns config_index, runtime)."""
        table = check_measured(measured, where)
        unknown = table["config_index"] >= self.graph.n_configs
        if unknown.any():
            raise MeasuredError(f"{where}: config_index "
                                f"{int(table['config_index'][unknown].iloc[0])} is not "
                                f"among the {self.graph.n_configs} configs of "
                                f"{self.graph.path}")
        self._rows += list(zip(table["config_index"].tolist(), table["runtime"].tolist()))

    def _medians(self) -> pd.Series:
        """float64 median runtime of each measured distinct config, indexed by its group
        (sorted, so the fit never depends on the order of the measurements)."""
        table = self.measured
        return table.groupby(self._group[table["config_index"].to_numpy()])["runtime"] \
            .median().sort_index()

    def best(self) -> tuple[int, float]:
        """(config_index, median runtime) of the fastest measured config; the index is the
        first one it was measured under."""
        if not self._rows:
            raise MeasuredError(f"{self.graph.path}: nothing measured yet")
        medians = self._medians()
        group = int(medians.idxmin())
        table = self.measured
        indices = table["config_index"].to_numpy()
        index = indices[self._group[indices] == group][0]
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
        if k < 1:
            raise MeasuredError(f"batch size {k}: ask for at least one config")
        medians = self._medians()
        free = np.setdiff1d(np.arange(self.n_distinct), medians.index.to_numpy(np.int64))
        k = min(k, len(free))
        rng = np.random.default_rng([self.seed, len(medians)])
        if k == 0:
            return _suggestions([], [], [], [])
        if len(medians) < 2 or medians.nunique() < 2:
            return self._cold_start(free, medians.index.to_numpy(np.int64), k, rng)
        return self._model_batch(free, medians, k, rng)

    def _cold_start(self, free: np.ndarray, measured: np.ndarray, k: int,
                    rng: np.random.Generator) -> pd.DataFrame:
        nan = [np.nan] * k
        if self._prior_score is not None:
            score = self._prior_score[self._first[free]]
            picks = free[np.lexsort((free, -score))[:k]]
            return _suggestions(self._first[picks], self._prior_score[self._first[picks]],
                                nan, [COLD_START] * k)
        if self.strategy.cold == "random":
            picks = rng.permutation(free)[:k]
        else:
            picks = _max_min_hamming(self._raw[self._first], free, measured, k, rng)
        return _suggestions(self._first[picks], nan, nan, [COLD_START] * k)

    def _model_batch(self, free: np.ndarray, medians: pd.Series, k: int,
                     rng: np.random.Generator) -> pd.DataFrame:
        import lightgbm as lgb

        strategy = self.strategy
        groups = medians.index.to_numpy(np.int64)
        x = self._x[self._first[groups]]
        target = rank_target(medians.to_numpy())
        candidates = self._x[self._first[free]]
        threads = self.threads or chosen_threads()
        gain = np.zeros(len(self._names))

        def fitted(rows: np.ndarray, salt: int) -> np.ndarray:
            params = {**TUNER_PARAMS, "seed": self.seed * 1009 + salt,
                      "num_threads": threads}
            data = lgb.Dataset(x[rows], label=target[rows], feature_name=self._names,
                               params={"min_data_in_bin": 1, "verbosity": -1})
            booster = lgb.train(params, data, num_boost_round=TUNER_ROUNDS)
            gain[:] += booster.feature_importance("gain")
            return booster.predict(candidates, num_threads=threads)

        # The prediction is the booster on every measured config; bootstrap samples only
        # measure its spread (their mean, a bagged booster, found the fast configs later
        # on the replay: a sample without the few fastest configs forgets them).
        mean = fitted(np.arange(len(groups)), 0)
        spread = []
        for b in range(strategy.bootstraps):
            rows = rng.integers(0, len(groups), len(groups))
            if np.ptp(target[rows]) > 0:  # a sample of one runtime has nothing to fit
                spread.append(fitted(rows, b + 1))
        sd = np.std(spread, axis=0) if len(spread) > 1 else np.zeros(len(free))
        bound = mean - strategy.kappa * sd
        signature = self._signature(gain)[self._first[free]]

        n_random = int(np.floor(strategy.random_share * k + rng.random()))
        n_random = min(n_random, k)
        chosen: list[int] = []
        reasons: list[str] = []
        penalty = np.zeros(len(free))
        taken = np.zeros(len(free), bool)
        exploit = set(np.lexsort((free, mean))[:k].tolist())
        for _ in range(k - n_random):
            pick = int(np.lexsort((free, np.where(taken, np.inf, bound + penalty)))[0])
            chosen.append(pick)
            reasons.append(EXPLOIT if pick in exploit else EXPLORE)
            taken[pick] = True
            penalty += strategy.diversity * (signature == signature[pick])
        if n_random:
            rest = np.flatnonzero(~taken)
            for pick in rng.choice(rest, n_random, replace=False).tolist():
                chosen.append(int(pick))
                reasons.append(EXPLORE)
        chosen_arr = np.array(chosen, np.int64)
        log_runtime = np.sort(np.log(medians.to_numpy()))
        place = (np.arange(len(log_runtime)) + 0.5) / len(log_runtime)
        centre = np.interp(mean[chosen_arr], place, log_runtime)
        spread = (np.interp(mean[chosen_arr] + sd[chosen_arr], place, log_runtime)
                  - np.interp(mean[chosen_arr] - sd[chosen_arr], place, log_runtime)) / 2
        return _suggestions(self._first[free[chosen_arr]], -centre, spread, reasons)

    def _signature(self, gain: np.ndarray) -> np.ndarray:
        """int64 (n_configs,): one id per combination of values on the raw columns holding
        `Strategy.important` of the raw-column gain (all 0 when no raw column gained)."""
        raw_gain = np.array([gain[i] if name in self._raw_names else 0.0
                             for i, name in enumerate(self._names)])
        if raw_gain.sum() <= 0:
            return np.zeros(self.graph.n_configs, np.int64)
        order = np.argsort(-raw_gain, kind="stable")
        share = np.cumsum(raw_gain[order]) / raw_gain.sum()
        top = order[: int(np.searchsorted(share, self.strategy.important)) + 1]
        columns = [self._raw_names[self._names[i]] for i in top]
        _, ids = np.unique(self._raw[:, columns], axis=0, return_inverse=True)
        return ids.ravel().astype(np.int64)


def _max_min_hamming(raw: np.ndarray, free: np.ndarray, measured: np.ndarray, k: int,
                     rng: np.random.Generator) -> np.ndarray:
    """k of ``free`` (distinct-config ids into raw (n_distinct, m)), each the farthest in
    Hamming distance from the measured ones and those already picked (ties: lowest id);
    the first at random when nothing is measured."""
    nearest = np.full(len(free), np.inf)
    for done in measured.tolist():
        nearest = np.minimum(nearest, (raw[free] != raw[done]).sum(axis=1))
    picks = []
    taken = np.zeros(len(free), bool)
    for _ in range(k):
        if np.isinf(nearest).all():
            pick = int(rng.integers(len(free)))
        else:
            pick = int(np.argmax(np.where(taken, -1.0, nearest)))
        picks.append(pick)
        taken[pick] = True
        nearest = np.minimum(nearest, (raw[free] != raw[free[pick]]).sum(axis=1))
    return free[np.array(picks, np.int64)]


def _suggestions(index, score, uncertainty, reason) -> pd.DataFrame:
    return pd.DataFrame({"config_index": np.asarray(index, np.int64),
                         "score": np.asarray(score, np.float64),
                         "uncertainty": np.asarray(uncertainty, np.float64),
                         "reason": pd.Series(reason, dtype=object)})


def read_measured_state(path: str | Path | None) -> pd.DataFrame:
    """The measured table a tuner resumes from: `read_measured`'s, or an empty table
    (config_index, runtime) for no path or an empty file (a header-only CSV reads as
    empty by itself)."""
    if path is None or _blank(path):
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in
                             zip(MEASURED_COLUMNS, (np.int64, np.float64))})
    return read_measured(path)


def _blank(path: str | Path) -> bool:
    """Whether the measured CSV at ``path`` holds nothing but white space (bytes, so a
    file that is not UTF-8 is `read_measured`'s to refuse); False where it cannot be
    opened (`read_measured` says why)."""
    try:
        with open_regular(measured_path(path), "measured runtimes CSV") as handle:
            return not handle.read().strip()
    except (BadInputError, OSError):
        return False


def suggest_next(graph, measured_path: str | Path | None, batch: int, prior=None,
                 seed: int = 0, threads: int | None = None) -> pd.DataFrame:
    """The next ``batch`` configs of ``graph`` given the measurements in a CSV (the whole
    state: a run resumes by reading it again): `Tuner.suggest`'s table."""
    check_seed(seed, "seed")
    measured = read_measured_state(measured_path)
    tuner = Tuner(graph, prior=prior, seed=seed, threads=threads)
    tuner.tell_table(measured, str(measured_path or "measured"))
    return tuner.suggest(batch)


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
