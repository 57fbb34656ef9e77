"""In-graph ranking: "I measured some configs of my program; rank the rest."

A graph-local booster is fitted on the measured configs of one graph and scores all of
them. Within one graph, which configurable node got which layout is what decides the
runtime (FORMAT.md: per-node identity carries the signal, aggregates over nodes throw it
away), so its inputs are the raw config columns themselves (layout: every configurable
node's 18 columns; tile: the 24 config columns), the graph-local feature families, and,
given a cross-graph model, that model's score as one more column. Columns that are
constant over the graph's configs, or repeat another column, are dropped: they cannot
split these configs.

The booster regresses each measured config's rank quantile (`rank_target`: 0 the
fastest measured, 1 the slowest), not its log runtime. On the real unet3d 628 of the 681
distinct configs lie within 5% of the fastest (324 within 0.1%) and 44 are 3x slower: a
squared loss on log runtime spends its trees on separating the few slow configs measured,
and when a split holds only one or two of them (bench/ingraph.py, 10% measured, seed 1) it
isolates them with columns that merely happen to agree on them and loses the order inside
the fast group, which is what Kendall tau counts (tau 0.41 against 0.77-0.82 on the other
seeds). On ranks every pair weighs the same. Small-sample settings (few leaves, leaves of
two configs, one config per histogram bin), because a user measures tens to hundreds of
configs.

That booster was chosen on unet3d. On other graphs the simplest peer, LightGBM regression
of log runtime on the raw config columns alone (`RAW_COLUMNS_BOOSTER`), can rank better, so
rank-graph chooses per graph, on the measured configs only (`choose_model`): K-fold
validation over the measured distinct configs (copies of one config stay in one fold)
between the booster, the raw-column regression and their blend (the mean of their rank
quantiles). Each candidate's held-out scores, each from the fold model that held the
config out, are compared with the measured runtimes by one Kendall tau; the highest
wins, ties going to the booster, then the blend. With fewer than
`MIN_MEASURED_FOR_CHOICE` distinct configs measured, folds are too small to tell them
apart, and the booster alone varies most there: with 5 to 19 configs its trees split on
whichever of hundreds of columns happen to agree with those few runtimes. There it is
blended (`BOOSTER_SIMILARITY`: the mean of rank quantiles) with `similarity_scores`,
which leans on every input at once: each config scores by how much it resembles the
fast measured configs more than the slow ones, the limit of ridge regression as its
penalty grows, with nothing fitted and no setting to choose (bench/ingraph.py and
docs/rank-graph.md: higher worst seeds on the imported layout record, unet3d with 10 or
17 measured and the synthetic files). What was chosen, and why, is the table's
``attrs["in_graph_model"]`` (`InGraphChoice.as_dict`).

What was measured (the CSV, repeats and copies merged, the graph's distinct configs, the
ranked table) is `xlarank.rank.measured`'s; this module is the graph-local model: its
inputs, the candidates and their choice, their fit through the LightGBM adapter
(`fit_booster`) and `rank_runtimes`, the one in-graph path of xlarank.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pandas as pd

from xlarank.data.collections import get_collection
from xlarank.data.graph import LayoutGraph, TileGraph
from xlarank.data.origin import warn_if_synthetic_meets_real
from xlarank.environment import MAX_THREADS
from xlarank.errors import ArgumentTypeError, MismatchError, XlarankError, XlarankWarning
from xlarank.features.build import KEY_COLUMNS, featurize_graph
from xlarank.features.spec import FeatureSpec
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.measured import (
    config_columns,
    config_groups,
    constant_unmeasured,
    graph_with_configs,
    interleaved_scores,
    measured_runtimes,
    measured_table,
    ranked_table,
    varying_columns,
)
from xlarank.rank.model import load_model
from xlarank.rank.spec import RankerSpec
from xlarank.seeds import check_booster_seed

# The per-config families; ``graph`` is one value per graph, constant here.
IN_GRAPH_SPEC = FeatureSpec("in-graph", ("config_raw", "config_joined", "khop", "config_nodes"))
# The graph-local booster: LightGBM regression of the rank quantile, small-sample leaves,
# fitted through the LightGBM adapter (`xlarank.rank.boosters`), which adds the seed,
# determinism and the thread count.
IN_GRAPH_BOOSTER = RankerSpec(
    name="in-graph", features=IN_GRAPH_SPEC.name, library="lightgbm", objective="regression",
    num_rounds=300,
    params={"learning_rate": 0.05, "num_leaves": 7, "min_data_in_leaf": 2,
            "min_data_in_bin": 1, "feature_fraction": 1.0})


# The raw-column candidate: bench/ingraph.py's simplest peer as its authors would run it
# (LGBMRegressor's defaults with 300 trees, learning rate 0.05, 31 leaves, 5 configs a
# leaf), regressing log runtime on the raw config columns alone.
RAW_COLUMNS_BOOSTER = RankerSpec(
    name="raw-columns", features="raw config columns", library="lightgbm",
    objective="regression", num_rounds=300,
    params={"learning_rate": 0.05, "num_leaves": 31, "min_data_in_leaf": 5})
BOOSTER, RAW_COLUMNS, BLEND = "booster", "raw-columns", "blend"
SIMILARITY, BOOSTER_SIMILARITY = "similarity", "booster + similarity"
# In order of preference where their validation taus tie.
IN_GRAPH_MODELS = (BOOSTER, BLEND, RAW_COLUMNS)
# Where too few configs are measured to choose (`MIN_MEASURED_FOR_CHOICE`).
FEW_MEASURED_MODEL = BOOSTER_SIMILARITY
# Below this many measured distinct configs a fold holds three or fewer: its tau says
# more about the split than about the model.
MIN_MEASURED_FOR_CHOICE = 20
CHOICE_FOLDS = 5


@dataclasses.dataclass(frozen=True)
class InGraphChoice:
    """Which graph-local model ranked a graph: model (one of `IN_GRAPH_MODELS`, or
    `FEW_MEASURED_MODEL` where no choice was made), each
    candidate's Kendall tau on the measured configs, each scored by the fold model that
    held it out (empty where no choice was made), the fold count (0: no choice) and the
    number of measured distinct configs."""

    model: str
    validation_tau: dict[str, float]
    folds: int
    measured_distinct: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for ``--verbose``."""
        if not self.folds:
            return (f"in-graph model: {self.model} ({self.measured_distinct} distinct "
                    f"configs measured: fewer than {MIN_MEASURED_FOR_CHOICE}, or a fold of "
                    "equal runtimes, leave nothing to choose on)")
        taus = ", ".join(f"{name} {tau:.3f}" for name, tau in self.validation_tau.items())
        return (f"in-graph model: {self.model}, chosen by {self.folds}-fold validation on "
                f"{self.measured_distinct} measured distinct configs (held-out tau {taus})")


