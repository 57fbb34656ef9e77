"""Running xlarank on Dask: the only module that imports dask (an optional extra).

Featurize and score run one task per file through `xlarank.engine.map_ordered`; training
uses the boosters' own Dask interfaces (lightgbm.DaskLGBMRanker, xgboost.dask) on
partitions that each hold whole graphs. Workers read and write the paths they are given,
so on a cluster of several machines the data, frames and models must sit on a filesystem
that every worker sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from xlarank.errors import MismatchError, XlarankError


def _require_dask():
    try:
        import distributed
    except ImportError:
        raise XlarankError("the Dask engine needs the dask extra: pip install 'xlarank[dask]'") \
            from None
    return distributed


@contextmanager
def dask_client(scheduler: str | None = None, workers: int = 2) -> Iterator[object]:
    """A Dask client: connected to ``scheduler`` if given, else to a local cluster of
    ``workers`` single-threaded processes on loopback, closed on exit."""
    distributed = _require_dask()
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise XlarankError(f"cannot reach Dask scheduler {scheduler} ({exc})") from None
        with client:
            yield client
        return
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def _partition_ranges(n_items: int, n_partitions: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) ranges of items (row groups), as even as possible."""
    bounds = np.linspace(0, n_items, min(n_partitions, n_items) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def train_ranker_dask(client, frame_path: str | Path, spec, threads_per_worker: int = 1):
    """Train like `xlarank.rank.model.train_ranker`, on the cluster of ``client``.

    Each partition reads whole graphs (parquet row groups) of the frame, samples and labels
    them exactly as the local engine does; the booster then trains data-parallel across
    workers. ``threads_per_worker`` applies to XGBoost (LightGBM's Dask interface uses each
    worker's own threads). Returns a `Ranker` whose card says engine "dask".
    """
    import operator

    import dask
    import dask.array as da
    import pyarrow.parquet as pq
    from distributed import wait as distributed_wait

    from xlarank.frame import read_meta, row_group_graph_sizes
    from xlarank.rank.model import (build_card, check_trainable, lightgbm_params,
                                    load_partition, xgboost_params)

    frame_path = str(frame_path)
    meta = read_meta(frame_path)
    collection = check_trainable(meta, spec)
    if not (pq.read_table(frame_path, columns=["runtime"])["runtime"].to_numpy() > 0).any():
        raise MismatchError("the training frame has no runtimes (all zero: a test split?)")
    by_row_group = row_group_graph_sizes(frame_path)
    if not by_row_group:
        raise XlarankError("the training frame has no rows")
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
    x = da.concatenate([da.from_delayed(p[0], shape=(sum(u), len(names)), dtype=np.float32)
                        for p, u in zip(parts, used)])
    y = da.concatenate([da.from_delayed(p[1], shape=(sum(u),),
                                        dtype=np.float64 if spec.pointwise else np.int32)
                        for p, u in zip(parts, used)])
    if spec.library == "lightgbm":
        import lightgbm as lgb

        group = da.concatenate([da.from_delayed(p[2], shape=(len(u),), dtype=np.int64)
                                for p, u in zip(parts, used)])
        params = lightgbm_params(spec, 0)
        # The scikit-learn style estimators name these differently.
        params.pop("num_threads")
        params.pop("verbosity")
        params.update(random_state=params.pop("seed"), n_estimators=spec.num_rounds,
                      verbose=-1)
        if spec.pointwise:
            model = lgb.DaskLGBMRegressor(client=client, **params)
            model.fit(x, y, feature_name=names)
        else:
            model = lgb.DaskLGBMRanker(client=client, **params)
            model.fit(x, y, group=group, feature_name=names)
        booster, version, model_file = model.to_local().booster_, lgb.__version__, "model.txt"
    else:
        import xgboost as xgb
        from xgboost import dask as xgb_dask

        qid = da.concatenate([da.from_delayed(p[3], shape=(sum(u),), dtype=np.int64)
                              for p, u in zip(parts, used)])
        params = xgboost_params(spec, threads_per_worker)
        data = xgb_dask.DaskDMatrix(client, x, y, qid=None if spec.pointwise else qid,
                                    feature_names=names)
        booster = xgb_dask.train(client, params, data, num_boost_round=spec.num_rounds)["booster"]
        version, model_file = xgb.__version__, "model.json"
    from xlarank.rank.model import Ranker

    card = build_card(meta, spec, collection, version, model_file,
                      graphs=int(first_graph[-1]), rows=int(sum(s.sum() for s in sizes)),
                      rows_used=int(sum(map(sum, used))), seconds=None)
    card["engine"] = {"name": "dask", "workers": workers, "workers_with_data": len(holders)}
    return Ranker(card=card, booster=booster)
