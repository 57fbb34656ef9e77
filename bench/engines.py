"""Featurize throughput: local engine (1 and 2 processes) against Dask (2 local workers).

Featurizes every file of a synthetic tree with each engine into fresh folders (no parts
reused), checks that the frames are byte-identical, and writes files per second.

    python bench/engines.py DATA --out bench/results/engines.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from xlarank.data.collections import COLLECTIONS, SPLITS, split_files
from xlarank.distributed import dask_client
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files

ROOT = Path(__file__).resolve().parents[1]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--out", default="bench/results/engines.json")
    parser.add_argument("--work", default="bench/results/engine-frames")
    args = parser.parse_args()
    spec = load_feature_spec(ROOT / "features" / "default.toml")
    data, work = Path(args.data), Path(args.work)
    # A first pass loads the Numba cache, so no engine pays for compiling.
    run(data, work / "warm", spec)
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
    out.write_text(json.dumps({"data": f"synthetic: {data}", "frames_identical": identical,
                               "results": results}, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name}: {r['files']} files in {r['seconds']}s ({r['files_per_second']} files/s)")
    print("frames identical across engines:", identical)


if __name__ == "__main__":
    main()
