"""Kernels of the gru family: opcode-scaled node inputs and a GRU over sequences.

GRU gates follow torch.nn.GRU's order and equations, with the input projections given:
for input gates g (3d,) = [g_r, g_z, g_n] and hidden state h (d,),

    r = sigmoid(g_r + h @ w_hidden[:, :d] + b_hidden[:d])
    z = sigmoid(g_z + h @ w_hidden[:, d:2d] + b_hidden[d:2d])
    n = tanh(g_n + r * (h @ w_hidden[:, 2d:] + b_hidden[2d:]))
    h' = (1 - z) * n + z * h
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@njit(cache=True, nogil=True)
def _gru_step(gates, h, w_hidden, b_hidden, recurrent):
    """One GRU step in place: h float64 (d,) becomes h'. gates float64 (3d,) are the input
    projections; recurrent float64 (3d,) is scratch."""
    d = h.shape[0]
    for g in range(3 * d):
        recurrent[g] = b_hidden[g]
    # Rows outer: w_hidden is read in memory order and the inner loop vectorizes.
    for f in range(d):
        for g in range(3 * d):
            recurrent[g] += h[f] * w_hidden[f, g]
    for f in range(d):
        r = _sigmoid(gates[f] + recurrent[f])
        z = _sigmoid(gates[d + f] + recurrent[d + f])
        n = np.tanh(gates[2 * d + f] + r * recurrent[2 * d + f])
        h[f] = (1.0 - z) * n + z * h[f]


# Serial: a pruned graph's few thousand nodes take a few milliseconds, less than waking
# threads on a busy machine.
@njit(cache=True, nogil=True)
def opcode_scaled_input(raw, opcode, opcode_scale, feat_proj, bias):
    """float64 (n, d): tanh((x * opcode_scale[opcode]) @ feat_proj + bias), x the signed
    log1p of raw float32 (n, f) node features, / 10; opcode uint8 (n,); opcode_scale
    float64 (n_opcodes, f), a learned weight per opcode and input column."""
    n, f_in = raw.shape
    d = feat_proj.shape[1]
    out = np.empty((n, d), dtype=np.float64)
    for v in range(n):
        for f in range(d):
            out[v, f] = bias[f]
        for k in range(f_in):
            x = np.float64(raw[v, k])
            # Most inputs are zero (one-hot types, dims past the rank): skip their log1p.
            if x == 0.0:
                continue
            x = np.log1p(x) / 10.0 if x > 0 else -np.log1p(-x) / 10.0
            x *= opcode_scale[opcode[v], k]
            for f in range(d):
                out[v, f] += x * feat_proj[k, f]
        for f in range(d):
            out[v, f] = np.tanh(out[v, f])
    return out


@njit(cache=True, nogil=True)
def gru_sequence(inputs, w_input, b_input, w_hidden, b_hidden):
    """float64 (d,): the GRU's last hidden state over the rows of inputs float64 (n, e) in
    order, from zero; w_input (e, 3d), b_input (3d,), w_hidden (d, 3d), b_hidden (3d,)."""
    n, e = inputs.shape
    d = w_hidden.shape[0]
    h = np.zeros(d)
    gates = np.empty(3 * d)
    recurrent = np.empty(3 * d)
    for v in range(n):
        for g in range(3 * d):
            acc = b_input[g]
            for f in range(e):
                acc += inputs[v, f] * w_input[f, g]
            gates[g] = acc
        _gru_step(gates, h, w_hidden, b_hidden, recurrent)
    return h


# Serial, as the other per-config kernels: they run once per batch of configs, and
# featurizing spreads over processes instead.
@njit(cache=True, nogil=True)
def layout_gru_columns(pairs, segment, heads, conv_table, start, cell):
    """float32 (n_configs, 2d): per config, the GRU run on from ``start`` over segments of
    configurable nodes: its last hidden state, then the mean of its states over the steps.

    pairs: int16 (n_configs, nc, 9), the int8 configs (n_configs, nc, 18) viewed two
    positions at a time (little-endian: the low byte is the even position), so a pair both
    -1 is one compare. segment: int64 (nc,), each configurable node's step (0..n_steps-1,
    topological order). heads: float64 (nc, e), e = 8, each node's context. conv_table: float64
    (3, 49, e), a width-2 filter over one-hot dimension ids at the minor-most position
    pair of the output, input and kernel layouts (its channels), tabulated for each pair
    (a, b) of ids in -1..5 at row 7 * (a + 1) + b + 1; a node's config code is heads[j]
    times its three rows, summed. A step's input is the mean code of its segment's nodes;
    steps with no node are skipped. start: float64 (d,), the state after the configurable
    nodes' context. cell: (w_input (e, 3d), b_input (3d,), w_hidden (d, 3d), b_hidden
    (3d,)).
    """
    w_input, b_input, w_hidden, b_hidden = cell
    c, nc, _ = pairs.shape
    e = heads.shape[1]
    if e != 8 or conv_table.shape[2] != 8:
        raise ValueError("layout_gru_columns is written for codes of 8 values")
    d = start.shape[0]
    n_steps = 0
    for j in range(nc):
        n_steps = max(n_steps, segment[j] + 1)
    count = np.zeros(n_steps)
    for j in range(nc):
        count[segment[j]] += 1.0
    # A node's pair is (-1, -1) in 3-42% of real configs: table row 0 is folded into a
    # per-step constant, and only other rows are read, from a table less its row 0.
    base = np.zeros((n_steps, e))
    delta = np.empty_like(conv_table)
    for ch in range(3):
        for row in range(49):
            for f in range(e):
                delta[ch, row, f] = conv_table[ch, row, f] - conv_table[ch, 0, f]
    for j in range(nc):
        for ch in range(3):
            for f in range(e):
                base[segment[j], f] += heads[j, f] * conv_table[ch, 0, f]
    out = np.zeros((c, 2 * d), dtype=np.float32)
    step_input = np.empty((n_steps, e))
    code = np.empty(e)
    h = np.empty(d)
    gates = np.empty(3 * d)
    recurrent = np.empty(3 * d)
    mean = np.empty(d)
    for i in range(c):
        step_input[:] = base
        for j in range(nc):
            # The node's code in eight scalars, which stay in registers (an array's do
            # not): this loop is most of the family's cost.
            c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = 0.0
            for ch in range(3):
                pair = np.int64(pairs[i, j, 3 * ch])
                if pair != -1:
                    # Sign-extended bytes: the even position low, the odd one high.
                    row = 7 * ((((pair & 0xFF) ^ 0x80) - 0x80) + 1) + (pair >> 8) + 1
                    c0 += delta[ch, row, 0]
                    c1 += delta[ch, row, 1]
                    c2 += delta[ch, row, 2]
                    c3 += delta[ch, row, 3]
                    c4 += delta[ch, row, 4]
                    c5 += delta[ch, row, 5]
                    c6 += delta[ch, row, 6]
                    c7 += delta[ch, row, 7]
            s = segment[j]
            step_input[s, 0] += heads[j, 0] * c0
            step_input[s, 1] += heads[j, 1] * c1
            step_input[s, 2] += heads[j, 2] * c2
            step_input[s, 3] += heads[j, 3] * c3
            step_input[s, 4] += heads[j, 4] * c4
            step_input[s, 5] += heads[j, 5] * c5
            step_input[s, 6] += heads[j, 6] * c6
            step_input[s, 7] += heads[j, 7] * c7
        h[:] = start
        mean[:] = 0.0
        taken = 0
        for s in range(n_steps):
            if count[s] == 0.0:
                continue
            for f in range(e):
                code[f] = step_input[s, f] / count[s]
            for g in range(3 * d):
                gates[g] = b_input[g]
            for f in range(e):
                for g in range(3 * d):
                    gates[g] += code[f] * w_input[f, g]
            _gru_step(gates, h, w_hidden, b_hidden, recurrent)
            for f in range(d):
                mean[f] += h[f]
            taken += 1
        for f in range(d):
            out[i, f] = h[f]
            out[i, d + f] = mean[f] / taken if taken > 0 else h[f]
    return out


@njit(cache=True, nogil=True)
def tile_gru_columns(config_feat, start, conv, cell):
    """float32 (n_configs, d): per tile config, one GRU step from ``start`` (the state after
    the kernel's nodes), its hidden state.

    config_feat: float32 (n_configs, 24), three groups of 6 dims + sum + product. The
    step's input is [tanh(max over windows of a width-2 convolution over the 6 dims, the
    groups as channels), the sums' and products' signed log1p], e + 6 values.
    conv: (weights (3, 2, e), bias (e,)); cell as in `layout_gru_columns`, w_input
    (e + 6, 3d).
    """
    conv_w, conv_b = conv
    w_input, b_input, w_hidden, b_hidden = cell
    c = config_feat.shape[0]
    e = conv_w.shape[2]
    d = start.shape[0]
    out = np.empty((c, d), dtype=np.float32)
    x = np.empty(24)
    step_input = np.empty(e + 6)
    gates = np.empty(3 * d)
    h = np.empty(d)
    recurrent = np.empty(3 * d)
    for i in range(c):
        for k in range(24):
            v = np.float64(config_feat[i, k])
            x[k] = np.log1p(v) if v >= 0 else -np.log1p(-v)
        for f in range(e):
            best = -np.inf
            for p in range(5):
                acc = conv_b[f]
                for ch in range(3):
                    for t in range(2):
                        acc += x[8 * ch + p + t] * conv_w[ch, t, f]
                best = max(best, acc)
            step_input[f] = np.tanh(best)
        for ch in range(3):
            step_input[e + 2 * ch] = x[8 * ch + 6]
            step_input[e + 2 * ch + 1] = x[8 * ch + 7]
        for g in range(3 * d):
            acc = b_input[g]
            for f in range(e + 6):
                acc += step_input[f] * w_input[f, g]
            gates[g] = acc
        h[:] = start
        _gru_step(gates, h, w_hidden, b_hidden, recurrent)
        for f in range(d):
            out[i, f] = h[f]
    return out
