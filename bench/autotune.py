"""Autotune replay: how many measurements does a model save before it holds a fast config?

Each file's distinct configs are a fixed pool; the oracle answers a measurement with the
config's median runtime (all measurements of identical config rows pooled). A strategy
asks for a batch (8 or 32 configs), the oracle answers, until a budget of 20% of the
distinct configs is spent; 10 seeds.

Files: every labelled real layout file under --samples (unet3d; a file with fewer than
2 distinct configs is listed and left out), and with --synthetic, per collection, tile
included, the first valid file with at least 100 distinct configs (so that 20% leaves
more than one batch) of an `xlarank synth` tree: valid, not train, because --prior's
models were trained on the train split, and a prior that has seen the file finds its best
config in one or two measurements.

Metrics, per strategy and batch size:
- best-so-far curve: best true runtime measured so far / the pool's best, per measurement;
- measurements until one of the top 1% (max(1, 1% of the pool), ties at the threshold
  included) and until the best config: the median over seeds, ">B" where more than half
  the seeds did not get there within the budget B; measurements are counted one by one
  in the order a batch was asked;
- standardised score at budgets of 2, 5, 10 and 20%: (random - strategy) / (random - 1)
  on the mean best-so-far ratio (1: the pool's best, 0: no better than random search).

Strategies ("peers") in the same run:
- random search, exact (`expected_random_best`, `expected_random_draws`: order statistics
  of a uniform sample without replacement, no simulation);
- the tuner (`xlarank.Tuner` without a prior, its default strategy: exploit the
  booster's prediction after a diverse cold start) and each part turned on or off: a
  random cold start, a lower confidence bound (kappa 0.5 on the bootstrap sd),
  within-batch diversity (0.02), a 10% random share; and the tuner given --prior's model
  (its cold start and a column from the prior's score);
- prior order without feedback (--prior MODELS_DIR: the model of the file's collection
  slug; not run where none exists, and said so);
- greedy rank-graph top-K: `xlarank.rank_graph` refitted each batch, its best unmeasured
  configs (first batch random);
- AutoTVM-style: XGBoost rank:pairwise on the raw config columns, refitted each batch,
  its best predicted unmeasured configs, each slot random with probability 0.05 (first
  batch random);
- Optuna TPE (optional: pip install optuna, the `bench` extra; skipped with a note
  without it): one categorical per configurable node (layout: the node's observed
  18-column options; tile: each varying config column's observed values), every
  proposal snapped to the nearest unmeasured pool config in that option space (Hamming),
  and the snapped config's parameters told back.

    python bench/autotune.py [--samples ../shared/tpugraphs] [--synthetic data/synth-demo]
        [--prior models/trained/synth-demo/xlarank] --out bench/results/autotune.json
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from provenance import write_record
from xlarank.compat import optuna_available
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.rank.ingraph import rank_graph
from xlarank.rank.measured import config_columns, distinct_configs, varying_columns
from xlarank.rank.tuner import (
    BoosterStrategy,
    Tuner,
    expected_random_best,
    expected_random_draws,
)

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (8, 32)
BUDGET_SHARE = 0.2
SCORE_BUDGETS = (0.02, 0.05, 0.10, 0.20)
SEEDS = 10
THREADS = 1
MIN_SYNTHETIC_DISTINCT = 100
TUNER = "tuner"
# Each part of the tuner against its default (exploitation after a diverse cold start).
ABLATIONS = {
    "tuner, random cold start": replace(BoosterStrategy(), cold="random"),
    "tuner + LCB (kappa 0.5 on the bootstrap sd)": replace(BoosterStrategy(), kappa=0.5),
    "tuner + diversity 0.02": replace(BoosterStrategy(), diversity=0.02),
    "tuner + 10% random": replace(BoosterStrategy(), random_share=0.1),
}
RANDOM = "random search (exact)"
PRIOR = "prior order, no feedback"
TUNER_PRIOR = "tuner + --prior"
GREEDY = "greedy rank-graph top-K"
AUTOTVM = "AutoTVM-style (XGBoost rank:pairwise, 5% random)"
TPE = "Optuna TPE (per-node categorical, snapped)"


class Pool:
    """One file's distinct configs: first (n,) their lowest config index, runtime (n,)
    the oracle's median, raw (n, m) the varying raw config columns, group (n_configs,)
    each config index's distinct config."""

    def __init__(self, graph):
        raw = config_columns(graph)
        distinct = distinct_configs(graph)
        self.graph = graph
        self.group = distinct.group
        self.first = distinct.first
        self.raw = raw[:, varying_columns(raw)][distinct.first]
        self.runtime = distinct.median
        self.n = len(distinct)


