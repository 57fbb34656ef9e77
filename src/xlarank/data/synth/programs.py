"""Generated programs: HLO-like computation graphs in topological order, as the real files
hold them (the package docstring, "Programs")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
