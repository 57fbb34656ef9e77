"""Running one function over many files: in this process, in a pool of local processes,
or as one Dask task per file.

Results come back in input order whatever the engine or worker count, so outputs
assembled from them are identical.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_ordered(fn: Callable[[T], R], items: Iterable[T], workers: int = 1,
                on_done: Callable[[T], None] | None = None, client=None) -> Iterator[R]:
    """Yield fn(item) for each item, in order; ``workers`` > 1 uses that many processes,
    a Dask ``client`` one task per item on its cluster.

    ``fn`` must be a module-level function (it is pickled). Worker processes are started
    with 'spawn': forking a process that holds Numba and OpenMP threads is unsafe.
    """
    items = list(items)
    if client is not None:
        # pure=False: the same file read twice (after it changed) is a new task.
        futures = client.map(fn, items, pure=False)
        for item, future in zip(items, futures):
            result = future.result()
            if on_done:
                on_done(item)
            yield result
        return
    if workers <= 1 or len(items) <= 1:
        for item in items:
            result = fn(item)
            if on_done:
                on_done(item)
            yield result
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(fn, item) for item in items]
        for item, future in zip(items, futures):
            result = future.result()
            if on_done:
                on_done(item)
            yield result
