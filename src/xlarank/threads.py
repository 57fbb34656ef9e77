"""How many threads the boosters and the Numba kernels use: a count chosen on purpose.

Two jobs that each take every core of a 2-core machine run about six times slower than
either alone (OpenMP threads spin while they wait for cores the other job holds), so
xlarank never lets a library pick. The count is the ``--threads`` given, else the cores
this process may run on divided by the jobs running at once: the xlarank commands running
on this machine for this user (each registers itself in a folder of pid files while it
runs, `running_jobs`), or the jobs make runs at once (``-jN``, read from ``MAKEFLAGS``),
whichever is more; and never more than the cores other programs leave idle (`other_load`:
a LightGBM or any OpenMP job of another program meets the same cliff, up to 70 times
slower beside one, and no pid file tells of it). The count is taken again at each booster
fit and predict, so a job started first gives up threads when a second one starts. The
total is shared by the command's local worker processes (`xlarank.engine`); a Dask task
uses one thread, since the worker's own thread slots are the cluster's parallelism.

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
import time
from pathlib import Path

# The --threads a command was given (None: share the cores, `default_threads`).
_chosen: int | None = None
# This process's pid file in `jobs_dir`, once registered.
_registered: Path | None = None

# Set to 0 to size threads by cores and jobs only (the bench measures what the back-off
# for other programs' load costs a job alone). OMP_WAIT_POLICY=PASSIVE is no substitute:
# it cured side-by-side runs but made a job alone 2-3 times slower.
LOAD_ENV = "XLARANK_LOAD_BACKOFF"
# A load sample is reused this long: fits and predicts of a scoring loop come many a second.
LOAD_TTL = 1.0
# Shorter windows than this hold too few clock ticks (100 a second per core) to mean much;
# readings older than the longest say more about the past than about now.
LOAD_WINDOW = 0.1
LOAD_MAX_WINDOW = 2.0
PROC_STAT = "/proc/stat"
# (monotonic time, busy CPU seconds of our cores, this process's CPU seconds) when read.
_counters: tuple[float, float, float] | None = None
# (monotonic time, cores busy with other programs) of the last sample.
_load: tuple[float, float] | None = None


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


def _busy_seconds(path: str | None = None) -> float | None:
    """CPU seconds the cores this process may run on have spent busy since boot (every
    program's, this one's included), from /proc/stat; None where there is none (macOS)."""
    try:
        with open(path or PROC_STAT, "rb") as handle:
            lines = handle.read().splitlines()
        try:
            mine = {f"cpu{i}".encode() for i in os.sched_getaffinity(0)}
        except AttributeError:
            mine = None
        ticks = 0
        for line in lines:
            fields = line.split()
            if not fields or not fields[0].startswith(b"cpu"):
                continue
            # The first line sums all cores: a container's CPU set sums its own lines.
            if (fields[0] not in mine) if mine is not None else fields[0] != b"cpu":
                continue
            # user nice system idle iowait irq softirq steal (guest time is inside user)
            values = [int(v) for v in fields[1:9]]
            ticks += sum(values) - values[3] - values[4]
        return ticks / os.sysconf("SC_CLK_TCK") if ticks else None
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _own_seconds() -> float:
    """CPU seconds of this process, all its threads (not its children)."""
    own = os.times()
    return own.user + own.system


def _load_average() -> float:
    """Fallback without /proc/stat: the 1-minute load average, less this process's share
    of it can not be told apart, so this counts our own threads too; 0.0 where none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def other_load(now: float | None = None) -> float:
    """Cores (of those this process may use) kept busy by other programs lately: busy
    time from /proc/stat over a short window, less this process's own CPU time.

    A sample is reused for `LOAD_TTL` seconds, and the window runs from the previous
    reading when that is recent, so a loop of predicts pays nothing; otherwise it waits
    `LOAD_WINDOW` seconds once. Without /proc/stat, `os.getloadavg` (which counts this
    process too); 0.0 when neither is there.
    """
    global _counters, _load
    now = time.monotonic() if now is None else now
    if _load is not None and 0 <= now - _load[0] < LOAD_TTL:
        return _load[1]
    busy = _busy_seconds()
    if busy is None:
        value = _load_average()
    else:
        reading = (now, busy, _own_seconds())
        if _counters is None or not LOAD_WINDOW <= now - _counters[0] <= LOAD_MAX_WINDOW:
            time.sleep(LOAD_WINDOW)
            _counters, now = reading, time.monotonic()
            reading = (now, _busy_seconds() or busy, _own_seconds())
        window = reading[0] - _counters[0]
        value = max(0.0, (reading[1] - _counters[1]) - (reading[2] - _counters[2])) / window
        _counters = reading
    _load = (now, value)
    return value


def load_backoff_enabled() -> bool:
    return os.environ.get(LOAD_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def default_threads(load: bool | None = None) -> int:
    """Threads when none are given: the cores shared among the jobs running at once
    (`running_jobs`, or make's -jN if more), and no more than the cores other programs
    leave idle (`other_load`, rounded; with ``load`` False or XLARANK_LOAD_BACKOFF=0 not
    looked at); at least 1."""
    cores = available_cores()
    count = cores // max(make_jobs(), running_jobs(), 1)
    if load is None:
        load = load_backoff_enabled()
    if load:
        count = min(count, round(cores - other_load()))
    return max(1, count)


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


def chosen_threads(load: bool | None = None) -> int:
    """The --threads a command was given, else `default_threads` now (the jobs running,
    and other programs' load, may have changed since the command started)."""
    return _chosen if _chosen is not None else default_threads(load)

