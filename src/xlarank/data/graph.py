"""Typed TpuGraphs records and the validating reader.

Every array keeps the real files' dtype (FORMAT.md), except a layout file's
``node_config_feat``: its values are small integers (-1..5), held as int8, which is four
times smaller than the float32 on disk. A tile file's ``config_feat`` values lie in
`TILE_CONFIG_RANGE` (0 to 2^40: sizes of dimensions, their sums and products); a value
outside it is refused, naming the file, the config and the column.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlarank.data.collections import Collection, locate
from xlarank.data.npzstream import NpzStream, ReadAhead
from xlarank.errors import ArgumentTypeError, BadGraphError
from xlarank.kernels.configs import config_to_int8
from xlarank.kernels.graph import cycle_edge
from xlarank.kernels.hashing import config_row_hashes

N_NODE_FEATURES = 140
N_TILE_CONFIG_FEATURES = 24
N_LAYOUT_CONFIG_FEATURES = 18
MAX_OPCODE = 120
SHAPE_DIM_COLUMNS = slice(21, 27)
MAX_DIM = 2**31
# Real files stay below 1e9; float32 sums and products of node features over 40,000 nodes
# stay finite below this, where 3e38 overflowed them.
MAX_NODE_FEATURE = 1e18
# Edges a node may have on average: real graphs have under 2 (an XLA instruction reads few
# operands); a header claiming more is a damaged or crafted file, refused before its
# edges are inflated (800 KB of deflated zeros claimed 50 million edges, 2.6 GB).
MAX_EDGES_PER_NODE = 100
# Format limits, checked on the .npy headers before any member is inflated: a small file
# of deflated zeros whose shapes agree can claim any count (deflate expands up to 1032 to
# 1), and the arrays of such a claim were allocated before anything else was wrong. Real
# files have up to about 44,000 nodes and 100,000 configs (FORMAT.md): these are 20 and 10
# times that.
MAX_NODES = 1_000_000
MAX_CONFIGS = 1_000_000
# The largest config tensor, as float32 (n_configs x n_configurable x 18 x 4 bytes), held
# whole in memory: load_graph(configs=True) (int8, a quarter of it) and `config_columns`
# (rank-graph, suggest, the tuner). The largest real file's is 2.6 GB; featurize streams
# the tensor in blocks and has no such limit.
MAX_IN_MEMORY_CONFIG_BYTES = 4 << 30
# Configs are streamed in blocks of this many bytes of float32. Reading a block holds
# about 2.5 times this (compressed input, decompressed bytes, int8 copy); bigger blocks
# do not read faster.
CONFIG_BLOCK_BYTES = 1 << 20
# int8 config blocks a reading thread may hold ready.
READ_AHEAD_BYTES = 1 << 20

TILE_KEYS = ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers")
LAYOUT_KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids",
               "node_config_feat", "config_runtime", "node_splits")


@dataclass(frozen=True, eq=False)
class Graph:
    """What tile and layout files share.

    node_feat: float32 (n_nodes, 140); node_opcode: uint8 (n_nodes,);
    edge_index: int64 (n_edges, 2), row [u, v] meaning node u consumes node v's output;
    config_runtime: int64 (n_configs,) in ns, all zero in the test split.
    """

    path: Path
    graph_id: str
    collection: Collection | None
    split: str | None
    node_feat: np.ndarray = field(repr=False)
    node_opcode: np.ndarray = field(repr=False)
    edge_index: np.ndarray = field(repr=False)
    config_runtime: np.ndarray = field(repr=False)

    @property
    def n_nodes(self) -> int:
        return len(self.node_opcode)

    @property
    def n_configs(self) -> int:
        return len(self.config_runtime)

    @property
    def labelled(self) -> bool:
        """False for the test split, whose runtimes are all zero."""
        return bool(self.config_runtime.any())


@dataclass(frozen=True, eq=False)
class TileGraph(Graph):
    """One fused kernel and its tile configs.

    config_feat: float32 (n_configs, 24); config_runtime_normalizers: int64 (n_configs,).
    """

    config_feat: np.ndarray = field(repr=False, default=None)
    config_runtime_normalizers: np.ndarray = field(repr=False, default=None)


@dataclass(frozen=True, eq=False)
class LayoutGraph(Graph):
    """One whole program and its layout configs.

    node_config_ids: int64 (n_configurable,); node_config_feat: int8
    (n_configs, n_configurable, 18), or None when loaded with ``configs=False``;
    node_splits: int64 (n_computations,).
    """

    node_config_ids: np.ndarray = field(repr=False, default=None)
    node_config_feat: np.ndarray | None = field(repr=False, default=None)
    node_splits: np.ndarray = field(repr=False, default=None)

    @property
    def n_configurable(self) -> int:
        return len(self.node_config_ids)


def load_graph(path: str | Path, collection: Collection | None = None,
               configs: bool = True) -> TileGraph | LayoutGraph:
    """Read and validate one TpuGraphs npz file.

    The collection and split come from the official directory layout; ``collection``
    overrides it for files kept elsewhere. ``configs=False`` skips a layout file's config
    tensor (only its header is checked). Raises `BadGraphError` naming the file and fault,
    TypeError for a ``path`` that is not one.
    """
    if not isinstance(path, str | os.PathLike):
        raise ArgumentTypeError(f"load_graph: expected an npz path (str or Path), got "
                        f"{type(path).__name__}")
    path = Path(path)
    try:
        str(path).encode()
    except UnicodeEncodeError:
        # Its name goes into frames and CSVs, which hold text.
        raise BadGraphError(path, "file name is not valid UTF-8; rename the file") from None
    located, split = locate(path)
    collection = collection or located
    with NpzStream(path) as npz:
        is_tile = "config_feat" in npz.keys
        if collection is not None and collection.is_tile != is_tile:
            kind = "tile" if is_tile else "layout"
            raise BadGraphError(path, f"holds a {kind} graph but sits in collection {collection}")
        keys = TILE_KEYS if is_tile else LAYOUT_KEYS
        missing = [k for k in keys if k not in npz.keys]
        if missing:
            raise BadGraphError(path, f"missing array(s) {', '.join(missing)}")
        _check_headers(path, {k: npz.header(k)[0] for k in keys}, is_tile)
        arrays = {k: npz.read(k) for k in keys if k != "node_config_feat"}
        common = _check_common(path, arrays)
        base = dict(path=path, graph_id=path.stem, collection=collection, split=split, **common)
        if is_tile:
            return TileGraph(**base, **_check_tile(path, arrays, len(common["config_runtime"])))
        layout = _check_layout(path, arrays, common["node_opcode"].shape[0])
        layout["node_config_feat"] = _read_layout_configs(
            path, npz, common["config_runtime"].shape[0], len(layout["node_config_ids"]), configs)
        return LayoutGraph(**base, **layout)


def _check_headers(path: Path, shapes: dict[str, tuple[int, ...]], is_tile: bool) -> None:
    """Refuse members whose shapes, read from their .npy headers alone, disagree, before
    any is inflated: a small file can claim gigabytes in one member that another member's
    shape already shows to be wrong. The same messages as the checks of the arrays."""
    feat = shapes["node_feat"]
    if len(feat) != 2 or feat[1] != N_NODE_FEATURES:
        _fail(path, f"node_feat: shape {feat}, expected (n_nodes, {N_NODE_FEATURES})")
    n = feat[0]
    if shapes["node_opcode"] != (n,):
        _fail(path, f"node_opcode: shape {shapes['node_opcode']}, expected ({n},) to match "
                    "node_feat")
    edges = shapes["edge_index"]
    if int(np.prod(edges, dtype=np.float64)) != 0 and (len(edges) != 2 or edges[1] != 2):
        _fail(path, f"edge_index: shape {edges}, expected (n_edges, 2)")
    if edges and edges[0] > MAX_EDGES_PER_NODE * n:
        _fail(path, f"edge_index: {edges[0]:,} edges for {n:,} nodes, more than "
                    f"{MAX_EDGES_PER_NODE} a node (real graphs have under 2)")
    if n > MAX_NODES:
        _fail(path, f"node_feat: {n:,} nodes, more than the {MAX_NODES:,} a graph may have "
                    "(real graphs have under 50,000)")
    runtime = shapes["config_runtime"]
    if len(runtime) != 1:
        _fail(path, f"config_runtime: shape {runtime}, expected (n_configs,)")
    c = runtime[0]
    if c > MAX_CONFIGS:
        _fail(path, f"config_runtime: {c:,} configs, more than the {MAX_CONFIGS:,} a graph "
                    "may have (real graphs have up to about 100,000)")
    if is_tile:
        if shapes["config_feat"] != (c, N_TILE_CONFIG_FEATURES):
            _fail(path, f"config_feat: shape {shapes['config_feat']}, expected ({c}, "
                        f"{N_TILE_CONFIG_FEATURES}) to match config_runtime")
        if shapes["config_runtime_normalizers"] != (c,):
            _fail(path, f"config_runtime_normalizers: shape "
                        f"{shapes['config_runtime_normalizers']}, expected ({c},)")
        return
    ids = shapes["node_config_ids"]
    if len(ids) != 1:
        _fail(path, f"node_config_ids: shape {ids}, expected (n_configurable,)")
    if shapes["node_config_feat"] != (c, ids[0], N_LAYOUT_CONFIG_FEATURES):
        _fail(path, f"node_config_feat: shape {shapes['node_config_feat']}, expected ({c}, "
                    f"{ids[0]}, {N_LAYOUT_CONFIG_FEATURES}) to match config_runtime and "
                    "node_config_ids")


def _fail(path: Path, fault: str) -> None:
    raise BadGraphError(path, fault)


def _as_int(path: Path, key: str, a: np.ndarray, dtype) -> np.ndarray:
    if a.dtype.kind not in "iu":
        if a.dtype.kind != "f" or not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            _fail(path, f"{key}: expected integers, got {a.dtype}")
        if a.size and np.abs(a).max() >= 2.0**62:
            _fail(path, f"{key}: values beyond the int64 range")
    if a.dtype == np.uint64 and a.size and a.max() >= 2**63:
        _fail(path, f"{key}: values beyond the int64 range")
    return a.astype(dtype, copy=False)


def _check_common(path: Path, a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    node_feat = a["node_feat"]
    if node_feat.ndim != 2 or node_feat.shape[1] != N_NODE_FEATURES:
        _fail(path, f"node_feat: shape {node_feat.shape}, expected (n_nodes, {N_NODE_FEATURES})")
    n = node_feat.shape[0]
    if n == 0:
        _fail(path, "node_feat: the graph has no nodes")
    if node_feat.dtype.kind not in "fiu":
        _fail(path, f"node_feat: dtype {node_feat.dtype}, expected float32")
    node_feat = node_feat.astype(np.float32, copy=False)
    if not np.all(np.isfinite(node_feat)):
        _fail(path, "node_feat: holds NaN or infinite values")
    beyond = np.abs(node_feat) > MAX_NODE_FEATURE
    if beyond.any():
        node, column = (int(i) for i in np.argwhere(beyond)[0])
        _fail(path, f"node_feat: node {node}, column {column}: {node_feat[node, column]:g} "
                    f"is beyond {MAX_NODE_FEATURE:g} (no tensor has that many elements or "
                    "bytes)")
    dims = node_feat[:, SHAPE_DIM_COLUMNS]
    if dims.min() < 0 or dims.max() >= MAX_DIM or np.any(dims != np.round(dims)):
        _fail(path, f"node_feat: shape dims (columns 21-26) must be whole numbers in "
                    f"0..{MAX_DIM - 1}")
    opcode = a["node_opcode"]
    if opcode.shape != (n,):
        _fail(path, f"node_opcode: shape {opcode.shape}, expected ({n},) to match node_feat")
    opcode = _as_int(path, "node_opcode", opcode, np.int64)
    if opcode.min() < 0 or opcode.max() > MAX_OPCODE:
        _fail(path, f"node_opcode: ids must lie in 0..{MAX_OPCODE}, found "
                    f"{opcode.min()}..{opcode.max()}")
    edges = a["edge_index"]
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2:
        _fail(path, f"edge_index: shape {edges.shape}, expected (n_edges, 2)")
    edges = _as_int(path, "edge_index", edges, np.int64)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        _fail(path, f"edge_index: node ids must lie in 0..{n - 1}, found "
                    f"{edges.min()}..{edges.max()}")
    _check_acyclic(path, edges, n)
    runtime = a["config_runtime"]
    if runtime.ndim != 1:
        _fail(path, f"config_runtime: shape {runtime.shape}, expected (n_configs,)")
    runtime = _as_int(path, "config_runtime", runtime, np.int64)
    if runtime.size == 0:
        _fail(path, "config_runtime: the file has no configs, nothing to rank")
    if runtime.min() < 0:
        _fail(path, "config_runtime: negative runtime")
    return dict(node_feat=node_feat, node_opcode=opcode.astype(np.uint8),
                edge_index=edges, config_runtime=runtime)


def _check_acyclic(path: Path, edges: np.ndarray, n: int) -> None:
    """Refuse an edge_index with a cycle or a self-loop: an XLA graph is a DAG, and the
    topological features would be computed on nonsense. Real files number nodes in
    topological order, every consumer after what it reads (u > v for each row [u, v]),
    which a vectorised test confirms at once; any other file gets Kahn's algorithm."""
    if not edges.size or bool((edges[:, 0] > edges[:, 1]).all()):
        return
    edge = int(cycle_edge(np.ascontiguousarray(edges[:, 0]),
                          np.ascontiguousarray(edges[:, 1]), n))
    if edge >= 0:
        u, v = (int(x) for x in edges[edge])
        what = "is a self-loop" if u == v else "lies on a cycle"
        _fail(path, f"edge_index: row {edge} [{u}, {v}] {what}; the graph must be acyclic")


