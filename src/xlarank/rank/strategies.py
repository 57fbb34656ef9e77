"""How a `xlarank.Tuner` picks the configs to measure: the strategies, as Optuna's
samplers pick trials.

A strategy (`TunerStrategy`) answers two questions for the tuner, which holds the loop and
the measured table: which configs to measure first (`TunerStrategy.cold_start`) and which
next once a model can be fitted (`TunerStrategy.batch`). Strategies are registered by name
in `STRATEGIES` (``xlarank suggest --strategy NAME``), their settings are their dataclass
fields (``--strategy-option key=value``, `make_strategy`). `BoosterStrategy` ("booster") is
the default, `RandomStrategy` ("random") is random search; `xlarank.rank.tuner` says what
the default does at each step.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
import pandas as pd

from xlarank.compat import require_optuna
from xlarank.data.distinct import DistinctConfigs
from xlarank.data.graph import LayoutGraph, TileGraph
from xlarank.errors import ArgumentTypeError, XlarankError
from xlarank.rank.ingraph import rank_graph, rank_target

EXPLOIT, EXPLORE, COLD_START = "exploit", "explore", "cold-start"


class TunerState(Protocol):
    """What a strategy reads of the tuner (`xlarank.rank.tuner.Tuner` is one), so that
    strategies need not import the tuner: the graph, its distinct configs
    (`xlarank.data.distinct.DistinctConfigs`), ``raw`` float32 (n_configs, m) the raw
    config columns that vary, ``prior_score`` float64 (n_configs,) or None, the input
    names, the seed and threads, the measured table, and the tuner's booster fit."""

    graph: TileGraph | LayoutGraph
    distinct: DistinctConfigs
    raw: np.ndarray
    prior_score: np.ndarray | None
    input_names: list[str]
    seed: int
    threads: int | None

    @property
    def measured(self) -> pd.DataFrame: ...

    def fit_predict(self, groups: np.ndarray, target: np.ndarray, candidates: np.ndarray,
                    salt: int = 0) -> tuple[np.ndarray, np.ndarray]: ...

    def log_runtimes(self, quantile: np.ndarray, sd: np.ndarray, medians: pd.Series
                     ) -> tuple[np.ndarray, np.ndarray]: ...

    def signature(self, gain: np.ndarray, important: float) -> np.ndarray: ...


class TunerStrategy(ABC):
    """How a `Tuner` picks the configs to measure, as Optuna's samplers pick trials: the
    tuner holds the loop and the measured table, a strategy answers two questions.

    - `cold_start`: which configs to measure first, while fewer than two distinct configs
      (or only equal runtimes) are measured, so no model can be fitted;
    - `batch`: the next configs once a model can be fitted on the measured table.

    Both get the tuner (`TunerState`: its distinct configs, inputs, prior score and
    boosters: `Tuner.fit_predict`), ``free`` int64 (n_free,): the distinct configs not yet measured
    (ids into ``tuner.distinct``), k (1 <= k <= n_free) and a seeded generator; they
    return `suggestions` of k of ``free``'s configs, best first. A strategy is registered
    by its ``name`` in `STRATEGIES` (``xlarank suggest --strategy NAME``), and its
    settings are its dataclass fields (``--strategy-option key=value``).
    """

    name: ClassVar[str] = ""
    # Numeric settings: name -> (low, high, whole number?, low excluded?), checked when
    # the strategy is made (`_check_ranges`).
    SETTING_RANGES: ClassVar[dict] = {}

    @abstractmethod
    def cold_start(self, tuner: TunerState, free: np.ndarray, measured: np.ndarray, k: int,
                   rng: np.random.Generator) -> pd.DataFrame:
        """The first configs: measured int64, the distinct configs measured so far."""

    @abstractmethod
    def batch(self, tuner: TunerState, free: np.ndarray, medians: pd.Series, k: int,
              rng: np.random.Generator) -> pd.DataFrame:
        """The next configs: medians float64, the median runtime of each measured
        distinct config indexed by its id (sorted), at least two distinct runtimes."""


def _range_text(low, high, whole: bool, open_low: bool = False) -> str:
    if whole:
        return f"a whole number in {low}..{high}"
    return f"a number in {'(' if open_low else '['}{low:g}, {high:g}]"


