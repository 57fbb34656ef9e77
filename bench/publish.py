"""Publish the benches' JSON records as the page docs/benchmarks.md.

Every bench (bench/*.py) writes one JSON under bench/results/, stamped by
`provenance.write_record` with the date, commit, machine and command of the run. This script
copies the stamped ones to bench/published/ (a record without provenance is skipped, and said
so; over MAX_BYTES, per-epoch and per-step arrays that no table shows are dropped and the copy
names them under "dropped_by_publish"), then renders the page from bench/published/ alone.
Why: every figure on the page then comes from a record kept in the repository and is shown
beside the date, commit, machine and command that produced it, so the page never holds a
figure no command produced (none is typed in by hand); `--check`, or a test comparing
`render(ROOT / "bench/published")` with the page, tells when the two differ.

    python bench/publish.py [--results DIR] [--published DIR] [--out FILE] [--check]

Relative paths are taken from the repository root, so it runs from any folder.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

from provenance import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 150_000
# Per-epoch / per-step arrays no table uses: dropped from a copy over MAX_BYTES.
BULKY_KEYS = ("curve", "history_seed0", "pairwise_loss_per_epoch", "centred_mse_per_epoch")
REAL_NLP = "../shared/tpugraphs/npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
REAL_TILE = "../shared/tpugraphs/npz/tile/xla/test/0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb.npz"


class Bench(NamedTuple):
    name: str
    title: str
    command: str
    about: str


_BENCHES = (
    Bench("setup", "Setting up from a fresh clone",
          "python bench/setup.py --out bench/results/setup.json",
          "The README's two set-up commands, each from nothing in a fresh clone of the "
          "commit named below (with `../shared` beside it): `make demo` makes the "
          "virtualenv, installs xlarank and runs the demo; then `make test` installs the "
          "test extras and runs lint and the whole suite. The longest silence is the "
          "longest stretch with no output a user waits through; the bench reads the "
          "output through a pipe, not a terminal, where `make demo` prints its table only "
          "(on a terminal it names each step as it starts)."),
    Bench("featurize", "Featurize speed and memory",
          "python bench/featurize.py data/bench/npz/layout/xla/random/test/bench_40k.npz "
          f"{REAL_NLP} --out bench/results/featurize.json",
          "On a real-scale synthetic layout graph (`xlarank synth`, made into data/bench/) and "
          "on the real TpuGraphs nlp default test sample: the "
          "time to decompress the file, xlarank's read + featurize time and peak RSS rise, the "
          "plain reference implementation's time (tests/naive.py, sampled and scaled), and the "
          "cost of the optional gnn and gru families."),
    Bench("score", "Scoring latency",
          f"python bench/score.py {REAL_NLP} --model models/trained/synth-demo/xlarank/"
          "layout-nlp-default --out bench/results/score.json",
          "Ranking the real TpuGraphs nlp test sample's configs in-process with the model "
          "(trained on synthetic demo data) loaded once, and `xlarank --help` / `--version` "
          "start-up."),
    Bench("startup", "Commands as a user starts them",
          f"python bench/startup.py {REAL_NLP} --model models/trained/synth-demo/xlarank "
          f"--tile {REAL_TILE} --out bench/results/startup.json",
          "Each command as a fresh process, in shuffled rounds, beside the floor of a "
          "Python command on numpy and Numba (`python -c \"import numpy\"` and so on), and "
          "the same work in process (warm): what start-up costs. The models were trained on "
          "synthetic demo data; the graphs are real samples. The targets: `--help` within "
          "1.3x `import numpy`, `score` of one graph within 2x `import numpy, numba, "
          "pyarrow.parquet`."),
    Bench("ingraph", "In-graph ranking",
          "python bench/ingraph.py --synthetic data/synth-demo --prior "
          "models/trained/synth-demo/xlarank --out bench/results/ingraph.json",
          "On every labelled real TpuGraphs layout sample, the real layout tuning record "
          "(imported as `xlarank import --drop-failed-runs` does) and the first synthetic demo "
          "valid file per layout collection (held out from the --prior models' training): a share "
          "of the distinct configs \"measured\", the rest "
          "ranked (Kendall tau over seeds), by `rank-graph` and its variants, the default "
          "pipeline trained in-graph, a raw-column LightGBM peer and random order."),
    Bench("ingraph_noisy", "In-graph ranking under record-like noise",
          "python bench/ingraph.py --samples data/synth-demo-noisy/none --synthetic "
          "data/synth-demo-noisy --synthetic-files 2 --peer-only --no-timing "
          "--out bench/results/ingraph_noisy.json",
          "The same protocol on a demo tree generated as noisy as the real layout record "
          "(`xlarank synth --preset demo --repeat-tau 0.3,0.45`: two measurements of one "
          "config agree to Kendall tau 0.3-0.45, the record's 0.36, where the demo's agree "
          "to 0.6-0.95), its first two valid files per layout collection: rank-graph "
          "against the raw-column peer and random order where measurement noise, not the "
          "model, bounds the order."),
    Bench("ingraph_timing", "rank-graph as a command",
          "python bench/ingraph.py --timing-only --before d9fd505^ --out "
          "bench/results/ingraph_timing.json",
          "`xlarank rank-graph` as a user runs it (fresh processes, start-up included) on the "
          "real TpuGraphs nlp default test sample with 100 configs measured, timed alone on a "
          "quiet machine (the in-graph run above shared its machine), beside the same command "
          "from the sources of rank-graph before its model choice, run by run."),
    Bench("ablation", "Feature ablation",
          "python bench/ablation.py data/synth-demo --out bench/results/ablation.json",
          "Validation quality of the default ranker with each feature family left out, per "
          "collection, on the synthetic demo data; and on the real unet3d sample split inside "
          "the graph, the same for the default pipeline and for `rank-graph`."),
    Bench("engines", "Engines and concurrency",
          "python bench/engines.py data/synth-demo --frame features/frames/synth-demo/default/"
          "layout-nlp-default/train.parquet --out bench/results/engines.json",
          "Files per second featurized by the local and the Dask engines on the synthetic demo "
          "data; one `xlarank train` of the demo's layout-nlp-default frame alone against two "
          "side by side; and runs beside another program's 2-thread LightGBM loop against the "
          "median alone."),
    Bench("quality", "Quality",
          "python bench/quality.py data/synth-demo --seeds 3 --out bench/results/quality.json",
          "Each objective, the ensemble, xlarank's default, the peers and the published systems "
          "xlarank descends from, mean and spread over seeds: on the synthetic demo data "
          "(split by graph) and on the real unet3d sample split inside the graph; with the "
          "quality targets (the default ahead of its peer, the ensemble no worse than the "
          "best single booster) checked on the synthetic part."),
    Bench("systems", "Published systems",
          "python bench/systems.py --data data/synth-demo --seeds 3 "
          "--out bench/results/systems.json",
          "xlarank beside tpugraphs-gnn, gru and hybrid (docs/systems.md), the same splits for "
          "every system: cross-graph on the synthetic demo data, in-graph on the real unet3d "
          "sample, and epoch cost on a sample of the real-sized synthetic preset."),
    Bench("systems_tile", "Published systems, synthetic tile after calibration",
          "python bench/systems.py --data data/synth-demo --parts synthetic --collections "
          "tile:xla --seeds 3 --out bench/results/systems_tile.json",
          "The systems bench's synthetic tile row again, on demo data made after the tile "
          "generator was calibrated against the real tuning record's 15 kernels "
          "(docs/synthetic.md): the row above predates it, when one synthetic kernel's "
          "slowest config could be 9,469x its default against at most 26x in the record."),
    Bench("systems_fair", "Published systems in-graph with tpugraphs-gnn's recipe, and epoch costs",
          "python bench/systems.py --parts ingraph --systems xlarank,tpugraphs-gnn,gru,"
          "hybrid --shares 0.5,0.2,0.1 --ingraph-seeds 3 --threads 1 "
          "--out bench/results/systems_fair.json",
          "The in-graph protocol of the systems bench (real unet3d, distinct configs split at "
          "random, a share measured, Kendall tau on the rest) with tpugraphs-gnn trained by "
          "its in-graph recipe (docs/systems.md: inner validation on the measured configs, a "
          "learning-rate grid by successive halving, early stopping), one core per fit; its "
          "held-out tau at each checkpoint against training seconds is drawn in "
          "bench/results/systems_fair-ingraph-curve.png, for the report only. Then the GNN "
          "systems' epoch cost, first and marginal epoch timed in one fit: the published "
          "copy holds tpugraphs-gnn's from an earlier `--parts ingraph,scale` run; `make "
          "bench` times every GNN system's in systems_scale below."),
    Bench("systems_competition", "Published systems: the competition GNN",
          "python bench/systems.py --parts ingraph --systems xlarank,competition-gnn "
          "--shares 0.5,0.2,0.1 --ingraph-seeds 3 --threads 1 "
          "--out bench/results/systems_competition.json",
          "The first-place GNN of the \"Fast or Slow?\" competition (`competition-gnn`, "
          "docs/systems.md) on the systems bench's in-graph protocol (real unet3d, distinct "
          "configs split at random, a share measured, Kendall tau on the rest), trained by the "
          "in-graph rule every GNN follows (inner validation, a learning-rate grid by "
          "successive halving, early stopping, the best checkpoint kept), beside xlarank and "
          "random order on the same splits, one core per fit (its epoch cost: "
          "systems_scale below); its own record, so the systems records above stay as they were "
          "published. The published copy may hold a subset of these shares and seeds: its "
          "stamped command says which. Rows read back from `--partial` keep the seconds of "
          "the run that made them; the stamped wall time is that of the last call."),
    Bench("systems_competition_low",
          "Published systems: the competition GNN at 20% and 10% measured",
          "python bench/systems.py --parts ingraph --systems xlarank,competition-gnn "
          "--ingraph-seed-list 0,1,2 --shares 0.2,0.1 --threads 1 "
          "--partial bench/results/systems_competition_low.jsonl "
          "--out bench/results/systems_competition_low.json",
          "The competition GNN's section above at the lower measured shares (20% and 10% of "
          "unet3d's distinct configs measured, Kendall tau on the rest), seeds 0-2, beside "
          "xlarank and random order on the same splits, one core per fit, by the same "
          "in-graph rule; its own record, so the one above stays as it was published. Seed "
          "0's rows are the first run's (commit dd5a34a, two cores shared, so its GNN's CPU "
          "seconds ran past its wall seconds), read back from --partial with seed 1's (run "
          "at 13a95bc); seeds 1 and 2 ran pinned to one core with taskset."),
    Bench("systems_rule", "Published systems: gru and hybrid by the in-graph rule",
          "python bench/systems.py --parts ingraph --systems xlarank,gru,hybrid "
          "--ingraph-seed-list 0,1,2 --shares 0.5,0.2,0.1 --threads 1 "
          "--partial bench/results/systems_rule.jsonl --out bench/results/systems_rule.json",
          "gru and hybrid on the systems bench's in-graph protocol (real unet3d, distinct "
          "configs split at random, a share measured, Kendall tau on the rest), trained by "
          "the in-graph rule the GNNs follow (inner validation on the measured configs, a "
          "learning-rate grid by successive halving, early stopping, the best checkpoint "
          "kept; the hybrid's inner tau is that of the whole hybrid, its booster refitted at "
          "each checkpoint), beside xlarank and random order on the same splits, seeds 0-2, "
          "one core per fit; its own record, so the records above stay as they were "
          "published (`make bench`'s systems_fair line measures the same beside "
          "tpugraphs-gnn)."),
    Bench("systems_tpugraphs_rule",
          "Published systems: tpugraphs-gnn by the in-graph rule at 20% and 10% measured",
          "python bench/systems.py --parts ingraph --systems xlarank,tpugraphs-gnn "
          "--ingraph-seed-list 0,1 --shares 0.2,0.1 --threads 1 "
          "--partial bench/results/systems_tpugraphs_rule.jsonl "
          "--out bench/results/systems_tpugraphs_rule.json",
          "tpugraphs-gnn on the systems bench's in-graph protocol (real unet3d, distinct "
          "configs split at random, a share measured, Kendall tau on the rest) with 20% and "
          "10% measured, trained by the in-graph rule (inner validation on the measured "
          "configs, a learning-rate grid by successive halving, early stopping, the best "
          "checkpoint kept), beside xlarank and random order on the same splits, one core "
          "per fit pinned with taskset; its half-measured figures are systems_fair's above. "
          "Its rows were read back from --partial, so the wall time below is the last "
          "invocation's; each fit's seconds are in the table. "
          "Its own record, so the records above stay as they were published (`make bench`'s "
          "systems_fair line measures the same at every share)."),
    Bench("systems_cross", "Published systems across graphs by the rule, as curves",
          "python bench/systems.py --data data/synth-demo --parts cross --systems xlarank,"
          "tpugraphs-gnn,gru,hybrid,competition-gnn --cross-seed-list 0,1 --threads 1 "
          "--cross-partial bench/results/systems_cross.jsonl "
          "--out bench/results/systems_cross.json",
          "The five systems and random order on the systems bench's synthetic cross-graph "
          "protocol (train on the demo's train split, the headline on its valid split), every "
          "stepped system trained by the cross-graph rule: the in-graph rule's twin (inner "
          "validation on a held-out share of the train files, early stopping by the same "
          "patience and min gain, the best epoch kept), each at its author's learning rate; "
          "its held-out headline at every epoch against training CPU seconds, one core per "
          "fit. Synthetic data: our cost model, not TpuGraphs (docs/synthetic.md). Rows read "
          "back from `--cross-partial` keep the seconds of the run that made them."),
    Bench("systems_counts", "Published systems across graphs with more training graphs",
          "python bench/systems.py --data data/synth-demo --parts counts --systems xlarank,"
          "tpugraphs-gnn,gru,hybrid,competition-gnn --collections layout:xla:default,"
          "layout:xla:random,layout:nlp:default,layout:nlp:random,tile:xla "
          "--cross-seed-list 0,1 --threads 1 "
          "--counts-partial bench/results/systems_counts.jsonl --cross-partial "
          "bench/results/systems_cross.jsonl --out bench/results/systems_counts.json",
          "The cross-graph rule of the section above on a tree with more training graphs: "
          "the demo preset's graphs (sizes, cost model, seed 0) at the real preset's "
          "train-file counts per layout collection (61, 69, 198 and 207 against the demo's "
          "30) and 1,600 tile kernels (the demo's 400; the real 5,709 would take 14x the "
          "demo's time), the valid files the demo's own. Every file has its own seeded "
          "stream, so the demo's train files are among these: only the number of training "
          "graphs moves. The demo count's figures beside it are the same units' rows of "
          "the section above. Synthetic data: our cost model, not TpuGraphs."),
    Bench("systems_scale", "Published systems: every GNN system's epoch cost",
          "python bench/systems.py --parts scale --systems tpugraphs-gnn,gru,hybrid,"
          "competition-gnn --out bench/results/systems_scale.json",
          "What an epoch over the whole train split costs each GNN system on real-sized "
          "graphs, where a full run does not fit the machine: a seeded sample of 4 train "
          "files per collection of the real preset (`xlarank synth --preset real`'s sizes, "
          "synthetic), one fit of a few epochs per system timed epoch by epoch in CPU "
          "seconds (2 threads a fit, summed), the first epoch (statistics, loading, "
          "compiling) apart from the marginal one, and the marginal one scaled to the real "
          "preset's train files. "
          "The hybrid reports no epochs, so it is timed by whole fits of 1 and 2 epochs after "
          "a warm-up fit: its marginal epoch is their difference, 0 where the two fits' "
          "noise hides it. "
          "xlarank trains a collection in seconds (the sections above)."),
    Bench("tile_kernels", "Real tile kernels",
          "python bench/tile_kernels.py --seeds 3 --out bench/results/tile_kernels.json",
          "The 15 real tile kernels of the XLA tuning record `../shared/tpugraphs/raw/"
          "op_tuning_data.pb` (`xlarank import --drop-failed-runs`), the only real data here "
          "with more than one graph of a collection: in-kernel (half of each kernel's distinct "
          "configs measured, Kendall tau on the rest, kernels with at least 10 distinct "
          "configs) and leave-one-kernel-out (train on 14, 1 - slowdown@5 on the held-out "
          "one), for xlarank, each published system and random order."),
    Bench("tile_kernels_rule", "Real tile kernels, the published systems by the in-graph rule",
          "python bench/tile_kernels.py --seeds 3 --systems xlarank,tpugraphs-gnn,gru,hybrid,"
          "random --out bench/results/tile_kernels_rule.json",
          "The section above again for every system, tpugraphs-gnn, gru and the hybrid's GNN "
          "now trained in the kernel by the in-graph rule (inner validation on "
          "the measured configs, a learning-rate grid by successive halving, early stopping, "
          "the best checkpoint kept; with fewer than 5 inner configs, the grid's middle rate "
          "for 500 steps on every measured config), beside xlarank as it is now; its own "
          "record, so the one above stays as it was published. Leave-one-kernel-out trains "
          "across kernels, which the rule does not touch."),
    Bench("tile_kernels_curves", "Real tile kernels, five systems by the rules, as curves",
          "python bench/tile_kernels.py --seeds 3 --partial bench/results/tile_kernels.jsonl "
          "--out bench/results/tile_kernels_curves.json",
          "The real tile kernels again, now with all five systems and random: in the kernel "
          "every stepped system trains by the in-graph rule, with its held-out tau at each "
          "checkpoint against training CPU seconds (the curves) and the time to its own "
          "plateau; leave-one-kernel-out trains each stepped system by the cross-graph rule "
          "(inner validation on 3 of the other 14 kernels, early stopping by the same "
          "patience and min gain, the best epoch kept). This is what `make bench`'s "
          "tile_kernels line makes now (on 2 threads); the two sections above are its "
          "earlier runs, kept as they were published. Here each system ran on one core "
          "(--threads 1), two processes side by side, its results read back from --partial, "
          "so the wall time below is the last invocation's; each system's own seconds are "
          "in the tables."),
    Bench("autotune", "Autotune replay",
          "python bench/autotune.py --synthetic data/synth-demo --prior "
          "models/trained/synth-demo/xlarank --out bench/results/autotune.json",
          "Measurements each strategy spends before it holds a config within the repeat noise "
          "of the best (a top-1% config in records before the noise was measured), and its "
          "regret along the way: the tuner and its variants against random search (exact), "
          "prior order, greedy rank-graph, an AutoTVM-style ranker and Optuna TPE, replayed on "
          "every real labelled graph at hand (the unet3d sample; the layout record and the "
          "tile kernels with at least 50 distinct configs of the XLA tuning records, imported) "
          "and one synthetic demo valid file per collection (held out from the --prior "
          "models' training)."),
    Bench("autotune_noisy", "Autotune replay under record-like noise",
          "python bench/autotune.py --synthetic-only --synthetic data/synth-demo-noisy "
          "--no-ablations --out bench/results/autotune_noisy.json",
          "The same replay on one valid file per collection of a demo tree generated as noisy "
          "as the real layout record (`xlarank synth --preset demo --repeat-tau 0.3,0.45`; "
          "tile measurements at the default 2%), without a prior or the tuner's ablations: "
          "each file's distinct configs, spread, repeat noise and plateau beside the "
          "measurements each strategy spends."),
    Bench("featurize_full", "Featurize the real preset's mix, before and after",
          "python bench/full.py --preset real --share 10 --featurize-only --before 37d32bf^ "
          "--out bench/results/featurize_full.json",
          "`xlarank featurize` of every 10th file of each collection and split of the `real` "
          "synthetic preset (its file-size mix at a tenth of its 7,868 files; synthetic, not "
          "TpuGraphs data), with this commit and with the commit before the ISA-L reader "
          "(37d32bf^), alternated, two processes each (`--workers 2`)."),
    Bench("full", "Full dataset end to end",
          "python bench/full.py --preset real --out bench/results/full.json",
          "The whole dataset's size on one machine (`make bench-full`): the `real` synthetic "
          "preset (`xlarank synth`: the real file counts and size mix, not TpuGraphs data) "
          "featurized, trained, evaluated and submitted, wall time and peak RSS per step."),
    Bench("corpus", "The measured corpus: real programs measured here",
          "python bench/corpus.py --corpus corpus --parts ingraph,tpu --seeds 3 "
          "--out bench/results/corpus.json",
          "Real JAX programs (corpus/programs.toml: ten model families) whose layout configs "
          "`xlarank measure` compiled with XLA's CPU backend and timed on a 2-core machine "
          "(`make corpus`, docs/xla.md), imported as layout:xla:random. A first look: "
          "xlarank's settings were frozen at the named commit before the corpus was first "
          "scored, and none was chosen on it. Per program: its runtime spread and noise "
          "ceiling (repeat tau: two independent halves of its rounds against each other); "
          "in-graph, a share of its distinct configs measured and the rest ranked, over "
          "seeds; and the corpus-trained model on the labelled real TpuGraphs graph "
          "(unet3d)."),
    Bench("corpus_cross", "The measured corpus: a family never seen",
          "python bench/corpus.py --corpus corpus --parts cross --seeds 3 --workers 2 "
          "--rows bench/results/corpus_cross.jsonl --out bench/results/corpus_cross.json",
          "The corpus's programs, each model family left out in turn: trained on the other "
          "families' programs, scored on the held family's configs. xlarank's default "
          "pipeline (one fit on all train files), the config-aggregates peer (the same "
          "pipeline on the baseline spec), random, and the four published systems by the "
          "cross-graph rule (`xlarank.systems.cross`: inner validation on 20% of the train "
          "files, early stopping within a 30-epoch budget, the kept epoch's scores). Every "
          "fold's row (family, system, seed, with the commit, date and machine that made "
          "it) is kept in the JSON lines beside the record, which is rebuilt from them; two "
          "folds ran at a time, so wall seconds are shared, CPU seconds are not."),
    Bench("corpus_remeasure", "The measured corpus measured again",
          "python bench/remeasure.py --corpus corpus --configs 50 --seed 1 "
          "--out bench/results/corpus_remeasure.json",
          "Every kept program of the corpus, `xlarank measure PROGRAM --remeasure RECORD "
          "--configs 50 --seed 1` as a user runs it, on a later day than its record: 50 of "
          "the record's configs (the default run among them) timed again on one pinned CPU. "
          "Beside the Kendall tau between the stored and the new runtimes, what the record "
          "says to expect: its repeat tau (even rounds against odd ones) over all its "
          "configs and over the 50 drawn here."),
    Bench("corpus_autotune", "The measured corpus: tuning by live measurements",
          "python bench/corpus.py --corpus corpus --parts autotune --seeds 3 "
          "--out bench/results/corpus_autotune.json",
          "The tuner (`xlarank suggest`'s booster strategy), random search and Optuna's "
          "TPE (`--strategy tpe`), each driving live measurements "
          "(`xlarank.measure.measure_program`, 2 rounds of 2 calls a config) of one corpus "
          "program per family for six families, 8 configs a batch, at most 48; the tuner's "
          "prior is xlarank trained on the other families' programs. Counted: configs "
          "measured until one whose stored runtime (the record's) lies within the record's "
          "noise of its best, and until one lies among the record's top 5% (the default "
          "run each batch adds is not counted)."),
)
# {name: Bench}, in page order.
BENCHES = {b.name: b for b in _BENCHES}
ENGINE_PARTS = ("results", "trainings", "busy machine")


# ---------------------------------------------------------------- formatting

def num(x, sig: int = 4) -> str:
    """A figure with `sig` significant digits (whole numbers past that), "–" for none."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if not isinstance(x, float) or not math.isfinite(x):
        return str(x)
    return f"{x:.0f}" if abs(x) >= 10**sig else f"{x:.{sig}g}"