# The range of every tile config_feat value (FORMAT.md: kernel, output and input bounds,
# each 6 dimension sizes, their sum and their product; unused dimensions 0): 0 to 2^40.
# Sizes are never negative; the real samples peak at 2,400 (a product; a synthetic
# product reaches 3,276,800), and a product of six real dimensions stays far below 2^40,
# while values near float32's limit (3.4e38) overflow the featurizers' arithmetic.
TILE_CONFIG_RANGE = (0, 1 << 40)
_TILE_CONFIG_PARTS = ("kernel", "output", "input")


def _tile_config_column(column: int) -> str:
    """What tile config_feat ``column`` (0..23) holds, in FORMAT.md's words."""
    part, within = _TILE_CONFIG_PARTS[column // 8], column % 8
    what = {6: "sum", 7: "product"}.get(within, f"dimension {within}")
    return f"{part} bounds, {what}"


def _check_tile(path: Path, a: dict[str, np.ndarray], c: int) -> dict[str, np.ndarray]:
    config_feat = a["config_feat"]
    if config_feat.shape != (c, N_TILE_CONFIG_FEATURES):
        _fail(path, f"config_feat: shape {config_feat.shape}, expected ({c}, "
                    f"{N_TILE_CONFIG_FEATURES}) to match config_runtime")
    if config_feat.dtype.kind not in "fiu" or not np.all(np.isfinite(config_feat)):
        _fail(path, "config_feat: holds NaN, infinite or non-numeric values")
    outside = (config_feat < TILE_CONFIG_RANGE[0]) | (config_feat > TILE_CONFIG_RANGE[1])
    if outside.any():
        row, column = (int(i) for i in np.argwhere(outside)[0])
        _fail(path, f"config_feat: column {column} ({_tile_config_column(column)}) of config "
                    f"{row} is {float(config_feat[row, column]):g}, outside "
                    f"{TILE_CONFIG_RANGE[0]}..{TILE_CONFIG_RANGE[1]:,} (tile bounds are sizes "
                    "of dimensions, their sums and products: FORMAT.md)")
    norm = a["config_runtime_normalizers"]
    if norm.shape != (c,):
        _fail(path, f"config_runtime_normalizers: shape {norm.shape}, expected ({c},)")
    norm = _as_int(path, "config_runtime_normalizers", norm, np.int64)
    if norm.size and norm.min() <= 0:
        _fail(path, "config_runtime_normalizers: must be positive")
    return dict(config_feat=config_feat.astype(np.float32, copy=False),
                config_runtime_normalizers=norm)


def _check_layout(path: Path, a: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    ids = a["node_config_ids"]
    if ids.ndim != 1:
        _fail(path, f"node_config_ids: shape {ids.shape}, expected (n_configurable,)")
    ids = _as_int(path, "node_config_ids", ids, np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        _fail(path, f"node_config_ids: node ids must lie in 0..{n - 1}, found "
                    f"{ids.min()}..{ids.max()}")
    if len(np.unique(ids)) != len(ids):
        _fail(path, "node_config_ids: a node is listed twice")
    raw_splits = a["node_splits"]
    if raw_splits.ndim != 2 or raw_splits.shape[0] != 1 or raw_splits.shape[1] == 0:
        _fail(path, f"node_splits: shape {raw_splits.shape}, expected (1, k), k >= 1")
    splits = _as_int(path, "node_splits", raw_splits, np.int64).reshape(-1)
    if splits.min() < 0 or splits.max() > n:
        _fail(path, f"node_splits: node ids must lie in 0..{n}, found "
                    f"{splits.min()}..{splits.max()}")
    if (np.diff(splits) <= 0).any():
        _fail(path, "node_splits: not strictly increasing")
    return dict(node_config_ids=ids, node_splits=splits)


def _read_layout_configs(path: Path, npz: NpzStream, c: int, nc: int,
                         load: bool) -> np.ndarray | None:
    """int8 (c, nc, 18) read block by block, or None (header checked) when not ``load``."""
    shape, dtype = npz.header("node_config_feat")
    if shape != (c, nc, N_LAYOUT_CONFIG_FEATURES):
        _fail(path, f"node_config_feat: shape {shape}, expected ({c}, {nc}, "
                    f"{N_LAYOUT_CONFIG_FEATURES}) to match config_runtime and node_config_ids")
    if dtype.kind not in "fiu":
        _fail(path, f"node_config_feat: dtype {dtype}, expected float32")
    if not load:
        return None
    check_in_memory_configs(path, c, nc, "a graph loaded with its configs (load_graph, rank-graph)")
    out = np.empty(shape, dtype=np.int8)
    start = 0
    raw_blocks = npz.iter_rows("node_config_feat", _rows_per_block(nc, CONFIG_BLOCK_BYTES))
    for block in _narrowed(path, raw_blocks):
        out[start : start + len(block)] = block
        start += len(block)
    return out


def check_in_memory_configs(path: Path, n_configs: int, n_configurable: int,
                            what: str) -> None:
    """BadGraphError naming the file unless its config tensor, as float32, is at most
    `MAX_IN_MEMORY_CONFIG_BYTES`: asked before ``what`` (a command or function that holds
    the whole tensor) allocates it."""
    nbytes = n_configs * n_configurable * N_LAYOUT_CONFIG_FEATURES * 4
    if nbytes > MAX_IN_MEMORY_CONFIG_BYTES:
        _fail(path, f"node_config_feat: {n_configs:,} configs x {n_configurable:,} "
                    f"configurable nodes are {nbytes / 2**30:.1f} GiB as float32, more than "
                    f"the {MAX_IN_MEMORY_CONFIG_BYTES / 2**30:g} GiB {what} holds in memory "
                    "(featurize streams larger files)")


def _narrowed(path: Path, raw_blocks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """Validated int8 blocks of float32 node_config_feat blocks."""
    for block in raw_blocks:
        narrow, ok = config_to_int8(np.ascontiguousarray(block, dtype=np.float32))
        if not ok:
            _fail(path, "node_config_feat: values must be whole numbers in -1..5 "
                        "(dimension ids), found NaN, fractions or others")
        yield narrow


def _rows_per_block(nc: int, block_bytes: int) -> int:
    """Configs per block of at most block_bytes of float32 (at least one)."""
    return max(1, block_bytes // max(1, nc * N_LAYOUT_CONFIG_FEATURES * 4))


@contextmanager
def config_blocks(graph: LayoutGraph, block_bytes: int | None = None
                  ) -> Iterator[Iterable[tuple[np.ndarray, np.ndarray]]]:
    """Context giving the graph's configs as int8 blocks (b, nc, 18), in config order, each
    with the uint64 (b,) `config_row_hashes` of its configs.

    From memory when the graph was loaded with its configs, else streamed from its file,
    so at most three blocks are held: a thread starts inflating on entering (zlib releases
    the GIL), so the caller's work on one block, or on per-graph tables before the first,
    overlaps reading the next. Raises `BadGraphError` if the file is bad or changed.
    """
    rows = _rows_per_block(graph.n_configurable, block_bytes or CONFIG_BLOCK_BYTES)
    if graph.node_config_feat is not None:
        yield ((block, config_row_hashes(block)) for block in
               (graph.node_config_feat[s : s + rows] for s in range(0, graph.n_configs, rows)))
        return
    with NpzStream(graph.path) as npz:
        shape, _ = npz.header("node_config_feat")
        if shape != (graph.n_configs, graph.n_configurable, N_LAYOUT_CONFIG_FEATURES):
            _fail(graph.path, "node_config_feat: changed since the file was loaded")
        int8_block_bytes = rows * graph.n_configurable * N_LAYOUT_CONFIG_FEATURES
        depth = max(1, READ_AHEAD_BYTES // max(1, int8_block_bytes))
        # The thread inflates and narrows; hashing and the per-config kernels stay on
        # this thread.
        with ReadAhead(_narrowed(graph.path, npz.iter_rows("node_config_feat", rows)),
                       depth) as blocks:
            yield ((block, config_row_hashes(block)) for block in blocks)