def oracle_runtime(pool: Pool, indices: np.ndarray) -> np.ndarray:
    return pool.runtime[pool.group[indices]]


def run_tuner(tuner: Tuner, pool: Pool, batch: int, budget: int) -> list[int]:
    """Distinct configs measured, in order, by an ask/tell loop."""
    order: list[int] = []
    while len(order) < budget:
        asked = tuner.ask(min(batch, budget - len(order)))
        if len(asked) == 0:
            break
        tuner.tell(asked, oracle_runtime(pool, asked))
        order += pool.group[asked].tolist()
    return order


def run_prior(pool: Pool, prior, budget: int) -> list[int]:
    from xlarank.features import featurize_graph

    score = prior.predict(featurize_graph(pool.graph, prior.feature_spec))[pool.first]
    return np.lexsort((np.arange(pool.n), -score))[:budget].tolist()


def run_greedy(pool: Pool, batch: int, budget: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(pool.n)[:min(batch, budget)].tolist()
    while len(order) < budget:
        measured = pd.DataFrame({"config_index": pool.first[order],
                                 "runtime": pool.runtime[order]})
        if pd.Series(pool.runtime[order]).nunique() < 2:
            fresh = [d for d in rng.permutation(pool.n).tolist() if d not in set(order)]
        else:
            ranked = rank_graph(pool.graph, measured, seed=seed, threads=THREADS)
            groups = pool.group[ranked["config_index"].to_numpy()]
            seen = set(order)
            fresh = [d for d in dict.fromkeys(groups.tolist()) if d not in seen]
        order += fresh[:min(batch, budget - len(order))]
    return order


def run_autotvm(pool: Pool, batch: int, budget: int, seed: int) -> list[int]:
    import xgboost as xgb

    rng = np.random.default_rng(seed)
    order = rng.permutation(pool.n)[:min(batch, budget)].tolist()
    x = pool.raw.astype(np.float32)
    while len(order) < budget:
        model = xgb.XGBRanker(objective="rank:pairwise", n_estimators=100, max_depth=6,
                              learning_rate=0.1, nthread=THREADS, random_state=seed)
        y = -np.log(pool.runtime[order])  # higher is faster: the ranker's relevance
        model.fit(x[order], np.argsort(np.argsort(y)), qid=np.zeros(len(order)))
        free = np.setdiff1d(np.arange(pool.n), order)
        by_score = free[np.argsort(-model.predict(x[free]), kind="stable")].tolist()
        picks: list[int] = []
        for _ in range(min(batch, budget - len(order))):
            rest = [d for d in by_score if d not in picks]
            if rng.random() < 0.05:
                picks.append(int(rng.choice(rest)))
            else:
                picks.append(rest[0])
        order += picks
    return order


def tpe_space(pool: Pool) -> np.ndarray:
    """int (n, p): each distinct config as one option id per parameter (layout: per
    configurable node, which of its observed 18-column rows; tile: per varying column)."""
    graph = pool.graph
    if not isinstance(graph, LayoutGraph):
        return np.stack([np.unique(c, return_inverse=True)[1].ravel()
                         for c in pool.raw.T], axis=1)
    nodes = graph.node_config_feat[pool.first]  # (n, nc, 18)
    columns = []
    for j in range(nodes.shape[1]):
        _, ids = np.unique(nodes[:, j, :], axis=0, return_inverse=True)
        if ids.max() > 0:
            columns.append(ids.ravel())
    return np.stack(columns, axis=1)


def run_tpe(pool: Pool, batch: int, budget: int, seed: int) -> list[int]:
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    options = tpe_space(pool)
    space = {f"p{j}": CategoricalDistribution(list(range(int(options[:, j].max()) + 1)))
             for j in range(options.shape[1])}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed,
                                                                   constant_liar=True))
    order: list[int] = []
    taken = np.zeros(pool.n, bool)
    while len(order) < budget:
        trials, picks = [], []
        for _ in range(min(batch, budget - len(order))):
            trial = study.ask(space)
            wanted = np.array([trial.params[f"p{j}"] for j in range(options.shape[1])])
            distance = np.where(taken, np.iinfo(np.int64).max,
                                (options != wanted).sum(axis=1))
            pick = int(np.argmin(distance))
            taken[pick] = True
            trials.append(trial)
            picks.append(pick)
        for trial, pick in zip(trials, picks):
            # The proposal is not in the pool: what was measured is the snapped config.
            study.tell(trial, state=TrialState.FAIL)
            study.add_trial(create_trial(
                params={f"p{j}": int(options[pick, j]) for j in range(options.shape[1])},
                distributions=space, value=float(np.log(pool.runtime[pick]))))
        order += picks
    return order