def metric(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def pm(entry: dict | None, worst: str | None = None) -> str:
    """ "mean ± sd", and " (worst)" from entry[worst] when asked and present."""
    if not entry:
        return "–"
    text = f"{entry['mean']:.3f} ± {entry.get('sd', 0.0):.3f}"
    if worst is not None and entry.get(worst) is not None:
        text += f" ({entry[worst]:.3f})"
    return text


def percent(x) -> str:
    return "–" if x is None else f"{100 * x:+.1f}%"


def overhead(family: dict | None) -> str:
    if not family:
        return "–"
    pairs = family.get("overhead_per_pair")
    return percent(family["overhead"]) + (f" ({percent(min(pairs))} to {percent(max(pairs))})"
                                          if pairs else "")


def limit(value, within) -> str:
    """A limit and whether it held; the record may keep only the verdict."""
    if value is None:
        return f"{yes_no(within)} (the record keeps no limit)"
    return f"≤ {num(value)}: {yes_no(within)}"


def yes_no(x) -> str:
    return "–" if x is None else ("met" if x else "NOT met")


def table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def where(path: str) -> str:
    """A data file as `<dataset folder>/npz/...` (a tuning record as
    `<dataset folder>/raw/...`), whatever machine folder held the dataset; a graph imported
    from a record, "<record>: <path inside>", as the record's place then the path inside."""
    if ": " in path:
        record, inside = path.split(": ", 1)
        return f"{where(record)}: {inside}"
    parts = Path(path).parts
    for anchor in ("npz", "raw"):
        if anchor in parts[1:]:
            at = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[at - 1:])
    return path


