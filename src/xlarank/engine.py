"""Running one function over many files: in this process, in a pool of local processes,
or as one Dask task per file.

Results come back in input order whatever the engine or worker count, so outputs
assembled from them are identical. Every worker runs with a thread count chosen for it
(`xlarank.threads`): a local process gets its share of the command's threads, a Dask task
one thread.
"""

from __future__ import annotations

import atexit
import functools
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from xlarank import threads as _threads
from xlarank.threads import chosen_threads, use_threads

T = TypeVar("T")
R = TypeVar("R")

# The local pool, kept between calls: starting a process (spawn, then importing numpy,
# pandas and the cached kernels) costs about a second, which made 2 processes slower
# than 1 on a small dataset. Keyed by (workers, threads per worker).
_pool: ProcessPoolExecutor | None = None
_pool_key: tuple[int, int] | None = None


def _local_pool(workers: int, threads_each: int) -> ProcessPoolExecutor:
    global _pool, _pool_key
    if _pool is None or _pool_key != (workers, threads_each):
        shutdown_pool()
        # 'spawn': forking a process that holds Numba and OpenMP threads is unsafe.
        _pool = ProcessPoolExecutor(max_workers=workers,
                                    mp_context=multiprocessing.get_context("spawn"),
                                    initializer=use_threads, initargs=(threads_each,))
        _pool_key = (workers, threads_each)
    return _pool


@atexit.register
def shutdown_pool() -> None:
    """Stop the kept local pool (at exit, or to free its processes' memory)."""
    global _pool, _pool_key
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
    _pool, _pool_key = None, None


def _on_one_thread(fn: Callable[[T], R], item: T) -> R:
    # On a Dask worker. Numba's count is per calling thread, so it is set in the task's.
    use_threads(1)
    return fn(item)


def map_ordered(fn: Callable[[T], R], items: Iterable[T], workers: int = 1,
                on_done: Callable[[T], None] | None = None, client=None) -> Iterator[R]:
    """Yield fn(item) for each item, in order; ``workers`` > 1 uses that many local
    processes (kept alive for later calls) sharing this process's threads, a Dask
    ``client`` one single-threaded task per item on its cluster.

    ``fn`` must be a module-level function (it is pickled). A worker that dies takes the
    pool with it; the next call starts a new one.
    """
    items = list(items)
    if client is not None:
        task = functools.partial(_on_one_thread, fn)
        # pure=False: the same file read twice (after it changed) is a new task.
        futures = client.map(task, items, pure=False)
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
    # No more processes than items or cores: each start costs a fraction of a second and
    # a copy of the interpreter, and beyond the cores buys nothing (--workers 1000000
    # over the tiny synth preset's files started 60 and took 40 times as long).
    workers = min(workers, len(items), _threads.available_cores())
    # Sized without other programs' load: it moves from second to second, and each new
    # size would start a new pool (about a second of process starts).
    pool = _local_pool(workers, max(1, chosen_threads(load=False) // workers))
    futures = [pool.submit(fn, item) for item in items]
    try:
        for item, future in zip(items, futures):
            try:
                result = future.result()
            except BrokenProcessPool:
                # A worker was killed; its pool cannot be reused.
                shutdown_pool()
                raise
            if on_done:
                on_done(item)
            yield result
    finally:
        for future in futures:
            future.cancel()
