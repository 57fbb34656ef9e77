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
import stat
import time
from pathlib import Path

from xlarank import environment
from xlarank.environment import MAX_THREADS, screen_environment
from xlarank.errors import XlarankError

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
# (monotonic time, busy CPU seconds of our cores, this process's CPU seconds, the other
# xlarank jobs' CPU seconds by pid) when read.
_counters: tuple[float, float, float, dict[int, float]] | None = None
# (monotonic time, cores busy with other programs) of the last sample.
_load: tuple[float, float] | None = None
# (monotonic time, this process's CPU seconds) at the last load-average sample.
_own_at: tuple[float, float] = (time.monotonic(), 0.0)


def check_environment() -> None:
    """Raise XlarankError naming the first environment variable xlarank refused
    (`screen_environment`) or XLARANK_LOAD_BACKOFF (`load_backoff_enabled`)."""
    screen_environment()
    for message in environment._refused.values():
        raise XlarankError(message)
    load_backoff_enabled()


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
    # A count of more digits than any job limit (int() refuses past 4300) is unlimited.
    digits = found.group(1)
    return int(digits) if digits and len(digits) <= 9 else available_cores()


# Linux's pid_max is at most 2**22; a longer run of digits names no process.
_MAX_PID = 1 << 22
_PID_NAME = re.compile(r"[1-9][0-9]{0,6}")


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _job_folders() -> list[Path]:
    """Where the pid files may go, in order: $XDG_RUNTIME_DIR's (private to the user), the
    temporary folder's, and ~/.cache's, for when a shared /tmp holds someone else's."""
    # Here, not at the top: tempfile (with random and hashlib) is a tenth of what
    # `xlarank --help` would import beside typer, and --help never starts a job.
    import tempfile

    name = f"xlarank-jobs-{_uid()}"
    # The XDG spec: a relative path there is to be ignored (it would be the working
    # folder's, and the pid files would land among the user's files).
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    bases = [runtime if runtime and os.path.isabs(runtime) else None,
             tempfile.gettempdir()]
    with contextlib.suppress(RuntimeError, KeyError, OSError):
        bases.append(str(Path.home() / ".cache" / "xlarank"))
    found: list[Path] = []
    for base in bases:
        if base and Path(base) / name not in found:
            found.append(Path(base) / name)
    return found


def _private_folder(folder: Path) -> bool:
    """Whether ``folder`` is a real folder (not a link) of this user that no one else may
    write in, and this process may use: on a shared /tmp anyone can make the name first,
    as a file, a link to a folder of ours (whose files the dead-pid cleanup would
    delete), or a folder of their own filled with pid files."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == _uid()
            and not info.st_mode & 0o022
            and os.access(folder, os.R_OK | os.W_OK | os.X_OK))


def _could_make(folder: Path) -> bool:
    try:
        os.lstat(folder)
    except FileNotFoundError:
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        return parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    except OSError:
        return False
    return False


def jobs_dir(create: bool = False) -> Path | None:
    """The folder where running xlarank commands leave their pid files (per user): the
    first of `_job_folders` that is this user's private folder or could be made one
    (made, with ``create``); None when none is, and the jobs are not counted."""
    for folder in _job_folders():
        if create:
            if private_folder(folder):
                return folder
        elif _private_folder(folder) or _could_make(folder):
            return folder
    return None


def private_folder(folder: Path) -> bool:
    """Whether ``folder`` is this user's private folder (`_private_folder`), made so
    (mode 0700, with its parents) where it is missing and could be made."""
    if _private_folder(folder):
        return True
    if not _could_make(folder):
        return False
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, parents=True)
        # mkdir's mode is cut by the umask and a parent made here gets the umask's; only
        # the folder itself must be private.
        os.chmod(folder, 0o700)
    return _private_folder(folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's
        return True
    except (OSError, OverflowError):
        return False
    return True


def running_jobs() -> int:
    """The xlarank commands running now (this one included when registered): plain files
    named by the pid of a live process in `jobs_dir`. Those of processes that died
    without cleaning up are removed; anything else there is left alone and not counted."""
    return len(_job_pids())


def _job_pids() -> list[int]:
    """The pids of `running_jobs`."""
    folder = jobs_dir()
    if folder is None:
        return []
    try:
        entries = list(os.scandir(folder))
    except OSError:  # gone, or unreadable: no jobs seen
        return []
    pids = []
    for entry in entries:
        if not _PID_NAME.fullmatch(entry.name) or int(entry.name) > _MAX_PID:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        if _alive(int(entry.name)):
            pids.append(int(entry.name))
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    return pids


def _unregister(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _register_job() -> None:
    """Leave this process's pid file in `jobs_dir`; where none is usable the command runs
    on, counting make's jobs only."""
    global _registered
    if _registered is not None:
        return
    folder = jobs_dir(create=True)
    if folder is None:
        return
    path = folder / str(os.getpid())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.close(fd)
    except OSError:
        return
    _registered = path
    atexit.register(_unregister, path)


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


