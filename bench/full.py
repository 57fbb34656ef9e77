"""The whole dataset end to end on one machine: featurize, train the five collections with
their packaged default specs, evaluate on valid, write the submission.

Each step runs as a user runs it (an ``xlarank`` process) and is measured for wall time
and peak RSS (the largest resident set of the step's process and its worker processes,
from wait4). The data is made first if missing (``xlarank synth --preset PRESET``: the
``real`` preset has the real file counts and size mix, 13.3M configs); making it is
reported but not counted in the total. Targets for the real preset on 2 cores: whole run
< 60 min, every step's peak RSS < 12 GB.

    python bench/full.py --preset real --data data/synth-real --out bench/results/full.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import write_record
from xlarank.data.collections import COLLECTIONS

TOTAL_TARGET_MIN = 60
RSS_TARGET_GB = 12


def run_step(args: list[str]) -> dict:
    """Run ``xlarank ARGS``; its wall seconds and peak RSS (GB, children included)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "xlarank", *args], stdout=out,
                                stderr=err)
        # wait4 reports the largest RSS of the process and of the children it waited for.
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        said, errors = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"xlarank {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{errors[-2000:]}")
    return {"command": "xlarank " + " ".join(args), "seconds": round(seconds, 1),
            "peak_rss_gb": round(usage.ru_maxrss / 2**20, 2),
            "said": said.strip().splitlines()[-1:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="real")
    parser.add_argument("--data", default=None, help="Dataset root [data/synth-PRESET].")
    parser.add_argument("--work", default=None, help="Frames, models and reports "
                        "[bench/results/full-PRESET].")
    parser.add_argument("--workers", type=int, default=2, help="Featurize processes.")
    parser.add_argument("--out", default="bench/results/full.json")
    args = parser.parse_args()
    data = Path(args.data or f"data/synth-{args.preset}")
    work = Path(args.work or f"bench/results/full-{args.preset}")
    shutil.rmtree(work, ignore_errors=True)
    steps: dict[str, dict] = {}
    if not (data / "synth.json").exists():
        shutil.rmtree(data, ignore_errors=True)
        steps["synth (not counted)"] = run_step(["synth", str(data), "--preset", args.preset,
                                                 "--workers", str(args.workers)])
    frames, models, reports = work / "frames", work / "models", work / "reports"
    steps["featurize"] = run_step(["featurize", str(data), "--out-dir", str(frames),
                                   "--workers", str(args.workers)])
    for c in COLLECTIONS:
        steps[f"train {c.slug}"] = run_step(["train", str(frames / c.slug / "train.parquet"),
                                             "--out", str(models / c.slug)])
    for c in COLLECTIONS:
        steps[f"evaluate {c.slug}"] = run_step(
            ["evaluate", str(frames / c.slug / "valid.parquet"), "--model",
             str(models / c.slug), "--out", str(reports / f"{c.slug}.csv")])
    steps["submit"] = run_step(["submit", str(data), "--models", str(models), "--out",
                                str(work / "submission.csv")])
    counted = [s for name, s in steps.items() if "not counted" not in name]
    total_min = sum(s["seconds"] for s in counted) / 60
    peak = max(s["peak_rss_gb"] for s in counted)
    results = {"preset": args.preset, "data": str(data), "synthetic": True,
               "cores": os.cpu_count(), "steps": steps, "total_minutes": round(total_min, 1),
               "peak_rss_gb": peak, "total_target_minutes": TOTAL_TARGET_MIN,
               "rss_target_gb": RSS_TARGET_GB,
               "within_targets": total_min < TOTAL_TARGET_MIN and peak < RSS_TARGET_GB}
    out = Path(args.out)
    write_record(out, results)
    for name, step in steps.items():
        print(f"{name:28s} {step['seconds']:8.1f} s  peak RSS {step['peak_rss_gb']:6.2f} GB")
    print(f"total {total_min:.1f} min (target < {TOTAL_TARGET_MIN}), peak RSS {peak:.2f} GB "
          f"(target < {RSS_TARGET_GB}) on synthetic data ({args.preset} preset)")


if __name__ == "__main__":
    main()
