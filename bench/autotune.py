"""Autotune replay: how many measurements does a model save before it holds a fast config?

Each file's distinct configs are a fixed pool; the oracle answers a measurement with the
config's median runtime (all measurements of identical config rows pooled). A strategy
asks for a batch (8 or 32 configs), the oracle answers, until a budget of 20% of the
distinct configs is spent; 10 seeds.

Files (every real labelled graph at hand, then the synthetic ones):
- every labelled real layout file under --samples (unet3d; a file with fewer than 2
  distinct configs, openai_v0_rnn_optimized, is listed and left out);
- the real XLA tuning records under --samples/raw, imported by the bench into a
  temporary folder (`xlarank.data.xla.import_records`, failed runs dropped as the
  official converter drops them): the layout record (unet3d's module, 112 configs, 91
  distinct) and the tile kernels of op_tuning_data.pb with at least 50 distinct configs;
- with --synthetic, per collection, tile included, the first valid file with at least
  100 distinct configs (so that 20% leaves more than one batch) of an `xlarank synth`
  tree: valid, not train, because --prior's models were trained on the train split, and
  a prior that has seen the file finds its best config in one or two measurements.

Per graph (`graph_record`): distinct configs, runtime spread (max / min of the distinct
configs' medians), plateau (share of distinct configs within 0.5% of the best), and the
repeat noise (`repeat_noise`): the median, over the configs measured twice or more, of
|r1 - r2|, the first two measurements of the config in file order, in ns and relative
to the best median, with the Kendall tau between those two measurements (`repeat_tau`;
FORMAT.md: 0.82 on unet3d). A file with no config measured twice has no measured noise:
it is recorded as unknown (None), and its target below is the best config itself
(noise 0).

Metrics, per strategy and batch size:
- measurements until a config within the noise of the best (`within_noise`: median
  runtime <= best + noise; ties included): the median over seeds, ">B" where more than
  half the seeds did not get there within the budget B; random search's exact
  expectation (N + 1) / (k + 1) for the k configs of that target;
- regret at budgets of 2, 5, 10 and 20% of the distinct configs (`regret_at`): best true
  runtime measured so far / the pool's best - 1, the mean over seeds; random search's
  exact expectation;
- best-so-far curve: best true runtime measured so far / the pool's best, per measurement;
- measurements until one of the top 1% (max(1, 1% of the pool), ties at the threshold
  included), kept only where the top 1% stands clear of the noise (its spread, the
  runtime at the 1% threshold minus the best, larger than the noise; else the row says
  "within noise" and the file is named in the record's `top1_within_noise`), and until
  the best config; counted as above; measurements are counted one by one in the order a
  batch was asked;
- standardised score at budgets of 2, 5, 10 and 20%: (random - strategy) / (random - 1)
  on the mean best-so-far ratio (1: the pool's best, 0: no better than random search).

Strategies ("peers") in the same run:
- random search, exact (`expected_random_best`, `expected_random_draws`: order statistics
  of a uniform sample without replacement, no simulation);
- the tuner (`xlarank.Tuner` without a prior, its default strategy: exploit the
  booster's prediction after a cold start, diverse on layout, random on tile) and each
  part turned on or off: a random cold start, a diverse one on tile too, a lower
  confidence bound (kappa 0.5 on the bootstrap sd),
  within-batch diversity (0.02), a 10% random share; and the tuner given --prior's model
  (its cold start and a column from the prior's score);
- prior order without feedback (--prior MODELS_DIR: the model of the file's collection
  slug; not run where none exists, and said so);
- the peers, each a registered strategy of the tuner (`xlarank suggest --strategy NAME`,
  `xlarank.rank.strategies` says how each works), in the same ask/tell loop: greedy
  rank-graph top-K ("greedy"), AutoTVM-style ("autotvm": XGBoost rank:pairwise on the raw
  config columns, 5% random) and Optuna TPE ("tpe", per-choice categoricals snapped to the
  nearest unmeasured config; needs `pip install 'xlarank[tpe]'`, else skipped with a
  note).

    python bench/autotune.py [--samples ../shared/tpugraphs] [--synthetic data/synth-demo]
        [--prior models/trained/synth-demo/xlarank] [--real-only | --synthetic-only]
        --out bench/results/autotune.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from provenance import write_record
from xlarank.compat import require_optuna
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.distinct import repeat_noise, repeat_tau, within_noise
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.errors import XlarankError
from xlarank.rank.measured import config_columns, distinct_configs, varying_columns
from xlarank.rank.strategies import AutotvmStrategy, BoosterStrategy, GreedyStrategy, TpeStrategy
from xlarank.rank.tuner import Tuner, expected_random_best, expected_random_draws

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (8, 32)
BUDGET_SHARE = 0.2
SCORE_BUDGETS = (0.02, 0.05, 0.10, 0.20)
SEEDS = 10
THREADS = 1
MIN_SYNTHETIC_DISTINCT = 100
# Real tile kernels with fewer distinct configs leave a 20% budget of under 10
# measurements: not one batch of feedback.
MIN_REAL_TILE_DISTINCT = 50
RECORDS = ("module_tuning_data_layout.pb", "op_tuning_data.pb")
PLATEAU = 0.005
NOISE_RULE = ("the median over configs measured twice or more of |r1 - r2| (their first "
              "two measurements in file order), in ns and relative to the best median; "
              "no config measured twice: noise unknown (None), target the best itself")
TUNER = "tuner"
# Each part of the tuner against its default (exploitation after its cold start).
ABLATIONS = {
    "tuner, random cold start": replace(BoosterStrategy(), cold="random"),
    "tuner, diverse cold start (tile too)": replace(BoosterStrategy(), cold="diverse"),
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


def top1_threshold(runtime: np.ndarray) -> float:
    """The runtime of the max(1, 1% of n)-th fastest of runtime (n,): the top 1% is every
    config at or below it."""
    return float(np.sort(runtime)[max(1, int(0.01 * len(runtime))) - 1])


def budget_at(share: float, n: int, length: int) -> int:
    """Measurements at a budget of `share` of n distinct configs, within a curve of
    `length` measurements."""
    return min(length, max(1, int(round(share * n))))


def regret_at(curve: list[float], n: int) -> dict[str, float]:
    """Regret (best so far / the pool's best - 1) of a best-so-far ratio curve (length
    the budget) at SCORE_BUDGETS shares of n distinct configs, keyed by share."""
    return {str(share): float(curve[budget_at(share, n, len(curve)) - 1] - 1.0)
            for share in SCORE_BUDGETS}


class Pool:
    """One file's distinct configs: first (n,) their lowest config index, runtime (n,)
    the oracle's median, raw (n, m) the varying raw config columns, group (n_configs,)
    each config index's distinct config; noise (ns, None if unknown) and repeated from
    `repeat_noise` on the file's own measurements."""

    def __init__(self, graph):
        raw = config_columns(graph)
        distinct = distinct_configs(graph)
        self.graph = graph
        self.group = distinct.group
        self.first = distinct.first
        self.raw = raw[:, varying_columns(raw)][distinct.first]
        self.runtime = distinct.median
        self.n = len(distinct)
        self.noise, self.repeated = repeat_noise(graph.config_runtime, distinct.group)


