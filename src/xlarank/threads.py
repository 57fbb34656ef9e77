"""How many threads the boosters and the Numba kernels use: a count chosen on purpose.

Two jobs that each take every core of a 2-core machine run about six times slower than
either alone (OpenMP threads spin while they wait for cores the other job holds), so
xlarank never lets a library pick. The count is the ``--threads`` given, else the cores
this process may run on divided by the jobs make runs at once (``-jN``, read from
``MAKEFLAGS``). That total is shared by the command's local worker processes
(`xlarank.engine`); a Dask task uses one thread, since the worker's own thread slots are
the cluster's parallelism.

`use_threads` sets the count for this process (Numba's parallel regions included);
`chosen_threads` is what the booster adapters pass to LightGBM and XGBoost at fit and at
predict.
"""

from __future__ import annotations

import os
import re

# None until a command chooses; then the count every booster and Numba region gets.
_chosen: int | None = None


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


def default_threads() -> int:
    """A command's threads when none are given: the cores shared among make's jobs, at
    least 1."""
    return max(1, available_cores() // make_jobs())


def use_threads(threads: int | None = None) -> int:
    """Choose this process's thread count (``threads`` when given and positive, else
    `default_threads`), apply it to Numba, and return it."""
    global _chosen
    _chosen = threads if threads and threads > 0 else default_threads()
    import numba

    # Numba's count is per calling thread and capped by the pool it started with.
    numba.set_num_threads(min(_chosen, numba.config.NUMBA_NUM_THREADS))
    return _chosen


def chosen_threads() -> int:
    """The count `use_threads` chose, or `default_threads` if no command chose one (a
    library user calling the functions directly)."""
    return _chosen if _chosen is not None else default_threads()

