"""Setting up from a fresh clone: `make demo`, then `make test`, as the README shows them.

The repository's HEAD is cloned into a temporary folder (with `../shared` beside it, as
on the project's machines and in CI), and the two commands run there one after the
other, each from nothing: `make demo` makes the virtualenv, installs xlarank from PyPI
and runs the demo; `make test` installs the test extras and runs lint and the suite.
Recorded for each: wall seconds, its exit status, the longest stretch with no output
(what a user waits through in silence) and its last line; for `make test` the count of
tests. The load average before and after says how quiet the machine was.

    python bench/setup.py --out bench/results/setup.json
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from provenance import write_record

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: Path) -> dict:
    """Run ``command``, reading its output as it comes: wall seconds, exit status, the
    longest gap between two pieces of output, the last line."""
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": ""})
    last, longest, tail = started, 0.0, b""
    while piece := proc.stdout.read1(4096):
        now = time.monotonic()
        longest = max(longest, now - last)
        last = now
        tail = (tail + piece)[-4096:]
    status = proc.wait()
    wall = time.monotonic() - started
    longest = max(longest, time.monotonic() - last)
    lines = [line for line in tail.decode(errors="replace").splitlines() if line.strip()]
    return {"command": " ".join(command), "seconds": round(wall, 1), "status": status,
            "longest_silence_s": round(longest, 1), "last_line": lines[-1] if lines else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--out", type=Path, default=Path("bench/results/setup.json"))
    args = parser.parse_args()
    record: dict = {"load_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "xlarank"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
                       check=True)
        if args.shared.exists():
            (Path(tmp) / "shared").symlink_to(args.shared.resolve())
        for name in ("demo", "test"):
            record[name] = timed(["make", name], clone)
            print(f"make {name}: {record[name]['seconds']} s, exit {record[name]['status']}",
                  flush=True)
    counted = re.search(r"(\d+) passed", record["test"]["last_line"])
    record["test"]["tests_passed"] = int(counted.group(1)) if counted else None
    record["load_after"] = list(os.getloadavg())
    write_record(args.out, record)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
