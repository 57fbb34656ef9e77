"""Run the declared benches (bench/benches.py), one command after another, in declaration order.

    python bench/run.py [--list] [--target TARGET | --only NAME [NAME ...]] [--set OPTION=VALUE]

By default the benches of `make bench` (target "bench": every bench but the fresh-clone
set-up, the full-size one and the earlier runs kept on the page); `--target bench-setup`
or `--target bench-full` runs those targets' own; `--only` runs the named benches, whatever
their target. Each command runs from the repository root as declared, its leading
`python` replaced by this interpreter, and writes its record under bench/results/; the
first one that fails stops the run (its exit status is this one's). `--set preset=small`
replaces the value of `--preset` in each command run (an error where none passes it).
`--list` prints what would run, with the data each command reads, and runs nothing.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

from benches import BENCHES, TARGETS, Bench, of_target

ROOT = Path(__file__).resolve().parents[1]


def argv_of(bench: Bench, settings: dict[str, str] | None = None) -> list[str]:
    """The bench's command as an argument list: this interpreter in place of its leading
    `python`, and each ``settings`` option's value replaced."""
    argv = shlex.split(bench.command)
    if argv[0] != "python":
        raise ValueError(f"{bench.name}: its command does not start with python: "
                         f"{bench.command}")
    argv[0] = sys.executable
    for option, value in (settings or {}).items():
        flag = f"--{option}"
        if flag not in argv[:-1]:
            raise ValueError(f"{bench.name}: its command has no {flag} to set")
        argv[argv.index(flag) + 1] = value
    return argv


def selected(target: str | None, only: list[str] | None) -> list[Bench]:
    """The benches to run: the named ones (in declaration order), else the target's."""
    if only:
        unknown = [n for n in only if n not in BENCHES]
        if unknown:
            raise ValueError(f"no such bench: {', '.join(unknown)} (python bench/run.py "
                             "--list --target all names them all)")
        return [b for b in BENCHES.values() if b.name in only]
    if target == "all":
        return list(BENCHES.values())
    return of_target(target or "bench")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true",
                        help="print the benches that would run and the data they read")
    parser.add_argument("--target", default="bench", choices=[*TARGETS, "all"],
                        help="the make target whose benches to run (all: every declared "
                             "bench, with --list)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these benches alone")
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="replace OPTION's value (e.g. preset=small) in each command")
    args = parser.parse_args(argv)
    try:
        settings = dict(s.split("=", 1) for s in args.set)
    except ValueError:
        parser.error("--set takes OPTION=VALUE")
    try:
        benches = selected(args.target, args.only)
        commands = [(b, argv_of(b, settings)) for b in benches]
    except ValueError as err:
        parser.error(str(err))
    if args.list:
        for bench, command in commands:
            missing = [p for p in bench.needs if not (ROOT / p).exists()]
            print(f"{bench.name} [{bench.target or 'no make target'}]: "
                  + shlex.join(["python", *command[1:]]))
            if bench.needs:
                print("    reads: " + ", ".join(
                    p + (" (missing)" if p in missing else "") for p in bench.needs))
        return 0
    if args.target == "all" and not args.only:
        parser.error("--target all only lists: run a target or --only NAME")
    for i, (bench, command) in enumerate(commands, 1):
        print(f"[{i}/{len(commands)}] {bench.name}: {shlex.join(command)}", flush=True)
        started = time.perf_counter()
        status = subprocess.run(command, cwd=ROOT, check=False).returncode
        if status:
            print(f"bench {bench.name} failed (exit {status}) after "
                  f"{time.perf_counter() - started:.0f} s: {bench.command}", file=sys.stderr)
            return status
        print(f"[{i}/{len(commands)}] {bench.name} done in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
