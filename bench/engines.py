"""Featurize throughput: local engine (1 and 2 processes) against Dask (2 local workers);
and two trainings side by side against one.

Featurizes every file of a synthetic tree with each engine into fresh folders (no parts
reused), checks that the frames are byte-identical, and writes files per second. The
local pool is kept between calls, as in any long-lived process (`xlarank.engine`); the
warm-up pass starts it and loads the Numba cache, so no engine pays for compiling.

Then ``xlarank train`` of one collection's frame runs as a user runs it (a fresh process,
packaged default spec), alone and two at once: with no hint of the neighbour (each takes
the cores) and as ``make -j2`` runs them (MAKEFLAGS, so each takes half). The ratio of
the slower of two side by side to one alone must stay <= 2.2, the limit for two jobs
sharing 2 cores.

    python bench/engines.py DATA --frame FRAME --out bench/results/engines.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlarank.data.collections import COLLECTIONS, SPLITS, split_files
from xlarank.distributed import dask_client
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.threads import available_cores, use_threads

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY_LIMIT = 2.2


def run(data: Path, work: Path, spec, workers: int = 1, client=None) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    files = rows = 0
    started = time.perf_counter()
    for collection in COLLECTIONS:
        for split in SPLITS:
            paths = split_files(data, collection, split)
            if paths:
                n, _, _ = featurize_files(paths, work / collection.slug / f"{split}.parquet",
                                          collection, split, spec, workers=workers,
                                          client=client)
                files += len(paths)
                rows += n
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "files": files, "rows": rows,
            "files_per_second": round(files / seconds, 1)}


def _trainings(frame: Path, copies: int, makeflags: str) -> list[float]:
    """Wall seconds of ``copies`` `xlarank train` processes started together."""
    env = {**os.environ, "MAKEFLAGS": makeflags}
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "xlarank", "train", str(frame),
                                   "--out", f"{work}/m{i}"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for i in range(copies)]
        seconds = []
        for proc in procs:
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"xlarank train failed: {err.decode()}")
            seconds.append(time.perf_counter() - started)
    return seconds


def concurrent_trainings(frame: Path, repeats: int = 3) -> dict:
    """Median wall time of one training alone and of the slower of two side by side."""
    _trainings(frame, 1, "")  # page in the libraries
    alone = statistics.median(_trainings(frame, 1, "")[0] for _ in range(repeats))
    out = {"frame": str(frame), "cores": available_cores(), "alone_seconds": round(alone, 2)}
    for name, flags in (("side by side", ""), ("side by side under make -j2", " -j2")):
        both = statistics.median(max(_trainings(frame, 2, flags)) for _ in range(repeats))
        out[name] = {"seconds": round(both, 2), "ratio": round(both / alone, 2),
                     "within_limit": both / alone <= CONCURRENCY_LIMIT}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--out", default="bench/results/engines.json")
    parser.add_argument("--work", default="bench/results/engine-frames")
    parser.add_argument("--frame", default="features/frames/synth-demo/default/layout-nlp-default/"
                        "train.parquet", help="Training frame for the side-by-side trainings.")
    args = parser.parse_args()
    use_threads()
    spec = load_feature_spec(ROOT / "features" / "default.toml")
    data, work = Path(args.data), Path(args.work)
    run(data, work / "warm", spec)
    run(data, work / "warm", spec, workers=2)
    results = {"local, 1 process": run(data, work / "local1", spec),
               "local, 2 processes": run(data, work / "local2", spec, workers=2)}
    with dask_client(None, workers=2) as client:
        results["dask, 2 local workers"] = run(data, work / "dask2", spec, client=client)
    frames = sorted(p.relative_to(work / "local1") for p in (work / "local1").rglob("*.parquet")
                    if ".parts" not in str(p))
    identical = all((work / "local1" / f).read_bytes() == (work / d / f).read_bytes()
                    for f in frames for d in ("local2", "dask2"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    trainings = concurrent_trainings(Path(args.frame))
    out.write_text(json.dumps({"data": f"synthetic: {data}", "frames_identical": identical,
                               "results": results, "trainings": trainings}, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name}: {r['files']} files in {r['seconds']}s ({r['files_per_second']} files/s)")
    print("frames identical across engines:", identical)
    print(f"xlarank train on {args.frame}: alone {trainings['alone_seconds']}s")
    for name in ("side by side", "side by side under make -j2"):
        r = trainings[name]
        print(f"  two {name}: {r['seconds']}s, ratio {r['ratio']} "
              f"({'within' if r['within_limit'] else 'OVER'} the {CONCURRENCY_LIMIT} limit)")


if __name__ == "__main__":
    main()