def data(text: str) -> str:
    """A record's own words on its data, "synthetic: X" read as "synthetic, X"."""
    return text.replace("synthetic: ", "synthetic, ", 1)


def data_kind(source: str) -> str:
    return {"real": "real TpuGraphs sample",
            "synthetic": "synthetic (`xlarank synth`)"}.get(source, source)


def union(rows, key) -> list:
    """Distinct values in order of first appearance: the keys of each row (key None), or
    each row's row[key]."""
    return list(dict.fromkeys(k for r in rows for k in (r if key is None else [r[key]])))


def provenance_lines(prov: dict) -> list[str]:
    """The run's date, commit, machine, command, wall time and load, as list items."""
    m = prov.get("machine") or {}
    machine = ", ".join(x for x in (
        f"{m['cores']} cores" if m.get("cores") else "",
        f"{num(m['memory_gb'])} GB" if m.get("memory_gb") else "",
        m.get("cpu") or "", f"Python {m['python']}" if m.get("python") else "") if x)
    seconds = prov.get("seconds")
    wall = "–" if seconds is None else f"{num(seconds)} s" + (
        f" ({num(seconds / 60, 3)} min)" if seconds >= 120 else "")
    load = prov.get("load_average_at_end")
    commit = f"`{prov['commit']}`" if prov.get("commit") else "unknown"
    return [f"- date: {prov.get('date', '–')}",
            f"- commit: {commit}" + (" (with uncommitted edits)" if prov.get("dirty") else ""),
            f"- machine: {machine or '–'}",
            f"- command: `{prov.get('command', '–')}`",
            f"- wall time: {wall}",
            "- load average at the end: "
            + (", ".join(num(x, 3) for x in load) + " (1, 5, 15 min)" if load else "–")]


# ---------------------------------------------------------------- one renderer per bench

def featurize(rec: dict) -> list[str]:
    files = rec["results"]
    rows = {
        "data": [r["data"] for r in files],
        "configs x features featurized": [f"{r['featurize']['rows']} x "
                                          f"{r['featurize']['features']}" for r in files],
        "node_config_feat MiB": [num(r["decompress"]["node_config_feat_mib"]) for r in files],
        "decompress s": [num(r["decompress"]["seconds"]) for r in files],
        "featurize s": [num(r["featurize"]["seconds"]) for r in files],
        "featurize / decompress (range over pairs)": [
            f"{num(r['featurize_over_decompress'])} ({num(min(p), 3)}–{num(max(p), 3)})"
            if (p := r.get("featurize_over_decompress_per_pair"))
            else num(r["featurize_over_decompress"]) for r in files],
        "peak RSS rise MiB": [num(r["featurize"]["peak_rss_rise_mib"]) for r in files],
        "peak RSS rise / node_config_feat": [num(r["peak_rss_rise_over_config_mib"])
                                             for r in files],
        "reference s (scaled from samples)": [num(r["reference"]["seconds"]) for r in files],
        "speed-up over the reference": [f"{num(r['speedup_over_reference'], 3)}x"
                                        for r in files],
        **{f"{family} family overhead (range over pairs)": [
            overhead(r.get(family)) for r in files] for family in ("gnn", "gru")},
        "`xlarank featurize` as a command s": [
            num((r.get("command") or {}).get("seconds")) for r in files],
        "the command's peak RSS MiB (libraries included)": [
            num((r.get("command") or {}).get("peak_rss_mib")) for r in files],
        "start-up: importing numpy, pandas, pyarrow, numba s": [
            num((r.get("startup") or {}).get("imports_seconds")) for r in files],
        "start-up: Numba's first cached kernel s": [
            num((r.get("startup") or {}).get("first_kernel_seconds")) for r in files],
        "zipfile's inflate of every member s": [
            num((r.get("inflate") or {}).get("zipfile_all_members")) for r in files],
        **{f"config member's stream with {label} s": [
            num((r.get("inflate") or {}).get(f"{key}_stream")) for r in files]
           for key, label in (("zlib", "zlib"), ("zlib_ng", "zlib-ng"),
                              ("isal_zlib", "ISA-L"))},
        "inflate xlarank reads with": [(r.get("inflate") or {}).get("chosen", "zlib")
                                       for r in files],
    }
    out = [table(["", *[f"`{Path(r['file']).name}`" for r in files]],
                 [[k, *v] for k, v in rows.items()])]
    pairs = sorted({len(r.get("featurize_over_decompress_per_pair", [])) for r in files})
    out.append("Files: " + "; ".join(f"`{where(r['file'])}`" for r in files) + ". Times are "
               f"the best of {'/'.join(map(str, pairs))} alternated (decompress, featurize) "
               "pairs, each run in its own process; peak RSS is the rise over the process "
               "after imports and a warm-up; a family's overhead is its best time over the best "
               "without it. The command, the start-up and the inflate rows are the best of 3 "
               "fresh processes; the inflate rows stream the config member with 16 MiB of "
               "output per call, CRC-32 included, data dropped.")
    return out


def setup(rec: dict) -> list[str]:
    rows = [[f"`make {name}`", f"{num(rec[name]['seconds'] / 60, 3)} min",
             str(rec[name]["status"]), f"{num(rec[name]['longest_silence_s'])} s",
             f"`{rec[name]['last_line'][:120]}`"] for name in ("demo", "test")]
    load = ", ".join(num(x, 3) for x in rec["load_before"])
    return [table(["command", "wall time", "exit", "longest silence", "last line"], rows),
            f"Tests passed: {rec['test'].get('tests_passed')}. Load average before: {load} "
            "(1, 5, 15 min)."]


def startup(rec: dict) -> list[str]:
    commands = rec["commands"]
    rows = [[f"`{name}`", num(row["best_s"]), num(row["median_s"]),
             "–" if row["in_process_s"] is None else num(row["in_process_s"])]
            for name, row in commands.items()]
    ratios = rec["ratios"]
    out = [table(["command", "best s", "median s", "the work in process, s"], rows),
           f"`--help` / `import numpy`: {num(ratios['help_over_numpy'], 3)}x (target 1.3x); "
           f"`score` / `import numpy, numba, pyarrow.parquet`: "
           f"{num(ratios['score_over_numpy_numba_parquet'], 3)}x (target 2x)."]
    for name, row in commands.items():
        if row.get("import_top"):
            out.append(f"`{name}`, its top imports by cumulative seconds: " + "; ".join(
                f"{module} {num(seconds, 3)}" for module, seconds in row["import_top"]))
    return out