def check_ranges(owner: str, values: Mapping, ranges: Mapping) -> dict:
    """The numeric settings ``values`` (name -> value), each inside its documented range
    (``ranges``: name -> (low, high, whole number?, low excluded?)), as Python numbers:
    an int for a whole-number setting (8.0 reads as 8), a float otherwise. Raises
    `ArgumentTypeError` for a value that is no number (a bool is none), and XlarankError
    naming ``owner`` and the first setting that is not finite or lies outside its range.
    The one range check of settings: the tuner's strategies (`SETTING_RANGES`) and the
    ranking systems (`xlarank.systems.RankingSystem.SETTING_RANGES`) state theirs so."""
    checked = {}
    for name, value in values.items():
        low, high, whole, open_low = ranges[name]
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ArgumentTypeError(f"{owner}: {name} must be a number, got "
                                    f"{type(value).__name__}")
        if isinstance(value, np.number):
            value = value.item()
        if isinstance(value, complex):
            raise ArgumentTypeError(f"{owner}: {name} must be a real number, got complex")
        # NaN fails every comparison, so each range is stated as what must hold.
        if isinstance(value, float) and not math.isfinite(value):
            raise XlarankError(f"{owner}: {name} must be finite, got {value}")
        inside = (low < value if open_low else low <= value) and value <= high
        if not inside or (whole and isinstance(value, float) and not value.is_integer()):
            shown = f"{value:g}" if isinstance(value, float) else f"{value}"
            raise XlarankError(f"{owner}: {name}={shown[:40]} is outside its range; "
                               f"{name} is {_range_text(low, high, whole, open_low)}")
        checked[name] = int(value) if whole else float(value)
    return checked


def _check_ranges(strategy) -> None:
    """`check_ranges` of a strategy's ``SETTING_RANGES``. The upper bounds keep one batch
    to seconds: a million bootstraps or XGBoost rounds fitted on every batch ran on for
    minutes."""
    ranges = type(strategy).SETTING_RANGES
    # Named as the user names it (--strategy NAME), not by the dataclass's long repr.
    check_ranges(f"strategy {strategy.name or type(strategy).__name__}",
                 {name: getattr(strategy, name) for name in ranges}, ranges)


