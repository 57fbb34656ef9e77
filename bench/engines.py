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

Last, the busy machine: ``xlarank train`` beside another program's OpenMP job (a LightGBM
fit on 2 threads in a loop, which no pid file tells of), 10 runs, against its median
alone, with xlarank's back-off for other programs' load and without it
(XLARANK_LOAD_BACKOFF=0, alone only: beside, that took up to 70 times as long). The
slowest run beside must stay <= 2.5 times the median alone. ``--only busy`` runs this part
alone and updates its entry in the --out file, the rest kept:

    python bench/engines.py DATA --frame FRAME --out bench/results/engines.json
    python bench/engines.py --only busy --frame FRAME [--busy-runs 10]
    python bench/engines.py --only trainings --frame FRAME
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import provenance, write_record
from xlarank.data.collections import COLLECTIONS, SPLITS, split_files
from xlarank.distributed import dask_client
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.threads import available_cores, other_load, use_threads

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY_LIMIT = 2.2
BUSY_LIMIT = 2.5

# Another program's LightGBM job, not xlarank: 2 threads, fitting again and again.
NEIGHBOUR = """
import lightgbm, numpy
rng = numpy.random.default_rng(0)
x = rng.normal(size=(20000, 40))
y = x[:, 0] + rng.normal(size=20000)
data = lightgbm.Dataset(x, y, params={"verbose": -1}).construct()
while True:
    lightgbm.train({"num_threads": 2, "verbose": -1, "objective": "regression"}, data, 50)
"""


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


def _trainings(frame: Path, copies: int, makeflags: str, extra_env: dict | None = None
               ) -> list[float]:
    """Wall seconds of ``copies`` `xlarank train` processes started together."""
    env = {**os.environ, "MAKEFLAGS": makeflags, **(extra_env or {})}
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
                     "limit": CONCURRENCY_LIMIT, "within_limit": both / alone <= CONCURRENCY_LIMIT}
    return out


