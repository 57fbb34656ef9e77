"""Commands as a user starts them: each against the floor of a Python command built on
numpy and Numba, and against the same work in process, side by side in one run.

Per round, in a shuffled order, each command runs once as a fresh process (`-m xlarank`
with this interpreter): `--help`; `score` of one real test graph with one model;
`rank-graph` of the real nlp sample with 100 measured configs; `suggest` of it (8
configs); `featurize` of it; and the floors `python -c "import numpy"`, `"import numpy,
numba"` and `"import numpy, numba, pyarrow.parquet"`. Reported per command: best and
median wall seconds over the rounds, and its ratio to the floors the issue's targets
name. The same work in process (after one warm-up call) gives what start-up costs. Each
command's top 10 imports by cumulative time come from one `-X importtime` run.

    python bench/startup.py GRAPH --model DIR --tile GRAPH --out bench/results/startup.json
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import write_record

ROUNDS = 5
FLOORS = {"import numpy": "import numpy",
          "import numpy, numba": "import numpy, numba",
          "import numpy, numba, pyarrow.parquet": "import numpy, numba, pyarrow.parquet"}


def commands(graph: Path, model: Path, tile: Path, measured: Path, work: Path) -> dict:
    """name -> argv of each command timed (xlarank's through this interpreter)."""
    x = [sys.executable, "-m", "xlarank"]
    return {
        "xlarank --help": [*x, "--help"],
        "xlarank score (one tile graph, one model)": [
            *x, "score", str(tile), "--models", str(model), "--out", str(work / "out-s.csv")],
        "xlarank rank-graph (nlp sample, 100 measured)": [
            *x, "rank-graph", str(graph), "--measured", str(measured),
            "--out", str(work / "out-r.csv")],
        "xlarank suggest (nlp sample, 100 measured)": [
            *x, "suggest", str(graph), "--measured", str(measured), "--batch", "8",
            "--out", str(work / "out-n.csv")],
        "xlarank featurize (nlp sample)": [
            *x, "featurize", str(graph), "--collection", "layout-nlp-default", "--split",
            "test", "--out", str(work / "out-f.parquet")],
        **{f'python -c "{code}"': [sys.executable, "-c", code] for code in FLOORS.values()},
    }


def run_once(argv: list[str], work: Path) -> float:
    for stale in work.glob("out-*"):
        stale.unlink()
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def import_top(argv: list[str], work: Path, n: int = 10) -> list[list]:
    """The n imports with the most cumulative time (s) in one `-X importtime` run."""
    for stale in work.glob("out-*"):
        stale.unlink()
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True,
                          text=True, check=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line[12:].split("|"))
            if cumulative.isdigit():
                rows.append([name, int(cumulative) / 1e6])
    return sorted(rows, key=lambda r: -r[1])[:n]


def in_process(graph: Path, model: Path, tile: Path, measured: Path) -> dict:
    """Seconds of each command's work in this process, warm (second call)."""
    import pandas as pd

    import xlarank
    from xlarank.features import load_feature_spec
    from xlarank.specs import spec_path

    table = pd.read_csv(measured)
    tile_model = xlarank.load_model(next(p.parent for p in model.rglob("card.json")
                                         if "tile" in p.parent.name))
    spec = load_feature_spec(spec_path("default", "feature"))
    work = {
        "xlarank score (one tile graph, one model)":
            lambda: xlarank.ranked_configs(xlarank.load_graph(tile), tile_model),
        "xlarank rank-graph (nlp sample, 100 measured)":
            lambda: xlarank.rank_graph(xlarank.load_graph(graph), table),
        "xlarank suggest (nlp sample, 100 measured)":
            lambda: _suggest(xlarank, graph, table),
        "xlarank featurize (nlp sample)":
            lambda: xlarank.featurize_graph(xlarank.load_graph(graph), spec),
    }
    out = {}
    for name, call in work.items():
        call()
        started = time.perf_counter()
        call()
        out[name] = round(time.perf_counter() - started, 3)
    return out


def _suggest(xlarank, graph: Path, table) -> None:
    tuner = xlarank.Tuner(graph)
    tuner.tell_table(table)
    tuner.suggest(8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path, help="the real nlp sample (layout)")
    parser.add_argument("--model", type=Path, required=True,
                        help="a models folder holding a tile-xla model")
    parser.add_argument("--tile", type=Path, required=True, help="one real tile test graph")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--out", type=Path, default=Path("bench/results/startup.json"))
    args = parser.parse_args()
    import numpy as np

    from xlarank.data.graph import load_graph

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        graph = load_graph(args.graph)
        rows = np.random.default_rng(0).choice(graph.n_configs, 100, replace=False)
        measured = work / "measured.csv"
        measured.write_text("config_index,runtime\n" + "".join(
            f"{i},{(i % 37 + 1) * 1000}\n" for i in sorted(rows.tolist())))
        argvs = commands(args.graph, args.model, args.tile, measured, work)
        for argv in argvs.values():
            run_once(argv, work)  # warm the file cache and Numba's on-disk cache
        times: dict[str, list[float]] = {name: [] for name in argvs}
        order = list(argvs)
        for r in range(args.rounds):
            random.Random(r).shuffle(order)
            for name in order:
                times[name].append(run_once(argvs[name], work))
        imports = {name: import_top(argv, work) for name, argv in argvs.items()
                   if name.startswith("xlarank")}
        inside = in_process(args.graph, args.model, args.tile, measured)
    best = {name: min(t) for name, t in times.items()}
    record = {"rounds": args.rounds, "graph": str(args.graph), "tile": str(args.tile),
              "model": str(args.model),
              "commands": {name: {"best_s": round(best[name], 3),
                                  "median_s": round(statistics.median(t), 3),
                                  "in_process_s": inside.get(name),
                                  "import_top": imports.get(name)}
                           for name, t in times.items()}}
    numpy_floor = best['python -c "import numpy"']
    parquet_floor = best['python -c "import numpy, numba, pyarrow.parquet"']
    record["ratios"] = {
        "help_over_numpy": round(best["xlarank --help"] / numpy_floor, 2),
        "score_over_numpy_numba_parquet": round(
            best["xlarank score (one tile graph, one model)"] / parquet_floor, 2)}
    write_record(args.out, record)
    for name, row in record["commands"].items():
        print(f"{name:50s} best {row['best_s']:.3f} s  median {row['median_s']:.3f} s  "
              f"in process {row['in_process_s']}")
    print(record["ratios"])


if __name__ == "__main__":
    main()