@dataclass(frozen=True)
class BoosterStrategy(TunerStrategy):
    """The default strategy ("booster"): a diverse cold start, then the in-graph booster.

    bootstraps: boosters on bootstrap samples of the measured configs, whose spread is
    the uncertainty (0: none); kappa: weight of that sd in the lower confidence bound on
    the predicted rank quantile; random_share: expected share of each batch drawn at
    random; diversity: penalty (rank-quantile units) per config already in the batch with
    the same values on the important raw columns; important: the share of the boosters'
    raw-column gain whose columns make up that signature; cold: the first batch without a
    prior, "diverse" (max-min Hamming), "random", or "auto" (the default: diverse on a
    layout graph, random on a tile graph); with a prior, the prior's best.

    Why "auto": a layout config is one categorical choice per configurable node, and
    Hamming distance counts the nodes laid out differently, so a diverse batch spans the
    choices; a tile config is a few ordered numbers (tile sizes), where Hamming counts a
    one-step change as much as a hundredfold one, and the diverse batch spread itself
    over rare values (bench/autotune.py, the synthetic tile file: 16.5 measurements to a
    config within the noise of the best diverse, 11.0 random; layout: unet3d 27.0
    diverse, 74.0 random).

    Ranges (`SETTING_RANGES`, checked when the strategy is made): bootstraps a whole
    number in 0..64, kappa and diversity in [0, 100], random_share and important in
    [0, 1].

    The defaults exploit the booster fitted on every measured config, with the
    uncertainty reported, not acted on; they were chosen on bench/autotune.py's replay
    (docs/rank-graph.md says what each setting did there; the current figures are in
    docs/benchmarks.md).
    """

    name: ClassVar[str] = "booster"
    bootstraps: int = 4
    kappa: float = 0.0
    random_share: float = 0.0
    diversity: float = 0.0
    important: float = 0.9
    cold: str = "auto"

    # name -> (low, high, whole number?, low excluded?): ``make_strategy`` and the
    # constructor refuse a value outside (each bootstrap is one more booster a batch).
    SETTING_RANGES: ClassVar[dict] = {
        "bootstraps": (0, 64, True, False), "kappa": (0.0, 100.0, False, False),
        "random_share": (0.0, 1.0, False, False), "diversity": (0.0, 100.0, False, False),
        "important": (0.0, 1.0, False, False)}

    def __post_init__(self):
        if not isinstance(self.cold, str) or self.cold not in ("auto", "diverse", "random"):
            raise XlarankError(f"cold start {self.cold!r}: 'auto', 'diverse' or 'random'")
        _check_ranges(self)

    def cold_start(self, tuner, free, measured, k, rng):
        nan = [np.nan] * k
        first = tuner.distinct.first
        if tuner.prior_score is not None:
            score = tuner.prior_score[first[free]]
            picks = free[np.lexsort((free, -score))[:k]]
            return suggestions(first[picks], tuner.prior_score[first[picks]], nan,
                               [COLD_START] * k)
        cold = self.cold
        if cold == "auto":
            cold = "random" if isinstance(tuner.graph, TileGraph) else "diverse"
        if cold == "random":
            picks = rng.permutation(free)[:k]
        else:
            picks = max_min_hamming(tuner.raw[first], free, measured, k, rng)
        return suggestions(first[picks], nan, nan, [COLD_START] * k)

    def batch(self, tuner, free, medians, k, rng):
        groups = medians.index.to_numpy(np.int64)
        target = rank_target(medians.to_numpy())
        gain = np.zeros(len(tuner.input_names))

        def fitted(rows: np.ndarray, salt: int) -> np.ndarray:
            prediction, booster_gain_ = tuner.fit_predict(groups[rows], target[rows], free,
                                                          salt)
            gain[:] += booster_gain_
            return prediction

        # The prediction is the booster on every measured config; bootstrap samples only
        # measure its spread (their mean, a bagged booster, found the fast configs later
        # on the replay: a sample without the few fastest configs forgets them).
        mean = fitted(np.arange(len(groups)), 0)
        spread = []
        for b in range(self.bootstraps):
            rows = rng.integers(0, len(groups), len(groups))
            if np.ptp(target[rows]) > 0:  # a sample of one runtime has nothing to fit
                spread.append(fitted(rows, b + 1))
        sd = np.std(spread, axis=0) if len(spread) > 1 else np.zeros(len(free))
        bound = mean - self.kappa * sd
        signature = tuner.signature(gain, self.important)[tuner.distinct.first[free]]

        n_random = int(np.floor(self.random_share * k + rng.random()))
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
            penalty += self.diversity * (signature == signature[pick])
        if n_random:
            rest = np.flatnonzero(~taken)
            for pick in rng.choice(rest, n_random, replace=False).tolist():
                chosen.append(int(pick))
                reasons.append(EXPLORE)
        chosen_arr = np.array(chosen, np.int64)
        centre, spread = tuner.log_runtimes(mean[chosen_arr], sd[chosen_arr], medians)
        return suggestions(tuner.distinct.first[free[chosen_arr]], -centre, spread, reasons)


@dataclass(frozen=True)
class RandomStrategy(TunerStrategy):
    """Random search ("random"): every batch drawn uniformly from the unmeasured distinct
    configs, no model fitted (a baseline; no settings)."""

    name: ClassVar[str] = "random"

    def cold_start(self, tuner, free, measured, k, rng):
        nan = [np.nan] * k
        return suggestions(tuner.distinct.first[rng.permutation(free)[:k]], nan, nan,
                           [COLD_START] * k)

    def batch(self, tuner, free, medians, k, rng):
        nan = [np.nan] * k
        return suggestions(tuner.distinct.first[rng.permutation(free)[:k]], nan, nan,
                           [EXPLORE] * k)


def _random_start(tuner, free: np.ndarray, k: int, rng: np.random.Generator,
                  reason: str = COLD_START) -> pd.DataFrame:
    """k of ``free`` drawn uniformly: the peers' first batch, as their authors start."""
    nan = [np.nan] * k
    return suggestions(tuner.distinct.first[rng.permutation(free)[:k]], nan, nan,
                       [reason] * k)