def _timed_training(frame: Path, extra_env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one `xlarank train`: CPU far above the run's own alone
    means threads spinning for cores held by others; wall far above with CPU the same
    means a fair share of a crowded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _trainings(frame, 1, "", extra_env)[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def busy_machine(frame: Path, runs: int = 10, alone_runs: int = 5) -> dict:
    """`xlarank train` alone (with and without the load back-off) and beside another
    program's looping 2-thread LightGBM job: seconds of each run, medians, and the slowest
    beside over the median alone (with the back-off)."""
    off = {"XLARANK_LOAD_BACKOFF": "0"}
    # Other programs on the machine make these figures noisy: their load is recorded.
    background = [round(other_load(), 2)]
    _trainings(frame, 1, "")  # page in the libraries
    alone, alone_off, cpu = [], [], {"alone": [], "alone_without_backoff": [], "beside": []}
    for _ in range(alone_runs):  # interleaved, so a noisy minute hits both alike
        for times, key, env in ((alone, "alone", None), (alone_off, "alone_without_backoff",
                                                         off)):
            wall, used = _timed_training(frame, env)
            times.append(wall)
            cpu[key].append(round(used, 2))
    beside = []
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)  # past its imports and into its loop
        if neighbour.poll() is not None:
            raise SystemExit("the neighbour LightGBM job did not start")
        for _ in range(runs):
            wall, used = _timed_training(frame)
            beside.append(wall)
            cpu["beside"].append(round(used, 2))
    finally:
        neighbour.kill()
        neighbour.wait()
    time.sleep(1.5)
    background.append(round(other_load(), 2))
    median = statistics.median(alone)
    return {"frame": str(frame), "cores": available_cores(),
            "neighbour": "another program: LightGBM regression, num_threads=2, in a loop",
            "background_load_cores_before_after": background,
            "alone_seconds": [round(t, 2) for t in alone],
            "alone_median": round(median, 2),
            "alone_without_backoff_seconds": [round(t, 2) for t in alone_off],
            "alone_without_backoff_median": round(statistics.median(alone_off), 2),
            "backoff_cost_alone": round(median / statistics.median(alone_off), 3),
            "beside_seconds": [round(t, 2) for t in beside],
            "beside_median": round(statistics.median(beside), 2),
            "slowest_over_alone_median": round(max(beside) / median, 2),
            "cpu_seconds": cpu,
            "limit": BUSY_LIMIT, "within_limit": max(beside) / median <= BUSY_LIMIT}


def _print_busy(busy: dict) -> None:
    print(f"busy machine, xlarank train on {busy['frame']}: alone median "
          f"{busy['alone_median']}s {busy['alone_seconds']}, without the back-off "
          f"{busy['alone_without_backoff_median']}s {busy['alone_without_backoff_seconds']} "
          f"(cost {busy['backoff_cost_alone']}x)")
    print(f"  CPU seconds: {busy['cpu_seconds']}")
    print(f"  load of other programs before and after (cores): "
          f"{busy['background_load_cores_before_after']}")
    print(f"  beside a 2-thread LightGBM loop: {busy['beside_seconds']}; slowest / median "
          f"alone {busy['slowest_over_alone_median']} "
          f"({'within' if busy['within_limit'] else 'OVER'} the {BUSY_LIMIT} limit)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?")
    parser.add_argument("--only", choices=["busy", "trainings"], help="Run only the "
                        "busy-machine part or the side-by-side trainings, and update its "
                        "entry in --out.")
    parser.add_argument("--busy-runs", type=int, default=10)
    parser.add_argument("--alone-runs", type=int, default=5)
    parser.add_argument("--out", default="bench/results/engines.json")
    parser.add_argument("--work", default="bench/results/engine-frames")
    parser.add_argument("--frame", default="features/frames/synth-demo/default/layout-nlp-default/"
                        "train.parquet", help="Training frame for the side-by-side trainings.")
    args = parser.parse_args()
    out = Path(args.out)
    if args.only is not None:
        if args.only == "busy":
            key, part = "busy machine", busy_machine(Path(args.frame), args.busy_runs,
                                                     args.alone_runs)
        else:
            key, part = "trainings", concurrent_trainings(Path(args.frame))
        old = json.loads(out.read_text()) if out.exists() else {}
        # The part carries its own provenance; the parts a full run wrote keep that run's.
        kept = old.pop("provenance", None)
        if kept and "--only" not in kept.get("command", ""):
            old["full_run_provenance"] = kept
        write_record(out, {**old, key: {**part, "provenance": provenance()}})
        if args.only == "busy":
            _print_busy(part)
        else:
            _print_trainings(part, args.frame)
        return
    if args.data is None:
        parser.error("DATA is needed unless --only busy")
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
    out.parent.mkdir(parents=True, exist_ok=True)
    trainings = concurrent_trainings(Path(args.frame))
    busy = busy_machine(Path(args.frame), args.busy_runs, args.alone_runs)
    write_record(out, {"data": f"synthetic: {data}", "frames_identical": identical,
                       "results": results, "trainings": trainings, "busy machine": busy})
    for name, r in results.items():
        print(f"{name}: {r['files']} files in {r['seconds']}s ({r['files_per_second']} files/s)")
    print("frames identical across engines:", identical)
    _print_trainings(trainings, args.frame)
    _print_busy(busy)


def _print_trainings(trainings: dict, frame: str) -> None:
    print(f"xlarank train on {frame}: alone {trainings['alone_seconds']}s")
    for name in ("side by side", "side by side under make -j2"):
        r = trainings[name]
        print(f"  two {name}: {r['seconds']}s, ratio {r['ratio']} "
              f"({'within' if r['within_limit'] else 'OVER'} the {CONCURRENCY_LIMIT} limit)")


if __name__ == "__main__":
    main()
