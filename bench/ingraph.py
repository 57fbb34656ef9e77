"""In-graph benchmark: "I measured some configs of my program; rank the rest."

For every labelled layout file given (by default the real samples in ../shared/tpugraphs,
and the real layout tuning record of its raw/ imported as `xlarank import
--drop-failed-runs` does; with --synthetic, also the first valid files per layout
collection of an `xlarank synth` tree: valid, not train, since --prior's models were
trained on the train split), the
graph's distinct configs are split at random: a share of them (0.5, 0.2, 0.1, 0.05) is
"measured" (every measurement of those configs goes to the ranker), the rest is ranked.
Kendall tau on the held-out distinct configs (median runtime of each), mean and sd over
10 seeds, and the worst seed (one unlucky split is what a user meets). A file with fewer
than 2 distinct configs is listed and left out.

Rows:
- rank-graph: `xlarank.rank_graph` (its graph-local model chosen per split by K-fold
  validation on the measured configs: the booster on raw config columns + graph-local
  features, the raw-column regression, or their blend; under 20 measured distinct
  configs, no folds, the booster blended with the similarity score; the record counts
  each choice);
- rank-graph --prior MODEL: the same plus a cross-graph model's score (only with --prior;
  the model of the file's collection under that folder);
- rank-graph + gnn, rank-graph + gru: the same plus the gnn or the gru embedding columns
  (random weights, no training). graph_metrics has no row here: its values
  are one per graph, constant inside a graph, so in-graph it adds nothing by
  construction (bench/quality.py compares it across graphs and on unet3d's default
  pipeline);
- default pipeline in-graph: models/<collection>.toml on features/default.toml, trained
  on the measured distinct configs as if they were a training split;
- peer: raw config columns, LGBMRegressor (300 trees, learning rate 0.05, 31 leaves,
  min_child_samples 5) on log runtime;
- random;
- noise ceiling: tau between the first two measurements of configs measured twice or
  more (one figure per file, the same at every share).

Per file the record also holds what makes a graph hard: its distinct configs, runtime
spread (slowest over fastest distinct median), repeat noise (median |first - second| of
configs measured twice or more, over the fastest runtime) and plateau (the share of
distinct configs within 0.5% of the fastest); and per share the peer check:
rank-graph's mean at or above the peer's (within 0.005), its worst seed at or above the
peer's mean minus its sd.

    python bench/ingraph.py --samples ../shared/tpugraphs [--synthetic data/synth-demo]
        [--prior models/trained/xlarank] --out bench/results/ingraph.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ingraph_protocol import FRACTIONS, RANK_GRAPH, ROOT, SEEDS, THREADS, one_file
from provenance import checkout_at, write_record
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import load_graph


def time_command(path: Path, measured: int = 100, repeats: int = 3,
                 before: str | None = None) -> dict:
    """Wall seconds of `xlarank rank-graph` as a user runs it, on ``measured`` configs of
    the file at ``path`` (their runtimes: exp of a fixed random projection of the raw
    config columns), best of ``repeats`` fresh processes. With ``before`` (a commit), the
    same command from that commit's sources too, alternated run by run (after a first,
    untimed run of each side that loads its Numba cache), so both sides see one machine."""
    import os
    import subprocess
    import sys
    from contextlib import nullcontext

    graph = load_graph(path)
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(graph.n_configs, measured, replace=False))
    raw = graph.node_config_feat.reshape(graph.n_configs, -1)[rows].astype(np.float64)
    runtime = 1e6 * np.exp(1e-3 * raw @ rng.normal(size=raw.shape[1]))
    with (tempfile.TemporaryDirectory() as tmp,
          checkout_at(before) if before else nullcontext((None, None)) as (rev, old)):
        csv = Path(tmp) / "measured.csv"
        pd.DataFrame({"config_index": rows, "runtime": runtime}).to_csv(csv, index=False)
        sides = {"after": None, **({"before": old} if old else {})}

        def run(sources: Path | None) -> float:
            env = dict(os.environ)
            if sources is not None:
                env["PYTHONPATH"] = str(sources / "src")
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "xlarank", "rank-graph", str(path),
                            "--measured", str(csv), "--out", str(Path(tmp) / "ranked.csv")],
                           check=True, capture_output=True, env=env)
            return time.perf_counter() - started

        for sources in sides.values():
            run(sources)
        seconds = {side: [] for side in sides}
        for _ in range(repeats):
            for side, sources in sides.items():
                seconds[side].append(run(sources))
    timing = {"file": str(path), "measured": measured, "seconds": seconds["after"],
              "best": min(seconds["after"]), "budget": 5.0,
              "load_average": os.getloadavg()[0]}
    if before:
        timing.update({"before": before, "before_commit": rev,
                       "before_seconds": seconds["before"],
                       "before_best": min(seconds["before"]),
                       "after_over_before": round(min(seconds["after"])
                                                  / min(seconds["before"]), 3)})
    return timing


def print_table(records: list[dict]) -> None:
    for record in records:
        print(f"\n{record['file']} ({record['collection']}, {record['distinct_configs']} "
              f"distinct configs)")
        if "runtime_spread" in record:
            noise = record["repeat_noise"]
            print(f"  spread {record['runtime_spread']:.3f}x, repeat noise "
                  f"{'none' if noise is None else f'{noise:.2e}'} of the fastest, "
                  f"plateau {record['plateau_0.5%']:.1%} within 0.5%")
        if "results" not in record:
            print(f"  left out: {record['left_out']}")
            continue
        systems = list(next(iter(record["results"].values())))
        print(f"  {'system (mean ± sd, worst seed)':44}"
              + "".join(f"{f:>24}" for f in record["results"]))
        for system in systems:
            cells = "".join(f"{r[system]['mean']:>9.3f} ± {r[system]['sd']:.3f} "
                            f"({r[system].get('worst', r[system]['mean']):.3f})"
                            for r in record["results"].values())
            print(f"  {system:44}{cells}")
        checks = "".join(
            f"{'ok' if r[RANK_GRAPH]['peer_check']['mean_ok'] else 'BELOW':>12}"
            f"{'ok' if r[RANK_GRAPH]['peer_check']['worst_ok'] else 'BELOW':>12}"
            for r in record["results"].values())
        print(f"  {'vs peer: mean, worst seed':44}{checks}")
        chosen = "".join(f"{','.join(f'{k} {v}' for k, v in r[RANK_GRAPH]['chosen'].items()):>24}"
                         for r in record["results"].values())
        print(f"  {'rank-graph chose':44}{chosen}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    parser.add_argument("--synthetic", type=Path, default=None,
                        help="an xlarank synth tree: also its first valid layout files")
    parser.add_argument("--synthetic-files", type=int, default=1,
                        help="valid files per layout collection of --synthetic")
    parser.add_argument("--prior", type=Path, default=None,
                        help="folder of cross-graph models, one per collection slug")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS),
                        help="shares of the distinct configs measured")
    parser.add_argument("--peer-only", action="store_true",
                        help="rank-graph, the peer and random only (no embedding, prior or "
                             "pipeline rows)")
    parser.add_argument("--collections", nargs="+", default=None,
                        help="the synthetic layout collections to take (default: all)")
    parser.add_argument("--no-timing", action="store_true",
                        help="leave out the rank-graph command's timing on the nlp sample")
    parser.add_argument("--timing-only", action="store_true",
                        help="only the rank-graph command's timing, as its own record "
                             "(bench/results/ingraph_timing.json unless --out): timed on a "
                             "quiet machine when the tau runs shared it")
    parser.add_argument("--before", default=None, metavar="REV",
                        help="with --timing-only: time the command from REV's sources too, "
                             "alternated (d9fd505^: rank-graph before its model "
                             "choice)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    nlp = args.samples / "npz" / "layout" / "nlp" / "default" / "test"
    if args.timing_only:
        timing = time_command(sorted(nlp.glob("*.npz"))[0], before=args.before)
        write_record(args.out or Path("bench/results/ingraph_timing.json"),
                     {"rank_graph_command": timing})
        print(f"rank-graph as a command: best {timing['best']:.2f} s of "
              f"{len(timing['seconds'])} (budget 5 s)"
              + (f"; {timing['before_best']:.2f} s at {args.before}" if args.before else ""))
        return
    args.out = args.out or Path("bench/results/ingraph.json")
    files = [p for p in sorted((args.samples / "npz" / "layout").rglob("*.npz"))
             if "/test/" not in str(p)]
    sources = ["real"] * len(files)
    tuning_record = args.samples / "raw" / "module_tuning_data_layout.pb"
    imported = tempfile.TemporaryDirectory()
    if tuning_record.exists():
        from xlarank.data.xla import import_records

        graphs = import_records([tuning_record], Path(imported.name) / "record",
                                drop_failed_runs=True)
        files += [Path(imported.name) / "record" / g.relative_path for g in graphs]
        sources += ["real (imported tuning record)"] * len(graphs)
    if args.synthetic is not None:
        for collection in COLLECTIONS[1:]:
            if args.collections is not None and collection.id not in args.collections:
                continue
            # Held out from --prior's training (the train split), so its row is fair.
            chosen = split_files(args.synthetic, collection, "valid")[:args.synthetic_files]
            files += chosen
            sources += ["synthetic"] * len(chosen)
    started = time.perf_counter()
    records = []
    for path, source in zip(files, sources):
        record = {"data": source, **one_file(path, list(range(args.seeds)), args.prior,
                                             tuple(args.fractions), args.peer_only)}
        if source.startswith("real (imported"):
            record["file"] = f"{tuning_record} (imported)"
        records.append(record)
        print_table([record])
    imported.cleanup()
    timing = None
    if not args.no_timing and nlp.exists():
        timing = time_command(sorted(nlp.glob("*.npz"))[0])
        print(f"\nrank-graph as a command, {timing['measured']} measured, {timing['file']}: "
              f"best {timing['best']:.2f} s of {len(timing['seconds'])} (budget 5 s; load "
              f"{timing['load_average']:.1f})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_record(args.out, {"fractions": tuple(args.fractions), "seeds": args.seeds,
                            "threads": THREADS, "files": records,
                            "rank_graph_command": timing,
                            "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