def _jobs_seconds() -> dict[int, float]:
    """CPU seconds of the other xlarank commands running (`running_jobs`), by pid, from
    /proc/PID/stat; those that cannot be read are left out."""
    found = {}
    for pid in _job_pids():
        if pid == os.getpid():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{pid}/stat", "rb") as handle:
                # The command name, in parentheses, may hold spaces: fields follow its end.
                fields = handle.read().rsplit(b")", 1)[1].split()
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def _own_seconds() -> float:
    """CPU seconds of this process, all its threads (not its children)."""
    own = os.times()
    return own.user + own.system


def _load_average(now: float) -> float:
    """Fallback without /proc/stat: the 1-minute load average less this process's CPU
    use since the last call (the average counts our own threads too, a minute late);
    0.0 where there is none (Windows)."""
    global _own_at
    own = _own_seconds()
    since, used = _own_at
    _own_at = (now, own)
    mine = (own - used) / (now - since) if now > since else 0.0
    try:
        return max(0.0, os.getloadavg()[0] - mine)
    except (AttributeError, OSError):
        return 0.0


def other_load(now: float | None = None) -> float:
    """Cores (of those this process may use) kept busy by other programs lately: busy
    time from /proc/stat over a short window, less this process's own CPU time and that
    of the other xlarank commands running (`running_jobs` shares the cores with those
    already; counted twice, a command starting beside one that holds every core of a
    big machine would take a single thread).

    A sample is reused for `LOAD_TTL` seconds, and the window runs from the previous
    reading when that is recent, so a loop of predicts pays nothing; otherwise it waits
    `LOAD_WINDOW` seconds once (the rest of it after `start_load_window`). Without
    /proc/stat, `os.getloadavg` (which counts this process too); 0.0 when neither is
    there.
    """
    global _counters, _load
    now = time.monotonic() if now is None else now
    if _load is not None and 0 <= now - _load[0] < LOAD_TTL:
        return _load[1]
    busy = _busy_seconds()
    if busy is None:
        value = _load_average(now)
    else:
        reading = (now, busy, _own_seconds(), _jobs_seconds())
        if _counters is not None and 0 <= now - _counters[0] < LOAD_WINDOW:
            # The window opened lately (`start_load_window`, at a command's start): only
            # the rest of it is waited for.
            time.sleep(LOAD_WINDOW - (now - _counters[0]))
            now = time.monotonic()
            reading = (now, _busy_seconds() or busy, _own_seconds(), _jobs_seconds())
        elif _counters is None or not LOAD_WINDOW <= now - _counters[0] <= LOAD_MAX_WINDOW:
            time.sleep(LOAD_WINDOW)
            _counters, now = reading, time.monotonic()
            reading = (now, _busy_seconds() or busy, _own_seconds(), _jobs_seconds())
        window = reading[0] - _counters[0]
        # A job that started within the window has no earlier reading: its time counts
        # as another program's until the next sample.
        jobs = sum(used - _counters[3][pid] for pid, used in reading[3].items()
                   if pid in _counters[3])
        value = max(0.0, (reading[1] - _counters[1]) - (reading[2] - _counters[2])
                    - jobs) / window
        _counters = reading
    _load = (now, value)
    return value


def start_load_window() -> None:
    """Take `other_load`'s first reading now, at a command's start: by the time the
    command chooses its threads, its imports have usually filled the window, and it
    waits for none (or the rest of it)."""
    global _counters
    busy = _busy_seconds()
    if busy is not None and _counters is None:
        _counters = (time.monotonic(), busy, _own_seconds(), _jobs_seconds())


def load_backoff_enabled() -> bool:
    """XLARANK_LOAD_BACKOFF: on unless 0, no, false or off (1, yes, true, on, empty or
    unset: on); any other value is refused with XlarankError naming it."""
    value = os.environ.get(LOAD_ENV, "").strip().lower()
    if value in ("0", "no", "false", "off"):
        return False
    if value in ("", "1", "yes", "true", "on"):
        return True
    raise XlarankError(f"{LOAD_ENV}={os.environ[LOAD_ENV]!r}: expected 1 or 0 (on or off)")


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
    check_environment()
    if threads is not None and threads > MAX_THREADS:
        # libgomp dies on a count it cannot start (out of memory, no error to catch).
        raise XlarankError(f"--threads {threads}: at most {MAX_THREADS} threads")
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
    check_environment()
    return _chosen if _chosen is not None else default_threads(load)


# Before anything that imports Numba or loads OpenMP (the kernels and boosters import this
# module first).
screen_environment()
