"""Renderers of set-up and start-up: a fresh clone's set-up (setup), commands as a user
starts them (startup) and scoring latency (score)."""

from __future__ import annotations

from render.format import (
    num,
    table,
    where,
    yes_no,
)


def setup(rec: dict) -> list[str]:
    rows = [[f"`make {name}`", f"{num(rec[name]['seconds'] / 60, 3)} min",
             str(rec[name]["status"]), f"{num(rec[name]['longest_silence_s'])} s",
             f"`{rec[name]['last_line'][:120]}`"] for name in ("demo", "test")]
    load = ", ".join(num(x, 3) for x in rec["load_before"])
    return [table(["command", "wall time", "exit", "longest silence", "last line"], rows),
            f"Tests passed: {rec['test'].get('tests_passed')}. Load average before: {load} "
            "(1, 5, 15 min)."]


def startup(rec: dict) -> list[str]:
    commands = rec["commands"]
    rows = [[f"`{name}`", num(row["best_s"]), num(row["median_s"]),
             "–" if row["in_process_s"] is None else num(row["in_process_s"])]
            for name, row in commands.items()]
    ratios = rec["ratios"]
    out = [table(["command", "best s", "median s", "the work in process, s"], rows),
           f"`--help` / `import numpy`: {num(ratios['help_over_numpy'], 3)}x (target 1.3x); "
           f"`score` / `import numpy, numba, pyarrow.parquet`: "
           f"{num(ratios['score_over_numpy_numba_parquet'], 3)}x (target 2x)."]
    for name, row in commands.items():
        if row.get("import_top"):
            out.append(f"`{name}`, its top imports by cumulative seconds: " + "; ".join(
                f"{module} {num(seconds, 3)}" for module, seconds in row["import_top"]))
    return out


def score(rec: dict) -> list[str]:
    rows = [
        ["warm ranking in-process (median; max)",
         f"{num(rec['warm_seconds_median'])} s; {num(rec['warm_seconds_max'])} s",
         f"< {num(rec['warm_target_seconds'])} s", yes_no(rec.get("warm_within_target"))],
        ["first call", f"{num(rec['first_call_seconds'])} s", "", ""],
        ["import + model load", f"{num(rec['import_and_load_model_seconds'])} s", "", ""],
        ["`xlarank --help` / `--version` start-up (medians)",
         f"{num(rec['help_seconds_median'])} s / {num(rec['version_seconds_median'])} s",
         f"< {num(rec['startup_target_seconds'])} s", yes_no(rec.get("startup_within_target"))],
    ]
    return [f"{rec['configs']} configs of `{where(rec['graph'])}`, model `{rec['model']}`, "
            f"{rec.get('threads', '–')} threads.",
            table(["measure", "seconds", "target", "met"], rows)]