def score(rec: dict) -> list[str]:
    rows = [
        ["warm ranking in-process (median; max)",
         f"{num(rec['warm_seconds_median'])} s; {num(rec['warm_seconds_max'])} s",
         f"< {num(rec['warm_target_seconds'])} s", yes_no(rec.get("warm_within_target"))],
        ["first call", f"{num(rec['first_call_seconds'])} s", "", ""],
        ["import + model load", f"{num(rec['import_and_load_model_seconds'])} s", "", ""],
        ["`xlarank --help` / `--version` start-up (medians)",
         f"{num(rec['help_seconds_median'])} s / {num(rec['version_seconds_median'])} s",
         f"< {num(rec['startup_target_seconds'])} s", yes_no(rec.get("startup_within_target"))],
    ]
    return [f"{rec['configs']} configs of `{where(rec['graph'])}`, model `{rec['model']}`, "
            f"{rec.get('threads', '–')} threads.",
            table(["measure", "seconds", "target", "met"], rows)]


def peer_cell(check: dict | None) -> str:
    if not check:
        return "–"
    return (f"{check['mean_minus_peer']:+.3f} (mean {'ok' if check['mean_ok'] else 'BELOW'}, "
            f"worst {'ok' if check['worst_ok'] else 'BELOW'})")


def ingraph(rec: dict) -> list[str]:
    out = [f"{rec['seeds']} seeds, {rec['threads']} threads; cells: Kendall tau on the held-out "
           "distinct configs, mean ± sd over seeds (worst seed)."]
    kinds = [data_kind(f.get("data", "–")) for f in rec["files"]]
    out[0] += (" Files in this record: "
               + "; ".join(f"{k} ({kinds.count(k)})" for k in dict.fromkeys(kinds)) + ".")
    if any("runtime_spread" in f for f in rec["files"]):
        out[0] += (" Per file, what makes it hard: the runtime spread (slowest / fastest "
                   "distinct median), the repeat noise (median |first - second| of configs "
                   "measured twice or more, over the fastest) and the plateau (distinct "
                   "configs within 0.5% of the fastest). Per share: the graph-local model "
                   "rank-graph chose (K-fold on the measured configs; seeds per choice), and "
                   "the check against the peer: rank-graph's mean minus the peer's, the mean "
                   "ok at or above the peer's less 0.005, the worst seed ok at or above the "
                   "peer's mean less its sd.")
    for f in rec["files"]:
        head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
                f"{f['distinct_configs']} distinct of {f['configs']} configs")
        if "runtime_spread" in f:
            noise = f.get("repeat_noise")
            head += (f"; spread {num(f['runtime_spread'], 4)}x, repeat noise "
                     f"{'unknown' if noise is None else num(noise, 2)} of the fastest, "
                     f"plateau {100 * f['plateau_0.5%']:.1f}% within 0.5%")
        if "results" not in f:
            out.append(f"{head}; left out: {f.get('left_out', '–')}.")
            continue
        shares = list(f["results"])
        tables = list(f["results"].values())
        systems = [s for s in union(tables, None) if all("worst" in t.get(s, {"worst": 0})
                                                         for t in tables)]
        rows = [[s, *[pm(t.get(s), "worst") for t in tables]] for s in systems]
        chosen = [(t.get("rank-graph") or {}).get("chosen") for t in tables]
        if any(chosen):
            rows.append(["rank-graph's model (seeds)",
                         *[", ".join(f"{k} {v}" for k, v in c.items()) if c else "–"
                           for c in chosen]])
        checks = [(t.get("rank-graph") or {}).get("peer_check") for t in tables]
        if any(checks):
            rows.append(["rank-graph - peer", *map(peer_cell, checks)])
        out.append(head + ":")
        out.append(table(["system", *[f"{float(s):.0%} measured" for s in shares]], rows))
        for s in union(tables, None):
            if s not in systems:
                out.append(f"{s}: {metric(tables[0][s]['mean'])} (one figure per file).")
    out += rank_graph_command(rec)
    return out


def rank_graph_command(rec: dict) -> list[str]:
    out = []
    if "rank_graph_command" in rec:
        timed = rec["rank_graph_command"]
        if not timed:
            out.append("`xlarank rank-graph` as a command: not timed in this run (see "
                       "[rank-graph as a command](#rank-graph-as-a-command)).")
        else:
            budget = timed.get("budget")
            verdict = ("" if budget is None else f" (budget {num(budget)} s: "
                       + ("within" if timed["best"] <= budget else "NOT within") + ")")
            out.append(f"`xlarank rank-graph` as a command, {timed['measured']} configs "
                       f"measured, on `{where(timed['file'])}`: best {num(timed['best'], 3)} s "
                       f"of {len(timed['seconds'])} fresh processes"
                       f" ({', '.join(num(x, 3) for x in timed['seconds'])} s){verdict}; "
                       f"load average {num(timed.get('load_average'), 3)} at the time.")
            if "before_best" in timed:
                out.append(f"The same command from the sources of `{timed['before']}` "
                           f"(commit {timed['before_commit'][:12]}), alternated run by run: "
                           f"best {num(timed['before_best'], 3)} s "
                           f"({', '.join(num(x, 3) for x in timed['before_seconds'])} s), so "
                           f"this commit takes {num(timed['after_over_before'], 3)}x as long "
                           "on this machine.")
    return out


def ablation(rec: dict) -> list[str]:
    rows = rec["results"]
    columns = ["random", *[k for k in union(rows, None)
                           if k == "all features" or k.startswith("without ")]]
    out = [f"Cross-graph, data: {data(rec['data'])}, validation split, one fit per cell (the "
           "record has no spread over seeds); the collection's headline metric.",
           table(["collection", "metric", *columns],
                 [[r["collection"], r["metric"], *[metric(r.get(c)) for c in columns]]
                  for r in rows])]
    real = rec.get("real")
    if real:
        out.append(f"In-graph, `{where(real['file'])}`: {real['data']}; {real['metric']}, "
                   "mean ± sd over seeds.")
        out.append(table(["system", real["metric"]],
                         [[k, pm(v)] for k, v in real["systems"].items()]))
    return out


def _part_provenance(rec: dict, key: str) -> dict | None:
    """The provenance of one part of engines.json: its own (an --only run), else the file's
    unless an --only run wrote the file's, then the full run's that it kept."""
    part, top = rec.get(key), rec.get("provenance")
    if isinstance(part, dict) and part.get("provenance"):
        return part["provenance"]
    if top and "--only" not in top.get("command", ""):
        return top
    return rec.get("full_run_provenance")


def engines(rec: dict) -> list[str]:
    out = []
    top = rec.get("provenance")

    def own(key: str) -> list[str] | None:
        prov = _part_provenance(rec, key)
        if prov is None:
            out.append("Not shown: this part has no provenance of its own.")
            return None
        return [] if prov == top else ["This part was rerun on its own:\n\n"
                                       + "\n".join(provenance_lines(prov))]

    if "results" in rec:
        out.append("### Featurize throughput")
        if (lines := own("results")) is not None:
            out.extend(lines)
            out.append(f"Data: {data(rec.get('data', '–'))}.")
            out.append(table(["engine", "files", "seconds", "files/s"],
                             [[k, num(v["files"]), num(v["seconds"]), num(v["files_per_second"])]
                              for k, v in rec["results"].items()]))
            out.append(f"Frames byte-identical across engines: "
                       f"{num(rec.get('frames_identical'))}.")
    if "trainings" in rec:
        out.append("### Concurrent trainings")
        t = rec["trainings"]
        if (lines := own("trainings")) is not None:
            out.extend(lines)
            rows = [["one alone (median)", num(t["alone_seconds"]), "", ""]]
            rows += [[f"slower of two {k} (median)", num(t[k]["seconds"]), num(t[k]["ratio"]),
                      limit(t[k].get("limit", t.get("limit")), t[k].get("within_limit"))]
                     for k in ("side by side", "side by side under make -j2") if k in t]
            out.append(f"`xlarank train` on `{t['frame']}`, {t.get('cores', '–')} cores.")
            out.append(table(["run", "seconds", "ratio to alone", "target"], rows))
    if "busy machine" in rec:
        out.append("### Busy machine")
        b = rec["busy machine"]
        if (lines := own("busy machine")) is not None:
            out.extend(lines)
            load = b.get("background_load_cores_before_after") or []
            out.append(f"`xlarank train` on `{b['frame']}` beside {b['neighbour']}; "
                       f"{len(b['beside_seconds'])} runs beside, {len(b['alone_seconds'])} "
                       "alone; other programs' load before and after: "
                       f"{', '.join(num(x, 3) for x in load) or '–'} cores.")
            rows = [["median alone, with the back-off", num(b["alone_median"]), ""],
                    ["median alone, without the back-off (XLARANK_LOAD_BACKOFF=0)",
                     num(b.get("alone_without_backoff_median")), ""],
                    ["median beside, with the back-off", num(b["beside_median"]), ""],
                    ["slowest beside, with the back-off", num(max(b["beside_seconds"])),
                     f"{num(b['slowest_over_alone_median'])}x the median alone; "
                     + limit(b.get("limit"), b.get("within_limit"))]]
            out.append(table(["run", "seconds", "target"], rows))
            out.append(f"Cost of the back-off alone: {num(b.get('backoff_cost_alone'))}x "
                       "(median with / without).")
    return out


# The config-aggregates peer has one name on the page, whatever an older bench called it.
PEER = "peer: config aggregates (XGBoost pairwise)"
PEER_ALIASES = {"peer: config aggregates, XGBoost pairwise": PEER}


def peer_name(name: str) -> str:
    return PEER_ALIASES.get(name, name)


def quality(rec: dict) -> list[str]:
    syn = rec["synthetic"]
    gen = syn.get("generator") or {}
    rows = syn["results"]
    systems = union([r["systems"] for r in rows], None)
    made = f" (preset `{gen['preset']}`, seed {gen['seed']})" if "preset" in gen else ""
    out = [f"Cross-graph, data: {data(syn['data'])}{made}"
           + f"; {syn['seeds']} seeds; mean ± sd (layout Kendall tau, tile 1 - slowdown@5).",
           table(["system", *[f"{r['collection']} ({r['metric']})" for r in rows]],
                 [[peer_name(s), *[pm(r["systems"].get(s)) for r in rows]]
                  for s in systems])]
    u = rec.get("unet3d")
    if u:
        n_seeds = len(next(iter(u["systems"].values())).get("per_seed", []))
        out.append(f"In-graph, `{where(u['file'])}`: {u['data']}, trained on "
                   f"{u['train_configs']} of its {u['distinct_configs']} distinct configs, "
                   f"scored on the other {u['eval_configs']}; {u['metric']}, {n_seeds} seeds.")
        out.append(table(["system", "mean ± sd (worst)", "train s"],
                         [[peer_name(k), pm(v, "min"), num(v.get("train_seconds"))]
                          for k, v in u["systems"].items()]))
    targets = syn.get("targets") or []
    if targets:
        out.append("Targets (synthetic, on the means): the default beats the config-aggregates "
                   "peer by the margin needed, and the ensemble is not worse than the best "
                   "single ranker.")
        out.append(table(["collection", "default - peer", "needed", "target",
                          "best single (mean)", "ensemble", "target"],
                         [[t["collection"], metric(t["default_minus_peer"]), num(t["needed"]),
                           yes_no(t["default_beats_peer"]),
                           f"{t['best_single']} ({metric(t['best_single_mean'])})",
                           metric(t["ensemble_mean"]), yes_no(t["ensemble_not_worse"])]
                          for t in targets]))
    return out


