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
    Layout programs also hold 3-D convolutions on rank-5 tensors, reshapes that flatten to
    rank 1 and reshapes to a scalar (``generate_program(layout=True)``); tile kernels do not.

Layout configs (``generate_layout_configs``), in the real encoding (FORMAT.md, "Layout
configs as they really are")
    Configurable nodes are convolution, dot and reshape of any rank (rank 0 to 5 occur) and
    transposes of rank >= 2. A config gives, per configurable node, an output layout
    (columns 0-5), the layout its first operand is read in (input, 6-11) and the layout of
    its second operand (kernel, 12-17, convolution and dot), each minor-to-major with -1
    where the config does not fix a position. Each slot takes one of a node's 1-3 options:
    mostly the two minor-most positions fixed (the default pair r-1, r-2, its swap, or a
    pair with another dim), sometimes nothing fixed (all -1), rarely one position (rank 1)
    or the whole order (some rank-3 reshapes). "default" search keeps most nodes on their
    first option and moves a few per config; "random" search picks near-uniformly. A node
    mostly reads its configurable producer's chosen output; reshapes and transposes read
    their operand in the layout that goes with their output choice. Per file, the option
    mix, duplicate rate (0-45%), runtime spread and repeat agreement are drawn so that the
    file statistics (``xlarank.data.config_stats``) fall in the ranges FORMAT.md measured.

Layout cost model (``layout_runtime``, ``layout_cost_terms``)
    The effective layout of a tensor under a config is the config's fixed prefix, the
    remaining dims following the tensor's default minor-to-major order r-1, ..., 0 (so all
    -1 is the default layout, and [r-1, r-2, -1, ...] is the same layout). Only its two
    minor-most dims matter below. The true runtime of a config is

        fixed = sum over nodes of  bytes(node) * op_weight * NS_PER_BYTE  (+ 10 us)
      + (a) padding: sum over configurable nodes of
                bytes(node) * op_weight * NS_PER_BYTE * (pad(node) - 1),
            pad = (minor padded to a multiple of 128 / minor)
                  * (second-minor padded to a multiple of 8 / second-minor)
            under the node's effective output layout (``pad_factor``)
      + (b) relayout: sum over configurable nodes and read operands (input, kernel) of
                COPY_NS_PER_BYTE * bytes(operand)
            whenever the effective read layout's two minor-most dims differ from those the
            operand is produced in (its effective chosen output if it is configurable,
            else its default layout)
      + (c) unmodelled: sum over configurable nodes of  u(node, effective minor pair),
            a cost drawn once per file for each (node, effective minor, second-minor),
            lognormal (sigma 1) times bytes(node) * NS_PER_BYTE: hardware effects no
            feature sees. It is scaled so that its standard deviation over the file's
            configs is share / (1 - share) times that of (a) + (b), share drawn per file
            from 30-50%: which nodes flip, and what each flip costs, decide the runtime.

    In generated files the variable part (a + b + c) is then rescaled: each file draws a
    runtime spread log-uniformly from 1.02x to 3x, and the variable part is scaled so that
    max / min of the measured runtimes equals it (FORMAT.md: 3.05x on unet3d down to
    ~1.02x, both measured). Measured runtimes are the true ones times lognormal noise,
    one draw per config (repeated configs get their own draws): its sigma is set per file
    so that two measurements of the same configs agree to a Kendall tau drawn from
    0.6-0.95 (unet3d: 0.82), and at least MIN_LAYOUT_NOISE; LAYOUT_NOISE (0.5%) when
    ``layout_runtime`` is called without a target tau.

Tile configs (``generate_tile_configs``), shaped after the 15 kernels of the real tuning
record (../shared/tpugraphs/raw/op_tuning_data.pb; docs/synthetic.md)
    Output bounds are in elements and tile whole hardware tiles: multiples of LANES (128)
    on the minor-most dim and of SUBLANES (8) on the second-minor, or the whole dim (the
    record's bounds count hardware tiles). The default (config 0) is the compiler's
    pick: of the candidates whose double-buffered tiles fit in VMEM_BYTES, the one the cost
    model below, times a lognormal error (TILE_DEFAULT_ERROR), rates fastest; so, as in the
    record, it is the fastest config or close to it. Each kernel draws how many times the
    default's tile count its finest candidate makes (TILE_FINEST, 4x-300x; the record:
    4x-288x) and always measures that finest candidate (the slowest config of the real
    kernels); the others lie between 1 / TILE_COARSEST and that many tiles.