@dataclass(frozen=True)
class GreedyStrategy(TunerStrategy):
    """Greedy rank-graph top-K ("greedy"), a peer: `xlarank.rank_graph` refitted on every
    measurement each batch, its best unmeasured configs (the first batch random). What a
    user who only has rank-graph would do; no settings."""

    name: ClassVar[str] = "greedy"

    def cold_start(self, tuner, free, measured, k, rng):
        return _random_start(tuner, free, k, rng)

    def batch(self, tuner, free, medians, k, rng):
        ranked = rank_graph(tuner.graph, tuner.measured, seed=tuner.seed,
                            threads=tuner.threads)
        order = tuner.distinct.group[ranked["config_index"].to_numpy(np.int64)]
        order = order[np.isin(order, free)]
        # Copies of one config share its place: the first of each, best first.
        picks = order[np.sort(np.unique(order, return_index=True)[1])][:k]
        score = ranked.set_index("config_index")["score"]
        first = tuner.distinct.first[picks]
        return suggestions(first, score.loc[first].to_numpy(), [np.nan] * len(picks),
                           [EXPLOIT] * len(picks))


@dataclass(frozen=True)
class AutotvmStrategy(TunerStrategy):
    """AutoTVM-style ("autotvm"), a peer after AutoTVM's XGBoost cost model with
    epsilon-greedy batches: an XGBoost rank:pairwise ranker on the raw config columns that
    vary, refitted on the measured distinct configs each batch; each slot of a batch its
    best predicted unmeasured config, or with probability ``epsilon`` a random one (the
    first batch random). rounds, depth and learning_rate are the ranker's. Ranges
    (`SETTING_RANGES`, checked when made): epsilon in [0, 1], rounds a whole number in
    1..10000, depth in 1..20, learning_rate in (0, 1]."""

    name: ClassVar[str] = "autotvm"
    epsilon: float = 0.05
    rounds: int = 100
    depth: int = 6
    learning_rate: float = 0.1

    SETTING_RANGES: ClassVar[dict] = {
        "epsilon": (0.0, 1.0, False, False), "rounds": (1, 10_000, True, False),
        "depth": (1, 20, True, False), "learning_rate": (0.0, 1.0, False, True)}

    def __post_init__(self):
        _check_ranges(self)

    def cold_start(self, tuner, free, measured, k, rng):
        return _random_start(tuner, free, k, rng)

    def batch(self, tuner, free, medians, k, rng):
        import xgboost as xgb

        groups = medians.index.to_numpy(np.int64)
        x = tuner.raw[tuner.distinct.first].astype(np.float32)
        model = xgb.XGBRanker(objective="rank:pairwise", n_estimators=int(self.rounds),
                              max_depth=int(self.depth), learning_rate=self.learning_rate,
                              nthread=tuner.threads or 0,
                              random_state=tuner.seed % 2**31)  # XGBoost takes 31 bits
        # Relevance: the faster, the higher (ranks of minus the runtime).
        relevance = np.argsort(np.argsort(-medians.to_numpy(), kind="stable"))
        model.fit(x[groups], relevance, qid=np.zeros(len(groups), np.int64))
        score = model.predict(x[free]).astype(np.float64)
        by_score = np.argsort(-score, kind="stable")
        taken = np.zeros(len(free), bool)
        chosen, reasons = [], []
        for _ in range(k):
            if rng.random() < self.epsilon:
                pick = int(rng.choice(np.flatnonzero(~taken)))
                reasons.append(EXPLORE)
            else:
                pick = int(by_score[~taken[by_score]][0])
                reasons.append(EXPLOIT)
            taken[pick] = True
            chosen.append(pick)
        chosen_arr = np.array(chosen, np.int64)
        return suggestions(tuner.distinct.first[free[chosen_arr]], score[chosen_arr],
                           [np.nan] * k, reasons)


