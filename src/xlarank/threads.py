"""How many threads the boosters and the Numba kernels use: a count chosen on purpose.

Two jobs that each take every core of a 2-core machine run about six times slower than
either alone (OpenMP threads spin while they wait for cores the other job holds), so
xlarank never lets a library pick. The count is the ``--threads`` given, else the cores
this process may run on divided by the jobs running at once: the xlarank commands running
on this machine for this user (each registers itself in a folder of pid files while it
runs, `running_jobs`), or the jobs make runs at once (``-jN``, read from ``MAKEFLAGS``),
whichever is more. The count is taken again at each booster fit and predict, so a job
started first gives up threads when a second one starts. The total is shared by the
command's local worker processes (`xlarank.engine`); a Dask task uses one thread, since
the worker's own thread slots are the cluster's parallelism.

`use_threads` sets the count for this process (Numba's parallel regions included);
`chosen_threads` is what the booster adapters pass to LightGBM and XGBoost at fit and at
predict.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import tempfile
from pathlib import Path

# The --threads a command was given (None: share the cores, `default_threads`).
_chosen: int | None = None
# This process's pid file in `jobs_dir`, once registered.
_registered: Path | None = None


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers restrict)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def make_jobs(makeflags: str | None = None) -> int:
    """The jobs make runs at once when xlarank runs under ``make -jN`` (1 otherwise).

    ``-j`` without a number lets make run any number of jobs: counted as one per core,
    so each gets a single thread.
    """
    flags = os.environ.get("MAKEFLAGS", "") if makeflags is None else makeflags
    found = re.search(r"(?:^|\s)-j(\d*)(?=\s|$)", flags)
    if found is None:
        return 1
    return int(found.group(1)) if found.group(1) else available_cores()


def jobs_dir() -> Path:
    """The folder where running xlarank commands leave their pid files (per user)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"xlarank-jobs-{os.getuid() if hasattr(os, 'getuid') else 0}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def running_jobs() -> int:
    """The xlarank commands running now (this one included when registered); pid files of
    processes that died without cleaning up are removed."""
    count = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in jobs_dir().iterdir():
            if entry.name.isdigit() and _alive(int(entry.name)):
                count += 1
            else:
                entry.unlink(missing_ok=True)
    return count


def _register_job() -> None:
    global _registered
    if _registered is not None:
        return
    try:
        folder = jobs_dir()
        folder.mkdir(mode=0o700, exist_ok=True)
        _registered = folder / str(os.getpid())
        _registered.touch()
    except OSError:  # no writable temporary folder: count make's jobs only
        _registered = None
        return
    atexit.register(_registered.unlink, missing_ok=True)


def default_threads() -> int:
    """Threads when none are given: the cores shared among the jobs running at once
    (`running_jobs`, or make's -jN if more), at least 1."""
    return max(1, available_cores() // max(make_jobs(), running_jobs(), 1))


def use_threads(threads: int | None = None) -> int:
    """Choose this process's thread count: ``threads`` when given and positive, else
    `default_threads` with this process registered as a running job. Applies it to Numba
    and returns it."""
    global _chosen
    if threads and threads > 0:
        _chosen = threads
        count = threads
    else:
        _chosen = None
        _register_job()
        count = default_threads()
    import numba

    # Numba's count is per calling thread and capped by the pool it started with.
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    return count


def chosen_threads() -> int:
    """The --threads a command was given, else `default_threads` now (the jobs running
    may have changed since the command started)."""
    return _chosen if _chosen is not None else default_threads()