def summarise(orders: list[list[int]], pool: Pool, budget: int) -> dict:
    """Curves and counts of one strategy over seeds."""
    best = pool.runtime.min()
    threshold = np.sort(pool.runtime)[max(1, int(0.01 * pool.n)) - 1]
    curves = np.array([np.minimum.accumulate(pool.runtime[o[:budget]]) / best
                       for o in orders])
    to_top = [first_hit(pool.runtime[o] <= threshold) for o in orders]
    to_best = [first_hit(pool.runtime[o] <= best) for o in orders]
    return {"curve": curves.mean(axis=0).tolist(), "to_top1": to_top,
            "to_top1_median": censored_median(to_top, budget),
            "to_best": to_best, "to_best_median": censored_median(to_best, budget)}


def first_hit(hits: np.ndarray) -> int | None:
    found = np.flatnonzero(hits)
    return int(found[0]) + 1 if len(found) else None


def censored_median(values: list[int | None], budget: int) -> float | None:
    """The median with a run that never got there counted past the budget (None when
    that is where the median falls)."""
    ordered = sorted(v if v is not None else np.inf for v in values)
    median = float(np.median(ordered))
    return None if median > budget else median


def standardised(curve: list[float], random_curve: list[float], n: int) -> dict:
    scores = {}
    for share in SCORE_BUDGETS:
        b = min(len(curve), max(1, int(round(share * n))))
        gap = random_curve[b - 1] - 1.0
        scores[str(share)] = (None if gap <= 0
                              else float((random_curve[b - 1] - curve[b - 1]) / gap))
    return scores


def one_file(path: Path, seeds: list[int], prior_dir: Path | None, ablations: bool,
             batches: tuple[int, ...] = BATCHES) -> dict:
    graph = load_graph(path)
    pool = Pool(graph)
    collection = graph.collection
    record = {"file": str(path), "collection": collection.id, "configs": graph.n_configs,
              "distinct_configs": pool.n}
    if pool.n < 2:
        record["left_out"] = "fewer than 2 distinct configs"
        return record
    budget = max(1, int(np.ceil(BUDGET_SHARE * pool.n)))
    top_k = int((pool.runtime <= np.sort(pool.runtime)[max(1, int(0.01 * pool.n)) - 1]).sum())
    record.update(budget=budget, top1_configs=top_k, notes=[])
    random_curve = [expected_random_best(pool.runtime, b) / pool.runtime.min()
                    for b in range(1, budget + 1)]
    prior = None
    if prior_dir is not None and (prior_dir / collection.slug).exists():
        from xlarank.rank.model import load_model

        prior = load_model(prior_dir / collection.slug)
    else:
        record["notes"].append(f"{PRIOR}: not run (no model at "
                               f"{prior_dir / collection.slug if prior_dir else '--prior'})")
    has_optuna = optuna_available()
    if not has_optuna:
        record["notes"].append(f"{TPE}: not run (optuna missing: pip install "
                               "'xlarank[bench]')")
    # The headline tuner has no prior: a prior is the user's model, and one trained on
    # other data (synthetic, for the real file) can lead it astray; it has its own row.
    base = Tuner(graph, prior=None, threads=THREADS)
    with_prior = Tuner(graph, prior=prior, threads=THREADS) if prior is not None else None
    strategies = {TUNER: BoosterStrategy(), **(ABLATIONS if ablations else {})}
    results = {}
    for batch in batches:
        table = {RANDOM: {"curve": random_curve,
                          "to_top1_median": expected_random_draws(pool.n, top_k),
                          "to_best_median": expected_random_draws(pool.n, 1),
                          "seconds": 0.0}}
        runs = {name: (lambda seed, k, s=strategy: run_tuner(base.with_seed(seed, s), pool,
                                                             k, budget))
                for name, strategy in strategies.items()}
        if prior is not None:
            runs[TUNER_PRIOR] = lambda seed, k: run_tuner(with_prior.with_seed(seed), pool, k,
                                                          budget)
            runs[PRIOR] = lambda seed, k: run_prior(pool, prior, budget)
        runs[GREEDY] = lambda seed, k: run_greedy(pool, k, budget, seed)
        runs[AUTOTVM] = lambda seed, k: run_autotvm(pool, k, budget, seed)
        if has_optuna:
            runs[TPE] = lambda seed, k: run_tpe(pool, k, budget, seed)
        for name, run in runs.items():
            started = time.perf_counter()
            orders = [run(seed, batch) for seed in seeds]
            table[name] = {**summarise(orders, pool, budget),
                           "seconds": round((time.perf_counter() - started) / len(seeds), 2)}
        for row in table.values():
            row["standardised"] = standardised(row["curve"], random_curve, pool.n)
        results[str(batch)] = table
    record["results"] = results
    return record


def fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def print_table(record: dict) -> None:
    print(f"\n{record['file']} ({record['data']}, {record['collection']}, "
          f"{record['distinct_configs']} distinct configs)")
    if "results" not in record:
        print(f"  left out: {record['left_out']}")
        return
    print(f"  budget {record['budget']} measurements (20%); top 1% = "
          f"{record['top1_configs']} configs")
    for note in record["notes"]:
        print(f"  note: {note}")
    for batch, table in record["results"].items():
        print(f"  batch {batch}: {'strategy':50}{'to top1%':>10}{'to best':>9}"
              + "".join(f"{'std@' + s:>10}" for s in map(str, SCORE_BUDGETS)) + f"{'s/run':>7}")
        for name, row in table.items():
            top = row["to_top1_median"]
            top_text = fmt(top) if top is not None else f">{record['budget']}"
            best = row["to_best_median"]
            best_text = fmt(best) if best is not None else f">{record['budget']}"
            scores = [row["standardised"][str(s)] for s in SCORE_BUDGETS]
            cells = "".join(f"{'-' if v is None else format(v, '.2f'):>10}" for v in scores)
            print(f"  {'':9}{name:50}{top_text:>10}{best_text:>9}{cells}"
                  f"{row['seconds']:>7.1f}")


def plot(record: dict, out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(record["results"]), figsize=(12, 4.5), squeeze=False)
    for ax, (batch, table) in zip(axes[0], record["results"].items()):
        for name, row in table.items():
            curve = np.asarray(row["curve"]) - 1.0
            ax.plot(np.arange(1, len(curve) + 1), np.maximum(curve, 1e-9), label=name,
                    lw=2.2 if name == TUNER else 1.2,
                    ls="--" if name == RANDOM else "-")
        ax.set_yscale("log")
        ax.set_xlabel("measurements")
        ax.set_ylabel("best so far / pool's best - 1 (mean of seeds)")
        ax.set_title(f"batch {batch}")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{Path(record['file']).name} ({record['data']}, {record['collection']}, "
                 f"{record['distinct_configs']} distinct configs)")
    fig.tight_layout()
    stem = f"autotune-{record['data']}-{record['collection'].replace(':', '-')}-" \
           f"{Path(record['file']).stem}"
    path = out_dir / f"{stem}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    parser.add_argument("--synthetic", type=Path, default=None,
                        help="an xlarank synth tree: one valid file per collection")
    parser.add_argument("--prior", type=Path, default=None,
                        help="folder of cross-graph models, one per collection slug")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--no-ablations", action="store_true",
                        help="only the tuner's default strategy (a faster run)")
    parser.add_argument("--real-only", action="store_true")
    parser.add_argument("--batches", type=str, default=",".join(map(str, BATCHES)),
                        help="comma-separated batch sizes")
    parser.add_argument("--out", type=Path, default=Path("bench/results/autotune.json"))
    args = parser.parse_args()
    files = [p for p in sorted((args.samples / "npz" / "layout").rglob("*.npz"))
             if "/test/" not in str(p)]
    sources = ["real"] * len(files)
    if args.synthetic is not None and not args.real_only:
        for collection in COLLECTIONS:
            for path in split_files(args.synthetic, collection, "valid"):
                if Pool(load_graph(path)).n >= MIN_SYNTHETIC_DISTINCT:
                    files.append(path)
                    sources.append("synthetic")
                    break
    batches = tuple(int(b) for b in args.batches.split(","))
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for path, source in zip(files, sources):
        record = {"data": source, **one_file(path, list(range(args.seeds)), args.prior,
                                             not args.no_ablations, batches)}
        if "results" in record:
            record["plot"] = str(plot(record, args.out.parent))
        records.append(record)
        print_table(record)
    write_record(args.out, {"batches": batches, "budget_share": BUDGET_SHARE,
                            "seeds": args.seeds, "threads": THREADS, "files": records,
                            "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