def systems(rec: dict) -> list[str]:
    out = []
    syn = rec.get("synthetic")
    if syn:
        rows = syn["results"]
        colls, names = union(rows, "collection"), union(rows, "system")
        cell = {(r["system"], r["collection"]): r for r in rows}
        out.append(f"Cross-graph, data: {data(syn['data'])}; {syn['seeds']} seeds; mean ± sd "
                   "(layout Kendall tau, tile 1 - slowdown@5).")
        out.append(table(["system", *colls],
                         [[s, *[pm(cell[s, c]["metric"]) if (s, c) in cell else "–"
                                for c in colls]] for s in names]))
        tile = [c for c in colls if c.startswith("tile")
                and any("median" in cell[s, c] for s in names if (s, c) in cell)]
        if tile:
            out.append("Tile per kernel (a few very slow kernels decide the mean): the median "
                       "over kernels of 1 - slowdown@5 and the share of kernels with a config "
                       "within 5% of the best in the top five, mean ± sd over seeds.")
            out.append(table(["system", *[f"{c} median" for c in tile],
                              *[f"{c} within 5%" for c in tile]],
                             [[s, *[pm(cell[s, c]["median"]) if (s, c) in cell else "–"
                                    for c in tile],
                               *[pm(cell[s, c]["within_5pct"]) if (s, c) in cell else "–"
                                 for c in tile]] for s in names]))
        out.append("Costs per collection: train s (mean over seeds) / peak RSS MB of the "
                   "training process / ms to score 1,000 configs.")
        out.append(table(["system", *colls],
                         [[s, *["/".join(num(cell[s, c][k], 3) for k in
                                         ("train_s", "peak_rss_mb", "score_ms_per_1000"))
                                if (s, c) in cell else "–" for c in colls]] for s in names]))
        settings = []
        for s in names:
            by = {}
            for r in rows:
                if r["system"] == s and r.get("settings"):
                    by.setdefault(json.dumps(r["settings"], sort_keys=True), []).append(
                        r["collection"])
            settings += [f"{s}" + ("" if len(c) == len(colls) else f" on {', '.join(c)}")
                         + f" `{k}`" for k, c in by.items()]
        if settings:
            out.append("Settings: " + "; ".join(settings) + ".")
    ing = rec.get("ingraph")
    if ing:
        rows = ing["results"]
        shares, names = union(rows, "share"), union(rows, "system")
        cell = {(r["system"], r["share"]): r for r in rows}
        seeds = (f"seeds {', '.join(map(str, ing['seed_list']))}" if ing.get("seed_list")
                 else f"{ing['seeds']} seeds")
        out.append(f"In-graph, data: {data(ing['data'])}; {seeds}; Kendall tau on the "
                   "held-out distinct configs, mean ± sd (worst seed), and seconds per fit.")
        if any(r["system"] == "tpugraphs-gnn" and "chosen" not in r for r in rows):
            out.append("Here tpugraphs-gnn trained 20 in-graph steps at Adam 1e-3, the "
                       "default before its in-graph recipe; the recipe's figures are in "
                       "[their own section](#published-systems-in-graph-with-tpugraphs-gnns-"
                       "recipe-and-epoch-costs).")
        out.append(table(["system", *[f"{s:.0%} measured" for s in shares], "s at 50%"],
                         [[s, *[pm(cell[s, h]["tau"], "min") if (s, h) in cell else "–"
                                for h in shares],
                           num(cell[s, 0.5]["seconds"], 3) if (s, 0.5) in cell else "–"]
                          for s in names]))
        curve = Path(str(rec.get("ingraph_curve") or "")).name
        if curve:
            out.append(f"![held-out tau at each checkpoint against training seconds]"
                       f"(../bench/published/{curve})")
        if any("plateau_s" in r for r in rows):
            out.append("Training time per fit, mean over seeds: wall s / CPU s of the whole "
                       "fit / CPU s until the held-out tau first came within 0.01 of the "
                       "returned model's (its own plateau; the search included). One core "
                       "per fit; CPU seconds are what a busy machine does not stretch.")
            out.append(table(["system", *[f"{s:.0%} measured" for s in shares]],
                             [[s, *["/".join(num(cell[s, h].get(k), 3) for k in
                                             ("train_s", "train_cpu_s", "plateau_cpu_s"))
                                    if (s, h) in cell else "–" for h in shares]]
                              for s in names]))
    cross = rec.get("cross")
    if cross:
        out += cross_graph(cross, rec.get("cross_curve"))
    scale = rec.get("scale")
    if scale:
        marginal = any("marginal_epoch_s" in r for r in scale["results"])
        if marginal:
            out.append(f"Scale, data: {data(scale['data'])}; per GNN system one fit of a few "
                       "epochs timed epoch by epoch in CPU seconds: the sample's first epoch "
                       "(one-off costs included) and marginal epoch, the marginal scaled to "
                       "the whole train "
                       "split, and the system's own epochs at that cost (tpugraphs-gnn's "
                       "official versions; competition-gnn's training scripts, tile's "
                       "100,000 steps at one kernel a step; gru's and the hybrid's defaults; "
                       "the one-off costs aside: the sample's first epoch less its marginal "
                       "one; early stopping may end sooner).")
            out.append(table(["collection", "system", "sample / train files",
                              "sample first / marginal epoch CPU s", "train-split epoch s",
                              "projected h (the system's epochs)", "peak RSS MB"],
                             [[r["collection"], r["system"],
                               f"{r['sample_files']} / {r['train_files']}",
                               f"{num(r['cpu_first_epoch_s'])} / "
                               f"{num(r['cpu_marginal_epoch_s'], 3)}",
                               num(r["epoch_s"]),
                               ", ".join(f"{h} ({v}: {r['official_epochs'][v]})"
                                         for v, h in r["projected_h"].items()),
                               num(r["peak_rss_mb"])] for r in scale["results"]]))
        else:
            out.append(f"Scale, data: {data(scale['data'])}; one epoch per GNN system, and "
                       "the official epochs projected (an upper bound: early stopping may "
                       "end sooner). This one-epoch time is mostly one-off cost "
                       "(statistics, loading, compiling), so the projection overstates the "
                       "epochs' cost; the marginal epoch is measured in [its own section]"
                       "(#published-systems-every-gnn-systems-epoch-cost).")
            out.append(table(["collection", "system", "sample / train files", "epoch s",
                              "official epochs", "projected h", "peak RSS MB"],
                             [[r["collection"], r["system"],
                               f"{r['sample_files']} / {r['train_files']}",
                               num(r["epoch_s"]), num(r["official_epochs"]),
                               num(r["projected_h"]), num(r["peak_rss_mb"])]
                              for r in scale["results"]]))
    return out


def cross_graph(cross: dict, figure: str | None) -> list[str]:
    """The curves part of the systems bench: the cross-graph rule's figures and times."""
    rows = cross["results"]
    colls, names = union(rows, "collection"), union(rows, "system")
    cell = {(r["system"], r["collection"]): r for r in rows}
    seeds = ", ".join(map(str, cross["seed_list"]))
    budget = ", ".join(f"{k} {v}" for k, v in cross["epochs"].items())
    out = [f"Cross-graph by the rule, data: {data(cross['data'])}; seeds {seeds}; every "
           f"stepped system trains on the train split less a seeded {cross['inner_share']:.0%}"
           f" of its files (at most {cross['most_graphs']}), held out as inner validation, "
           f"for an epoch budget ({budget}); after each epoch the headline (layout Kendall "
           "tau, tile 1 - slowdown@5) on the inner files decides, by the in-graph rule's "
           "patience and min gain, where it stops and which epoch it keeps; the held-out "
           f"valid files (at most {cross['most_graphs']}, the same for every system) are "
           "scored at each epoch for the report only. xlarank and random train once on the "
           "whole train split. Held-out headline of the kept epoch, mean ± sd over seeds "
           "(worst seed):"]
    out.append(table(["system", *colls],
                     [[s, *[pm(cell[s, c]["metric"], "min") if (s, c) in cell else "–"
                            for c in colls]] for s in names]))
    missing = {}
    for collection, system, seed in cross.get("not_run", []):
        missing.setdefault((system, collection), []).append(str(seed))
    if missing:
        out.append("Not run (a dash above, or fewer seeds): " + "; ".join(
            f"{s} on {c}, seed {', '.join(lacking)}" for (s, c), lacking in missing.items())
            + ".")
    if figure:
        out.append(f"![held-out headline at each epoch against training seconds]"
                   f"(../bench/published/{Path(str(figure)).name})")
    out.append("Per stepped system: the epoch kept / stopped at (seed by seed), the best "
               "held-out headline of any epoch in the budget and of the last one (a curve "
               "still rising at its end says the budget cut it), CPU s to the stop, CPU s "
               "until the held-out headline first came within 0.01 of the kept epoch's (its "
               "own plateau), and how many times xlarank's one fit that is, where xlarank's "
               "figure reaches that plateau (less 0.01; – where it does not), and the peak "
               "RSS of the process that trained it (MB, the largest over seeds). One core per "
               "fit.")
    stepped = [r for r in rows if r.get("curves")]
    out.append(table(["collection", "system", "kept / stopped epoch", "best / last in budget",
                      "CPU s to stop", "CPU s to plateau", "x xlarank's fit",
                      "peak RSS MB"],
                     [[r["collection"], r["system"],
                       ", ".join(f"{p['kept_epoch']}/{p['stopped_epoch']}"
                                 for p in r["per_seed"]),
                       ", ".join(f"{metric(p['best_held_in_budget'])}/"
                                 f"{metric(p['last_held'])}" for p in r["per_seed"]),
                       num(r["train_cpu_s"], 3), num(r["plateau_cpu_s"], 3),
                       num(r.get("plateau_ratio"), 3), num(r["peak_rss_mb"], 3)]
                      for r in stepped]))
    ours = [r for r in rows if r["system"] == "xlarank"]
    if ours:
        out.append("xlarank's one fit, CPU s / peak RSS MB: " + "; ".join(
            f"{r['collection']} {num(r['train_cpu_s'], 3)} / {num(r['peak_rss_mb'], 3)}"
            for r in ours) + ".")
    return out


