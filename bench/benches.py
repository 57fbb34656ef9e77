"""Every bench, declared once: its name (the record bench/results/<name>.json), the title of
its section of docs/benchmarks.md, the command that makes its record, what it measures,
the make target that runs it and the data it reads.

`bench/run.py` runs these commands (`make bench`, `make bench-setup`, `make bench-full`);
`bench/publish.py` renders the page from their records in this order, each through its
renderer (`render.RENDERERS`). A bench is a script bench/<script>.py; the modules beside
the scripts (provenance, harness, crossgraph, curves, epoch_cost, ingraph_protocol, this
one, render/) are the library they share, and no script imports another.

Adding a bench: its script writes its record through `provenance.write_record`; declare it
here (the page's sections follow this order) and give it a renderer in bench/render/.
"""

from __future__ import annotations

from typing import NamedTuple

REAL_NLP = "../shared/tpugraphs/npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
REAL_TILE = "../shared/tpugraphs/npz/tile/xla/test/0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb.npz"
# The real samples and tuning records beside the repository, and the synthetic layout
# graph of real scale that `make bench` writes first (bench/featurize.py --make-graph).
SHARED = "../shared/tpugraphs"
TILE_RECORD = "../shared/tpugraphs/raw/op_tuning_data.pb"
BENCH_GRAPH = "data/bench/npz/layout/xla/random/test/bench_40k.npz"
# Make targets a bench's command runs under; None: an earlier run kept on the page, which
# only `python bench/run.py --only NAME` reruns.
TARGETS = ("bench", "bench-setup", "bench-full")


class Bench(NamedTuple):
    name: str
    title: str
    command: str
    description: str
    # The make target that runs the command (TARGETS), None for none.
    target: str | None = "bench"
    # Paths (from the repository root) the command reads: data, models, records.
    needs: tuple[str, ...] = ()


