"""The measured corpus measured again: does a stored record hold on another day?

For every program of corpus/manifest.json (or those named), `xlarank measure PROGRAM
--remeasure RECORD --configs N --seed S` runs as a user runs it, in a fresh process, timing
on one pinned CPU. It measures N of the record's configs again (the default run among them)
and prints the Kendall tau between the stored and the new runtimes. Beside that tau this
bench puts what the record says to expect: the record's own repeat tau (its even rounds
against its odd ones, over all its configs) and the same repeat tau over the N configs
drawn here, and the calendar days between the two measurements.

    python bench/remeasure.py --corpus corpus --configs 50 --seed 1 \\
        --out bench/results/corpus_remeasure.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from provenance import write_record

ROOT = Path(__file__).resolve().parents[1]


def one_program(corpus: Path, program: dict, source: str, configs: int, seed: int,
                timing_cpu: int, work: Path) -> dict:
    """One program remeasured by the command: the stored and the new noise, the tau
    between the two measurements and the days between them."""
    from xlarank.measure import noise_ceiling

    record = corpus / program["record"]
    stored = json.loads(record.with_suffix(".json").read_text())
    out = work / f"{program['name']}.pb"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "xlarank", "measure", source, "--remeasure", str(record),
         "--configs", str(configs), "--seed", str(seed), "--out", str(out),
         "--timing-cpu", str(timing_cpu)],
        capture_output=True, text=True, check=False, cwd=corpus)
    if done.returncode != 0:
        return {"family": program["family"], "error": done.stderr.strip()[-400:]}
    new = json.loads(out.with_suffix(".json").read_text())
    chosen = new["remeasure"]["configs"]
    per_round = np.array(stored["per_round_ns"], np.float64)
    same_configs = noise_ceiling(per_round[:, chosen])["repeat_tau"]
    then = dt.datetime.fromisoformat(stored["started"])
    now = dt.datetime.fromisoformat(new["started"])
    return {"family": program["family"], "configs": len(chosen),
            "stored_started": stored["started"], "started": new["started"],
            "days_apart": (now.date() - then.date()).days,
            "hours_apart": round((now - then).total_seconds() / 3600, 1),
            "stored_rounds": per_round.shape[0], "rounds": new["settings"]["rounds"],
            "stored_repeat_tau": round(stored["noise"]["repeat_tau"], 4),
            "stored_repeat_tau_same_configs": (None if same_configs is None
                                               else round(same_configs, 4)),
            "repeat_tau": (None if new["noise"]["repeat_tau"] is None
                           else round(new["noise"]["repeat_tau"], 4)),
            "tau_with_stored": (None if new["remeasure"]["tau_with_stored"] is None
                                else round(new["remeasure"]["tau_with_stored"], 4)),
            "load_average": new["load_average"],
            "wall_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    parser.add_argument("--programs", default="",
                        help="comma-separated program names [every kept program]")
    parser.add_argument("--configs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timing-cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--out", type=Path,
                        default=Path("bench/results/corpus_remeasure.json"))
    args = parser.parse_args()
    from xlarank.measure.corpus import read_programs

    manifest = json.loads((args.corpus / "manifest.json").read_text())
    sources = {p.name: p.function
               for p in read_programs(args.corpus.resolve() / "programs.toml")}
    wanted = set(filter(None, args.programs.split(",")))
    programs = [p for p in manifest["programs"] if not wanted or p["name"] in wanted]
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        for program in programs:
            rows[program["name"]] = row = one_program(
                args.corpus.resolve(), program, sources[program["name"]], args.configs,
                args.seed, args.timing_cpu, Path(work))
            print(f"{program['name']:22} " + (
                f"tau with stored {row['tau_with_stored']}, stored repeat tau "
                f"{row['stored_repeat_tau']} ({row['stored_repeat_tau_same_configs']} on "
                f"these configs), {row['days_apart']} day(s) apart ({row['wall_s']} s)"
                if "error" not in row else f"error: {row['error']}"), flush=True)
    kept = [r for r in rows.values() if r.get("tau_with_stored") is not None]
    gap = [r["tau_with_stored"] - r["stored_repeat_tau_same_configs"] for r in kept
           if r["stored_repeat_tau_same_configs"] is not None]
    write_record(args.out, {
        "configs": args.configs, "seed": args.seed, "timing_cpu": args.timing_cpu,
        "programs": rows,
        "summary": {
            "programs": len(kept),
            "tau_with_stored_median": round(float(np.median(
                [r["tau_with_stored"] for r in kept])), 4) if kept else None,
            "stored_repeat_tau_same_configs_median": round(float(np.median(
                [r["stored_repeat_tau_same_configs"] for r in kept])), 4) if kept else None,
            "gap_median": round(float(np.median(gap)), 4) if gap else None,
            "below_by_more_than_0.1": sum(g < -0.1 for g in gap),
            "days_apart": sorted({r["days_apart"] for r in kept})}})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