def seeds_named(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def cross_counts(rec: dict) -> list[str]:
    """The counts part: each system's held-out headline at the demo's train-file count and
    at the larger one, then the larger run's curves and times as `cross_graph` gives them."""
    counts = rec["counts"]
    rows, demo = counts["results"], counts.get("demo_results") or []
    colls, names = union(rows, "collection"), union(rows, "system")
    ours = {(r["system"], r["collection"]): r for r in rows}
    theirs = {(r["system"], r["collection"]): r for r in demo}

    def moved(key) -> str:
        if key not in ours:
            return "–"
        now = ours[key]["metric"]["mean"]
        fewer = ("" if ours[key]["seeds"] == counts["seed_list"] else
                 f" ({seeds_named(ours[key]['seeds'])})")
        if key not in theirs:
            return metric(now) + fewer
        was = theirs[key]["metric"]["mean"]
        if theirs[key]["seeds"] != ours[key]["seeds"]:
            fewer += f" (demo: {seeds_named(theirs[key]['seeds'])})"
        # Rounded first, so a change under 0.0005 reads +0.000, not -0.000.
        return f"{metric(was)} → {metric(now)} ({round(now - was, 3) + 0.0:+.3f}){fewer}"

    out = [f"Held-out headline of the kept epoch (mean over seeds "
           f"{', '.join(map(str, counts['seed_list']))}), at the demo's train files → at the "
           "larger count (change):",
           table(["system", *[f"{c} ({counts['demo_train_files'][c]} → "
                              f"{counts['train_files'][c]} files)" for c in colls]],
                 [[s, *[moved((s, c)) for c in colls]] for s in names])]
    return out + cross_graph(counts, rec.get("counts_curve"))


def tile_kernels(rec: dict) -> list[str]:
    kernels = rec["kernels"]
    out = [f"Data: {data(rec['data'])}; {rec['seeds']} seeds, {rec['threads']} "
           f"thread{'s' if rec['threads'] != 1 else ''} per fit. "
           f"{len(kernels)} kernels, {sum(k['configs'] for k in kernels)} configs "
           f"({', '.join(str(k['configs']) for k in kernels)}); the slowest config is "
           f"{num(max(k['max_over_default'] for k in kernels), 3)}x its kernel's default. "
           "In-kernel cells: mean ± sd over seeds of the mean tau over kernels (worst seed); "
           "leave-one-kernel-out: 1 - slowdown@5 mean ± sd over seeds, over kernels with more "
           "than 5 configs and over all, the median and the share of (kernel, seed) within 5% "
           "of the best, over all kernels; then 1 - slowdown@1; then seconds for both "
           "protocols and peak RSS."]
    rows = []
    for name, r in rec["systems"].items():
        loko = r["loko"]
        rows.append([name, pm(r["in_kernel_tau"], "min"), pm(loko["kernels_over_5_configs"]),
                     pm(loko["all_kernels"]), metric(loko["median"]),
                     f"{100 * loko['share_within_5pct']:.0f}%", pm(loko["one_minus_slowdown_at_1"]),
                     num(r["in_kernel_s"] + r["loko_s"], 3), num(r["peak_rss_mb"])])
    out.append(table(["system", "in-kernel tau", "LOKO >5 configs", "LOKO all", "median",
                      "within 5%", "LOKO 1 - slowdown@1", "s", "peak RSS MB"], rows))
    settings = [f"{n} `{json.dumps(r['settings'], sort_keys=True)}`"
                for n, r in rec["systems"].items() if r.get("settings")]
    costs = {n: r["in_kernel_costs"] for n, r in rec["systems"].items()
             if "in_kernel_costs" in r}
    if settings and not costs:
        out.append("Settings (those of the systems bench's synthetic tile row): "
                   + "; ".join(settings) + ".")
    if costs:
        out.append("Leave-one-kernel-out trains each stepped system by the cross-graph rule "
                   "(bench/systems.py: 3 of the 14 other kernels held out as inner "
                   "validation, the epoch kept and the stop by the in-graph rule's patience "
                   "and min gain) within an epoch budget: "
                   + "; ".join(settings) + ".")
        ours = costs.get("xlarank", {}).get("cpu_s")
        out.append("In-kernel training cost, mean over seeds of the sum over kernels: CPU s "
                   "of the whole fits (xlarank's graph-local booster: fit and scoring), CPU s "
                   "until each kernel's held-out tau first came within 0.01 of its returned "
                   "model's (its own plateau), and that as a multiple of xlarank's whole "
                   "fits; leave-one-kernel-out: the epoch kept / stopped at, median over "
                   "(kernel, seed).")
        rows = []
        for name, c in costs.items():
            loko = [k for run in [rec["systems"][name]["loko_per_kernel_seed0"]]
                    for k in run.values() if "kept_epoch" in k]
            epochs = (f"{statistics.median(k['kept_epoch'] for k in loko):g} / "
                      f"{statistics.median(k['stopped_epoch'] for k in loko):g}"
                      if loko else "–")
            rows.append([name, num(c["cpu_s"], 3), num(c["plateau_cpu_s"], 3),
                         num(c["plateau_cpu_s"] / ours, 3) if ours else "–", epochs])
        out.append(table(["system", "in-kernel CPU s", "CPU s to plateau", "x xlarank's",
                          "LOKO kept / stopped epoch (seed 0, median)"], rows))
    figure = Path(str(rec.get("kernel_curve") or "")).name
    if figure:
        out.append(f"![held-out tau at each checkpoint against training seconds]"
                   f"(../bench/published/{figure})")
    return out


AUTOTUNE_TUNER = "tuner"
AUTOTUNE_RANDOM = "random search (exact)"


def short_name(label: str) -> str:
    """A file's name alone (a graph imported from a record: the graph's)."""
    return Path(label.split(": ")[-1]).stem


def reach(row: dict | None, key: str, budget: int) -> str:
    """A count of measurements from row[key]: ">B" where most seeds did not get there
    within the budget B; "–" where the strategy has no row."""
    if row is None:
        return "–"
    return f">{budget}" if row.get(key) is None else num(row[key])


def noise_cell(f: dict) -> str:
    if f.get("noise_ns") is None:
        return "unknown (no config measured twice)"
    return f"{num(f['noise_ns'], 3)} ns ({num(f['noise_relative'], 2)})"


def top1_cell(f: dict) -> str:
    verdict = "clear of the noise" if f.get("top1_clear_of_noise") else "within noise"
    return f"{num(f['top1_spread_ns'], 3)} ns ({num(f['top1_spread_relative'], 2)}): {verdict}"


def autotune_file(f: dict, batches: list[str]) -> list[str]:
    """One replayed file of the autotune record: its line and its table, one row per strategy."""
    keep_top1 = bool(f.get("top1_clear_of_noise", True))
    head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
            f"{f['distinct_configs']} distinct configs, budget {f['budget']}, "
            f"{f.get('within_noise_configs', '–')} within the noise, top 1% = "
            f"{f['top1_configs']} configs"
            + ("" if keep_top1 else " (within noise: its column left out)")
            + "".join(f"; {n}" for n in f.get("notes", [])) + ".")
    tables = [f["results"][b] for b in batches if b in f["results"]]
    here = [b for b in batches if b in f["results"]]
    random_noise = [(t.get(AUTOTUNE_RANDOM) or {}).get("to_noise_median") for t in tables]
    shares = union([(t.get(AUTOTUNE_TUNER) or next(iter(t.values())))["regret"]
                    for t in tables], None)

    def cells(s, key, bold=False):
        values = []
        for t, expected in zip(tables, random_noise):
            text = reach(t.get(s), key, f["budget"])
            got = (t.get(s) or {}).get(key)
            if (bold and s != AUTOTUNE_RANDOM and got is not None and expected
                    and got <= expected / 3):
                text = f"**{text}**"
            values.append(text)
        return " / ".join(values)

    def regret(s, share):
        return " / ".join("–" if t.get(s) is None else num(t[s]["regret"].get(share), 2)
                          for t in tables)

    header = ["strategy", f"within noise ({' / '.join(here)})",
              *([f"top 1% ({' / '.join(here)})"] if keep_top1 else []),
              f"best ({' / '.join(here)})",
              *[f"regret @{num(100 * float(s))}%" for s in shares]]
    body = [[s, cells(s, "to_noise_median", bold=True),
             *([cells(s, "to_top1_median")] if keep_top1 else []),
             cells(s, "to_best_median"), *[regret(s, share) for share in shares]]
            for s in union(tables, None)]
    return [head, table(header, body)]


def autotune(rec: dict) -> list[str]:
    if not any("noise_ns" in f for f in rec["files"]):
        return _autotune_before_noise(rec)
    batches = [str(b) for b in rec["batches"]]
    per = " / ".join(batches)
    out = [f"Batches {', '.join(batches)}; budget {num(100 * rec['budget_share'])}% of the "
           f"distinct configs; {rec['seeds']} seeds; {rec.get('threads', '–')} thread(s). The "
           "target is a config within the repeat noise of the best (its median runtime at "
           "most the best's plus the noise); the noise: "
           f"{rec.get('noise_rule', '–')}. Plateau: the share of distinct configs within "
           f"{num(100 * rec.get('plateau_share', 0.005))}% of the best."]
    rows = []
    for f in rec["files"]:
        rows.append([f"`{short_name(f['file'])}`", f.get("data", "–"), f["collection"],
                     f"{f['distinct_configs']} of {f['configs']}",
                     f"{f['budget']}" if "budget" in f else f"left out: {f.get('left_out', '–')}",
                     f"{num(f['runtime_spread'], 3)}x", f"{100 * f['plateau']:.1f}%",
                     noise_cell(f), num(f.get("repeated_configs")),
                     num(f.get("repeat_tau"), 2), num(f.get("within_noise_configs")),
                     top1_cell(f)])
    out.append("What makes each file hard: distinct configs (of all measured), budget, "
               "runtime spread (slowest / fastest distinct median), plateau, repeat noise (ns, "
               "and relative to the best), configs measured twice or more, the Kendall tau "
               "between their two measurements, distinct configs within the noise of the "
               "best, and the top 1%'s spread (its threshold minus the best).")
    out.append(table(["file", "data", "collection", "distinct configs", "budget", "spread",
                      "plateau", "repeat noise", "repeated", "repeat tau", "within noise",
                      "top-1% spread"], rows))
    replayed = [f for f in rec["files"] if "results" in f]
    verdicts = []
    for f in replayed:
        for b in batches:
            t = f["results"].get(b)
            if t is None:
                continue
            v = (f.get("tuner_to_noise_vs_random") or {}).get(b) or {}
            tuner, random = t.get(AUTOTUNE_TUNER), t.get(AUTOTUNE_RANDOM)
            expected = v.get("random_expected", (random or {}).get("to_noise_median"))
            got = v.get("tuner", (tuner or {}).get("to_noise_median"))
            ranked = sorted(((r["to_noise_median"], s) for s, r in t.items()
                             if s != AUTOTUNE_RANDOM and r.get("to_noise_median") is not None))
            lead = ", ".join(s for c, s in ranked if c == ranked[0][0]) if ranked else None
            verdicts.append([
                f"`{short_name(f['file'])}`", f["collection"], b,
                reach(tuner, "to_noise_median", f["budget"]), num(expected),
                "–" if got is None or not expected else f"{got / expected:.2f}",
                "yes" if v.get("within_a_third_of_random") else "**no**",
                f"{lead} ({num(ranked[0][0])})" if lead else f"none within {f['budget']}"])
    out.append("The tuner against random search: measurements until a config within the "
               "noise (the tuner: median over seeds; random: the exact expectation "
               "(N + 1) / (k + 1) for the k configs within the noise of N), and whether the "
               "tuner needs at most a third of random's; the fewest of any strategy beside.")
    out.append(table(["file", "collection", "batch", "tuner", "random (exact)",
                      "tuner / random", "within a third of random", "fewest (strategy)"],
                     verdicts))
    for f in replayed:
        out += autotune_file(f, batches)
    out.append(f"Cells are per batch size ({per}): median measurements over seeds (\">B\": "
               "most seeds did not get there within the budget B; random search: the exact "
               "expectation); bold: at most a third of random search's expectation. Regret: "
               "best runtime measured so far / the pool's best - 1 at that share of the "
               "distinct configs, mean over seeds (random: exact).")
    within = rec.get("top1_within_noise")
    if within is not None:
        out.append("Files whose top 1% is within the noise (the top-1% column not kept): "
                   + (", ".join(f"`{where(w)}`" for w in within) or "none") + ".")
    if rec.get("synthetic_noise"):
        out.append(f"Synthetic noise: {rec['synthetic_noise']}.")
    return out


