"""Synthetic TpuGraphs: real file format and layout, runtimes from an analytic cost model.

The full dataset cannot be had on every machine, so xlarank makes data that looks like it
for scale tests and learning curves. Nothing here is a TpuGraphs result.

Programs
    Nodes are made in topological order from a mix of HLO opcodes (parameters, constants,
    elementwise ops, broadcast, reshape, transpose, convolution, dot, reduce, fusion, copy)
    with shapes that follow the operands (elementwise keeps the shape, reduce drops a dim,
    convolution maps (b, h, w, c) to (b, h', w', c_out), ...). Dimension sizes mix powers of
    two with sizes such as 7, 14, 28, 96, 100 or 1000 that do not fill hardware tiles.
    Edges are [consumer, producer], so every edge points to a lower node id, as in real files.

Layout cost model (``layout_runtime``)
    Configurable nodes are convolution, dot, reshape and transpose of rank >= 2. A config
    picks, per configurable node, an output layout, the layout it reads its first operand
    in (input) and, for convolution and dot, the layout of its second operand (kernel); all
    minor-to-major, -1 past the rank. The runtime of a config is

        sum over nodes of  bytes(node) * op_weight                      (fixed part)
      + sum over configurable nodes of  bytes(node) * op_weight * (pad(node) - 1)
      + sum over configurable nodes and read operands of  COPY_NS_PER_BYTE * bytes(operand)
            where the layout the node reads differs from the layout the operand is
            produced in (the operand's own chosen output layout when it is configurable,
            else its default layout)

    with pad = (minor padded to a multiple of 128 / minor) * (second-minor padded to a
    multiple of 8 / second-minor) under the chosen output layout. Each runtime is then
    multiplied by lognormal measurement noise (sigma 0.5% layout, 2% tile), so duplicate
    configs have slightly different runtimes, as in the real data.

Tile cost model (``tile_runtime``)
    A kernel's config tiles its output shape (output bounds, columns 8-15 of config_feat).
    runtime = padded_work * lane_pad * sublane_pad * NS_PER_BYTE
              + input_bytes * rereads * READ_NS_PER_BYTE
              + n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel nodes)
              + tile bytes * operands * FILL_NS_PER_BYTE   (the pipeline's first load,
                which nothing overlaps)
              + a spill term when two tiles per operand (double buffering; operands are
                the kernel's inputs and output) exceed the on-chip memory VMEM_BYTES,
    where padded_work counts the bytes of whole tiles (tiles that do not divide the shape
    waste the remainder), lane/sublane pads apply the 128/8 rule to the tile itself, and
    rereads is 1 for elementwise kernels but, for kernels with a convolution or dot, the
    mean tile count along the two minor-most output dims (a contraction reads its inputs
    once per row or column of output tiles). The re-read and per-node overhead terms make
    the best tile depend on the kernel, not on the tile alone, as on real hardware.
    The normalizer is the default config's runtime, measured separately.

Duplicates
    Each graph draws fewer distinct configs than it has configs (60% to 95%) and repeats
    some, so identical configs with different measured runtimes occur.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from xlarank.data.collections import COLLECTIONS, SPLITS, Collection
from xlarank.data.npzwrite import write_npz
from xlarank.engine import map_ordered
from xlarank.errors import XlarankError

# Opcode ids (FORMAT.md).
PARAMETER, CONSTANT, CONVOLUTION, DOT, RESHAPE, TRANSPOSE = 63, 24, 26, 34, 75, 98
ADD, MULTIPLY, MAXIMUM, SUBTRACT, DIVIDE, EXP, TANH, CONVERT, SELECT = 2, 59, 57, 95, 32, 37, 96, 25, 83
BROADCAST, REDUCE, FUSION, COPY, GTE, TUPLE, RSQRT = 13, 70, 41, 27, 45, 100, 81
CONFIGURABLE_OPCODES = (CONVOLUTION, DOT, RESHAPE, TRANSPOSE)
ELEMENTWISE_UNARY = (EXP, TANH, CONVERT, RSQRT, COPY, FUSION)
ELEMENTWISE_BINARY = (ADD, MULTIPLY, MAXIMUM, SUBTRACT, DIVIDE, SELECT)

# (opcode, weight) of the ops that follow the inputs; a rough real-graph mix.
OP_MIX = (
    (ADD, 10), (MULTIPLY, 9), (MAXIMUM, 3), (SUBTRACT, 3), (DIVIDE, 2), (SELECT, 2),
    (EXP, 2), (TANH, 1), (CONVERT, 4), (RSQRT, 1), (COPY, 2), (FUSION, 6),
    (BROADCAST, 6), (RESHAPE, 8), (TRANSPOSE, 4), (CONVOLUTION, 6), (DOT, 5),
    (REDUCE, 4), (CONSTANT, 3), (PARAMETER, 2),
)
OP_WEIGHT = {CONVOLUTION: 6.0, DOT: 5.0, REDUCE: 1.5, TRANSPOSE: 1.2, RESHAPE: 0.6}
# One-hot element type columns of node_feat: f32 and bf16, 4 and 2 bytes.
ELEMENT_TYPES = ((13, 4), (15, 2))
DIM_SIZES = np.array([1, 2, 3, 4, 7, 8, 14, 16, 28, 32, 56, 64, 96, 100, 112, 128, 192, 224,
                      256, 384, 512, 768, 1000, 1024])
DIM_P = np.array([2, 3, 2, 3, 3, 6, 4, 6, 4, 8, 3, 8, 4, 2, 3, 9, 4, 2, 6, 3, 4, 2, 1, 2], float)
DIM_P /= DIM_P.sum()
CHANNELS = np.array([8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512])

MAX_MERGED_DIM = 1 << 20
MAX_CONFIG_TENSOR_BYTES = 2_600_000_000
NS_PER_BYTE = 0.02
COPY_NS_PER_BYTE = 0.1
TILE_OVERHEAD_NS = 350.0
TILE_NODE_OVERHEAD_NS = 30.0
READ_NS_PER_BYTE = 0.01
FILL_NS_PER_BYTE = 0.05
VMEM_BYTES = 16 << 20
LAYOUT_NOISE = 0.005
TILE_NOISE = 0.02


@dataclass(frozen=True)
class SynthSize:
    """How many files and how large. Sizes are drawn log-uniformly from the (min, max)
    ranges, so small graphs are common and large ones rare, as in the real data."""

    tile_files: tuple[int, int, int]  # train, valid, test
    layout_files: tuple[int, int, int]  # per layout collection, unless layout_files_each
    tile_nodes: tuple[int, int]  # min, max
    tile_configs: tuple[int, int]
    layout_nodes: tuple[int, int]
    layout_configurable: tuple[int, int]
    layout_configs: tuple[int, int]  # unless layout_configs_each
    # Per layout collection (xla default, xla random, nlp default, nlp random), if they differ.
    layout_files_each: tuple[tuple[int, int, int], ...] | None = None
    layout_configs_each: tuple[tuple[int, int], ...] | None = None
    compress_level: int = 6

    def files(self, collection: Collection) -> tuple[int, int, int]:
        if collection.is_tile:
            return self.tile_files
        if self.layout_files_each:
            return self.layout_files_each[COLLECTIONS.index(collection) - 1]
        return self.layout_files

    def configs(self, collection: Collection) -> tuple[int, int]:
        if collection.is_tile:
            return self.tile_configs
        if self.layout_configs_each:
            return self.layout_configs_each[COLLECTIONS.index(collection) - 1]
        return self.layout_configs


# One layout graph at the scale of the largest real ones (FORMAT.md: 40,332 nodes,
# 2,251 configurable, 10,760 configs), for benchmarks.
BENCH_GRAPH = SynthSize((0, 0, 0), (0, 0, 1), (2, 2), (1, 1), (40_000, 40_000), (2_000, 2_000),
                        (10_000, 10_000))

PRESETS = {
    "tiny": SynthSize((6, 3, 2), (4, 2, 2), (2, 12), (8, 30), (40, 120), (4, 12), (12, 40)),
    # Tile kernels sized like the real ones (a few to a few hundred nodes, a few to thousands
    # of configs; FORMAT.md): with a few dozen configs per kernel the top five are nearly
    # always good, so tile quality could not be told apart from the noise floor.
    "demo": SynthSize((400, 100, 10), (30, 8, 3), (2, 300), (2, 8000), (200, 800), (16, 60),
                      (80, 300)),
    "small": SynthSize((400, 60, 20), (40, 8, 4), (2, 60), (20, 400), (500, 3000), (30, 200),
                       (200, 1500)),
    # The real dataset's file counts per collection and split (FORMAT.md) and its size
    # range: tile kernels of up to a few hundred nodes and thousands of configs; programs of
    # up to 40,000 nodes and 2,000 configurable nodes; up to 100,000 configs in nlp random.
    # Compressed fast (level 1): the point is reading it back.
    "real": SynthSize((5709, 676, 844), (0, 0, 0), (2, 300), (2, 8000), (300, 40_000),
                      (10, 2_000), (500, 15_000),
                      layout_files_each=((61, 7, 8), (69, 7, 8), (198, 20, 17), (207, 20, 17)),
                      layout_configs_each=((500, 15_000), (500, 15_000), (500, 15_000),
                                           (1_000, 100_000)),
                      compress_level=1),
}


def draw_size(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    """An integer in [lo, hi], log-uniform."""
    lo, hi = bounds
    return int(np.clip(round(np.exp(rng.uniform(np.log(lo), np.log(hi + 0.999)))), lo, hi))


@dataclass(frozen=True)
class Program:
    """A generated computation graph.

    opcode: int64 (n,); dims: int64 (n, 6) zero past the rank; rank: int64 (n,);
    element_col / element_bytes: int64 (n,); operands: list of producer-id lists.
    """

    opcode: np.ndarray
    dims: np.ndarray
    rank: np.ndarray
    element_col: np.ndarray
    element_bytes: np.ndarray
    operands: list[list[int]]

    @property
    def bytes(self) -> np.ndarray:
        """float64 (n,): bytes of each node's output."""
        prod = np.where(np.arange(6)[None, :] < self.rank[:, None], self.dims, 1).prod(axis=1)
        return prod.astype(np.float64) * self.element_bytes

    def edge_index(self) -> np.ndarray:
        rows = [(u, v) for u, ops in enumerate(self.operands) for v in ops]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def node_feat(self) -> np.ndarray:
        """float32 (n, 140) filled as the real files fill it (FORMAT.md)."""
        n = len(self.opcode)
        feat = np.zeros((n, 140), dtype=np.float32)
        feat[n - 1, 0] = 1.0
        feat[np.arange(n), self.element_col] = 1.0
        feat[:, 21:27] = self.dims
        live = np.arange(6)[None, :] < self.rank[:, None]
        feat[:, 27] = np.where(live, self.dims, 0).sum(axis=1)
        feat[:, 28] = np.where(live, self.dims, 1).prod(axis=1)
        params = np.flatnonzero(self.opcode == PARAMETER)
        feat[params, 30] = np.arange(len(params))
        feat[:, 134:140] = default_layouts(self.rank).clip(min=0)
        return feat


