"""Where a bench's figures came from, stamped into the JSON it writes.

Every bench writes its record through `write_record`, which adds a "provenance" entry: the
UTC date it finished, the commit it ran (and whether tracked files differed from it), the
machine (cores, memory, CPU model, Python), the command line, its wall seconds and the load
average at its end. `bench/publish.py` prints these beside each table of docs/benchmarks.md,
so the page never shows a figure without the command and commit that produced it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Taken at import, which every bench does first: the record's seconds span the whole run.
_STARTED = time.perf_counter()


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict:
    """The date, commit, machine and command of the running bench (a JSON-ready dict)."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git("rev-parse", "--short=12", "HEAD") or None,
        # Untracked files (data, results) do not count: only edits to tracked code.
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": {"cores": os.cpu_count(), "memory_gb": _memory_gb(), "cpu": _cpu_model(),
                    "python": platform.python_version(), "system": platform.system()},
        "command": shlex.join(["python", str(script), *sys.argv[1:]]),
        "seconds": round(time.perf_counter() - _STARTED, 1),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def write_text_atomic(out: Path | str, text: str) -> Path:
    """Write `text` to `out` under a temporary name, then rename: never half-written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    return out


def write_record(out: Path | str, record: dict) -> Path:
    """Write `record` with its provenance to `out` (JSON), replacing it whole."""
    stamped = {"provenance": provenance(), **record}
    return write_text_atomic(out, json.dumps(stamped, indent=2, default=float) + "\n")


@contextmanager
def checkout_at(rev: str):
    """(full commit id, a temporary detached worktree of the repository at ``rev``): the
    sources a bench times beside this checkout's, removed on leaving."""
    import shutil
    import tempfile

    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    if not commit:
        raise SystemExit(f"error: {rev}: not a commit of this repository")
    old = Path(tempfile.mkdtemp(prefix="xlarank-before-"))
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(old), commit], cwd=ROOT,
                   check=True, capture_output=True)
    try:
        yield commit, old
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                       capture_output=True)
        shutil.rmtree(old, ignore_errors=True)
