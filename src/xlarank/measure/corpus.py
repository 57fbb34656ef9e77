"""A corpus of measured programs: every program of a programs list measured
(`measure_program`) into ``records/<name>.pb``, and ``manifest.json`` listing them.

A program whose repeat tau (the noise ceiling, `noise_ceiling`) is under
``min_repeat_tau`` after its rounds gets more rounds, one at a time, up to
``retry_rounds``; if it is still under, its record moves to ``left_out/`` and the manifest
lists it there with its figures, so the corpus holds only programs whose order repeats.
Programs are measured a family at a time in turn, so a build cut short has every family.

Each record is kept once written: a rerun measures only the programs without one (and
goes on from a killed program's partial log), so an interrupted build loses at most the
timings not yet logged.
"""

from __future__ import annotations

import datetime
import json
import math
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from xlarank.atomic import write_text_atomic
from xlarank.errors import XlarankError
from xlarank.files import open_regular
from xlarank.measure import (
    MAX_ROUNDS,
    Settings,
    check_timeout,
    load_program,
    measure_program,
    program_time_limit,
)
from xlarank.measure.record import partial_path, sidecar_path

MANIFEST = "manifest.json"
MIN_REPEAT_TAU = 0.4
RETRY_ROUNDS = 8
# The keys of a [[program]] table.
KEYS = frozenset({"name", "family", "function", "about"})


@dataclass(frozen=True)
class CorpusProgram:
    """One program of a programs list: ``function`` is PATH.py:FUNCTION with PATH relative
    to the list's folder."""

    name: str
    family: str
    function: str
    about: str = ""


def read_programs(path: str | Path) -> list[CorpusProgram]:
    """The ``[[program]]`` tables of a programs list (TOML: name, family, function, about),
    their functions' paths made relative to the current folder."""
    path = Path(path)
    with open_regular(path, "programs list") as handle:
        try:
            table = tomllib.loads(handle.read().decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise XlarankError(f"{path}: not a TOML programs list ({exc})") from None
    entries = table.get("program")
    if not isinstance(entries, list) or not entries:
        raise XlarankError(f"{path}: lists no [[program]]")
    programs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) and entry.get(k)
                for k in ("name", "family", "function")):
            raise XlarankError(f"{path}: program {i + 1} needs name, family and function "
                               "(strings)")
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise XlarankError(f"{path}: program {i + 1} ({entry['name']!r}): unknown "
                               f"key{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(map(repr, unknown))}; a program takes "
                               f"{', '.join(sorted(KEYS))}")
        if not isinstance(entry.get("about", ""), str):
            raise XlarankError(f"{path}: program {i + 1} ({entry['name']!r}): about must "
                               "be a string")
        if not entry["name"].replace("_", "").isalnum():
            raise XlarankError(f"{path}: program name {entry['name']!r}: use letters, "
                               "digits and _")
        file, sep, function = entry["function"].rpartition(":")
        if not sep or not file or not function.isidentifier():
            raise XlarankError(f"{path}: program {i + 1} ({entry['name']!r}): function "
                               f"{entry['function']!r}: expected PATH.py:FUNCTION, PATH "
                               "relative to the list's folder")
        programs.append(CorpusProgram(entry["name"], entry["family"],
                                      f"{path.parent / file}{sep}{function}",
                                      entry.get("about", "")))
    names = [p.name for p in programs]
    if len(set(names)) != len(names):
        raise XlarankError(f"{path}: a program name is listed twice")
    return programs


def _figures(manifest: dict, program: CorpusProgram, record: Path) -> dict:
    noise = manifest["noise"]
    rounds = np.array(manifest["per_round_ns"], dtype=np.float64)  # None (untimed) is NaN
    timed = np.median(rounds[:, ~np.isnan(rounds).any(axis=0)], axis=0)
    return {"name": program.name, "family": program.family, "record": str(record),
            "about": program.about, "configs": manifest["measured"],
            "failed": len(manifest["errors"]), "rounds": len(rounds),
            "repeat_tau": noise["repeat_tau"], "spread": noise["spread"],
            "within_noise": noise["within_noise"], "noise_ns": noise["noise_ns"],
            "runtime_ms": [timed.min() / 1e6, timed.max() / 1e6] if timed.size else None}