def fit_booster(x: np.ndarray, target: np.ndarray, names: list[str], seed: int,
                threads: int | None, booster: RankerSpec = IN_GRAPH_BOOSTER):
    """A graph-local booster (``booster``'s library, objective, rounds and params, with
    ``seed``) fitted on x float32 (rows, inputs) against target (rows,), on ``threads``
    (None or 0: the process's chosen count)."""
    spec = dataclasses.replace(booster, seed=seed)
    return BOOSTERS[spec.library].fit(x, target, np.array([len(x)], np.int64), names, spec,
                                      threads or 0)


def predict_booster(booster, x: np.ndarray, names: list[str],
                    spec: RankerSpec = IN_GRAPH_BOOSTER) -> np.ndarray:
    """float64 (rows,): a `fit_booster` booster's prediction of x."""
    return BOOSTERS[spec.library].predict(booster, x, names, None)


def booster_gain(booster, names: list[str], spec: RankerSpec = IN_GRAPH_BOOSTER
                 ) -> np.ndarray:
    """float64 (len(names),): a `fit_booster` booster's total split gain per input."""
    # In column order: the library may rewrite names it cannot store.
    return BOOSTERS[spec.library].importance(booster, names).to_numpy(np.float64)


def _informative(x: np.ndarray) -> np.ndarray:
    """int64 ids of the columns of x (n, m) that vary over the rows, first of each set of
    identical columns."""
    varying = varying_columns(x)
    # Identical columns have identical random projections; distinct ones differ with
    # probability 1 (a sort of m numbers instead of m columns of n values).
    weights = np.random.default_rng(0).random(len(x))
    _, first = np.unique(weights @ x[:, varying].astype(np.float64), return_index=True)
    return varying[np.sort(first)]


