"""Scoring latency: the CLI's start-up, and ranking one real graph's configs in-process.

A compiler or autotuner that asks for an order many times keeps the model loaded and
calls the library: `xlarank.load_model` once, then `xlarank.load_graph` and
`xlarank.ranked_configs` per graph. This times that warm call on the real nlp test sample
(21,918 nodes, 1,001 configs), and ``xlarank --help`` / ``--version`` as a user starts them.
Targets: warm scoring < 0.3 s, start-up < 0.5 s (medians).

    python bench/score.py GRAPH --model DIR --out bench/results/score.json
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from provenance import write_record

WARM_TARGET_S = 0.3
STARTUP_TARGET_S = 0.5


def startup_seconds(args: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "xlarank", *args], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("--model", required=True, help="Model directory of the graph's "
                        "collection.")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default="bench/results/score.json")
    args = parser.parse_args()

    started = time.perf_counter()
    import xlarank
    from xlarank.threads import use_threads

    threads = use_threads()
    model = xlarank.load_model(args.model)
    loaded = time.perf_counter() - started
    first = None
    times = []
    for _ in range(args.repeats + 1):
        started = time.perf_counter()
        graph = xlarank.load_graph(args.graph, configs=False)
        order, _ = xlarank.ranked_configs(graph, model)
        seconds = time.perf_counter() - started
        if first is None:
            first = seconds
        else:
            times.append(seconds)
    warm = statistics.median(times)
    results = {
        "graph": args.graph, "configs": len(order), "model": args.model, "threads": threads,
        "import_and_load_model_seconds": round(loaded, 3),
        "first_call_seconds": round(first, 3),
        "warm_seconds_median": round(warm, 4), "warm_seconds_max": round(max(times), 4),
        "warm_target_seconds": WARM_TARGET_S, "warm_within_target": warm < WARM_TARGET_S,
        "help_seconds_median": round(startup_seconds(["--help"], args.repeats), 3),
        "version_seconds_median": round(startup_seconds(["--version"], args.repeats), 3),
        "startup_target_seconds": STARTUP_TARGET_S,
    }
    results["startup_within_target"] = max(results["help_seconds_median"],
                                           results["version_seconds_median"]) < STARTUP_TARGET_S
    out = Path(args.out)
    write_record(out, results)
    print(f"ranking {len(order)} configs of {Path(args.graph).name} in-process: "
          f"{warm:.3f}s warm (median of {args.repeats}; first call {first:.3f}s, "
          f"model load {loaded:.2f}s) - target < {WARM_TARGET_S}s")
    print(f"xlarank --help {results['help_seconds_median']}s, --version "
          f"{results['version_seconds_median']}s - target < {STARTUP_TARGET_S}s")


if __name__ == "__main__":
    main()