@dataclass(frozen=True)
class TpeStrategy(TunerStrategy):
    """Optuna's TPE ("tpe"), a peer; needs optuna (``pip install 'xlarank[tpe]'``).

    The search space is one categorical parameter per choice the graph offers: on a layout
    graph each configurable node, whose options are its distinct 18-column rows among the
    configs; on a tile graph each raw config column that varies, whose options are its
    values. A proposal is snapped to the nearest unmeasured distinct config in that space
    (Hamming distance, ties to the lowest id), since the graph's configs are all that can
    be measured, and the snapped config is what is told back. The study is rebuilt from
    the measured table at each batch (TPE's model is the trials, not hidden state), with
    a constant liar so one batch spreads; TPE starts with ``startup`` random trials, the
    first batch among them (a whole number in 1..10000, `SETTING_RANGES`)."""

    name: ClassVar[str] = "tpe"
    startup: int = 10

    SETTING_RANGES: ClassVar[dict] = {"startup": (1, 10_000, True, False)}

    def __post_init__(self):
        _check_ranges(self)

    def cold_start(self, tuner, free, measured, k, rng):
        return self._propose(tuner, free, pd.Series(dtype=np.float64), k, rng)

    def batch(self, tuner, free, medians, k, rng):
        return self._propose(tuner, free, medians, k, rng)

    def _propose(self, tuner, free, medians, k, rng) -> pd.DataFrame:
        optuna = require_optuna("the tpe strategy")
        CategoricalDistribution = optuna.distributions.CategoricalDistribution
        TrialState, create_trial = optuna.trial.TrialState, optuna.trial.create_trial

        options = choice_options(tuner)
        names = [f"choice{j}" for j in range(options.shape[1])]
        space = {name: CategoricalDistribution(list(range(int(options[:, j].max()) + 1)))
                 for j, name in enumerate(names)}
        sampler = optuna.samplers.TPESampler(seed=int(rng.integers(2**31)),
                                             n_startup_trials=int(self.startup),
                                             constant_liar=True)
        study = optuna.create_study(sampler=sampler)
        study.add_trials([create_trial(params=dict(zip(names, options[g].tolist())),
                                       distributions=space, value=float(np.log(runtime)))
                          for g, runtime in medians.items()])
        open_ = np.ones(len(free), bool)
        chosen = []
        for _ in range(k):
            trial = study.ask(space)
            wanted = np.array([trial.params[name] for name in names])
            distance = np.where(open_, (options[free] != wanted).sum(axis=1),
                                np.iinfo(np.int64).max)
            pick = int(np.argmin(distance))
            open_[pick] = False
            chosen.append(pick)
            # The proposal itself may not be a config of the graph: what is measured is
            # the snapped one, so the trial stays pending (a liar) with its parameters.
            study.tell(trial, state=TrialState.FAIL)
            study.add_trial(create_trial(
                params=dict(zip(names, options[free[pick]].tolist())), distributions=space,
                state=TrialState.RUNNING))
        nan = [np.nan] * k
        reason = COLD_START if len(medians) < 2 else EXPLORE
        return suggestions(tuner.distinct.first[free[np.array(chosen, np.int64)]], nan, nan,
                           [reason] * k)


def choice_options(tuner) -> np.ndarray:
    """int64 (n_distinct, p): each distinct config as one option id per choice the graph
    offers (layout: per configurable node that varies, which of its distinct 18-column
    rows; tile: per varying raw config column, which of its values)."""
    first = tuner.distinct.first
    graph = tuner.graph
    if not isinstance(graph, LayoutGraph):
        blocks = [tuner.raw[first][:, j] for j in range(tuner.raw.shape[1])]
    else:
        nodes = graph.node_config_feat[first]  # (n_distinct, n_config_nodes, 18)
        blocks = [nodes[:, j, :] for j in range(nodes.shape[1])]
    columns = [np.unique(block, axis=0, return_inverse=True)[1].ravel() for block in blocks]
    columns = [ids for ids in columns if ids.max() > 0]
    if not columns:  # one distinct config: nothing to choose
        return np.zeros((len(first), 1), np.int64)
    return np.stack(columns, axis=1).astype(np.int64)


# name -> strategy class: ``xlarank suggest --strategy NAME``.
STRATEGIES: dict[str, type[TunerStrategy]] = {
    cls.name: cls for cls in (BoosterStrategy, RandomStrategy, GreedyStrategy,
                              AutotvmStrategy, TpeStrategy)}