Tile cost model (``tile_runtime``)
    A kernel's config tiles its output shape (output bounds, columns 8-15 of config_feat).
    runtime = padded_work * lane_pad * sublane_pad * TILE_NS_PER_BYTE
              + input_bytes * rereads * TILE_READ_NS_PER_BYTE
              + n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel nodes)
              + tile bytes * operands * TILE_FILL_NS_PER_BYTE   (the pipeline's first
                load, which nothing overlaps)
              + a spill term when two tiles per operand (double buffering; operands are
                the kernel's inputs and output) exceed the on-chip memory VMEM_BYTES,
    where padded_work counts the bytes of whole tiles (tiles that do not divide the shape
    waste the remainder), lane/sublane pads apply the 128/8 rule to the tile itself, and
    rereads is 1 for elementwise kernels but, for kernels with a convolution or dot, the
    mean tile count along the two minor-most output dims (a contraction reads its inputs
    once per row or column of output tiles). The re-read and per-node overhead terms make
    the best tile depend on the kernel, not on the tile alone, as on real hardware.
    The normalizer is the default config's runtime, measured separately. Measured over
    the default, the runtimes then sit where the record's do (``tile_runtime_stats``):
    per kernel, max / min is a few times (the record: median 5.5x, at most 29x).

Duplicates
    Each tile kernel draws fewer distinct configs than it has configs (60% to 95%) and
    repeats some, so identical configs with different measured runtimes occur; layout
    files do the same with their drawn duplicate rate.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from xlarank.atomic import check_output
from xlarank.data.collections import COLLECTIONS, SPLITS, Collection
from xlarank.data.npzwrite import write_npz
from xlarank.engine import map_ordered
from xlarank.errors import XlarankError
from xlarank.seeds import check_seed

# Opcode ids (FORMAT.md).
PARAMETER, CONSTANT, CONVOLUTION, DOT, RESHAPE, TRANSPOSE = 63, 24, 26, 34, 75, 98
ADD, MULTIPLY, MAXIMUM, SUBTRACT, DIVIDE = 2, 59, 57, 95, 32
EXP, TANH, CONVERT, SELECT = 37, 96, 25, 83
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
# Layout programs only: spatial sizes of 3-D convolution volumes, the share of convolutions
# that are 3-D, and the share of reshapes that flatten to rank 1 or reshape a scalar.
VOLUME_SIZES = np.array([4, 8, 16, 32, 64])
LAYOUT_CONV3D = 0.1
LAYOUT_LOW_RANK_RESHAPE = 0.1

MAX_MERGED_DIM = 1 << 20
MAX_CONFIG_TENSOR_BYTES = 2_600_000_000
NS_PER_BYTE = 0.02
COPY_NS_PER_BYTE = 0.1
TILE_OVERHEAD_NS = 350.0
TILE_NODE_OVERHEAD_NS = 30.0
VMEM_BYTES = 16 << 20
LAYOUT_NOISE = 0.005
MIN_LAYOUT_NOISE = 5e-5
# Per layout file: max/min of the measured runtimes (log-uniform) and the Kendall tau
# between two measurements of the same configs (uniform); FORMAT.md: 1.02x-3.05x, tau 0.82
# (unet3d).
LAYOUT_SPREAD = (1.02, 3.0)
LAYOUT_REPEAT_TAU = (0.6, 0.95)
CONFIG_CHUNK = 1 << 24  # int8 config values drawn at a time
TILE_NOISE = 0.02
# Tile kernels move bytes at TILE_NS_PER_BYTE (500 GB/s, HBM-like; layout's NS_PER_BYTE
# is 10x slower), re-reads and the pipeline fill at the same ratios as before. Set so
# that a kernel N times finer than its default slows down about as much as the real
# record's kernels (16x finer: 3.7x-5.5x; 64x-139x: 4.4x-8.5x; 288x: 26x).
TILE_NS_PER_BYTE = 0.002
TILE_READ_NS_PER_BYTE = 0.001
TILE_FILL_NS_PER_BYTE = 0.005
# The compiler's own cost model, by which it picks a kernel's default tile: the true cost
# times a lognormal error of this sigma (real record: the default is the fastest config
# in 11 of 15 kernels, the others' best is 2-12% faster).
TILE_DEFAULT_ERROR = 0.05
# Hardware tile of the two minor-most dims (sublanes x lanes): the real record's output
# bounds count whole ones.
LANES, SUBLANES = 128, 8
# Per tile kernel: how many times the default's output tiles its finest candidate makes,
# log-uniform (the real record: 4x to 288x over its 12 tiled kernels); the other
# candidates make at most that many and at least 1 / TILE_COARSEST as many (real: up to
# 8x coarser than the default); draws outside are redrawn TILE_DRAW_ROUNDS times, then
# repeat the default.
TILE_FINEST = (4.0, 300.0)
TILE_COARSEST = 8.0
TILE_DRAW_ROUNDS = 30


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


def generate_program(rng: np.random.Generator, n_nodes: int, layout: bool = False) -> Program:
    """A program of ``n_nodes`` nodes in topological order; the last node is the root.

    ``layout=True`` (whole programs of the layout collections) also makes the shapes real
    layout files have and tile kernels rarely do: 3-D convolutions on rank-5 activations
    (unet3d), reshapes that flatten a tensor to rank 1 and scalar reshapes (a reduce to
    [1] reshaped to []), so that configurable nodes of rank 0 to 5 occur, as in
    the real files (FORMAT.md). ``layout=False`` draws exactly as before.
    """
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
        elif op == RESHAPE and layout and rng.random() < LAYOUT_LOW_RANK_RESHAPE:
            size = int(np.prod(a_shape)) if a_shape else 1
            if a_shape and size <= MAX_MERGED_DIM and rng.random() < 0.3:
                add(op, [size], a_elem, [a])  # flatten
            else:
                add(REDUCE, [1], a_elem, [a])  # a reduce to [1], reshaped to a scalar
                add(op, [], a_elem, [len(opcode) - 1])
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
        elif op == CONVOLUTION and layout and (len(a_shape) == 5
                                               or rng.random() < LAYOUT_CONV3D):
            # 3-D convolution (b, d, h, w, c) -> (b, d', h', w', c_out), kernel 3x3x3.
            act = a_shape if len(a_shape) == 5 else \
                [int(rng.choice([1, 2, 4]))] + [int(d) for d in rng.choice(VOLUME_SIZES, 3)] + \
                [int(rng.choice(CHANNELS[:7]))]
            if len(a_shape) != 5:
                add(RESHAPE, act, a_elem, [a])
                a = len(opcode) - 1
            c_out = int(rng.choice(CHANNELS[:7]))
            add(PARAMETER, [3, 3, 3, act[4], c_out], a_elem, [])
            stride = int(rng.choice([1, 1, 2]))
            out = [act[0]] + [max(1, d // stride) for d in act[1:4]] + [c_out]
            add(op, out, a_elem, [a, len(opcode) - 1])
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
    """Configurable nodes: every convolution, dot and reshape, of any rank (the real files
    have configurable reshapes of rank 0 and 1, FORMAT.md), and transposes of rank >= 2."""
    op = program.opcode
    ids = np.flatnonzero(np.isin(op, CONFIGURABLE_OPCODES) & ((op != TRANSPOSE) |
                                                              (program.rank >= 2)))
    first = np.array([program.operands[i][0] if program.operands[i] else -1 for i in ids],
                     dtype=np.int64)
    second = np.array([program.operands[i][1] if len(program.operands[i]) > 1 else -1
                       for i in ids], dtype=np.int64)
    return LayoutSetting(ids.astype(np.int64), first, second)


# Kinds of option sets of one layout slot of one node (FORMAT.md: "1.4-2.0 distinct values"
# per node; a pair and its swap most often, "not fixed" or a constant otherwise).
CONST, PAIR, UNFIXED, TRIPLE = range(4)
MAX_OPTIONS = 3


@dataclass(frozen=True)
class LayoutPlan:
    """What a file's configs are drawn from.

    out_opts / in_opts / ker_opts: int8 (nc, MAX_OPTIONS, 6), the values a node's output,
    input (first operand) and kernel (second operand) layout can take, -1 where not fixed;
    out_p / in_p / ker_p: float64 (nc, MAX_OPTIONS), their pick probabilities (rows sum to
    1, zero past a node's options; default search: the first option dominates);
    in_tied: bool (nc,), the input option follows the output option (reshape, transpose);
    in_follow: float64 (nc,), the chance that a node reads its configurable producer's
    chosen output instead of its own input option (0 if the producer is not configurable);
    in_pos: int64 (nc,), the producer's position among the configurable nodes or -1;
    flip_rate: float (default search: the mean share of a slot's movable nodes a config
    moves off their first option; 0 for random search).
    """

    out_opts: np.ndarray
    out_p: np.ndarray
    in_opts: np.ndarray
    in_p: np.ndarray
    ker_opts: np.ndarray
    ker_p: np.ndarray
    in_tied: np.ndarray
    in_follow: np.ndarray
    in_pos: np.ndarray
    flip_rate: float


def _options(rng: np.random.Generator, rank: int, kind: int, default_pair: bool,
             full: bool) -> list[list[int]]:
    """The option values of one layout slot of a tensor of ``rank`` (first = dominant).

    A fixed option fixes the two minor-most positions: the default pair (r-1, r-2), or
    with ``default_pair`` False a pair (r-1, k) with another dim second; the swapped pair
    puts the other dim minor. ``full`` extends each fixed option to the whole order (the
    other dims in default order), as real rank-3 reshapes show. Rank 0 is never fixed;
    rank 1 fixes its single position or nothing.
    """
    none: list[int] = []
    if rank == 0:
        return [none]
    if rank == 1:
        return [[0]] if kind == CONST else ([[0], none] if rng.random() < 0.5 else [none, [0]])
    pair = [rank - 1, rank - 2] if default_pair or rank == 2 else \
        [rank - 1, int(rng.integers(rank - 2))]
    swapped = pair[::-1]
    if full:
        rest = [d for d in range(rank - 1, -1, -1) if d not in pair]
        pair, swapped = pair + rest, swapped + rest
    if kind == CONST:
        return [pair]
    if kind == PAIR:
        return [pair, swapped]
    if kind == UNFIXED:
        return [pair, none] if rng.random() < 0.5 else [none, pair]
    return [pair, swapped, none]


def _option_array(options: list[list[list[int]]]) -> np.ndarray:
    out = np.full((len(options), MAX_OPTIONS, 6), -1, dtype=np.int8)
    for j, opts in enumerate(options):
        for k, value in enumerate(opts):
            out[j, k, :len(value)] = value
    return out


def _pick_probabilities(rng: np.random.Generator, n_options: np.ndarray, search: str,
                        flip_rate: float) -> np.ndarray:
    """float64 (nc, MAX_OPTIONS): per node, how likely each option is picked.

    ``random`` search: near-uniform (Dirichlet, concentration 40 per option; real random
    files: 439/561 of 1000, a mean dominant share of 0.50-0.53). ``default`` search: the
    first option, except that a config moves ``flip_rate`` of the movable nodes (at least
    one) on average off it, nodes weighted lognormally (real default files: 3 of 21, 6 of
    35, 83 of 832 movable nodes per config; 22 to 500 of 1000 configs off the dominant
    option, depending on the node; a mean dominant share of 0.82-0.90).
    """
    nc = len(n_options)
    live = np.arange(MAX_OPTIONS)[None, :] < n_options[:, None]
    if search == "random":
        g = rng.gamma(40.0, size=(nc, MAX_OPTIONS)) * live
        return g / g.sum(axis=1, keepdims=True)
    movable = n_options > 1
    weight = rng.lognormal(0.0, 1.0, nc) * movable
    rate = np.zeros(nc)
    if weight.sum() > 0:
        flips = max(1.0, flip_rate * movable.sum())
        rate = np.minimum(0.6, flips * weight / weight.sum())
    p = np.where(live, rate[:, None] / np.maximum(1, n_options - 1)[:, None], 0.0)
    p[:, 0] = 1.0 - rate
    return p


def draw_layout_plan(rng: np.random.Generator, program: Program, setting: LayoutSetting,
                     search: str) -> LayoutPlan:
    """Per configurable node, the few layouts each slot can take, and how they are picked.

    Per file: the shares of node kinds (constant 5-55%, skewed low; pair and swap; pair or
    not fixed 8-40%; all three 0-8%), the share of pairs that are the default pair
    (60-95%), of rank-3 reshape options fixed in full (0-15%; a quarter of that on rank 4),
    of nodes whose input is read as its configurable producer's output (60-95%), of kernel
    slots that may be left unfixed (0-30%) and, for default search, the share of movable
    nodes a config moves (6-20%). These ranges put the file statistics where FORMAT.md
    measured them on the real samples.
    """
    ids = setting.config_ids
    nc = len(ids)
    rank = program.rank
    p_const = 0.05 + 0.5 * rng.random() ** 2
    p_unfixed = rng.uniform(0.08, 0.4)
    p_triple = rng.uniform(0.0, 0.08)
    shares = np.array([p_const, max(0.0, 1.0 - p_const - p_unfixed - p_triple), p_unfixed,
                       p_triple])
    shares /= shares.sum()
    p_default_pair = rng.uniform(0.6, 0.95)
    p_full = rng.uniform(0.0, 0.15)
    p_follow = rng.uniform(0.6, 0.95)
    p_kernel_unfixed = rng.uniform(0.0, 0.3)
    flip_rate = float(rng.uniform(0.06, 0.2)) if search == "default" else 0.0

    position = np.full(len(rank), -1, dtype=np.int64)
    position[ids] = np.arange(nc)
    kinds = rng.choice(4, size=nc, p=shares)
    in_kinds = rng.choice(4, size=nc, p=shares)
    tied = np.isin(program.opcode[ids], (RESHAPE, TRANSPOSE))
    out_opts, in_opts, ker_opts = [], [], []
    for j, node in enumerate(ids):
        r = int(rank[node])
        # Real files fix a whole order on some rank-3 reshapes, very rarely on rank 4.
        full = (program.opcode[node] == RESHAPE and (r == 3 or r == 4 and rng.random() < 0.25)
                and rng.random() < p_full)
        default = rng.random() < p_default_pair
        out = _options(rng, r, int(kinds[j]), default, bool(full))
        out_opts.append(out)
        src = int(setting.input_src[j])
        rs = int(rank[src]) if src >= 0 else 0
        in_full = bool(tied[j]) and (rs == 3 or rs == 4 and rng.random() < 0.25) and \
            rng.random() < p_full
        if src < 0:
            read = [[]]
        elif tied[j]:
            # A reshape or transpose reads its operand in the layout that goes with its
            # output choice: the operand's primary pair, its swap, or not fixed.
            pair, swapped = _options(rng, rs, PAIR, True, in_full)[:2] if rs >= 2 else \
                ([[0], [0]] if rs == 1 else [[], []])
            read = [[] if not o else (pair if o == out[0] or (not out[0] and k == 1)
                                      else swapped) for k, o in enumerate(out)]
        else:
            read = _options(rng, rs, int(in_kinds[j]), rng.random() < p_default_pair, in_full)
        in_opts.append(read)
        ksrc = int(setting.kernel_src[j])
        if ksrc < 0:
            ker_opts.append([[]])
        else:
            rk = int(rank[ksrc])
            kind = TRIPLE if rng.random() < p_kernel_unfixed else PAIR
            ker_opts.append(_options(rng, rk, kind, True, False))
    n_out = np.array([len(o) for o in out_opts], dtype=np.int64)
    n_in = np.array([len(o) for o in in_opts], dtype=np.int64)
    n_ker = np.array([len(o) for o in ker_opts], dtype=np.int64)
    in_pos = np.where(setting.input_src >= 0, position[np.maximum(setting.input_src, 0)], -1)
    follow = np.where(in_pos >= 0, p_follow, 0.0)
    return LayoutPlan(
        out_opts=_option_array(out_opts),
        out_p=_pick_probabilities(rng, n_out, search, flip_rate),
        in_opts=_option_array(in_opts), in_p=_pick_probabilities(rng, n_in, search, flip_rate),
        ker_opts=_option_array(ker_opts),
        ker_p=_pick_probabilities(rng, n_ker, search, flip_rate),
        in_tied=tied, in_follow=follow, in_pos=in_pos.astype(np.int64), flip_rate=flip_rate)


def _draw_picks(rng: np.random.Generator, p: np.ndarray, m: int) -> np.ndarray:
    """int64 (m, nc): option index per config and node, from probabilities (nc, k)."""
    cum = np.cumsum(p, axis=1)
    cum /= cum[:, -1:]  # exactly 1 from a node's last option on: never picks past it
    u = rng.random((m, p.shape[0]))
    return (u[:, :, None] >= cum[None, :, :-1]).sum(axis=2)


def draw_layout_configs(rng: np.random.Generator, plan: LayoutPlan, m: int) -> np.ndarray:
    """int8 (m, nc, 18): m configs drawn from a plan (duplicates possible)."""
    nc = plan.out_opts.shape[0]
    nodes = np.arange(nc)[None, :]
    out_pick = _draw_picks(rng, plan.out_p, m)
    in_pick = np.where(plan.in_tied[None, :], out_pick, _draw_picks(rng, plan.in_p, m))
    ker_pick = _draw_picks(rng, plan.ker_p, m)
    configs = np.empty((m, nc, 18), dtype=np.int8)
    configs[:, :, 0:6] = plan.out_opts[nodes, out_pick]
    configs[:, :, 6:12] = plan.in_opts[nodes, in_pick]
    configs[:, :, 12:18] = plan.ker_opts[nodes, ker_pick]
    follow = rng.random((m, nc)) < plan.in_follow[None, :]
    if follow.any():
        produced = configs[:, np.maximum(plan.in_pos, 0), 0:6]
        configs[:, :, 6:12] = np.where(follow[:, :, None], produced, configs[:, :, 6:12])
    return configs


def _row_hashes(configs: np.ndarray, salt: np.ndarray) -> np.ndarray:
    """uint64 (m,): a hash of each config row; equal rows hash equal."""
    flat = np.ascontiguousarray(configs).reshape(len(configs), -1)
    if flat.shape[1] % 8:
        flat = np.pad(flat, ((0, 0), (0, 8 - flat.shape[1] % 8)))
    words = flat.view(np.uint64)
    w = words.shape[1]
    with np.errstate(over="ignore"):
        low = (words * salt[:w][None, :]).sum(axis=1, dtype=np.uint64)
        high = (words * salt[w:2 * w][None, :]).sum(axis=1, dtype=np.uint64)
    return low ^ ((high << np.uint64(29)) | (high >> np.uint64(35)))


def generate_layout_configs(rng: np.random.Generator, program: Program, setting: LayoutSetting,
                            n_configs: int, search: str) -> np.ndarray:
    """int8 (n_configs, nc, 18): output, input and kernel layouts per configurable node, in
    the real encoding (FORMAT.md "Layout configs as they really are").

    Each slot takes one of a node's few options (`draw_layout_plan`): mostly the two
    minor-most positions fixed, sometimes none, rarely one or the whole order. A node
    reads its first operand mostly in its configurable producer's chosen output layout,
    else in its own input option. The file's duplicate rate is drawn (40% of files 0-2%,
    the others 2-45%; real: 0-1.3% on the test samples, 41% on unet3d): that many configs
    repeat a distinct one, so their runtimes differ by measurement noise only. When the
    options allow fewer distinct configs, the rate is higher (real openai_v0_rnn_optimized:
    20 configs, 1 distinct).
    """
    nc = len(setting.config_ids)
    plan = draw_layout_plan(rng, program, setting, search)
    rate = rng.uniform(0.0, 0.02) if rng.random() < 0.4 else rng.uniform(0.02, 0.45)
    want = max(1, int(round(n_configs * (1.0 - rate))))
    salt = rng.integers(1, 2**63, size=2 * (nc * 18 // 8 + 1), dtype=np.uint64) | np.uint64(1)
    distinct = np.empty((want, nc, 18), dtype=np.int8)
    seen: set[int] = set()
    have, drawn = 0, 0
    # Candidates in chunks of about CONFIG_CHUNK values, so memory stays near the output's.
    chunk = max(16, CONFIG_CHUNK // max(1, nc * 18))
    while have < want and drawn < 8 * want + 64:
        m = min(chunk, (want - have) * 5 // 4 + 16)
        block = draw_layout_configs(rng, plan, m)
        drawn += m
        hashes = _row_hashes(block, salt)
        _, first = np.unique(hashes, return_index=True)
        fresh = [i for i in np.sort(first) if int(hashes[i]) not in seen][: want - have]
        seen.update(int(hashes[i]) for i in fresh)
        distinct[have:have + len(fresh)] = block[fresh]
        have += len(fresh)
        if not fresh:
            break  # the options allow (nearly) no more distinct configs
    distinct = distinct[:have]
    pick = np.concatenate([np.arange(have), rng.integers(0, have, n_configs - have)])
    return distinct[rng.permutation(pick)]


def effective_minor_pair(prefix: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """int64 (..., 2): the two minor-most dims a layout config leaves in effect.

    prefix: int8 (..., 6) config layout (-1 where not fixed); rank: int (...) tensor rank.
    Fixed positions are kept; unfixed ones follow the tensor's default order r-1, ..., 0
    over the dims the prefix does not fix. -1 where the rank has no such position.
    """
    rank = np.broadcast_to(np.asarray(rank, dtype=np.int64), prefix.shape[:-1])
    p0, p1 = prefix[..., 0].astype(np.int64), prefix[..., 1].astype(np.int64)
    fixed0 = p0 >= 0
    fixed1 = fixed0 & (p1 >= 0)
    e0 = np.where(fixed0, p0, rank - 1)
    e1 = np.where(fixed1, p1, np.where(fixed0 & (p0 == rank - 1), rank - 2,
                                       np.where(fixed0, rank - 1, rank - 2)))
    e0 = np.where(rank >= 1, e0, -1)
    e1 = np.where(rank >= 2, e1, -1)
    return np.stack([e0, e1], axis=-1)


def pad_factor(dims: np.ndarray, layouts: np.ndarray) -> np.ndarray:
    """float64 (b, nc): waste of padding the minor dim to 128 and the second-minor to 8.

    dims: int64 (nc, 6); layouts: int (b, nc, >= 2) minor-to-major, the first two positions
    used (-1: no such dim, no padding). Pass effective layouts (`effective_minor_pair`).
    """
    nodes = np.arange(dims.shape[0])[None, :]
    minor_id, second_id = layouts[..., 0].astype(np.int64), layouts[..., 1].astype(np.int64)
    minor = np.where(minor_id >= 0, dims[nodes, minor_id.clip(0, 5)], 1).clip(min=1)
    second = np.where(second_id >= 0, dims[nodes, second_id.clip(0, 5)], 1).clip(min=1)
    return (np.ceil(minor / 128) * 128 / minor) * (np.ceil(second / 8) * 8 / second)


def op_weights(program: Program) -> np.ndarray:
    """float64 (n,): cost weight of each node's opcode (OP_WEIGHT, 0.3 otherwise)."""
    weight = np.full(len(program.opcode), 0.3)
    for op, w in OP_WEIGHT.items():
        weight[program.opcode == op] = w
    return weight


def draw_unmodelled_costs(rng: np.random.Generator, program: Program,
                          setting: LayoutSetting) -> np.ndarray:
    """float64 (nc, 7, 7): the unmodelled cost in ns of each configurable node under each
    effective (minor, second-minor) pair, indexed by dim + 1 (0: no such dim); lognormal
    (sigma 1), scaled by the node's bytes. Drawn once per file."""
    nbytes = program.bytes[setting.config_ids]
    draws = rng.lognormal(0.0, 1.0, size=(len(nbytes), 7, 7))
    return draws * (nbytes * NS_PER_BYTE)[:, None, None]


def layout_cost_terms(program: Program, setting: LayoutSetting, configs: np.ndarray,
                      unmodelled: np.ndarray | None = None) -> np.ndarray:
    """float64 (b, 3): padding, relayout and (unscaled) unmodelled cost in ns of each
    config of configs int8 (b, nc, 18); see the module docstring. ``unmodelled`` is
    `draw_unmodelled_costs`' table (zero term if None)."""
    ids = setting.config_ids
    rank, dims, nbytes = program.rank, program.dims, program.bytes
    b, nc = configs.shape[0], len(ids)
    terms = np.zeros((b, 3))
    if nc == 0:
        return terms
    out = effective_minor_pair(configs[:, :, 0:6], rank[ids][None, :])
    node_cost = nbytes[ids] * op_weights(program)[ids] * NS_PER_BYTE
    terms[:, 0] = (node_cost[None, :] * (pad_factor(dims[ids], out) - 1)).sum(axis=1)
    defaults = default_layouts(rank)[:, :2].astype(np.int64)
    position = np.full(len(rank), -1, dtype=np.int64)
    position[ids] = np.arange(nc)
    for slot, src in ((6, setting.input_src), (12, setting.kernel_src)):
        live = (src >= 0) & (rank[np.maximum(src, 0)] >= 1)
        if not live.any():
            continue
        s = np.maximum(src, 0)
        read = effective_minor_pair(configs[:, :, slot:slot + 6], rank[s][None, :])
        pos = position[s]
        produced = np.where((pos >= 0)[None, :, None], out[:, np.maximum(pos, 0)],
                            defaults[s][None, :, :])
        moved = (read != produced).any(axis=2) & live[None, :]
        terms[:, 1] += (moved * (nbytes[s] * COPY_NS_PER_BYTE)[None, :]).sum(axis=1)
    if unmodelled is not None:
        terms[:, 2] = unmodelled[np.arange(nc)[None, :], out[..., 0] + 1, out[..., 1] + 1].sum(1)
    return terms


def _pair_agreement(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau of two tie-free samples (all pairs; cheap for a few hundred values)."""
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    n = len(x)
    return float((dx * dy).sum() / (n * (n - 1)))


def _noise_for_tau(rng: np.random.Generator, runtime: np.ndarray, tau: float) -> float:
    """The lognormal sigma at which two measurements of the same configs agree to Kendall
    ``tau``, found by bisection on a sample of up to 200 configs (common random draws)."""
    sample = runtime if len(runtime) <= 200 else rng.choice(runtime, 200, replace=False)
    z = rng.standard_normal((2, len(sample)))
    log = np.log(sample)
    if len(sample) < 3 or np.ptp(log) == 0:
        return MIN_LAYOUT_NOISE
    lo, hi = np.log(MIN_LAYOUT_NOISE), 0.0
    if _pair_agreement(log + np.exp(lo) * z[0], log + np.exp(lo) * z[1]) <= tau:
        return MIN_LAYOUT_NOISE
    for _ in range(14):
        mid = (lo + hi) / 2
        agree = _pair_agreement(log + np.exp(mid) * z[0], log + np.exp(mid) * z[1])
        lo, hi = (mid, hi) if agree > tau else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def layout_runtime(program: Program, setting: LayoutSetting, configs: np.ndarray,
                   rng: np.random.Generator, spread: float | None = None,
                   repeat_tau: float | None = None, unmodelled_share: float | None = None,
                   block: int = 512) -> np.ndarray:
    """int64 (b,): measured runtime in ns of each config of configs int8 (b, nc, 18).

    The true runtime is the fixed part plus the padding, relayout and unmodelled terms
    (module docstring), the unmodelled term scaled so that its standard deviation over
    the configs is share / (1 - share) times that of padding + relayout, share being
    ``unmodelled_share`` (drawn from 30-50% if None). Measurements are the true runtimes times
    lognormal noise: with ``repeat_tau``, its sigma is sized so that two measurements of
    the same configs agree to that Kendall tau; else it is LAYOUT_NOISE. With ``spread``,
    the variable part is scaled so that max/min of the measured runtimes is ``spread``
    (the noise sigma scaled along, so the tau holds).
    """
    table = draw_unmodelled_costs(rng, program, setting)
    share = rng.uniform(0.3, 0.5) if unmodelled_share is None else unmodelled_share
    terms = np.concatenate([layout_cost_terms(program, setting, configs[s:s + block], table)
                            for s in range(0, len(configs), block)] or [np.zeros((0, 3))])
    modelled = terms[:, 0] + terms[:, 1]
    sm, su = float(modelled.std()), float(terms[:, 2].std())
    scale = share / (1.0 - share) * sm / su if sm > 0 and su > 0 else 1.0
    variable = modelled + scale * terms[:, 2]
    fixed = float((program.bytes * op_weights(program)).sum()) * NS_PER_BYTE + 1e4
    z = rng.standard_normal(len(configs))
    scaled = spread is not None and len(variable) > 1 and np.ptp(variable) > 0
    v = (variable - variable.min()) / np.ptp(variable) if scaled else variable

    def true_at(s: float) -> np.ndarray:
        return fixed * (1.0 + (s - 1.0) * v) if scaled else fixed + variable

    def sigma_at(true: np.ndarray) -> float:
        if repeat_tau is None:
            return LAYOUT_NOISE
        return max(MIN_LAYOUT_NOISE, ratio * float(np.log(true).std()))

    if repeat_tau is not None:
        true = true_at(spread if scaled else 1.0)
        s = float(np.log(true).std())
        ratio = _noise_for_tau(rng, true, repeat_tau) / s if s > 0 else 0.0
    if scaled:
        # Bisect the true spread so that the measured one (noise draws fixed) is ``spread``.
        lo, hi = 1.0, 2.0 * spread
        for _ in range(22):
            mid = (lo + hi) / 2
            true = true_at(mid)
            measured = true * np.exp(sigma_at(true) * z)
            lo, hi = (lo, mid) if measured.max() / measured.min() > spread else (mid, hi)
        true = true_at((lo + hi) / 2)
    else:
        true = true_at(1.0)
    return np.maximum(1, np.round(true * np.exp(sigma_at(true) * z))).astype(np.int64)


# ---------------------------------------------------------------- tile collection


def tile_units(out_dims: np.ndarray) -> np.ndarray:
    """int64 (rank,): elements per hardware tile along each output dim: LANES on the
    minor-most dim, SUBLANES on the second-minor, 1 on the others."""
    rank = int((out_dims > 0).sum())
    units = np.ones(rank, dtype=np.int64)
    if rank:
        units[-1] = LANES
    if rank >= 2:
        units[-2] = SUBLANES
    return units


def default_tile(out_dims: np.ndarray, fit_bytes: float | None) -> np.ndarray:
    """int64 (rank,): hardware tiles per dim of the largest tile that fits on chip: the
    whole output, its major-most dims halved until ``fit_bytes`` (on-chip bytes per tile
    element) times the tile's elements fits VMEM_BYTES (the whole output if None)."""
    rank = int((out_dims > 0).sum())
    size = out_dims[:rank].astype(np.int64)
    units = tile_units(out_dims)
    tile = -(-size // units)
    while fit_bytes and (tile > 1).any() and \
            np.minimum(tile * units, size).prod() * fit_bytes > VMEM_BYTES:
        d = int(np.flatnonzero(tile > 1)[0])
        tile[d] = -(-tile[d] // 2)
    return tile


def generate_tile_configs(rng: np.random.Generator, out_dims: np.ndarray, n_configs: int,
                          fit_bytes: float | None = None,
                          rate: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """float32 (n_configs, 24): output bounds (columns 8-15, in elements) tile the output
    shape; config 0 is the default.

    Shaped after the 15 kernels of the real tuning record (docs/synthetic.md, "Tile configs
    and runtimes"): tiles are whole hardware tiles (multiples of LANES on the minor-most
    dim and of SUBLANES on the second-minor, or the whole dim); the default is the
    compiler's pick, ``rate`` (true runtimes of configs, float64 (c,)) times a lognormal
    error of TILE_DEFAULT_ERROR, among the candidates that fit on chip (``default_tile``
    when ``rate`` is None); the finest candidate makes ``finest`` times the default's
    output tiles, ``finest`` drawn per kernel log-uniformly from TILE_FINEST, and the
    other candidates make between 1 / TILE_COARSEST and ``finest`` times as many."""
    rank = int((out_dims > 0).sum())
    size = out_dims[:rank].astype(np.int64)
    units = tile_units(out_dims)
    n_units = -(-size // units)
    finest = float(np.exp(rng.uniform(np.log(TILE_FINEST[0]), np.log(TILE_FINEST[1]))))
    n_distinct = max(1, int(round(n_configs * rng.uniform(0.6, 0.95))))
    choices = []
    for d in range(rank):
        n = int(n_units[d])
        cand = {n, -(-n // 2), -(-n // 3), -(-n // 4)}
        cand |= {1 << k for k in range(n.bit_length())}
        choices.append(np.array(sorted(cand)))

    def n_tiles(tiles: np.ndarray) -> np.ndarray:
        return (-(-n_units // tiles)).prod(axis=1)

    def elements(tiles: np.ndarray) -> np.ndarray:
        return np.minimum(tiles * units, size)

    def draw(tiles: np.ndarray, rows: np.ndarray, anchor: np.ndarray) -> None:
        # Redraw ``rows`` until their tile counts lie in the range around ``anchor``'s;
        # rows still outside after TILE_DRAW_ROUNDS become the anchor.
        base = n_tiles(anchor[None, :])[0]
        for _ in range(TILE_DRAW_ROUNDS):
            if not len(rows) or not rank:
                return
            drawn = np.stack([rng.choice(c, len(rows)) for c in choices], axis=1)
            count = n_tiles(drawn)
            ok = (count <= base * finest) & (count * TILE_COARSEST >= base)
            tiles[rows[ok]] = drawn[ok]
            rows = rows[~ok]
        tiles[rows] = anchor

    tiles = np.tile(default_tile(out_dims, fit_bytes), (n_distinct, 1))
    draw(tiles, np.arange(1, n_distinct), tiles[0].copy())
    if rate is not None and n_distinct > 1:
        rows = np.zeros((n_distinct, 24), dtype=np.float32)
        rows[:, 8:8 + rank] = elements(tiles)
        rated = rate(rows) * rng.lognormal(0.0, TILE_DEFAULT_ERROR, n_distinct)
        if fit_bytes:
            on_chip = np.prod(elements(tiles), axis=1) * fit_bytes
            rated = np.where(on_chip <= VMEM_BYTES, rated, np.inf)
        pick = int(np.argmin(rated))
        tiles[[0, pick]] = tiles[[pick, 0]]
        anchor = tiles[0].copy()
        base = n_tiles(anchor[None, :])[0]
        count = n_tiles(tiles)
        draw(tiles, np.flatnonzero((count > base * finest) | (count * TILE_COARSEST < base)),
             anchor)
    if n_distinct > 1 and rank:
        # The finest candidate is always measured (the slowest config of the real kernels
        # is their finest or nearly): the default's dims halved, minor-most first, while
        # the tile count stays within ``finest`` times the default's.
        fine, base = tiles[0].copy(), n_tiles(tiles[:1])[0]
        for d in range(rank - 1, -1, -1):
            while fine[d] > 1:
                finer = fine.copy()
                finer[d] = -(-finer[d] // 2)
                if n_tiles(finer[None, :])[0] > base * finest:
                    break
                fine = finer
        tiles[1] = fine
    distinct = np.zeros((n_distinct, 24), dtype=np.float32)
    distinct[:, 8:8 + rank] = elements(tiles)
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
                 rng: np.random.Generator | None) -> np.ndarray:
    """int64 (c,): measured runtime in ns of each tile config (float32 (c, 24)); with
    ``rng`` None, float64 (c,): the true (noise-free) runtimes."""
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
    spill = np.where(tile_bytes > VMEM_BYTES, 2.0 * work * TILE_NS_PER_BYTE, 0.0)
    # A contraction reads each input once per row or column of output tiles.
    rereads = (reread_factor(per_dim) if kernel.contracts else np.ones(len(configs)))
    reads = kernel.input_bytes * rereads * TILE_READ_NS_PER_BYTE
    overhead = n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel.n_nodes)
    # The pipeline's first tile loads with nothing to overlap it: a fill cost per config.
    fill = tile_elems * kernel.element_bytes * kernel.n_operands * TILE_FILL_NS_PER_BYTE
    runtime = work * TILE_NS_PER_BYTE + reads + overhead + fill + spill + 500.0
    if rng is None:
        return runtime
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
    inputs = program.opcode == PARAMETER
    contractions = int(np.isin(program.opcode, (CONVOLUTION, DOT)).sum())
    kernel = TileKernel(
        out_dims=out_dims, element_bytes=int(program.element_bytes[out]),
        n_operands=int(inputs.sum()) + 1,
        intensity=1.0 + contractions * 4.0,
        input_bytes=float(program.bytes[inputs].sum()),
        contracts=contractions > 0,
        n_nodes=len(program.opcode))
    # Double-buffered tiles of every operand (inputs and output) must fit on chip.
    fit_bytes = 2.0 * kernel.element_bytes * kernel.n_operands
    configs = generate_tile_configs(rng, out_dims, n_configs, fit_bytes,
                                    rate=lambda c: tile_runtime(kernel, c, None))
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
    program = generate_program(rng, n_nodes, layout=True)
    setting = layout_setting(program)
    n_configs = draw_size(rng, size.configs(collection))
    # The largest real config tensor is ~2.6 GB as float32 (FORMAT.md): many configs come
    # with fewer configurable nodes.
    target = min(draw_size(rng, size.layout_configurable),
                 max(1, MAX_CONFIG_TENSOR_BYTES // (n_configs * 18 * 4)))
    if len(setting.config_ids) > target:
        # Keep a subset configurable; the others keep their default layout. Reshapes and
        # transposes are kept less often than convolutions and dots, by a weight drawn per
        # file: reshapes are 6-40% of the configurable nodes of the real samples.
        op = program.opcode[setting.config_ids]
        weight = np.where(np.isin(op, (RESHAPE, TRANSPOSE)),
                          np.exp(rng.uniform(np.log(0.1), 0.0)), 1.0)
        keep = np.sort(rng.choice(len(setting.config_ids), target, replace=False,
                                  p=weight / weight.sum()))
        setting = LayoutSetting(setting.config_ids[keep], setting.input_src[keep],
                                setting.kernel_src[keep])
    configs = generate_layout_configs(rng, program, setting, n_configs, collection.search)
    # Real files: runtime spread 1.02x to 3.05x, repeat tau 0.82 on unet3d (FORMAT.md).
    spread = float(np.exp(rng.uniform(np.log(LAYOUT_SPREAD[0]), np.log(LAYOUT_SPREAD[1]))))
    tau = float(rng.uniform(*LAYOUT_REPEAT_TAU))
    runtime = layout_runtime(program, setting, configs, rng, spread=spread, repeat_tau=tau,
                             block=config_block)
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
    seed = check_seed(seed, "seed")
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise XlarankError(f"{out}: already exists; remove it or choose another folder")
    check_output(out, "dir")
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