def in_graph_inputs(graph: TileGraph | LayoutGraph, prior=None,
                    spec: FeatureSpec = IN_GRAPH_SPEC, raw: np.ndarray | None = None
                    ) -> tuple[np.ndarray, list[str]]:
    """The booster's inputs for every config: float32 (n_configs, n_inputs) and names.
    raw: the graph's `config_columns`, where the caller holds them already."""
    raw = config_columns(graph) if raw is None else raw
    frame = featurize_graph(graph, spec)
    features = frame.iloc[:, len(KEY_COLUMNS):]
    blocks = [raw, features.to_numpy(np.float32)]
    names = [f"raw{i}" for i in range(raw.shape[1])] + list(features.columns)
    if prior is not None:
        prior_block = featurize_graph(graph, prior.feature_spec)
        blocks.append(prior.predict(prior_block).astype(np.float32)[:, None])
        names.append("prior_score")
    x = np.hstack(blocks)
    keep = _informative(x)
    return np.ascontiguousarray(x[:, keep]), [names[i] for i in keep]


def checked_prior(graph: TileGraph | LayoutGraph, prior):
    """``prior`` loaded (a model directory, or a ranker as is; None stays None), after
    refusing (`MismatchError`) a model of another collection than the graph's."""
    if prior is not None and not hasattr(prior, "predict"):
        if not isinstance(prior, str | os.PathLike):
            raise ArgumentTypeError(f"prior: expected a model directory (str or Path) or a loaded "
                            f"model (xlarank.load_model), got {type(prior).__name__}")
        prior = load_model(prior)
    if prior is not None:
        trained_on = prior.card["collection"]
        if (graph.collection.id != trained_on if graph.collection is not None
                else get_collection(trained_on).is_tile != isinstance(graph, TileGraph)):
            kind = (graph.collection.id if graph.collection is not None
                    else "tile" if isinstance(graph, TileGraph) else "layout")
            raise MismatchError(f"{graph.path}: collection {kind}, but the prior model was "
                                f"trained on {trained_on}")
        if graph.path is not None:
            warn_if_synthetic_meets_real(prior.card, [graph.path], "the --prior model")
    return prior


def rank_graph(graph, measured: pd.DataFrame, prior=None, seed: int = 0,
               threads: int | None = None, spec: FeatureSpec = IN_GRAPH_SPEC) -> pd.DataFrame:
    """Rank every config of one graph from the runtimes of some of them.

    graph: a TileGraph or LayoutGraph (with its configs or ``configs=False``: then they
    are read again), or an npz path; measured: a DataFrame (or a dict of columns) with
    config_index and runtime (ns), or a CSV path (`read_measured`); the file's own
    runtimes are never read, so a test file (runtimes all zero) is the normal case.
    Repeats of one config index are combined by their median. prior: a model directory
    or a loaded ranker of the graph's collection, whose score becomes one more input.
    spec: the feature families beside the raw columns (for ablations; the default is
    IN_GRAPH_SPEC). threads: the booster's (None or 0: the process's chosen count,
    `xlarank.threads`).

    Returns a DataFrame of n_configs rows, best first: rank (1 = predicted fastest),
    config_index, score (higher is faster: minus the log runtime, measured where measured,
    else predicted: `interleaved_scores`), measured (bool), runtime (the measured
    median, NaN where not measured) and copy_of (`ranked_table`: exact copies of a config
    share its place). Measured configs appear in the order of their runtimes, unmeasured
    ones between them where the booster places them; the rank column keeps the booster's
    order where scores tie (beyond the measured range). A booster that gives every
    unmeasured config one score (too few measured) is warned about (XlarankWarning) and
    replaced by each config's nearest measured config (`nearest_measured_scores`).
    Raises `MeasuredError` for unknown config indices, fewer than two distinct measured
    configs, or runtimes that are all equal; `MismatchError` for a prior of another
    collection; TypeError for arguments of the wrong type, XlarankError for negative
    threads.
    """
    graph = graph_with_configs(graph)
    measured = measured_table(measured)
    seed, threads = check_booster_seed(seed, "seed"), check_threads(threads)
    groups = config_groups(graph)
    runtime = measured_runtimes(graph, measured, groups)
    return rank_runtimes(graph, runtime, groups, prior=prior, seed=seed, threads=threads,
                         spec=spec)