def _measure(program: CorpusProgram, record: Path, settings: Settings,
             on_step: Callable | None, timeout: float | None = None) -> dict:
    file = program.function.rpartition(":")[0]
    with program_time_limit(timeout, file):
        fn, args, _ = load_program(program.function)
        result = measure_program(fn, args, record, name=program.name,
                                 source=program.function, settings=settings,
                                 resume=partial_path(record).exists(), on_step=on_step,
                                 extra={"family": program.family})
    return result.manifest


def _stored(record: Path) -> dict | None:
    side = sidecar_path(record)
    if record.is_file() and side.is_file():
        try:
            return json.loads(side.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
    return None


def _families_in_turn(programs: list[CorpusProgram]) -> list[CorpusProgram]:
    """The programs reordered: the first of each family, then the second of each, ..."""
    families: dict[str, list[CorpusProgram]] = {}
    for program in programs:
        families.setdefault(program.family, []).append(program)
    out = []
    for k in range(max(len(v) for v in families.values())):
        out.extend(v[k] for v in families.values() if k < len(v))
    return out


def check_min_repeat_tau(value: float, *, strict: bool = True) -> None:
    """XlarankError unless ``value`` is a finite number (NaN would keep every program: no
    tau is under it) and, ``strict``, within -1..1, the range of a Kendall tau."""
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise XlarankError(f"--min-repeat-tau must be a finite number, not {value}")
    if strict and not -1 <= value <= 1:
        raise XlarankError(f"--min-repeat-tau must lie in -1..1 (a Kendall tau), not "
                           f"{value}")


def check_retry_rounds(rounds: int) -> None:
    """XlarankError unless ``rounds`` (--retry-rounds) is a whole number in
    1..`MAX_ROUNDS`."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise XlarankError(f"--retry-rounds must lie in 1..{MAX_ROUNDS}, not {rounds}")


def build_corpus(programs: list[CorpusProgram], out_dir: str | Path, *,
                 settings: Settings | None = None, min_repeat_tau: float = MIN_REPEAT_TAU,
                 retry_rounds: int = RETRY_ROUNDS,
                 on_program: Callable[[CorpusProgram], None] | None = None,
                 on_step: Callable[[str, int], None] | None = None,
                 measure: bool = True, timeout: float | None = None) -> dict:
    """Measure every program without a record under ``out_dir`` and write the manifest;
    returns it. With ``measure`` False nothing is measured: the manifest lists the records
    there, and the programs without one under ``not_measured``. ``timeout``: the most
    seconds one program may take, loaded, traced and measured (`program_time_limit`;
    None: no limit); one that runs longer ends the build with an XlarankError naming its
    file, its timings kept for the next run."""
    check_min_repeat_tau(min_repeat_tau, strict=False)
    check_retry_rounds(retry_rounds)
    if timeout is not None:
        check_timeout(timeout)
    settings = settings or Settings()
    out_dir = Path(out_dir)
    records, left = out_dir / "records", out_dir / "left_out"
    started = time.perf_counter()
    kept, left_out, not_measured = [], [], []
    for program in _families_in_turn(programs):
        record = records / f"{program.name}.pb"
        parked = left / f"{program.name}.pb"
        manifest = _stored(record)
        if manifest is None and _stored(parked) is not None:
            left_out.append(_figures(_stored(parked), program, parked.relative_to(out_dir)))
            continue
        if manifest is None and not measure:
            not_measured.append(program.name)
            continue
        if manifest is None:
            manifest = _measure(program, record, replace(
                settings, target_repeat_tau=min_repeat_tau,
                max_rounds=max(retry_rounds, settings.rounds)), on_step, timeout)
        tau = manifest["noise"]["repeat_tau"]
        if tau is None or tau < min_repeat_tau:
            left.mkdir(parents=True, exist_ok=True)
            record.replace(parked)
            sidecar_path(record).replace(sidecar_path(parked))
            left_out.append(_figures(manifest, program, parked.relative_to(out_dir)))
        else:
            kept.append(_figures(manifest, program, record.relative_to(out_dir)))
        if on_program:
            on_program(program)
    listed = [p.name for p in programs]
    kept.sort(key=lambda p: listed.index(p["name"]))
    left_out.sort(key=lambda p: listed.index(p["name"]))
    manifest = {"generator": "xlarank corpus",
                "written": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "min_repeat_tau": min_repeat_tau,
                "families": sorted({p["family"] for p in kept}),
                "programs": kept, "left_out": left_out,
                "not_measured": sorted(not_measured, key=listed.index),
                "wall_s_this_run": round(time.perf_counter() - started, 1)}
    write_text_atomic(out_dir / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return manifest
