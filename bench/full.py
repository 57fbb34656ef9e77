"""The whole dataset end to end on one machine: featurize, train the five collections with
their packaged default specs, evaluate on valid, write the submission.

Each step runs as a user runs it (an ``xlarank`` process) and is measured for wall time
and peak RSS (the largest resident set of the step's process and its worker processes,
from wait4). The data is made first if missing (``xlarank synth --preset PRESET``: the
``real`` preset has the real file counts and size mix, 13.3M configs); making it is
reported but not counted in the total. Targets for the real preset on 2 cores: whole run
< 60 min, every step's peak RSS < 12 GB.

    python bench/full.py --preset real --data data/synth-real --out bench/results/full.json

The featurize step alone, with this checkout and with an earlier commit's sources side by
side (``--before REV``: a detached worktree of REV, its ``xlarank`` run from the same
virtualenv), alternated, on every K-th file of each collection and split of the preset
(``--share K``: the preset's size mix at 1/K of its files, made by the preset's own
per-file generator, so each file is the one the whole preset would hold):

    python bench/full.py --preset real --share 10 --featurize-only --before 37d32bf^ \
        --out bench/results/featurize_full.json
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

from provenance import checkout_at, write_record
from xlarank.data.collections import COLLECTIONS

TOTAL_TARGET_MIN = 60
RSS_TARGET_GB = 12


def run_step(args: list[str], sources: Path | None = None) -> dict:
    """Run ``xlarank ARGS`` (from the ``src`` folder of ``sources`` when given); its wall
    seconds and peak RSS (GB, children included)."""
    env = dict(os.environ)
    if sources is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(sources / "src"), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "xlarank", *args], stdout=out,
                                stderr=err, env=env)
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


def make_share(data: Path, preset: str, every: int, workers: int) -> None:
    """Every ``every``-th file (index 0, K, 2K, ...) of each collection and split of the
    preset under ``data``, each the file the whole preset holds at that index; the tree
    appears when complete."""
    import json

    from xlarank.data.synth.dataset import PRESETS, synth_jobs, write_synth_file
    from xlarank.engine import map_ordered

    building = data.with_name(f".{data.name}.partial")
    shutil.rmtree(building, ignore_errors=True)
    jobs = [job for job in synth_jobs(building, 0, PRESETS[preset]) if job.index % every == 0]
    for _ in map_ordered(write_synth_file, jobs, workers):
        pass
    (building / "synth.json").write_text(json.dumps(
        {"generator": "bench/full.py --share", "preset": preset, "seed": 0, "share": every,
         "note": "synthetic data, not TpuGraphs"}, indent=2) + "\n")
    building.rename(data)


def frame_digests(frames: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(frames)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(frames.rglob("*.parquet")) if not any(
                part.startswith(".") for part in p.relative_to(frames).parts)}


def featurize_before_after(data: Path, work: Path, before: str, workers: int,
                           repeats: int) -> dict:
    """The featurize step with this checkout's sources and with ``before``'s, alternated
    ``repeats`` times, each into fresh folders (no part is reused). A first run of each
    side on the smallest file of each collection warms its Numba cache, not counted."""
    with checkout_at(before) as (rev, old):
        return _featurize_sides(data, work, before, rev, old, workers, repeats)


def _featurize_sides(data: Path, work: Path, before: str, rev: str, old: Path,
                     workers: int, repeats: int) -> dict:
    """`featurize_before_after` with ``before`` (commit ``rev``) checked out at ``old``."""
    sides = {"after": None, "before": old}
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    digests = {}
    # The smallest file of each collection, so both sides' tile and layout kernels
    # are compiled (or loaded) before anything is timed.
    for collection in COLLECTIONS:
        smallest = min((data / "npz" / collection.folder).rglob("*.npz"),
                       key=lambda f: f.stat().st_size)
        warm = work / "warm" / "npz" / smallest.relative_to(data / "npz")
        warm.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(smallest, warm)
    for side, sources in sides.items():
        run_step(["featurize", str(work / "warm"), "--out-dir", str(work / f"warm-{side}")],
                 sources)
    for _ in range(repeats):
        for side, sources in sides.items():
            frames = work / f"frames-{side}"
            shutil.rmtree(frames, ignore_errors=True)
            runs[side].append(run_step(["featurize", str(data), "--out-dir", str(frames),
                                        "--workers", str(workers)], sources))
            digests[side] = frame_digests(frames)
    best = {side: min(r["seconds"] for r in rs) for side, rs in runs.items()}
    files = list(data.rglob("*.npz"))
    return {"before": before, "before_commit": rev, "runs": runs, "best_seconds": best,
            "after_over_before": round(best["after"] / best["before"], 3),
            "frames": len(digests["after"]),
            "frames_identical": digests["after"] == digests["before"],
            "files": len(files), "npz_gb": round(sum(f.stat().st_size for f in files) / 1e9, 2),
            "peak_rss_gb": {side: max(r["peak_rss_gb"] for r in rs) for side, rs in runs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="real")
    parser.add_argument("--data", default=None, help="Dataset root [data/synth-PRESET].")
    parser.add_argument("--work", default=None, help="Frames, models and reports "
                        "[bench/results/full-PRESET].")
    parser.add_argument("--workers", type=int, default=2, help="Featurize processes.")
    parser.add_argument("--share", type=int, default=1, metavar="K",
                        help="Every K-th file of each collection and split [1: all].")
    parser.add_argument("--featurize-only", action="store_true",
                        help="Only the featurize step, with --before beside it.")
    parser.add_argument("--before", default="37d32bf^", metavar="REV",
                        help="With --featurize-only: the commit to compare [37d32bf^, the "
                        "reader before ISA-L].")
    parser.add_argument("--repeats", type=int, default=2,
                        help="With --featurize-only: alternated runs of each side.")
    parser.add_argument("--out", default="bench/results/full.json")
    args = parser.parse_args()
    tag = args.preset if args.share == 1 else f"{args.preset}-share{args.share}"
    data = Path(args.data or f"data/synth-{tag}")
    work = Path(args.work or f"bench/results/full-{tag}")
    shutil.rmtree(work, ignore_errors=True)
    if args.share > 1 and not (data / "synth.json").exists():
        started = time.perf_counter()
        make_share(data, args.preset, args.share, args.workers)
        print(f"made {data} in {time.perf_counter() - started:.0f} s (not counted)")
    if args.featurize_only:
        results = {"preset": args.preset, "share": args.share, "data": str(data),
                   "synthetic": True, "cores": os.cpu_count(), "workers": args.workers,
                   **featurize_before_after(data, work, args.before, args.workers,
                                            args.repeats)}
        write_record(Path(args.out), results)
        print(f"featurize {results['best_seconds']['after']:.1f} s against "
              f"{results['best_seconds']['before']:.1f} s at {args.before} "
              f"({results['after_over_before']:.2f}x) on {results['files']} files")
        return
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
