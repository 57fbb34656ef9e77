"""Recurrent nets unrolled with a Python loop over a fixed number of time steps (no lax.scan or
other control flow): an Elman RNN, a GRU, an LSTM and a two-layer LSTM. Inputs are
[batch, time, features]; the input projections of all steps are one batched matmul."""

import jax
import jax.numpy as jnp
import numpy as np


def _w(rng, *shape, fan_in):
    w = rng.standard_normal(shape, dtype=np.float32)
    return w * np.float32(1.0 / np.sqrt(fan_in))


def rnn_elman(x, h0, wx, wh, b, wy, by):
    """Elman RNN (tanh), 16 steps, hidden 512, input 128, batch 64; per-step outputs projected
    to 32 features, returned as [batch, time, 32]."""
    xp = jnp.einsum("btd,dh->bth", x, wx) + b
    h = h0
    hs = []
    for t in range(x.shape[1]):
        h = jnp.tanh(xp[:, t] + h @ wh)
        hs.append(h)
    hs = jnp.stack(hs, axis=1)
    return jnp.einsum("bth,hk->btk", hs, wy) + by


def rnn_elman_inputs():
    rng = np.random.default_rng(701)
    b, t, d, h = 64, 16, 128, 512
    x = rng.standard_normal((b, t, d), dtype=np.float32)
    h0 = np.zeros((b, h), np.float32)
    return (x, h0, _w(rng, d, h, fan_in=d), _w(rng, h, h, fan_in=h),
            np.zeros((h,), np.float32), _w(rng, h, 32, fan_in=h), np.zeros((32,), np.float32))


def rnn_gru(x, h0, wx, bx, wh, bh, wy, by):
    """GRU with fused [d, 3h] gate weights, 12 steps, hidden 384, input 96, batch 64; the last
    state goes through a classifier head."""
    xp = jnp.einsum("btd,dg->btg", x, wx) + bx
    h = h0
    for t in range(x.shape[1]):
        hp = h @ wh + bh
        xr, xz, xn = jnp.split(xp[:, t], 3, axis=-1)
        hr, hz, hn = jnp.split(hp, 3, axis=-1)
        r = jax.nn.sigmoid(xr + hr)
        z = jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
    return h @ wy + by


def rnn_gru_inputs():
    rng = np.random.default_rng(702)
    b, t, d, h = 64, 12, 96, 384
    x = rng.standard_normal((b, t, d), dtype=np.float32)
    h0 = np.zeros((b, h), np.float32)
    return (x, h0, _w(rng, d, 3 * h, fan_in=d), np.zeros((3 * h,), np.float32),
            _w(rng, h, 3 * h, fan_in=h), np.zeros((3 * h,), np.float32),
            _w(rng, h, 10, fan_in=h), np.zeros((10,), np.float32))


def _lstm_cell(xp_t, h, c, wh):
    g = xp_t + h @ wh
    i, f, o, u = jnp.split(g, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(u)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return h, c


def rnn_lstm(x, h0, c0, wx, wh, b, wy, by):
    """LSTM with fused [d, 4h] gates, 10 steps, hidden 256, input 128, batch 64; per-step
    outputs stacked to [batch, time, hidden] and projected."""
    xp = jnp.einsum("btd,dg->btg", x, wx) + b
    h, c = h0, c0
    hs = []
    for t in range(x.shape[1]):
        h, c = _lstm_cell(xp[:, t], h, c, wh)
        hs.append(h)
    return jnp.einsum("bth,hk->btk", jnp.stack(hs, axis=1), wy) + by


def rnn_lstm_inputs():
    rng = np.random.default_rng(703)
    b, t, d, h = 64, 10, 128, 256
    x = rng.standard_normal((b, t, d), dtype=np.float32)
    z = np.zeros((b, h), np.float32)
    bias = np.zeros((4 * h,), np.float32)
    bias[h:2 * h] = 1.0  # forget-gate bias
    return (x, z, z.copy(), _w(rng, d, 4 * h, fan_in=d), _w(rng, h, 4 * h, fan_in=h), bias,
            _w(rng, h, 64, fan_in=h), np.zeros((64,), np.float32))


def rnn_lstm2(x, wx1, wh1, b1, wx2, wh2, b2, wy, by):
    """Two stacked LSTM layers, 8 steps, hidden 192, input 64, batch 48, zero initial state;
    the second layer's input projection is done per step; the last state is classified."""
    batch = x.shape[0]
    hidden = wh1.shape[0]
    xp = jnp.einsum("btd,dg->btg", x, wx1) + b1
    h1 = c1 = h2 = c2 = jnp.zeros((batch, hidden), x.dtype)
    for t in range(x.shape[1]):
        h1, c1 = _lstm_cell(xp[:, t], h1, c1, wh1)
        h2, c2 = _lstm_cell(h1 @ wx2 + b2, h2, c2, wh2)
    return h2 @ wy + by


def rnn_lstm2_inputs():
    rng = np.random.default_rng(704)
    b, t, d, h = 48, 8, 64, 192
    x = rng.standard_normal((b, t, d), dtype=np.float32)
    bias1 = np.zeros((4 * h,), np.float32)
    bias1[h:2 * h] = 1.0
    bias2 = bias1.copy()
    return (x, _w(rng, d, 4 * h, fan_in=d), _w(rng, h, 4 * h, fan_in=h), bias1,
            _w(rng, h, 4 * h, fan_in=h), _w(rng, h, 4 * h, fan_in=h), bias2,
            _w(rng, h, 5, fan_in=h), np.zeros((5,), np.float32))