_BENCHES = (
    Bench("setup", "Setting up from a fresh clone",
          "python bench/setup.py --out bench/results/setup.json",
          "The README's two set-up commands, each from nothing in a fresh clone of the "
          "commit named below (with `../shared` beside it): `make demo` makes the "
          "virtualenv, installs xlarank and runs the demo; then `make test` installs the "
          "test extras and runs lint and the whole suite. The longest silence is the "
          "longest stretch with no output a user waits through; the bench reads the "
          "output through a pipe, not a terminal, where `make demo` prints its table only "
          "(on a terminal it names each step as it starts).",
          target="bench-setup", needs=(SHARED,)),
    Bench("featurize", "Featurize speed and memory",
          "python bench/featurize.py data/bench/npz/layout/xla/random/test/bench_40k.npz "
          f"{REAL_NLP} --out bench/results/featurize.json",
          "On a real-scale synthetic layout graph (`xlarank synth`, made into data/bench/) and "
          "on the real TpuGraphs nlp default test sample: the "
          "time to decompress the file, xlarank's read + featurize time and peak RSS rise, the "
          "plain reference implementation's time (tests/naive.py, sampled and scaled), and the "
          "cost of the optional gnn and gru families.",
          needs=(BENCH_GRAPH, REAL_NLP)),
    Bench("score", "Scoring latency",
          f"python bench/score.py {REAL_NLP} --model models/trained/synth-demo/xlarank/"
          "layout-nlp-default --out bench/results/score.json",
          "Ranking the real TpuGraphs nlp test sample's configs in-process with the model "
          "(trained on synthetic demo data) loaded once, and `xlarank --help` / `--version` "
          "start-up.",
          needs=(REAL_NLP, "models/trained/synth-demo/xlarank/layout-nlp-default")),
    Bench("startup", "Commands as a user starts them",
          f"python bench/startup.py {REAL_NLP} --model models/trained/synth-demo/xlarank "
          f"--tile {REAL_TILE} --out bench/results/startup.json",
          "Each command as a fresh process, in shuffled rounds, beside the floor of a "
          "Python command on numpy and Numba (`python -c \"import numpy\"` and so on), and "
          "the same work in process (warm): what start-up costs. The models were trained on "
          "synthetic demo data; the graphs are real samples. The targets: `--help` within "
          "1.3x `import numpy`, `score` of one graph within 2x `import numpy, numba, "
          "pyarrow.parquet`.",
          needs=(REAL_NLP, "models/trained/synth-demo/xlarank", REAL_TILE)),
    Bench("ingraph", "In-graph ranking",
          "python bench/ingraph.py --synthetic data/synth-demo --prior "
          "models/trained/synth-demo/xlarank --out bench/results/ingraph.json",
          "On every labelled real TpuGraphs layout sample, the real layout tuning record "
          "(imported as `xlarank import --drop-failed-runs` does) and the first synthetic demo "
          "valid file per layout collection (held out from the --prior models' training): a share "
          "of the distinct configs \"measured\", the rest "
          "ranked (Kendall tau over seeds), by `rank-graph` and its variants, the default "
          "pipeline trained in-graph, a raw-column LightGBM peer and random order.",
          needs=(SHARED, "data/synth-demo", "models/trained/synth-demo/xlarank")),
    Bench("ingraph_noisy", "In-graph ranking under record-like noise",
          "python bench/ingraph.py --samples data/synth-demo-noisy/none --synthetic "
          "data/synth-demo-noisy --synthetic-files 2 --peer-only --no-timing "
          "--out bench/results/ingraph_noisy.json",
          "The same protocol on a demo tree generated as noisy as the real layout record "
          "(`xlarank synth --preset demo --repeat-tau 0.3,0.45`: two measurements of one "
          "config agree to Kendall tau 0.3-0.45, the record's 0.36, where the demo's agree "
          "to 0.6-0.95), its first two valid files per layout collection: rank-graph "
          "against the raw-column peer and random order where measurement noise, not the "
          "model, bounds the order.",
          needs=("data/synth-demo-noisy",)),
    Bench("ingraph_timing", "rank-graph as a command",
          "python bench/ingraph.py --timing-only --before d9fd505^ --out "
          "bench/results/ingraph_timing.json",
          "`xlarank rank-graph` as a user runs it (fresh processes, start-up included) on the "
          "real TpuGraphs nlp default test sample with 100 configs measured, timed alone on a "
          "quiet machine (the in-graph run above shared its machine), beside the same command "
          "from the sources of rank-graph before its model choice, run by run.",
          needs=(SHARED,)),
    Bench("ablation", "Feature ablation",
          "python bench/ablation.py data/synth-demo --out bench/results/ablation.json",
          "Validation quality of the default ranker with each feature family left out, per "
          "collection, on the synthetic demo data; and on the real unet3d sample split inside "
          "the graph, the same for the default pipeline and for `rank-graph`.",
          needs=("data/synth-demo", SHARED)),
    Bench("engines", "Engines and concurrency",
          "python bench/engines.py data/synth-demo --frame features/frames/synth-demo/default/"
          "layout-nlp-default/train.parquet --out bench/results/engines.json",
          "Files per second featurized by the local and the Dask engines on the synthetic demo "
          "data; one `xlarank train` of the demo's layout-nlp-default frame alone against two "
          "side by side; and runs beside another program's 2-thread LightGBM loop against the "
          "median alone.",
          needs=("data/synth-demo",
                 "features/frames/synth-demo/default/layout-nlp-default/train.parquet")),
    Bench("quality", "Quality",
          "python bench/quality.py data/synth-demo --seeds 3 --out bench/results/quality.json",
          "Each objective, the ensemble, xlarank's default, the peers and the published systems "
          "xlarank descends from, mean and spread over seeds: on the synthetic demo data "
          "(split by graph) and on the real unet3d sample split inside the graph; with the "
          "quality targets (the default ahead of its peer, the ensemble no worse than the "
          "best single booster) checked on the synthetic part.",
          needs=("data/synth-demo", SHARED)),
    Bench("systems", "Published systems",
          "python bench/systems.py --data data/synth-demo --seeds 3 "
          "--out bench/results/systems.json",
          "xlarank beside tpugraphs-gnn, gru and hybrid (docs/systems.md), the same splits for "
          "every system: cross-graph on the synthetic demo data, in-graph on the real unet3d "
          "sample, and epoch cost on a sample of the real-sized synthetic preset.",
          needs=("data/synth-demo", SHARED)),
    Bench("systems_tile", "Published systems, synthetic tile after calibration",
          "python bench/systems.py --data data/synth-demo --parts synthetic --collections "
          "tile:xla --seeds 3 --out bench/results/systems_tile.json",
          "The systems bench's synthetic tile row again, on demo data made after the tile "
          "generator was calibrated against the real tuning record's 15 kernels "
          "(docs/synthetic.md): the row above predates it, when one synthetic kernel's "
          "slowest config could be 9,469x its default against at most 26x in the record. "
          "Rerun on 2026-12-05 from a clean tree (the first run's tree had uncommitted "
          "changes), now with competition-gnn: every other system's metric is the first "
          "run's to the last digit. It ran beside other benches (load 3-6 on 2 cores), so "
          "its training seconds and scoring times are not quiet timings and run 1-7x the "
          "first run's.",
          needs=("data/synth-demo",)),
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
          "copy holds tpugraphs-gnn's from a `--parts ingraph,scale` run (xlarank and "
          "tpugraphs-gnn at half measured, seeds 0 and 1, rerun on 2026-12-05 from a clean "
          "tree, each seed in its own process read back from --partial); `make bench` "
          "times every GNN system's in systems_scale below.",
          needs=(SHARED,)),
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
          "the run that made them; the stamped wall time is that of the last call.",
          needs=(SHARED,)),
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
          "at 13a95bc); seeds 1 and 2 ran pinned to one core with taskset.",
          target=None, needs=(SHARED,)),
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
          "tpugraphs-gnn).",
          target=None, needs=(SHARED,)),
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
          "systems_fair line measures the same at every share).",
          target=None, needs=(SHARED,)),
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
          "back from `--cross-partial` keep the seconds of the run that made them.",
          needs=("data/synth-demo",)),
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
          "the section above. Synthetic data: our cost model, not TpuGraphs.",
          needs=("data/synth-demo",)),
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
          "one), for xlarank, each published system and random order.",
          target=None, needs=(TILE_RECORD,)),
    Bench("tile_kernels_rule", "Real tile kernels, the published systems by the in-graph rule",
          "python bench/tile_kernels.py --seeds 3 --systems xlarank,tpugraphs-gnn,gru,hybrid,"
          "random --out bench/results/tile_kernels_rule.json",
          "The section above again for every system, tpugraphs-gnn, gru and the hybrid's GNN "
          "now trained in the kernel by the in-graph rule (inner validation on "
          "the measured configs, a learning-rate grid by successive halving, early stopping, "
          "the best checkpoint kept; with fewer than 5 inner configs, the grid's middle rate "
          "for 500 steps on every measured config), beside xlarank as it is now; its own "
          "record, so the one above stays as it was published. Leave-one-kernel-out trains "
          "across kernels, which the rule does not touch.",
          target=None, needs=(TILE_RECORD,)),
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
          "in the tables. Rerun on 2026-12-05 because the in-kernel split became "
          "`xlarank.in_graph_split` (half the distinct configs in config order; the first "
          "run drew them in another order with n // 2): the in-kernel taus moved, "
          "leave-one-kernel-out did not.",
          needs=(TILE_RECORD,)),
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
          "models' training).",
          needs=(SHARED, "data/synth-demo", "models/trained/synth-demo/xlarank")),
    Bench("autotune_noisy", "Autotune replay under record-like noise",
          "python bench/autotune.py --synthetic-only --synthetic data/synth-demo-noisy "
          "--no-ablations --out bench/results/autotune_noisy.json",
          "The same replay on one valid file per collection of a demo tree generated as noisy "
          "as the real layout record (`xlarank synth --preset demo --repeat-tau 0.3,0.45`; "
          "tile measurements at the default 2%), without a prior or the tuner's ablations: "
          "each file's distinct configs, spread, repeat noise and plateau beside the "
          "measurements each strategy spends.",
          needs=(SHARED, "data/synth-demo-noisy")),
    Bench("featurize_full", "Featurize the real preset's mix, before and after",
          "python bench/full.py --preset real --share 10 --featurize-only --before 37d32bf^ "
          "--out bench/results/featurize_full.json",
          "`xlarank featurize` of every 10th file of each collection and split of the `real` "
          "synthetic preset (its file-size mix at a tenth of its 7,868 files; synthetic, not "
          "TpuGraphs data), with this commit and with the commit before the ISA-L reader "
          "(37d32bf^), alternated, two processes each (`--workers 2`).",
          target=None),
    Bench("full", "Full dataset end to end",
          "python bench/full.py --preset real --out bench/results/full.json",
          "The whole dataset's size on one machine (`make bench-full`): the `real` synthetic "
          "preset (`xlarank synth`: the real file counts and size mix, not TpuGraphs data) "
          "featurized, trained, evaluated and submitted, wall time and peak RSS per step.",
          target="bench-full"),
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
          "(unet3d).",
          needs=("corpus", SHARED)),
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
          "folds ran at a time, so wall seconds are shared, CPU seconds are not.",
          needs=("corpus",)),
    Bench("corpus_remeasure", "The measured corpus measured again",
          "python bench/remeasure.py --corpus corpus --configs 50 --seed 1 "
          "--out bench/results/corpus_remeasure.json",
          "Every kept program of the corpus, `xlarank measure PROGRAM --remeasure RECORD "
          "--configs 50 --seed 1` as a user runs it, on a later day than its record: 50 of "
          "the record's configs (the default run among them) timed again on one pinned CPU. "
          "Beside the Kendall tau between the stored and the new runtimes, what the record "
          "says to expect: its repeat tau (even rounds against odd ones) over all its "
          "configs and over the 50 drawn here.",
          needs=("corpus",)),
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
          "run each batch adds is not counted).",
          needs=("corpus",)),
)

# {name: Bench}, in page order.
BENCHES = {b.name: b for b in _BENCHES}


def of_target(target: str) -> list[Bench]:
    """The benches a make target runs, in declaration order."""
    return [b for b in _BENCHES if b.target == target]