def default_layouts(rank: np.ndarray) -> np.ndarray:
    """int8 (n, 6): XLA's default minor-to-major order r-1, ..., 0, then -1."""
    slots = np.arange(6)[None, :]
    return np.where(slots < rank[:, None], rank[:, None] - 1 - slots, -1).astype(np.int8)


def _random_shape(rng: np.random.Generator, rank: int) -> list[int]:
    return [int(d) for d in rng.choice(DIM_SIZES, size=rank, p=DIM_P)]


def generate_program(rng: np.random.Generator, n_nodes: int) -> Program:
    """A program of ``n_nodes`` nodes in topological order; the last node is the root."""
    ops, weights = zip(*OP_MIX)
    p = np.array(weights, float) / sum(weights)
    opcode, shapes, elements, operands = [], [], [], []

    def add(op: int, shape: list[int], element: int, inputs: list[int]) -> None:
        opcode.append(op)
        shapes.append(shape[:6])
        elements.append(element)
        operands.append(inputs)

    n_inputs = max(1, min(n_nodes // 8, 6))
    for _ in range(n_inputs):
        add(PARAMETER, _random_shape(rng, int(rng.integers(1, 5))), int(rng.integers(2)), [])
    while len(opcode) < n_nodes - 1:
        i = len(opcode)
        # Operands are mostly recent nodes, as in straight-line HLO.
        a = max(0, i - 1 - int(rng.geometric(0.35)) + 1)
        a_shape, a_elem = shapes[a], elements[a]
        op = int(rng.choice(ops, p=p))
        if op in (PARAMETER, CONSTANT):
            add(op, _random_shape(rng, int(rng.integers(0, 4))), a_elem, [])
        elif op in ELEMENTWISE_UNARY:
            add(op, a_shape, a_elem if op != CONVERT else 1 - a_elem, [a])
        elif op in ELEMENTWISE_BINARY:
            same = [j for j in range(max(0, i - 12), i) if shapes[j] == a_shape and j != a]
            if same:
                add(op, a_shape, a_elem, [a, int(rng.choice(same))])
            else:
                add(CONSTANT, a_shape, a_elem, [])
                add(op, a_shape, a_elem, [a, i])
        elif op == BROADCAST:
            if len(a_shape) >= 4:
                add(COPY, a_shape, a_elem, [a])
            else:
                pos = int(rng.integers(0, len(a_shape) + 1))
                add(op, a_shape[:pos] + _random_shape(rng, 1) + a_shape[pos:], a_elem, [a])
        elif op == RESHAPE:
            add(op, _reshape(rng, a_shape), a_elem, [a])
        elif op == TRANSPOSE:
            add(op, [a_shape[k] for k in rng.permutation(len(a_shape))], a_elem, [a])
        elif op == REDUCE:
            if a_shape:
                drop = int(rng.integers(len(a_shape)))
                add(op, a_shape[:drop] + a_shape[drop + 1:], a_elem, [a])
            else:
                add(COPY, a_shape, a_elem, [a])
        elif op == CONVOLUTION:
            act = a_shape if len(a_shape) == 4 else [int(rng.choice([1, 2, 8, 16, 32]))] + \
                _random_shape(rng, 2) + [int(rng.choice(CHANNELS))]
            if len(a_shape) != 4:
                add(RESHAPE, act, a_elem, [a])
                a = len(opcode) - 1
            c_out = int(rng.choice(CHANNELS))
            add(PARAMETER, [3, 3, act[3], c_out], a_elem, [])
            stride = int(rng.choice([1, 1, 2]))
            out = [act[0], max(1, act[1] // stride), max(1, act[2] // stride), c_out]
            add(op, out, a_elem, [a, len(opcode) - 1])
        elif op == DOT:
            lhs = a_shape if len(a_shape) in (2, 3) else _random_shape(rng, 2)
            if len(a_shape) not in (2, 3):
                add(RESHAPE, lhs, a_elem, [a])
                a = len(opcode) - 1
            n_out = int(rng.choice(DIM_SIZES[8:], p=DIM_P[8:] / DIM_P[8:].sum()))
            add(PARAMETER, [lhs[-1], n_out], a_elem, [])
            add(op, lhs[:-1] + [n_out], a_elem, [a, len(opcode) - 1])
    # The root gathers the last few values, as a tuple or a final op.
    last = len(opcode) - 1
    add(TUPLE, [], elements[last], sorted({last, max(0, last - 1)}))
    # The helper above may overshoot by a node or two; keep the root last.
    n = len(opcode)
    rank = np.array([len(s) for s in shapes], dtype=np.int64)
    dims = np.zeros((n, 6), dtype=np.int64)
    for i, s in enumerate(shapes):
        dims[i, : len(s)] = s
    element_col = np.array([ELEMENT_TYPES[e][0] for e in elements], dtype=np.int64)
    element_bytes = np.array([ELEMENT_TYPES[e][1] for e in elements], dtype=np.int64)
    return Program(np.array(opcode, dtype=np.int64), dims, rank, element_col, element_bytes,
                   operands)


def _reshape(rng: np.random.Generator, shape: list[int]) -> list[int]:
    """A shape of the same element count: merge two neighbours or split one dim.

    Merges stay below MAX_MERGED_DIM, as real dims do; a long chain of reshapes would
    otherwise grow one dim past what node_feat can hold.
    """
    if len(shape) >= 2 and (len(shape) >= 4 or rng.random() < 0.5):
        k = int(rng.integers(len(shape) - 1))
        if shape[k] * shape[k + 1] <= MAX_MERGED_DIM:
            return shape[:k] + [shape[k] * shape[k + 1]] + shape[k + 2:]
    if shape and shape[-1] % 2 == 0 and shape[-1] > 2:
        return shape[:-1] + [2, shape[-1] // 2]
    return shape + [1]


# ---------------------------------------------------------------- layout collection


@dataclass(frozen=True)
class LayoutSetting:
    """The configurable part of a layout program.

    config_ids: int64 (nc,); input_src / kernel_src: int64 (nc,) node id of the first and
    second operand (-1 if none).
    """

    config_ids: np.ndarray
    input_src: np.ndarray
    kernel_src: np.ndarray


def layout_setting(program: Program) -> LayoutSetting:
    op, rank = program.opcode, program.rank
    ids = np.flatnonzero(np.isin(op, CONFIGURABLE_OPCODES) & (rank >= 2))
    first = np.array([program.operands[i][0] if program.operands[i] else -1 for i in ids],
                     dtype=np.int64)
    second = np.array([program.operands[i][1] if len(program.operands[i]) > 1 else -1
                       for i in ids], dtype=np.int64)
    return LayoutSetting(ids.astype(np.int64), first, second)


def _random_layouts(rng: np.random.Generator, count: int, rank: int) -> np.ndarray:
    """int8 (count, 6): random minor-to-major permutations of ``rank`` dims, -1 after."""
    out = np.full((count, 6), -1, dtype=np.int8)
    if rank:
        out[:, :rank] = np.argsort(rng.random((count, rank)), axis=1)
    return out


def generate_layout_configs(rng: np.random.Generator, program: Program, setting: LayoutSetting,
                            n_configs: int, search: str) -> np.ndarray:
    """int8 (n_configs, nc, 18): output, input and kernel layouts per configurable node.

    ``default`` search moves few nodes off their default output layout, ``random`` many.
    Each operand is mostly read in the layout it is produced in (its configurable
    producer's choice, or its default); otherwise in its default or a random layout, which
    costs a copy in the cost model.
    """
    ids = setting.config_ids
    nc = len(ids)
    defaults = default_layouts(program.rank)
    p_change = 0.12 if search == "default" else 0.6
    n_distinct = max(1, int(round(n_configs * rng.uniform(0.6, 0.95))))
    distinct = np.full((n_distinct, nc, 18), -1, dtype=np.int8)
    distinct[:, :, 0:6] = defaults[ids][None, :, :]
    change = rng.random((n_distinct, nc)) < p_change
    for r in np.unique(program.rank[ids]):
        nodes = np.flatnonzero(program.rank[ids] == r)
        moved = change[:, nodes]
        fresh = _random_layouts(rng, moved.sum(), int(r))
        block = distinct[:, nodes, 0:6]
        block[moved] = fresh
        distinct[:, nodes, 0:6] = block
    position = np.full(len(program.rank), -1, dtype=np.int64)
    position[ids] = np.arange(nc)
    for slot, sources in ((6, setting.input_src), (12, setting.kernel_src)):
        live = np.flatnonzero((sources >= 0) & (program.rank[np.maximum(sources, 0)] > 0))
        if not len(live):
            continue
        src = sources[live]
        configurable = position[src] >= 0
        produced = np.broadcast_to(defaults[src][None], (n_distinct, len(live), 6)).copy()
        produced[:, configurable] = distinct[:, position[src[configurable]], 0:6]
        pick = rng.random((n_distinct, len(live)))
        read = produced
        keep_default = (pick >= 0.65) & (pick < 0.825)
        read[keep_default] = np.broadcast_to(defaults[src][None], produced.shape)[keep_default]
        for r in np.unique(program.rank[src]):
            wild = (pick >= 0.825) & (program.rank[src] == r)[None, :]
            read[wild] = _random_layouts(rng, int(wild.sum()), int(r))
        distinct[:, live, slot:slot + 6] = read
    pick = np.concatenate([np.arange(n_distinct),
                           rng.integers(0, n_distinct, n_configs - n_distinct)])
    return distinct[rng.permutation(pick)[:n_configs]]


def pad_factor(dims: np.ndarray, layouts: np.ndarray) -> np.ndarray:
    """float64 (b, nc): waste of padding the minor dim to 128 and the second-minor to 8.

    dims: int64 (nc, 6); layouts: int8 (b, nc, 6) minor-to-major, -1 past the rank.
    """
    nodes = np.arange(dims.shape[0])[None, :]
    minor_id, second_id = layouts[..., 0].astype(np.int64), layouts[..., 1].astype(np.int64)
    minor = np.where(minor_id >= 0, dims[nodes, minor_id.clip(min=0)], 1).clip(min=1)
    second = np.where(second_id >= 0, dims[nodes, second_id.clip(min=0)], 1).clip(min=1)
    return (np.ceil(minor / 128) * 128 / minor) * (np.ceil(second / 8) * 8 / second)


def layout_runtime(program: Program, setting: LayoutSetting, configs: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
    """int64 (b,): measured runtime in ns of each config of configs int8 (b, nc, 18)."""
    nbytes = program.bytes
    weight = np.array([OP_WEIGHT.get(int(o), 0.3) for o in program.opcode])
    fixed = float((nbytes * weight).sum()) * NS_PER_BYTE + 1e4
    ids = setting.config_ids
    node_cost = nbytes[ids] * weight[ids] * NS_PER_BYTE
    cost = (node_cost[None, :] * (pad_factor(program.dims[ids], configs[..., 0:6]) - 1)).sum(axis=1)
    defaults = default_layouts(program.rank)
    position = {int(node): j for j, node in enumerate(ids)}
    for j in range(len(ids)):
        for slot, src in ((6, setting.input_src[j]), (12, setting.kernel_src[j])):
            if src < 0 or program.rank[src] == 0:
                continue
            produced = (configs[:, position[int(src)], 0:6] if int(src) in position
                        else defaults[src][None, :])
            mismatch = np.any(configs[:, j, slot:slot + 6] != produced, axis=1)
            cost += mismatch * nbytes[src] * COPY_NS_PER_BYTE
    noise = rng.lognormal(0.0, LAYOUT_NOISE, size=len(configs))
    return np.maximum(1, np.round((fixed + cost) * noise)).astype(np.int64)


# ---------------------------------------------------------------- tile collection


def generate_tile_configs(rng: np.random.Generator, out_dims: np.ndarray,
                          n_configs: int) -> np.ndarray:
    """float32 (n_configs, 24): output bounds tile the output shape; config 0 is the default
    (whole dims)."""
    rank = int((out_dims > 0).sum())
    n_distinct = max(1, int(round(n_configs * rng.uniform(0.6, 0.95))))
    distinct = np.zeros((n_distinct, 24), dtype=np.float32)
    for d in range(rank):
        size = int(out_dims[d])
        # Compilers rarely propose tiles of 1 or 2 on large dims.
        smallest = 1 if size < 16 else 4
        choices = sorted({4, 8, 16, 32, 64, 128, 256, 512, size, max(1, size // 2),
                          max(1, size // 3), min(size, 100)})
        choices = np.array([t for t in choices if smallest <= t <= size] or [size])
        distinct[:, 8 + d] = rng.choice(choices, n_distinct)
        distinct[0, 8 + d] = choices[-1]
    pick = np.concatenate([np.arange(n_distinct),
                           rng.integers(0, n_distinct, n_configs - n_distinct)])
    order = np.concatenate([[0], rng.permutation(pick[1:])])
    configs = distinct[order[:n_configs]]
    live = configs[:, 8:14]
    configs[:, 14] = live.sum(axis=1)
    configs[:, 15] = np.where(live > 0, live, 1).prod(axis=1)
    return configs


@dataclass(frozen=True)
class TileKernel:
    """What the tile cost model needs of a kernel: its output shape (int64 (6,), zero past
    the rank), output bytes per element, operands holding a tile on chip (inputs + output),
    arithmetic intensity, total bytes of its inputs, whether it contracts (convolution or
    dot) and its node count."""

    out_dims: np.ndarray
    element_bytes: int
    n_operands: int
    intensity: float
    input_bytes: float
    contracts: bool
    n_nodes: int


def tile_runtime(kernel: TileKernel, configs: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """int64 (c,): measured runtime in ns of each tile config (float32 (c, 24))."""
    out_dims = kernel.out_dims
    rank = int((out_dims > 0).sum())
    dims = out_dims[:rank].astype(np.float64)[None, :]
    tile = np.maximum(configs[:, 8:8 + rank].astype(np.float64), 1.0)
    per_dim = np.ceil(dims / tile)
    n_tiles = per_dim.prod(axis=1)
    tile_elems = tile.prod(axis=1)
    lane = np.ceil(tile[:, -1] / 128) * 128 / tile[:, -1] if rank else 1.0
    sublane = np.ceil(tile[:, -2] / 8) * 8 / tile[:, -2] if rank >= 2 else 1.0
    work = n_tiles * tile_elems * kernel.element_bytes * lane * sublane * kernel.intensity
    # Double-buffered: each operand holds two tiles on chip, one computed, one loading.
    tile_bytes = 2.0 * tile_elems * kernel.element_bytes * kernel.n_operands
    spill = np.where(tile_bytes > VMEM_BYTES, 2.0 * work * NS_PER_BYTE, 0.0)
    # A contraction reads each input once per row or column of output tiles.
    rereads = (reread_factor(per_dim) if kernel.contracts else np.ones(len(configs)))
    reads = kernel.input_bytes * rereads * READ_NS_PER_BYTE
    overhead = n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel.n_nodes)
    # The pipeline's first tile loads with nothing to overlap it: a fill cost per config.
    fill = tile_elems * kernel.element_bytes * kernel.n_operands * FILL_NS_PER_BYTE
    runtime = work * NS_PER_BYTE + reads + overhead + fill + spill + 500.0
    noise = rng.lognormal(0.0, TILE_NOISE, size=len(configs))
    return np.maximum(1, np.round(runtime * noise)).astype(np.int64)


def reread_factor(tiles_per_dim: np.ndarray) -> np.ndarray:
    """float64 (c,): times a contraction's inputs are read, for tile counts per output dim
    (c, rank): the mean of the tile counts along the two minor-most dims."""
    if tiles_per_dim.shape[1] == 0:
        return np.ones(len(tiles_per_dim))
    return tiles_per_dim[:, -2:].mean(axis=1)


# ---------------------------------------------------------------- files


def _rng(seed: int, collection: Collection, split: str, index: int) -> np.random.Generator:
    # One stream per file, so any file can be made alone and in any order.
    return np.random.default_rng([seed, COLLECTIONS.index(collection), SPLITS.index(split), index])


def make_tile_file(path: Path, seed: int, split: str, index: int, size: SynthSize) -> None:
    rng = _rng(seed, COLLECTIONS[0], split, index)
    n_nodes = draw_size(rng, size.tile_nodes)
    program = generate_program(rng, n_nodes)
    # The kernel's output is the last non-tuple value.
    out = int(np.flatnonzero((program.rank > 0) & (program.opcode != TUPLE))[-1])
    program = _truncate(program, out + 1)
    out_dims = program.dims[out]
    n_configs = draw_size(rng, size.tile_configs)
    configs = generate_tile_configs(rng, out_dims, n_configs)
    inputs = program.opcode == PARAMETER
    contractions = int(np.isin(program.opcode, (CONVOLUTION, DOT)).sum())
    kernel = TileKernel(
        out_dims=out_dims, element_bytes=int(program.element_bytes[out]),
        n_operands=int(inputs.sum()) + 1,
        intensity=1.0 + contractions * 4.0,
        input_bytes=float(program.bytes[inputs].sum()),
        contracts=contractions > 0,
        n_nodes=len(program.opcode))
    runtime = tile_runtime(kernel, configs, rng)
    normalizer = tile_runtime(kernel, configs[:1], rng)[0]
    if split == "test":
        runtime = np.zeros_like(runtime)
        normalizer = 1
    write_npz(path, {
        "node_feat": program.node_feat(),
        "node_opcode": program.opcode.astype(np.uint8),
        "edge_index": program.edge_index(),
        "config_feat": configs,
        "config_runtime": runtime,
        "config_runtime_normalizers": np.full(n_configs, normalizer, dtype=np.int64),
    }, compress_level=size.compress_level)


def _truncate(program: Program, n: int) -> Program:
    """The first n nodes, with the last one as root."""
    return Program(program.opcode[:n], program.dims[:n], program.rank[:n],
                   program.element_col[:n], program.element_bytes[:n],
                   [list(o) for o in program.operands[:n]])


def make_layout_file(path: Path, collection: Collection, seed: int, split: str, index: int,
                     size: SynthSize, config_block: int = 512) -> None:
    rng = _rng(seed, collection, split, index)
    n_nodes = draw_size(rng, size.layout_nodes)
    program = generate_program(rng, n_nodes)
    setting = layout_setting(program)
    n_configs = draw_size(rng, size.configs(collection))
    # The largest real config tensor is ~2.6 GB as float32 (FORMAT.md): many configs come
    # with fewer configurable nodes.
    target = min(draw_size(rng, size.layout_configurable),
                 max(1, MAX_CONFIG_TENSOR_BYTES // (n_configs * 18 * 4)))
    if len(setting.config_ids) > target:
        # Keep a subset configurable; the others keep their default layout.
        keep = np.sort(rng.choice(len(setting.config_ids), target, replace=False))
        setting = LayoutSetting(setting.config_ids[keep], setting.input_src[keep],
                                setting.kernel_src[keep])
    configs = generate_layout_configs(rng, program, setting, n_configs, collection.search)
    runtime = np.concatenate([layout_runtime(program, setting, configs[s:s + config_block], rng)
                              for s in range(0, n_configs, config_block)])
    if split == "test":
        runtime = np.zeros_like(runtime)
    blocks = (configs[s:s + config_block].astype(np.float32)
              for s in range(0, n_configs, config_block))
    write_npz(path, {
        "node_feat": program.node_feat(),
        "node_opcode": program.opcode.astype(np.uint8),
        "edge_index": program.edge_index(),
        "node_config_ids": setting.config_ids,
        "config_runtime": runtime,
        "node_splits": np.array([[0, program.opcode.shape[0]]], dtype=np.int64),
    }, streamed={"node_config_feat": ((n_configs, len(setting.config_ids), 18), np.float32,
                                      blocks)}, compress_level=size.compress_level)


@dataclass(frozen=True)
class SynthJob:
    """One file of a synthetic tree, to be written by `write_synth_file` in any process."""

    root: Path
    rel: Path
    collection: Collection
    split: str
    index: int
    seed: int
    size: SynthSize


def write_synth_file(job: SynthJob) -> Path:
    path = job.root / job.rel
    if job.collection.is_tile:
        make_tile_file(path, job.seed, job.split, job.index, job.size)
    else:
        make_layout_file(path, job.collection, job.seed, job.split, job.index, job.size)
    return job.rel


def synth_jobs(root: Path, seed: int, size: SynthSize) -> list[SynthJob]:
    """Every file of a synthetic tree under ``root``."""
    return [SynthJob(root, Path("npz") / c.folder / split / f"synth_{split}_{i:04d}.npz",
                     c, split, i, seed, size)
            for c in COLLECTIONS for split, count in zip(SPLITS, size.files(c))
            for i in range(count)]


def synth_dataset(out: Path, preset: str = "demo", seed: int = 0,
                  on_file: Callable[[Path], None] | None = None, workers: int = 1) -> Path:
    """Write a synthetic dataset in the official tree under ``out``.

    The tree is built beside ``out`` and renamed into place when complete, so ``out``
    either holds a whole dataset or does not exist. ``out/synth.json`` records how it was
    made. Files are the same for any ``workers``. Raises `XlarankError` if ``out`` exists.
    """
    if preset not in PRESETS:
        raise XlarankError(f"unknown synth preset {preset!r}; known: {', '.join(PRESETS)}")
    out = Path(out)
    if out.exists():
        raise XlarankError(f"{out}: already exists; remove it or choose another folder")
    size = PRESETS[preset]
    building = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    try:
        jobs = synth_jobs(building, seed, size)
        done = (lambda job: on_file(job.rel)) if on_file else None
        for _ in map_ordered(write_synth_file, jobs, workers, on_done=done):
            pass
        manifest = {"generator": "xlarank synth", "preset": preset, "seed": seed,
                    "size": asdict(size), "note": "synthetic data, not TpuGraphs"}
        (building / "synth.json").write_text(json.dumps(manifest, indent=2) + "\n")
        building.rename(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return out


def synth_file_count(preset: str) -> int:
    size = PRESETS[preset]
    return sum(sum(size.files(c)) for c in COLLECTIONS)