def rank_runtimes(graph: TileGraph | LayoutGraph, runtime: pd.Series, groups: np.ndarray,
                  prior=None, seed: int = 0, threads: int | None = None,
                  spec: FeatureSpec = IN_GRAPH_SPEC) -> pd.DataFrame:
    """xlarank's one in-graph path: `rank_graph`'s table from measured medians already
    merged (`xlarank.rank.measured.measured_runtimes`: float64 indexed by config index)
    and the graph's `config_groups`. `rank_graph`, ``rank-graph --system xlarank`` and
    the xlarank system's `fit_graph` (`xlarank.systems.booster`) all rank through it.
    The table's ``attrs["in_graph_model"]`` is the model chosen (`InGraphChoice.as_dict`)."""
    prior = checked_prior(graph, prior)
    score, choice = in_graph_score(graph, runtime, groups, prior, seed, threads, spec)
    table = ranked_table(interleaved_scores(score, runtime), runtime, tiebreak=score,
                         groups=groups)
    table.attrs["in_graph_model"] = choice.as_dict()
    return table


def in_graph_score(graph: TileGraph | LayoutGraph, runtime: pd.Series, groups: np.ndarray,
                   prior=None, seed: int = 0, threads: int | None = None,
                   spec: FeatureSpec = IN_GRAPH_SPEC) -> tuple[np.ndarray, InGraphChoice]:
    """float64 (n_configs,): the graph-local model's score of every config (higher is
    faster), fitted on the measured medians ``runtime`` (prior: a loaded, checked model
    or None), and the `InGraphChoice` of that model (`choose_model`). Where the model
    gives every unmeasured config one score, a warning (XlarankWarning) and each config's
    nearest measured config's score instead (`nearest_measured_scores`)."""
    rows = runtime.index.to_numpy(np.int64)
    raw = config_columns(graph)
    x, names = in_graph_inputs(graph, prior, spec, raw)
    # Identical columns offer a tree the same splits: one of each keeps the fits small
    # (nlp's 15,264 raw columns are 159 distinct ones).
    raw = np.ascontiguousarray(raw[:, _informative(raw)], np.float32)
    choice = choose_model(x, names, raw, rows, runtime.to_numpy(np.float64), groups[rows],
                          seed)
    score = candidate_scores((choice.model,), x, names, raw, rows,
                             runtime.to_numpy(np.float64), groups[rows], None, seed,
                             threads)[choice.model]
    if constant_unmeasured(score, runtime, groups):
        warnings.warn(XlarankWarning(
            f"{graph.path}: the graph-local model ({choice.model}) gave every unmeasured "
            f"config one score from {len(runtime)} measured configs; they are ordered by "
            "their nearest measured config instead: measure more configs for a model's "
            "order"), stacklevel=4)
        score = nearest_measured_scores(graph, runtime)
    return score, choice