def make_strategy(name: str = "booster", options: dict | None = None) -> TunerStrategy:
    """The strategy registered as ``name`` with ``options`` (setting name -> value; a
    string is read as the setting's type: "0.5" for a float, "4" for an int); XlarankError
    for an unknown name, an unknown setting, a value that is not of its type or outside its
    range (`SETTING_RANGES`), `ArgumentTypeError` (an XlarankError) for a name that is
    not a string or options that are not a mapping."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"make_strategy: name: expected a strategy name (str: "
                                f"{', '.join(STRATEGIES)}), got {type(name).__name__}")
    if options is not None and not isinstance(options, Mapping):
        raise ArgumentTypeError(
            f"make_strategy: options: expected a mapping of setting -> value "
            f"(parse_strategy_options reads 'key=value' strings into one), got "
            f"{type(options).__name__}")
    if name not in STRATEGIES:
        raise XlarankError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    cls = STRATEGIES[name]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    settings = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f"strategy {name}: a setting's name must be a str, got "
                                    f"{type(key).__name__}")
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise XlarankError(f"strategy {name}: unknown setting {key!r}; known: {known}")
        settings[key] = _setting(name, key, value, type(fields[key].default))
    return cls(**settings)


def _setting(strategy: str, key: str, value, kind: type):
    if not isinstance(value, str) or kind is str:
        return value
    try:
        if kind is int:
            number = float(value)
            if not math.isfinite(number) or not number.is_integer():
                raise ValueError(value)
            return int(number)
        return kind(value)
    except ValueError:
        raise XlarankError(f"strategy {strategy}: {key}={value!r} is not "
                           f"{'a whole number' if kind is int else 'a number'}") from None


def parse_strategy_options(options) -> dict:
    """``key=value`` strings as a dict; XlarankError for one without ``=``, an empty key
    or a key given twice."""
    parsed: dict[str, str] = {}
    if options is not None and (isinstance(options, str | bytes)
                                or not isinstance(options, Iterable)):
        raise ArgumentTypeError(f"strategy options: expected a list of 'key=value' "
                                f"strings, got {type(options).__name__}")
    for option in options or ():
        if not isinstance(option, str):
            raise ArgumentTypeError(f"strategy option {option!r}: expected a 'key=value' "
                                    f"string, got {type(option).__name__}")
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise XlarankError(f"strategy option {option!r}: write key=value")
        if key in parsed:
            raise XlarankError(f"strategy option {key} given twice")
        parsed[key] = value.strip()
    return parsed


def checked_strategy(strategy) -> TunerStrategy:
    if strategy is None:
        return BoosterStrategy()
    if not isinstance(strategy, TunerStrategy):
        raise ArgumentTypeError(f"strategy: expected a TunerStrategy (e.g. "
                                f"xlarank.BoosterStrategy()), got {type(strategy).__name__}")
    return strategy


def max_min_hamming(raw: np.ndarray, free: np.ndarray, measured: np.ndarray, k: int,
                    rng: np.random.Generator) -> np.ndarray:
    """k of ``free`` (distinct-config ids into raw (n_distinct, m)), each the farthest in
    Hamming distance from the measured ones and those already picked, ties drawn at
    random; the first at random when nothing is measured.

    Ties are the rule, not the exception: a tile file has a few varying columns of many
    values, where most pairs differ in all of them. Taking the lowest id among the tied
    packed the batch into the file's first configs (on the synthetic tile file 7 of 8
    picks among its first 110 of 464, seed 0), which the random
    start's feedback then beat (bench/autotune.py: 11.0 against 20.5 measurements to a
    config within the noise of the best)."""
    nearest = np.full(len(free), np.inf)
    for done in measured.tolist():
        nearest = np.minimum(nearest, (raw[free] != raw[done]).sum(axis=1))
    picks = []
    taken = np.zeros(len(free), bool)
    for _ in range(k):
        if np.isinf(nearest).all():
            pick = int(rng.integers(len(free)))
        else:
            distance = np.where(taken, -1.0, nearest)
            pick = int(rng.choice(np.flatnonzero(distance == distance.max())))
        picks.append(pick)
        taken[pick] = True
        nearest = np.minimum(nearest, (raw[free] != raw[free[pick]]).sum(axis=1))
    return free[np.array(picks, np.int64)]


def suggestions(index, score, uncertainty, reason) -> pd.DataFrame:
    """A strategy's answer: config_index int64, score and uncertainty float64 (NaN where
    none), reason (exploit, explore or cold-start), one row per config, best first."""
    return pd.DataFrame({"config_index": np.asarray(index, np.int64),
                         "score": np.asarray(score, np.float64),
                         "uncertainty": np.asarray(uncertainty, np.float64),
                         "reason": pd.Series(reason, dtype=object)})