def graph_record(pool: Pool) -> dict:
    """What decides how hard a file is to tune: its size, spread, plateau and noise."""
    best = float(pool.runtime.min())
    top1 = top1_threshold(pool.runtime)
    noise = pool.noise
    return {
        "runtime_spread": float(pool.runtime.max() / best),
        "plateau": float(np.mean(pool.runtime <= best * (1 + PLATEAU))),
        "repeated_configs": pool.repeated,
        "noise_ns": noise,
        "noise_relative": None if noise is None else noise / best,
        "repeat_tau": repeat_tau(pool.graph.config_runtime, pool.group),
        "within_noise_configs": int(within_noise(pool.runtime, noise).sum()),
        "top1_spread_ns": top1 - best,
        "top1_spread_relative": (top1 - best) / best,
        # Top 1% holds meaning only where its members are told apart from the best by
        # more than measurement noise; else which configs are in it is measurement luck.
        "top1_clear_of_noise": bool(top1 - best > (noise or 0.0)),
    }


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


def summarise(orders: list[list[int]], pool: Pool, budget: int) -> dict:
    """Curves and counts of one strategy over seeds (orders: per seed, the distinct
    configs in the order measured)."""
    best = pool.runtime.min()
    threshold = top1_threshold(pool.runtime)
    target = within_noise(pool.runtime, pool.noise)
    curves = np.array([np.minimum.accumulate(pool.runtime[o[:budget]]) / best
                       for o in orders])
    curve = curves.mean(axis=0).tolist()
    to_noise = [first_hit(target[o]) for o in orders]
    to_top = [first_hit(pool.runtime[o] <= threshold) for o in orders]
    to_best = [first_hit(pool.runtime[o] <= best) for o in orders]
    return {"curve": curve, "regret": regret_at(curve, pool.n),
            "to_noise": to_noise, "to_noise_median": censored_median(to_noise, budget),
            "to_top1": to_top, "to_top1_median": censored_median(to_top, budget),
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
        b = budget_at(share, n, len(curve))
        gap = random_curve[b - 1] - 1.0
        scores[str(share)] = (None if gap <= 0
                              else float((random_curve[b - 1] - curve[b - 1]) / gap))
    return scores


def one_file(graph, label: str, seeds: list[int], prior_dir: Path | None, ablations: bool,
             batches: tuple[int, ...] = BATCHES) -> dict:
    """The replay of one graph; label names it in the record (its path, or the record
    it was imported from)."""
    pool = Pool(graph)
    collection = graph.collection
    record = {"file": label, "collection": collection.id, "configs": graph.n_configs,
              "distinct_configs": pool.n, **graph_record(pool)}
    if pool.n < 2:
        record["left_out"] = "fewer than 2 distinct configs"
        return record
    budget = max(1, int(np.ceil(BUDGET_SHARE * pool.n)))
    top_k = int((pool.runtime <= top1_threshold(pool.runtime)).sum())
    record.update(budget=budget, top1_configs=top_k, notes=[])
    if pool.noise is None:
        record["notes"].append("no config measured twice: noise unknown, the target "
                               "'within noise' is the best config itself")
    random_curve = [expected_random_best(pool.runtime, b) / pool.runtime.min()
                    for b in range(1, budget + 1)]
    prior = None
    if prior_dir is not None and (prior_dir / collection.slug).exists():
        from xlarank.rank.model import load_model

        prior = load_model(prior_dir / collection.slug)
    else:
        record["notes"].append(f"{PRIOR}: not run (no model at "
                               f"{prior_dir / collection.slug if prior_dir else '--prior'})")
    peers = {GREEDY: GreedyStrategy(), AUTOTVM: AutotvmStrategy(), TPE: TpeStrategy()}
    try:
        require_optuna()
    except XlarankError as missing:
        del peers[TPE]
        record["notes"].append(f"{TPE}: not run ({missing})")
    # The headline tuner has no prior: a prior is the user's model, and one trained on
    # other data (synthetic, for the real file) can lead it astray; it has its own row.
    base = Tuner(graph, prior=None, threads=THREADS)
    with_prior = Tuner(graph, prior=prior, threads=THREADS) if prior is not None else None
    strategies = {TUNER: BoosterStrategy(), **(ABLATIONS if ablations else {})}
    results, verdict = {}, {}
    for batch in batches:
        table = {RANDOM: {"curve": random_curve, "regret": regret_at(random_curve, pool.n),
                          "to_noise_median": expected_random_draws(
                              pool.n, record["within_noise_configs"]),
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
        for name, strategy in peers.items():
            runs[name] = (lambda seed, k, s=strategy: run_tuner(base.with_seed(seed, s), pool,
                                                                k, budget))
        for name, run in runs.items():
            started = time.perf_counter()
            orders = [run(seed, batch) for seed in seeds]
            table[name] = {**summarise(orders, pool, budget),
                           "seconds": round((time.perf_counter() - started) / len(seeds), 2)}
        for row in table.values():
            row["standardised"] = standardised(row["curve"], random_curve, pool.n)
        results[str(batch)] = table
        # The bar: within the noise in at most a third of random search's draws.
        tuner, random = table[TUNER]["to_noise_median"], table[RANDOM]["to_noise_median"]
        verdict[str(batch)] = {"tuner": tuner, "random_expected": random,
                               "within_a_third_of_random": (tuner is not None
                                                            and tuner <= random / 3)}
    record["results"] = results
    record["tuner_to_noise_vs_random"] = verdict
    return record


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def reach(value, budget: int) -> str:
    """A count of measurements, ">B" where most seeds did not get there."""
    return fmt(value) if value is not None else f">{budget}"


def print_table(record: dict) -> None:
    print(f"\n{record['file']} ({record['data']}, {record['collection']}, "
          f"{record['distinct_configs']} distinct configs)")
    noise = record["noise_ns"]
    noise_text = ("unknown (no config measured twice)" if noise is None else
                  f"{noise:.0f} ns = {record['noise_relative']:.2g} of the best "
                  f"({record['repeated_configs']} configs measured twice or more, "
                  f"their two runs agree to Kendall tau {fmt(record['repeat_tau'], 2)})")
    print(f"  spread {record['runtime_spread']:.4g}x; plateau (within 0.5%) "
          f"{100 * record['plateau']:.1f}%; repeat noise {noise_text}; "
          f"{record['within_noise_configs']} configs within the noise of the best")
    top1 = ("clear of the noise" if record["top1_clear_of_noise"] else "within noise")
    if noise:
        top1 += f" ({record['top1_spread_ns'] / noise:.2f}x the noise)"
    if record["top1_spread_ns"] == 0:
        top1 += ": the top 1% is the best config and its ties ('to best')"
    print(f"  top 1%: spread {record['top1_spread_relative']:.2g} of the best: {top1}")
    if "results" not in record:
        print(f"  left out: {record['left_out']}")
        return
    print(f"  budget {record['budget']} measurements (20%); top 1% = "
          f"{record['top1_configs']} configs")
    for note in record["notes"]:
        print(f"  note: {note}")
    shares = list(map(str, SCORE_BUDGETS))
    for batch, table in record["results"].items():
        print(f"  batch {batch}: {'strategy':50}{'to noise':>9}{'to top1%':>10}"
              f"{'to best':>9}" + "".join(f"{'regret@' + s:>13}" for s in shares)
              + "".join(f"{'std@' + s:>10}" for s in shares) + f"{'s/run':>7}")
        for name, row in table.items():
            top = (reach(row["to_top1_median"], record["budget"])
                   if record["top1_clear_of_noise"] else "in noise")
            regrets = "".join(f"{row['regret'][s]:>13.2g}" for s in shares)
            scores = "".join(f"{'-' if v is None else format(v, '.2f'):>10}"
                             for v in (row["standardised"][s] for s in shares))
            print(f"  {'':9}{name:50}{reach(row['to_noise_median'], record['budget']):>9}"
                  f"{top:>10}{reach(row['to_best_median'], record['budget']):>9}"
                  f"{regrets}{scores}{row['seconds']:>7.1f}")
        verdict = record["tuner_to_noise_vs_random"][batch]
        print(f"  {'':9}tuner within the noise in at most a third of random's "
              f"{verdict['random_expected']:.1f}: "
              f"{'yes' if verdict['within_a_third_of_random'] else 'no'}")


def plot(record: dict, out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floor = 1e-9  # log axis: a curve at the pool's best is drawn there
    fig, axes = plt.subplots(1, len(record["results"]), figsize=(12, 4.5), squeeze=False)
    for ax, (batch, table) in zip(axes[0], record["results"].items()):
        if record["noise_relative"]:
            # Below the band's top a config is within the repeat noise of the best.
            ax.axhspan(floor, record["noise_relative"], color="grey", alpha=0.2,
                       label="within repeat noise of the best")
        for name, row in table.items():
            curve = np.asarray(row["curve"]) - 1.0
            ax.plot(np.arange(1, len(curve) + 1), np.maximum(curve, floor), label=name,
                    lw=2.2 if name == TUNER else 1.2,
                    ls="--" if name == RANDOM else "-")
        ax.set_yscale("log")
        ax.set_xlabel("measurements")
        ax.set_ylabel("best so far / pool's best - 1 (mean of seeds)")
        ax.set_title(f"batch {batch}")
    axes[0][0].legend(fontsize=7)
    name = Path(record["file"].split(": ")[-1]).stem
    fig.suptitle(f"{name} ({record['data']}, {record['collection']}, "
                 f"{record['distinct_configs']} distinct configs)")
    fig.tight_layout()
    stem = (f"autotune-{record['data'].replace(' ', '-')}-"
            f"{record['collection'].replace(':', '-')}-{name}")
    path = out_dir / f"{stem}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def real_graphs(samples: Path, tmp: Path) -> list[tuple[object, str, str]]:
    """(graph, label, data) of every real labelled graph: the layout samples, then the
    tuning records imported into tmp (layout, and tile kernels of at least
    MIN_REAL_TILE_DISTINCT distinct configs)."""
    from xlarank.data.xla import import_records

    found = [(load_graph(p), str(p), "real")
             for p in sorted((samples / "npz" / "layout").rglob("*.npz"))
             if "/test/" not in str(p)]
    for name in RECORDS:
        source = samples / "raw" / name
        if not source.exists():
            print(f"note: {source} not found: its graphs are not replayed")
            continue
        for imported in import_records([source], tmp / name, drop_failed_runs=True):
            graph = load_graph(tmp / name / imported.relative_path)
            if (not isinstance(graph, LayoutGraph)
                    and len(distinct_configs(graph)) < MIN_REAL_TILE_DISTINCT):
                continue
            found.append((graph, f"{source}: {imported.relative_path}", "real record"))
    return found


def tree_noise(tree: Path) -> dict:
    """The noise settings a synthetic tree was made with (its synth.json; a tree from
    before the settings existed was made with the defaults): `SynthNoise` as a dict."""
    from dataclasses import asdict

    from xlarank.data.synth import SynthNoise

    manifest = tree / "synth.json"
    noise = json.loads(manifest.read_text()).get("noise") if manifest.is_file() else None
    return asdict(SynthNoise(**noise) if noise else SynthNoise())


def synthetic_noise_note(records: list[dict], noise: dict) -> str:
    """How the synthetic files' repeat noise compares with the real files' (relative to
    the best), with the generator's settings (src/xlarank/data/synth; ``noise``: the
    tree's, `tree_noise`); records: per graph, its data and `graph_record`."""
    from xlarank.data.synth.layout import MIN_LAYOUT_NOISE

    def measured(*kinds: str) -> list[float]:
        return sorted(r["noise_relative"] for r in records
                      if r["data"] in kinds and r["noise_relative"] is not None)

    def span(values: list[float]) -> str:
        return f"{values[0]:.2g} to {values[-1]:.2g}" if values else "none measured"

    synthetic, real = measured("synthetic"), measured("real", "real record")
    lo, hi = noise["layout_repeat_tau"]
    spans = bool(synthetic and real and synthetic[0] <= real[0] and synthetic[-1] >= real[-1])
    return (f"generator: each measurement is the true runtime times lognormal noise; "
            f"layout sigma per file from a repeat Kendall tau of {lo:g}-{hi:g}, at least "
            f"{MIN_LAYOUT_NOISE:g} (a median |r1 - r2| of about 0.95 sigma of the "
            f"runtime); tile sigma {noise['tile_sigma']:g}. Relative repeat "
            f"noise measured: synthetic {span(synthetic)}, real {span(real)}: the synthetic "
            f"files {'span' if spans else 'do not span'} the real range"
            + ("" if spans else " (`xlarank synth --repeat-tau LO,HI --tile-noise SIGMA` "
               "makes a tree of other noise)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs",
                        help="the real samples: npz/layout/... and raw/*.pb tuning records")
    parser.add_argument("--synthetic", type=Path, default=None,
                        help="an xlarank synth tree: one valid file per collection")
    parser.add_argument("--prior", type=Path, default=None,
                        help="folder of cross-graph models, one per collection slug")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--no-ablations", action="store_true",
                        help="only the tuner's default strategy (a faster run)")
    parser.add_argument("--real-only", action="store_true")
    parser.add_argument("--synthetic-only", action="store_true",
                        help="only the --synthetic files (the real ones run on their own)")
    parser.add_argument("--batches", type=str, default=",".join(map(str, BATCHES)),
                        help="comma-separated batch sizes")
    parser.add_argument("--out", type=Path, default=Path("bench/results/autotune.json"))
    args = parser.parse_args()
    batches = tuple(int(b) for b in args.batches.split(","))
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records, noise_note = [], None
    with tempfile.TemporaryDirectory() as tmp:
        real = real_graphs(args.samples, Path(tmp))
        synthetic = []
        if args.synthetic is not None and not args.real_only:
            for collection in COLLECTIONS:
                for path in split_files(args.synthetic, collection, "valid"):
                    graph = load_graph(path)
                    if len(distinct_configs(graph)) >= MIN_SYNTHETIC_DISTINCT:
                        synthetic.append((graph, str(path), "synthetic"))
                        break
        for graph, label, data in ([] if args.synthetic_only else real) + synthetic:
            record = {"data": data, **one_file(graph, label, list(range(args.seeds)),
                                               args.prior, not args.no_ablations, batches)}
            if "results" in record:
                record["plot"] = str(plot(record, args.out.parent))
            records.append(record)
            print_table(record)
        if synthetic:
            # The real files' noise is cheap to measure: compared even when not replayed.
            noise_note = synthetic_noise_note([{"data": data, **graph_record(Pool(graph))}
                                               for graph, _, data in real + synthetic],
                                              tree_noise(args.synthetic))
    within = [r["file"] for r in records if "results" in r and not r["top1_clear_of_noise"]]
    print(f"\ntop 1% within noise (its figures not kept): {', '.join(within) or 'none'}")
    summary = {"batches": batches, "budget_share": BUDGET_SHARE, "seeds": args.seeds,
               "threads": THREADS, "noise_rule": NOISE_RULE, "plateau_share": PLATEAU,
               "top1_within_noise": within}
    if noise_note is not None:
        summary["synthetic_noise"] = noise_note
        print(f"synthetic noise: {noise_note}")
    write_record(args.out, {**summary, "files": records,
                            "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