def candidate_scores(models: tuple[str, ...], x: np.ndarray, names: list[str],
                     raw: np.ndarray, rows: np.ndarray, runtime: np.ndarray,
                     group: np.ndarray, scored: np.ndarray | None, seed: int,
                     threads: int | None) -> dict[str, np.ndarray]:
    """float64 (n_scored,) per model of ``models`` (names in `IN_GRAPH_MODELS`, or
    `SIMILARITY`, `BOOSTER_SIMILARITY`): its score
    (higher is faster) of the configs ``scored`` (int64 (n_scored,); None: all), fitted
    on the measured configs ``rows`` (int64 (m,) ids into x (n_configs, n_inputs) and
    raw (n_configs, n_raw)) with their runtimes (float64 (m,)) and distinct configs
    ``group`` (int64 (m,)). The booster fits every measured config index (copies weigh as
    measured); the raw-column regression, like the peer it is, one row per distinct
    config; the blend is the mean of the two's rank quantiles and reuses their fits; the
    similarity is `similarity_scores` on the booster's inputs x, and its blend with the
    booster the mean of their rank quantiles."""

    scored = np.arange(len(x)) if scored is None else scored
    scores = {}
    if {BOOSTER, BLEND, BOOSTER_SIMILARITY} & set(models):
        booster = fit_booster(x[rows], rank_target(runtime), names, seed, threads)
        scores[BOOSTER] = -predict_booster(booster, x[scored], names)
    if RAW_COLUMNS in models or BLEND in models:
        _, once = np.unique(group, return_index=True)
        raw_names = [f"raw{i}" for i in range(raw.shape[1])]
        regression = fit_booster(raw[rows[once]], np.log(runtime[once]), raw_names, seed,
                                 threads, RAW_COLUMNS_BOOSTER)
        scores[RAW_COLUMNS] = -predict_booster(regression, raw[scored], raw_names,
                                               RAW_COLUMNS_BOOSTER)
    if BLEND in models:
        scores[BLEND] = blend(scores[BOOSTER], scores[RAW_COLUMNS])
    if SIMILARITY in models or BOOSTER_SIMILARITY in models:
        scores[SIMILARITY] = similarity_scores(x, rows, runtime, group)[scored]
    if BOOSTER_SIMILARITY in models:
        # A booster that could not split (2 or 3 configs) stays flat, so that rank-graph
        # says so and orders by the nearest measured config, as without the similarity.
        scores[BOOSTER_SIMILARITY] = (scores[BOOSTER] if np.ptp(scores[BOOSTER]) == 0
                                      else blend(scores[BOOSTER], scores[SIMILARITY]))
    return {model: scores[model] for model in models}


def similarity_scores(x: np.ndarray, rows: np.ndarray, runtime: np.ndarray,
                      group: np.ndarray) -> np.ndarray:
    """float64 (n_configs,): each config's resemblance to the fast measured configs over
    the slow ones (higher is faster): the sum over the measured distinct configs i of
    (mean quantile - quantile_i) <z, z_i>, z the inputs x (n_configs, n_inputs) each
    standardised over the graph's configs, quantile_i the rank quantile (`rank_target`)
    of config i's runtime (rows, runtime, group as in `candidate_scores`; copies of one
    config count once). Ridge regression of the quantile on z orders configs this way as
    its penalty grows: no split is chosen on a few rows, every input counts."""
    _, once = np.unique(group, return_index=True)
    z = x.astype(np.float64)
    z -= z.mean(axis=0)
    sd = z.std(axis=0)
    z /= np.where(sd > 0, sd, 1.0)
    quantile = rank_target(runtime[once])
    return z @ (z[rows[once]].T @ (quantile.mean() - quantile))


def blend(booster: np.ndarray, raw_columns: np.ndarray) -> np.ndarray:
    """float64 (n,): the mean of two scores' rank quantiles over the n configs scored."""
    from scipy.stats import rankdata

    return (rankdata(booster) + rankdata(raw_columns)) / (2.0 * len(booster))