def _autotune_before_noise(rec: dict) -> list[str]:
    out = [f"Batches {', '.join(map(str, rec['batches']))}; budget "
           f"{num(100 * rec['budget_share'])}% of the distinct configs; {rec['seeds']} seeds; "
           "cells: median measurements until one of the top 1% (\">B\": most seeds did not "
           "get there within the budget B); random search: the exact expectation."]
    for f in rec["files"]:
        head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
                f"{f['distinct_configs']} distinct configs")
        if "results" not in f:
            out.append(f"{head}; left out: {f.get('left_out', '–')}.")
            continue
        out.append(f"{head}, budget {f['budget']}, top 1% = {f['top1_configs']} configs"
                   + "".join(f"; {n}" for n in f.get("notes", [])) + ":")
        batches = list(f["results"])
        tables = list(f["results"].values())

        def reach(row, key, budget=f["budget"]):
            if row is None:
                return "–"
            return f">{budget}" if row.get(key) is None else num(row[key])

        out.append(table(["strategy", *[f"top 1%, batch {b}" for b in batches],
                          *[f"best, batch {b}" for b in batches]],
                         [[s, *[reach(t.get(s), "to_top1_median") for t in tables],
                           *[reach(t.get(s), "to_best_median") for t in tables]]
                          for s in union(tables, None)]))
    return out


def featurize_full(rec: dict) -> list[str]:
    runs, best = rec["runs"], rec["best_seconds"]
    rows = [["this commit", ", ".join(num(r["seconds"]) for r in runs["after"]),
             num(best["after"]), num(rec["peak_rss_gb"]["after"])],
            [f"`{rec['before']}` (`{rec['before_commit'][:12]}`)",
             ", ".join(num(r["seconds"]) for r in runs["before"]), num(best["before"]),
             num(rec["peak_rss_gb"]["before"])]]
    return [f"Data: `{rec['data']}`, one file in {rec['share']} of each collection and split "
            f"of the `{rec['preset']}` preset: {rec['files']} files, {num(rec['npz_gb'])} GB "
            f"of npz; {rec.get('workers', '–')} workers, {rec.get('cores', '–')} cores.",
            table(["sources", "seconds per run", "best s", "peak RSS GB"], rows),
            f"This commit over the earlier one: {num(rec['after_over_before'])}x "
            f"(target: at most 0.5). Frames byte-identical between the two: "
            f"{'yes' if rec['frames_identical'] else 'no'} ({rec['frames']} frames; the "
            "earlier commit's feature spec and frame metadata differ where they changed "
            "since)."]


def full(rec: dict) -> list[str]:
    steps = rec["steps"]
    out = [f"Data: `{rec['data']}`, preset `{rec['preset']}` "
           f"({'synthetic' if rec.get('synthetic') else 'real'}), {rec.get('cores', '–')} "
           "cores.",
           table(["step", "seconds", "peak RSS GB"],
                 [[k, num(v["seconds"]), num(v["peak_rss_gb"])] for k, v in steps.items()]),
           table(["", "measured", "target"],
                 [["total minutes (synth not counted)", num(rec["total_minutes"]),
                   f"< {num(rec['total_target_minutes'])}"],
                  ["peak RSS GB", num(rec["peak_rss_gb"]), f"< {num(rec['rss_target_gb'])}"]]),
           f"Within both targets: {num(rec.get('within_targets'))}."]
    return out


def corpus(rec: dict) -> list[str]:
    """The measured corpus: noise per program, in-graph, leave-one-family-out, CPU to TPU."""
    noise = rec["noise"]
    out = [f"{len(noise)} programs in {len(rec['families'])} families "
           f"({', '.join(rec['families'])}); {len(rec['left_out'])} left out for noise. "
           f"xlarank's settings frozen at `{rec['freeze']}`; a first look. Every tau below is "
           "a Kendall tau; mean ± sd (worst) over every program and seed."]
    plot = Path(str(rec.get("noise_plot") or "")).name
    if plot:
        out.append(f"![each program's runtime spread and noise ceiling]"
                   f"(../bench/published/{plot})")
    out.append(table(["program", "family", "ms (fastest-slowest)", "spread", "repeat tau",
                      "within noise of the best"],
                     [[f"`{name}`", p["family"],
                       f"{p['runtime_ms'][0]:.2f}-{p['runtime_ms'][1]:.2f}",
                       f"{p['spread']:.2f}x", metric(p["repeat_tau"]),
                       f"{100 * p['within_noise']:.0f}%"] for name, p in noise.items()]))
    if rec["left_out"]:
        out.append("Left out for noise (repeat tau under the corpus's 0.4 after up to 8 "
                   "rounds):")
        out.append(table(["program", "family", "rounds", "spread", "repeat tau"],
                         [[f"`{p['name']}`", p["family"], str(p["rounds"]),
                           f"{p['spread']:.2f}x", metric(p["repeat_tau"])]
                          for p in rec["left_out"]]))
    if rec.get("not_measured"):
        out.append(f"Listed in corpus/programs.toml but not measured yet (`make corpus` "
                   f"measures them): {', '.join(f'`{n}`' for n in rec['not_measured'])}.")
    ingraph = rec.get("ingraph")
    if ingraph:
        shares = list(ingraph["overall"])
        systems = [s for s in next(iter(ingraph["overall"].values()))
                   if s != "peer_beats_pipeline_programs"]
        out.append("**In-graph**: a share of each program's distinct configs measured, the "
                   "rest ranked; over programs and seeds (the mean of program means beside "
                   "it).")
        out.append(table(["system", *[f"{float(h):.0%} measured" for h in shares],
                          *[f"program means, {float(h):.0%}" for h in shares]],
                         [[s, *[pm(ingraph["overall"][h][s], "worst") for h in shares],
                           *[pm(ingraph["overall"][h][s]["program_means"], "worst")
                             for h in shares]] for s in systems]))
        out.append("Programs where the raw-columns peer beats the default pipeline "
                   "in-graph: " + ", ".join(
                       f"{ingraph['overall'][h]['peer_beats_pipeline_programs']} of "
                       f"{len(ingraph['per_program'])} at {float(h):.0%}" for h in shares)
                   + ".")
        out.append(table(["program", *[f"{s.split(':')[0]} {float(h):.0%}"
                                       for s in systems[:3] for h in shares]],
                         [[f"`{name}`", *[metric(p["results"][h][s]["mean"])
                                          for s in systems[:3] for h in shares]]
                          for name, p in ingraph["per_program"].items()]))
    tpu = rec.get("tpu")
    if tpu:
        out.append(f"**CPU to TPU**: xlarank's default pipeline trained on the "
                   f"{tpu['trained_on']} corpus programs (imported as layout:xla:default), "
                   f"scored on the real TpuGraphs graph `{tpu['graph']}`: tau "
                   + ", ".join(metric(v) for v in tpu["unet3d"])
                   + f" on seeds {', '.join(map(str, tpu['seeds']))}; random order "
                   + ", ".join(metric(v) for v in tpu["random"]) + ".")
    return out


def corpus_cross(rec: dict) -> list[str]:
    """The measured corpus, one family left out: per system over programs and seeds, per
    family."""
    cross = rec["cross"]
    systems = list(cross["overall"])
    seeds = cross["seeds"]
    families = sorted({f["family"] for f in cross["folds"]})
    fold: dict = {}
    for f in cross["folds"]:
        fold.setdefault((f["family"], f["system"]), []).append(f["mean"])
    made = "; ".join(f"`{m['commit']}` on {m['date']} ({m['cores']}-core {m['cpu']})"
                     for m in cross["rows_made"])
    out = [f"Kendall tau on the held family's programs, mean ± sd (worst) over "
           f"{len(cross['per_program'])} programs × {len(seeds)} seeds "
           f"({', '.join(map(str, seeds))}); the mean over seeds of each program beside it; "
           f"then each seed's mean over programs, and per family the mean over seeds. Rows "
           f"made at {made}.",
           table(["system", "over programs and seeds", "program means", "per seed",
                  *families],
                 [[s, pm(cross["overall"][s], "worst"),
                   pm(cross["overall"][s]["program_means"], "worst"),
                   " / ".join(metric(v) for v in cross["overall"][s]["seed_means"]),
                   *[metric(statistics.fmean(fold[f, s])) if (f, s) in fold else "–"
                     for f in families]] for s in systems])]
    stepped = [f for f in cross["folds"] if f.get("kept_epoch") is not None]

    def of(system: str) -> list[dict]:
        return [f for f in stepped if f["system"] == system]

    if stepped:
        out.append("The stepped systems' epochs (kept / stopped by the rule, of a 30-epoch "
                   "budget) and training CPU seconds, median over folds:")
        out.append(table(["system", "kept epoch", "stopped epoch", "train CPU s"],
                         [[s, *[f"{statistics.median(row[k] for row in of(s)):.0f}"
                                for k in ("kept_epoch", "stopped_epoch", "train_cpu_s")]]
                          for s in systems if of(s)]))
    return out


