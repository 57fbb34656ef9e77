"""Training a booster on a Dask cluster (dask is an optional extra).

Training shares its preparation and card with the local engine (`xlarank.rank.train`) and
hands dask arrays, in partitions that each hold whole graphs, to the booster adapter's
``fit_dask`` (`xlarank.rank.boosters`: lightgbm.DaskLGBMRanker, xgboost.dask). Only this
module, `xlarank.distributed` (the client) and those ``fit_dask`` methods import dask, and
only when called.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from xlarank.files import input_path
from xlarank.frame import read_keys, read_meta, row_group_graph_sizes
from xlarank.rank.boosters import DaskArrays, get_library
from xlarank.rank.ranker import Ranker
from xlarank.rank.spec import RankerSpec
from xlarank.rank.train import build_card, check_trainable, training_arrays


def _partition_ranges(n_items: int, n_partitions: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) ranges of items (row groups), as even as possible."""
    bounds = np.linspace(0, n_items, min(n_partitions, n_items) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def load_partition(frame_path: str, start: int, stop: int, names: list[str], is_tile: bool,
                   spec: RankerSpec, first_graph: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """On a worker: `xlarank.rank.train.training_arrays` of row groups [start, stop) of a
    frame (whole graphs), plus qid int64 (rows,) numbering their graphs from
    ``first_graph``."""
    parquet = pq.ParquetFile(input_path(frame_path))
    frame = parquet.read_row_groups(list(range(start, stop))).to_pandas()
    x, labels, sizes = training_arrays(frame, names, is_tile, spec)
    qid = np.repeat(np.arange(first_graph, first_graph + len(sizes)), sizes)
    return x, labels, sizes, qid


def train_ranker_dask(client, frame_path: str | Path, spec: RankerSpec,
                      threads_per_worker: int = 1) -> Ranker:
    """Train like `xlarank.rank.train.train_ranker`, on the cluster of ``client``.

    Each partition reads whole graphs (parquet row groups) of the frame, samples and labels
    them exactly as the local engine does; the booster then trains data-parallel across
    workers (the adapter's ``fit_dask``). ``threads_per_worker`` applies to XGBoost
    (LightGBM's Dask interface uses each worker's own threads). Returns a `Ranker` whose
    card says engine "dask".
    """
    import operator

    from xlarank.compat import require_dask, require_dask_array

    distributed_wait = require_dask().wait
    dask, da = require_dask_array()

    frame_path = str(frame_path)
    meta = read_meta(frame_path)
    keys = read_keys(frame_path)
    collection = check_trainable(meta, spec, keys["runtime"].to_numpy(),
                                 keys["graph_id"].to_numpy(), where=frame_path)
    by_row_group = row_group_graph_sizes(frame_path)
    workers = len(client.scheduler_info()["workers"])
    # Partitions are runs of row groups, so each holds whole graphs.
    ranges = _partition_ranges(len(by_row_group), 4 * max(workers, 1))
    limit = spec.max_configs_per_graph
    sizes = [np.concatenate(by_row_group[a:b]) for a, b in ranges]
    used = [np.minimum(s, limit).tolist() for s in sizes]
    first_graph = np.cumsum([0] + [len(s) for s in sizes])
    names = meta.feature_names
    # Partitions are placed round-robin on the workers: left to itself the scheduler may
    # put all of them on one worker, and the boosters then train on that worker alone.
    addresses = sorted(client.scheduler_info()["workers"])
    futures = [client.submit(load_partition, frame_path, a, b, names, collection.is_tile,
                             spec, int(first), pure=False,
                             workers=[addresses[i % len(addresses)]])
               for i, ((a, b), first) in enumerate(zip(ranges, first_graph))]
    distributed_wait(futures)
    holders = {w for ws in client.who_has(futures).values() for w in ws}
    parts = [[dask.delayed(operator.getitem)(f, k) for k in range(4)] for f in futures]

    def column(k: int, shape, dtype):
        """Item k of every partition's arrays as one dask array; shape(u) is a partition's
        shape given its used rows per graph u."""
        return da.concatenate([da.from_delayed(p[k], shape=shape(u), dtype=dtype)
                               for p, u in zip(parts, used)])

    data = DaskArrays(
        x=column(0, lambda u: (sum(u), len(names)), np.float32),
        labels=column(1, lambda u: (sum(u),), np.float64 if spec.pointwise else np.int32),
        group=column(2, lambda u: (len(u),), np.int64),
        qid=column(3, lambda u: (sum(u),), np.int64))
    booster = get_library(spec.library).fit_dask(client, data, names, spec, threads_per_worker)
    card = build_card(meta, spec, collection, graphs=int(first_graph[-1]),
                      rows=int(sum(s.sum() for s in sizes)),
                      rows_used=int(sum(map(sum, used))), seconds=None,
                      engine={"name": "dask", "workers": workers,
                              "workers_with_data": len(holders)})
    return Ranker(card=card, booster=booster)