def choose_model(x: np.ndarray, names: list[str], raw: np.ndarray, rows: np.ndarray,
                 runtime: np.ndarray, group: np.ndarray, seed: int = 0) -> InGraphChoice:
    """The in-graph model for one graph, chosen on its measured configs alone.

    x: float32 (n_configs, n_inputs), the booster's inputs (`in_graph_inputs`); raw:
    float32 (n_configs, n_raw), the raw config columns; rows: int64 (m,) the measured
    config indices, runtime: float64 (m,) their medians, group: int64 (m,) their distinct
    configs (copies share one). `CHOICE_FOLDS`-fold validation over the measured distinct
    configs, folds drawn from ``seed``: each candidate of `IN_GRAPH_MODELS` is fitted on
    the other folds and scores one row per distinct config of the held-out fold; its
    Kendall tau over all the held-out scores decides, the highest winning, ties in
    `IN_GRAPH_MODELS`' order. Fewer than `MIN_MEASURED_FOR_CHOICE` distinct configs
    measured, or a fold whose fitting configs all ran equally fast: `FEW_MEASURED_MODEL`,
    no folds."""
    from scipy.stats import kendalltau

    distinct, first = np.unique(group, return_index=True)
    if len(distinct) < MIN_MEASURED_FOR_CHOICE:
        return InGraphChoice(FEW_MEASURED_MODEL, {}, 0, len(distinct))
    fold_of = np.empty(len(distinct), np.int64)
    fold_of[np.random.default_rng(seed).permutation(len(distinct))] = (
        np.arange(len(distinct)) % CHOICE_FOLDS)
    fold = fold_of[np.searchsorted(distinct, group)]
    folds = [k for k in range(CHOICE_FOLDS) if np.ptp(runtime[fold != k]) > 0]
    if len(folds) < CHOICE_FOLDS:
        return InGraphChoice(FEW_MEASURED_MODEL, {}, 0, len(distinct))

    def held_out_scores(k: int) -> dict[str, np.ndarray]:
        # One thread a fit: a booster of tens of configs spends more time waking threads
        # than splitting (20x slower on 2 threads beside a busy job). One fold at a time:
        # LightGBM calls from two Python threads at once crash the process (it sets
        # OpenMP's thread count globally at every call).
        return candidate_scores((BOOSTER, RAW_COLUMNS), x, names, raw, rows[fold != k],
                                runtime[fold != k], group[fold != k],
                                rows[first[fold_of == k]], seed, 1)

    per_fold = [held_out_scores(k) for k in folds]
    # One tau over every measured distinct config, each scored by the fold that held it
    # out: the fold models share a target scale, and 20 configs give 190 pairs where
    # five folds of four give 30.
    held = np.concatenate([first[fold_of == k] for k in folds])
    scores = {model: np.concatenate([fitted[model] for fitted in per_fold])
              for model in (BOOSTER, RAW_COLUMNS)}
    scores[BLEND] = blend(scores[BOOSTER], scores[RAW_COLUMNS])
    mean = {}
    for model in IN_GRAPH_MODELS:
        value = kendalltau(-scores[model], runtime[held])[0]
        mean[model] = 0.0 if np.isnan(value) else float(value)
    best = max(IN_GRAPH_MODELS, key=lambda model: (mean[model],
                                                    -IN_GRAPH_MODELS.index(model)))
    return InGraphChoice(best, mean, CHOICE_FOLDS, len(distinct))


def rank_target(runtime: np.ndarray) -> np.ndarray:
    """float64 (n,): each runtime's rank quantile, (rank - 0.5) / n with rank 1 the
    fastest; equal runtimes share their mean rank."""
    from scipy.stats import rankdata

    return (rankdata(runtime) - 0.5) / len(runtime)


def _whole(value, name: str) -> int:
    # bool is an int to Python, but seed=True is a mistake, not a seed.
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArgumentTypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def check_threads(threads) -> int | None:
    if threads is None:
        return None
    threads = _whole(threads, "threads")
    # The CLI's cap: libgomp dies on a count it cannot start (a segfault or out of memory,
    # no error to catch).
    if not 0 <= threads <= MAX_THREADS:
        raise XlarankError(f"threads={threads}: give 0 or None (the chosen count) or a "
                           f"number in 1..{MAX_THREADS}")
    return threads


def nearest_measured_scores(graph: TileGraph | LayoutGraph, runtime: pd.Series
                            ) -> np.ndarray:
    """float64 (n_configs,): minus the log runtime of each config's nearest measured
    config (L1 over the raw config columns that vary, each scaled to its range), minus a
    small share of that distance, so nearer configs come first among those of one
    neighbour. The fallback order where a model predicts one score for all."""
    x = config_columns(graph)
    varying = varying_columns(x)
    x = x[:, varying].astype(np.float32)
    span = x.max(axis=0) - x.min(axis=0) if len(varying) else np.ones(0, np.float32)
    x = x / np.where(span > 0, span, 1)
    rows = runtime.index.to_numpy(np.int64)
    measured_score = -np.log(runtime.to_numpy(np.float64))
    best = np.full(len(x), np.inf)
    score = np.zeros(len(x))
    for row, value in zip(rows, measured_score):
        distance = np.abs(x - x[row]).sum(axis=1, dtype=np.float64)
        nearer = distance < best
        best[nearer], score[nearer] = distance[nearer], value
    spread = np.ptp(measured_score) or 1.0
    return score - 1e-3 * spread * best / max(1.0, float(best.max()))