def corpus_remeasure(rec: dict) -> list[str]:
    """The corpus measured again: per program, the tau with the stored runtimes beside the
    record's own repeat tau."""
    summary = rec["summary"]
    rows = rec["programs"]
    failed = [n for n, r in rows.items() if "error" in r]
    out = [f"{summary['programs']} programs, {rec['configs']} configs each, "
           f"{', '.join(map(str, summary['days_apart']))} calendar day(s) after their "
           f"records. Median tau with the stored runtimes "
           f"{metric(summary['tau_with_stored_median'])}, against a median repeat tau of "
           f"{metric(summary['stored_repeat_tau_same_configs_median'])} on the same configs "
           f"(median gap {metric(summary['gap_median'])}); "
           f"{summary['below_by_more_than_0.1']} program(s) agree worse than their record's "
           "repeat tau by more than 0.1."
           + (f" Failed: {', '.join(f'`{n}`' for n in failed)}." if failed else ""),
           table(["program", "family", "hours apart", "tau with stored",
                  "repeat tau, same configs", "repeat tau, all configs",
                  "repeat tau, new run", "load before"],
                 [[f"`{n}`", r["family"], f"{r['hours_apart']:.1f}",
                   metric(r["tau_with_stored"]), metric(r["stored_repeat_tau_same_configs"]),
                   metric(r["stored_repeat_tau"]), metric(r["repeat_tau"]),
                   f"{r['load_average']['before'][0]:.2f}"]
                  for n, r in rows.items() if "error" not in r])]
    return out


def corpus_autotune(rec: dict) -> list[str]:
    tune = rec["autotune"]
    budget = tune["budget"]
    # Records before the TPE peer and the top-5% target hold the tuner and random alone.
    names = [s for s in ("tuner", "random", "tpe") if s in tune]
    top5 = all(f"{s}_top5" in tune for s in names)

    def counts(values) -> str:
        return ", ".join(str(v) if v is not None else f">{budget}" for v in values)

    within, programs = tune["default_within_noise_programs"]
    out = [f"The compiler's own layouts (config 0, no constraint) lie within the noise of the "
           f"best in {within} of the corpus's {programs} programs: a strategy that measures "
           "them first is done at once, so the noise counts mostly say whether it does: in "
           f"those {within}, no drawn layout beats XLA:CPU's own choice by more than the "
           "noise. The tuner's counts repeat over seeds: its cold start follows its prior's "
           "order." + (" The top 5% of the stored runtimes is the stricter target."
                       if top5 else ""),
           table(["program", "family", "configs", "within noise", "default's rank"]
                 + [f"{s} (per seed)" for s in names]
                 + ([f"{s}, top 5%" for s in names] if top5 else []),
                 [[f"`{name}`", p["family"], str(p["configs"]), str(p["within_noise"]),
                   str(p["default_rank"] + 1) + (" (within noise)"
                                                 if p["default_within_noise"] else "")]
                  + [counts(p[s]) for s in names]
                  + ([counts(p[f"{s}_top5"]) for s in names] if top5 else [])
                  for name, p in tune["programs"].items()])]
    rows = [[s, "within noise", num(tune[s]["median"]),
             f"{tune[s]['reached']} of {tune[s]['runs']}"] for s in names]
    if top5:
        rows += [[s, "top 5%", num(tune[f"{s}_top5"]["median"]),
                  f"{tune[f'{s}_top5']['reached']} of {tune[f'{s}_top5']['runs']}"]
                 for s in names]
    out.append(table(["strategy", "target", f"median measurements (>{budget} as {budget + 1})",
                      "runs that reached it"], rows))
    return out


RENDERERS = {"setup": setup, "featurize": featurize, "score": score, "startup": startup,
             "ingraph": ingraph,
             "ingraph_noisy": ingraph, "ablation": ablation,
             "engines": engines, "quality": quality, "systems": systems,
             "systems_tile": systems, "systems_fair": systems,
             "systems_competition": systems, "systems_competition_low": systems,
             "systems_rule": systems, "systems_tpugraphs_rule": systems,
             "systems_cross": systems, "systems_counts": cross_counts,
             "systems_scale": systems,
             "tile_kernels": tile_kernels, "tile_kernels_rule": tile_kernels,
             "tile_kernels_curves": tile_kernels,
             "autotune": autotune, "autotune_noisy": autotune,
             "featurize_full": featurize_full, "full": full,
             "ingraph_timing": rank_graph_command, "corpus": corpus,
             "corpus_cross": corpus_cross, "corpus_remeasure": corpus_remeasure,
             "corpus_autotune": corpus_autotune}


# ---------------------------------------------------------------- page

def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def render(published: Path) -> str:
    """The page docs/benchmarks.md from the JSON records under `published` alone."""
    published = Path(published)
    records = {name: _load(published / f"{name}.json") for name in BENCHES}
    seconds = [r["provenance"]["seconds"] for name, r in records.items()
               if r and name != "full" and (r.get("provenance") or {}).get("seconds")]
    lines = [
        "# Benchmarks",
        "",
        "Every figure on this page comes from the JSON record of a bench run, kept in "
        "`bench/published/` (copied from `bench/results/` by `make bench-publish`, which runs "
        "`bench/publish.py` and renders this page from those copies alone). Each section names "
        "the date, commit, machine and command of its run. `make bench` reruns every bench but "
        "the full-size one"
        + (f" (the {len(seconds)} of its {len(BENCHES) - 1} runs published here took "
           f"{num(sum(seconds) / 60, 2)} minutes in all, not counting the demo models it "
           "trains first)" if seconds else "")
        + ". Wall times depend on the machine and on what else it was running (the load "
        "average at each run's end is given). Figures on synthetic `xlarank synth` data show "
        "learning under its own cost model and say nothing about TpuGraphs by themselves.",
        "",
        "This page is generated: change `bench/publish.py` or rerun a bench, never edit it.",
        "",
        "**Why one quantity has several figures.** \"xlarank on unet3d with half its configs "
        "measured\" is measured by several benches, each under its own protocol, and each "
        "figure is right for its protocol: In-graph ranking splits the distinct configs and "
        "runs `rank_graph` (its K-fold choice among the graph-local models); Quality trains "
        "the default cross-graph pipeline on half of all configs, copies included; the "
        "Published systems benches train every system by one in-graph rule on one thread, "
        "the same split for each; the corpus benches use programs timed here. They differ in "
        "which configs are held out, what is trained on them and over which seeds. The "
        "README quotes one figure per claim and links the section it comes from.",
    ]
    for bench in BENCHES.values():
        lines += ["", f"## {bench.title}", "", bench.about, ""]
        rec = records[bench.name]
        if rec is None:
            lines.append(f"Not published yet: run `{bench.command}` then `make bench-publish`.")
            continue
        problem = provenance_problem(bench.name, rec)
        if problem:
            lines.append(f"Not shown: `bench/published/{bench.name}.json` has {problem}.")
            continue
        lines += provenance_lines(rec.get("provenance") or {})
        dropped = rec.get("dropped_by_publish")
        if dropped:
            lines.append("- left out of the published copy: "
                         + ", ".join(f"`{k}`" for k in dropped)
                         + " (per-step arrays no table shows)")
        try:
            blocks = RENDERERS[bench.name](rec)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"{bench.name}.json: unexpected structure ({err!r})") from err
        for block in blocks:
            lines += ["", block]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- publishing

def provenance_problem(name: str, record) -> str | None:
    """Why a results record may not be published (None: it may)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if name != "engines":
        return None if record.get("provenance") else (
            "no provenance entry (written before bench/provenance.py, or not by write_record)")
    missing = [k for k in ENGINE_PARTS if k in record and _part_provenance(record, k) is None]
    if missing:
        return (f"no provenance for its part(s) {', '.join(missing)} (an --only run replaced "
                "the file's: rerun the whole bench)")
    return None if any(k in record for k in ENGINE_PARTS) else "none of its parts"


def _drop_bulky(value, dropped: set[str]):
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            if k in BULKY_KEYS:
                dropped.add(k)
            else:
                kept[k] = _drop_bulky(v, dropped)
        return kept
    if isinstance(value, list):
        return [_drop_bulky(v, dropped) for v in value]
    return value


def publish(results: Path, published: Path) -> list[str]:
    """Copy each stamped results record to `published` (trimmed when large); the messages."""
    said = []
    for name in BENCHES:
        source = results / f"{name}.json"
        if not source.exists():
            continue
        text = source.read_text()
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            said.append(f"skipped {_show(source)}: not valid JSON ({err})")
            continue
        problem = provenance_problem(name, record)
        if problem:
            said.append(f"skipped {_show(source)}: {problem}")
            continue
        note = ""
        if len(text.encode()) > MAX_BYTES:
            dropped: set[str] = set()
            record = _drop_bulky(record, dropped)
            if dropped:
                record["dropped_by_publish"] = sorted(dropped)
                text = json.dumps(record, indent=2) + "\n"
                note = f" (dropped {', '.join(sorted(dropped))}: {len(text.encode())} bytes)"
        write_text_atomic(published / source.name, text)
        said.append(f"published {_show(source)} -> {_show(published / source.name)}{note}")
        # The record's figure (a PNG the same run drew) goes beside it, for the page.
        for key in ("ingraph_curve", "cross_curve", "counts_curve", "kernel_curve",
                    "noise_plot"):
            drawn = results / Path(str(record.get(key) or "")).name
            if record.get(key) and drawn.is_file():
                (published / drawn.name).write_bytes(drawn.read_bytes())
                said.append(f"published {_show(drawn)} -> {_show(published / drawn.name)}")
    return said


def _show(path: Path) -> str:
    """`path` from the repository root when inside it, else whole."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _path(arg: str) -> Path:
    path = Path(arg).expanduser()
    return path if path.is_absolute() else ROOT / path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Relative paths are from the repository root.")
    parser.add_argument("--results", default="bench/results", help="the benches' records")
    parser.add_argument("--published", default="bench/published",
                        help="the published copies, which the page is rendered from")
    parser.add_argument("--out", default="docs/benchmarks.md", help="the page")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when "
                        "--out differs from the page rendered from --published")
    args = parser.parse_args(argv)
    published, out = _path(args.published), _path(args.out)
    if args.check:
        page = render(published)
        if not out.exists() or out.read_text() != page:
            print(f"{args.out} differs from the page rendered from {args.published}: "
                  "run `python bench/publish.py`")
            return 1
        print(f"{args.out} matches {args.published}")
        return 0
    for line in publish(_path(args.results), published):
        print(line)
    write_text_atomic(out, render(published))
    print(f"wrote {_show(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
