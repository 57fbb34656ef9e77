"""The Dask client (dask is an optional extra): `engine_client` turns the commands' engine
choice (local, or dask at a scheduler or on a local cluster) into None or a client.

Training on the cluster is `xlarank.rank.dask`'s. Workers read and write the paths they
are given, so on a cluster of several machines the data, frames and models must sit on a
filesystem that every worker sees.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager

from xlarank.compat import require_dask
from xlarank.errors import XlarankError

# The most --workers: any more start no more processes (never more than the cores).
MAX_WORKERS = 1024


def check_workers(workers: int) -> int:
    """``workers`` if it is a whole number (not a bool) in 1..`MAX_WORKERS`, else
    XlarankError naming --workers."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) \
            or not 1 <= workers <= MAX_WORKERS:
        raise XlarankError(f"--workers {workers!r}: a whole number in 1..{MAX_WORKERS}")
    return int(workers)


@contextmanager
def dask_client(scheduler: str | None = None, workers: int = 2) -> Iterator[object]:
    """A Dask client: connected to ``scheduler`` if given, else to a local cluster of
    ``workers`` single-threaded processes on loopback (no more than the cores, as the
    local engine starts no more), closed on exit."""
    distributed = require_dask()
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise XlarankError(f"cannot reach Dask scheduler {scheduler} ({exc})") from None
        with client:
            yield client
        return
    from xlarank.threads import available_cores

    # Beyond the cores a process buys nothing and costs an interpreter's start and memory.
    workers = max(1, min(workers, available_cores()))
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


@contextmanager
def engine_client(engine: str, scheduler: str | None = None,
                  workers: int = 2) -> Iterator[object | None]:
    """None for the local engine, else a Dask client: connected to ``scheduler`` if given,
    else to a local cluster of ``workers`` processes (1..`MAX_WORKERS`, no more than the
    cores started).

    Raises
    ------
    XlarankError
        An unknown engine, ``workers`` not a whole number in 1..`MAX_WORKERS`, a
        ``scheduler`` with the local engine, the dask extra missing, or a scheduler that
        cannot be reached.
    """
    check_workers(workers)
    if engine == "local":
        if scheduler:
            raise XlarankError("--scheduler needs --engine dask")
        yield None
    elif engine == "dask":
        with dask_client(scheduler, workers) as client:
            yield client
    else:
        raise XlarankError(f"unknown engine {engine!r}; known: local, dask")
