"""File-level statistics of layout configs, to compare generated files with real ones.

FORMAT.md ("Layout configs as they really are") describes the real layout configs by a few
numbers: how many positions a layout fixes, how many distinct output layouts a node takes,
the tensor ranks of configurable nodes, duplicates, runtime spread and how well two
measurements of the same config agree. `layout_config_stats` measures them on one file;
`config_stats` on arrays already in memory (e.g. a generated file before it is written).

Tile kernels: `tile_runtime_stats` measures how far a kernel's runtimes over its default's
(runtime / normalizer, the tile target) spread, per kernel and over kernels, on tile npz
files or real tuning records. From the repository root:

    PYTHONPATH=src python -m xlarank.data.config_stats tile \
        ../shared/tpugraphs/raw/op_tuning_data.pb
    PYTHONPATH=src python -m xlarank.data.config_stats tile DATA/npz/tile/xla/train
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from xlarank.data.distinct import repeat_tau, row_groups
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.errors import XlarankError

SHAPE_DIMS = slice(21, 27)
# Column blocks of node_config_feat (FORMAT.md).
OUTPUT, INPUT, KERNEL = slice(0, 6), slice(6, 12), slice(12, 18)
# repeat_tau is None below this many configs measured at least twice.
MIN_REPEATED = 10


def layout_config_stats(path: str | Path) -> dict:
    """Statistics of one layout npz file; see `config_stats`. The file is read with
    `load_graph`, which streams the configs into int8 (a quarter of the float32 size)."""
    graph = load_graph(path)
    if not isinstance(graph, LayoutGraph):
        raise XlarankError(f"{path}: not a layout file")
    return config_stats(graph.node_feat, graph.node_config_ids, graph.node_config_feat,
                        graph.config_runtime)


def config_stats(node_feat: np.ndarray, config_ids: np.ndarray, configs: np.ndarray,
                 runtime: np.ndarray) -> dict:
    """Statistics of a layout file's configs.

    node_feat (n, 140); config_ids int (nc,); configs (c, nc, 18) of any numeric dtype
    holding the integers -1..5; runtime int (c,), all zero when unlabelled.

    Returns a dict with:
      n_configs, n_configurable;
      out_fixed_share, in_fixed_share, kernel_fixed_share: shares of (config, node) pairs
        whose output (0-5), input (6-11), kernel (12-17) layout fixes 0, 1, 2, 3+ positions
        (positions >= 0), 4 floats each;
      out_distinct_per_node: mean over configurable nodes of the number of distinct output
        layouts across the configs;
      rank_share: share of configurable nodes of tensor rank 0..6 (rank = count of
        node_feat[:, 21:27] > 0; 6 is the most node_feat holds, unseen in the samples),
        7 floats;
      duplicate_rate: 1 - distinct configs / configs;
      runtime_spread: max / min runtime, None if unlabelled;
      repeat_tau: Kendall tau between the first and second measurement of each config
        measured at least twice, None if unlabelled or fewer than 10 such configs.
    """
    c, nc = configs.shape[0], configs.shape[1]
    cfg = np.asarray(configs).astype(np.int8, copy=False)
    stats: dict = {"n_configs": int(c), "n_configurable": int(nc)}
    for name, cols in (("out", OUTPUT), ("in", INPUT), ("kernel", KERNEL)):
        fixed = (cfg[:, :, cols] >= 0).sum(axis=2).clip(max=3)
        counts = np.bincount(fixed.ravel(), minlength=4).astype(np.float64)
        stats[f"{name}_fixed_share"] = (counts / max(1, fixed.size)).tolist()
    stats["out_distinct_per_node"] = (float(_distinct_per_node(cfg[:, :, OUTPUT]).mean())
                                      if nc and c else 0.0)
    rank = (np.asarray(node_feat)[np.asarray(config_ids), SHAPE_DIMS] > 0).sum(axis=1)
    stats["rank_share"] = (np.bincount(rank, minlength=7) / max(1, nc)).tolist()
    first, group = row_groups(cfg.reshape(c, nc * 18))
    stats["duplicate_rate"] = 1.0 - len(first) / c if c else 0.0
    runtime = np.asarray(runtime)
    labelled = bool(runtime.any())
    stats["runtime_spread"] = (float(runtime.max() / max(1, runtime.min())) if labelled
                               else None)
    stats["repeat_tau"] = repeat_tau(runtime, group, MIN_REPEATED) if labelled else None
    return stats


def _distinct_per_node(layouts: np.ndarray) -> np.ndarray:
    """int64 (nc,): distinct layouts per node of layouts int8 (c, nc, 6), values -1..5."""
    digits = (layouts.astype(np.int64) + 1) * (7 ** np.arange(6))
    codes = np.sort(digits.sum(axis=2), axis=0)
    return 1 + (np.diff(codes, axis=0) != 0).sum(axis=0)


# ---------------------------------------------------------------- tile kernels

TILE_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def tile_runtime_stats(kernels: Iterable[tuple[np.ndarray, np.ndarray]]) -> dict:
    """How a tile collection's runtimes spread around each kernel's default.

    ``kernels``: (config_runtime, config_runtime_normalizers) per kernel; kernels whose
    runtimes are all 0 (test files) are skipped. Returns per kernel (float64 arrays, in
    order) ``n_configs``, ``spread`` (max / min of runtime / normalizer), ``max_ratio``
    and ``min_ratio`` (how much slower the slowest config is than the default, and how
    much faster the fastest), and over kernels ``quantiles`` (TILE_QUANTILES) of each of
    the last three, keyed ``spread_q`` etc.
    """
    rows = []
    for runtime, normalizers in kernels:
        runtime = np.asarray(runtime, dtype=np.float64)
        if not len(runtime) or not runtime.any():
            continue
        ratio = runtime / np.asarray(normalizers, dtype=np.float64)
        rows.append((len(ratio), ratio.max() / ratio.min(), ratio.max(), ratio.min()))
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    out = {key: table[:, i] for i, key in
           enumerate(("n_configs", "spread", "max_ratio", "min_ratio"))}
    for key in ("spread", "max_ratio", "min_ratio"):
        out[f"{key}_q"] = (np.quantile(out[key], TILE_QUANTILES) if len(table)
                           else np.full(len(TILE_QUANTILES), np.nan))
    return out


def tile_runtimes_of(paths: Iterable[str | Path]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(config_runtime, config_runtime_normalizers) of every tile kernel in ``paths``:
    tile npz files, folders of them (searched recursively) and TpuGraphs tuning records
    (``.pb``, read with failed runs left out, as the official converter does)."""
    kernels = []
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(path.rglob("*.npz"))
        else:
            files = [path]
        for file in files:
            if file.suffix == ".npz":
                with np.load(file, allow_pickle=False) as arrays:
                    if "config_runtime_normalizers" not in arrays:
                        continue
                    kernels.append((arrays["config_runtime"],
                                    arrays["config_runtime_normalizers"]))
            else:
                from xlarank.data.xla import read_records

                for graph in read_records(file, drop_failed_runs=True):
                    if "config_runtime_normalizers" in graph.arrays:
                        kernels.append((graph.arrays["config_runtime"],
                                        graph.arrays["config_runtime_normalizers"]))
    return kernels


def _print_tile_stats(paths: list[str]) -> None:
    stats = tile_runtime_stats(tile_runtimes_of(paths))
    print(f"{len(stats['spread'])} tile kernels with runtimes; quantiles "
          + " / ".join(f"{q:g}" for q in TILE_QUANTILES) + " over kernels:")
    for key, what in (("spread", "max / min of runtime / default"),
                      ("max_ratio", "slowest config / default"),
                      ("min_ratio", "fastest config / default")):
        print(f"  {what:32s} " + "  ".join(f"{v:.3g}" for v in stats[f"{key}_q"]))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "tile":
        sys.exit("usage: python -m xlarank.data.config_stats tile PATH...")
    _print_tile_stats(sys.argv[2:])
