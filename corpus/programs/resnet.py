"""Residual conv nets in NHWC: basic blocks with batch-statistics normalization, a bottleneck
stage, a downsampling stage with a 1x1 projection shortcut and a pre-activation net with
group normalization (reshaped into channel groups)."""

import jax
import jax.numpy as jnp
import numpy as np


def _conv(x, w, stride=1):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding="SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )


def _batch_norm(x, gamma, beta, eps=1e-5):
    """Per-channel normalization with the batch's own statistics (training-mode batch norm)."""
    mu = jnp.mean(x, axis=(0, 1, 2), keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=(0, 1, 2), keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * gamma + beta


def _group_norm(x, gamma, beta, groups, eps=1e-5):
    n, h, w, c = x.shape
    g = x.reshape(n, h, w, groups, c // groups)
    mu = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
    var = jnp.mean(jnp.square(g - mu), axis=(1, 2, 4), keepdims=True)
    g = (g - mu) * jax.lax.rsqrt(var + eps)
    return g.reshape(n, h, w, c) * gamma + beta


def _conv_w(rng, kh, kw, cin, cout, gain=2.0):
    w = rng.standard_normal((kh, kw, cin, cout), dtype=np.float32)
    return w * np.float32(np.sqrt(gain / (kh * kw * cin)))


def _norm_params(c):
    return np.ones((c,), np.float32), np.zeros((c,), np.float32)


def _dense(rng, fan_in, fan_out):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(1 / np.sqrt(fan_in))
    return w, np.zeros((fan_out,), np.float32)


def _basic_block(x, wa, ga, ba, wb, gb, bb):
    h = jax.nn.relu(_batch_norm(_conv(x, wa), ga, ba))
    h = _batch_norm(_conv(h, wb), gb, bb)
    return jax.nn.relu(x + h)


def resnet_basic(x, w0, g0, c0, wa1, ga1, ca1, wb1, gb1, cb1, wa2, ga2, ca2, wb2, gb2, cb2,
                 wf, bf):
    """Stem conv + two basic blocks (two 3x3 convs, batch norm, identity skip) at 16x16x64,
    global pool and dense head."""
    h = jax.nn.relu(_batch_norm(_conv(x, w0), g0, c0))
    h = _basic_block(h, wa1, ga1, ca1, wb1, gb1, cb1)
    h = _basic_block(h, wa2, ga2, ca2, wb2, gb2, cb2)
    return jnp.mean(h, axis=(1, 2)) @ wf + bf


def resnet_basic_inputs():
    rng = np.random.default_rng(301)
    x = rng.standard_normal((8, 16, 16, 16), dtype=np.float32)
    params = [_conv_w(rng, 3, 3, 16, 64), *_norm_params(64)]
    for _ in range(4):
        params.extend((_conv_w(rng, 3, 3, 64, 64), *_norm_params(64)))
    return (x, *params, *_dense(rng, 64, 10))


def _bottleneck(x, w1, g1, c1, w2, g2, c2, w3, g3, c3):
    h = jax.nn.relu(_batch_norm(_conv(x, w1), g1, c1))
    h = jax.nn.relu(_batch_norm(_conv(h, w2), g2, c2))
    h = _batch_norm(_conv(h, w3), g3, c3)
    return jax.nn.relu(x + h)


def resnet_bottleneck(x, w1a, g1a, c1a, w2a, g2a, c2a, w3a, g3a, c3a, w1b, g1b, c1b, w2b, g2b,
                      c2b, w3b, g3b, c3b):
    """Two bottleneck blocks (1x1 reduce 256 -> 64, 3x3, 1x1 expand 64 -> 256, batch norm,
    identity skip) on [4, 28, 28, 256]."""
    h = _bottleneck(x, w1a, g1a, c1a, w2a, g2a, c2a, w3a, g3a, c3a)
    return _bottleneck(h, w1b, g1b, c1b, w2b, g2b, c2b, w3b, g3b, c3b)


def resnet_bottleneck_inputs():
    rng = np.random.default_rng(302)
    x = np.maximum(rng.standard_normal((4, 28, 28, 256), dtype=np.float32), np.float32(0))
    params = []
    for _ in range(2):
        params.extend((_conv_w(rng, 1, 1, 256, 64), *_norm_params(64)))
        params.extend((_conv_w(rng, 3, 3, 64, 64), *_norm_params(64)))
        params.extend((_conv_w(rng, 1, 1, 64, 256), *_norm_params(256)))
    return (x, *params)


def resnet_downsample(x, wa1, ga1, ca1, wb1, gb1, cb1, wp1, gp1, cp1, wa2, ga2, ca2, wb2, gb2,
                      cb2, wp2, gp2, cp2, wf, bf):
    """Two transition blocks, each a stride-2 3x3 conv, a 3x3 conv and a strided 1x1 projection
    shortcut (32 -> 16 -> 8 px, 32 -> 64 -> 128 ch), then a global pool and dense head."""
    h = x
    for wa, ga, ca, wb, gb, cb, wp, gp, cp in (
        (wa1, ga1, ca1, wb1, gb1, cb1, wp1, gp1, cp1),
        (wa2, ga2, ca2, wb2, gb2, cb2, wp2, gp2, cp2),
    ):
        r = jax.nn.relu(_batch_norm(_conv(h, wa, stride=2), ga, ca))
        r = _batch_norm(_conv(r, wb), gb, cb)
        s = _batch_norm(_conv(h, wp, stride=2), gp, cp)
        h = jax.nn.relu(r + s)
    return jnp.mean(h, axis=(1, 2)) @ wf + bf


def resnet_downsample_inputs():
    rng = np.random.default_rng(303)
    x = rng.standard_normal((8, 32, 32, 32), dtype=np.float32)
    params = []
    for cin, cout in ((32, 64), (64, 128)):
        params.extend((_conv_w(rng, 3, 3, cin, cout), *_norm_params(cout)))
        params.extend((_conv_w(rng, 3, 3, cout, cout), *_norm_params(cout)))
        params.extend((_conv_w(rng, 1, 1, cin, cout), *_norm_params(cout)))
    return (x, *params, *_dense(rng, 128, 10))


def resnet_groupnorm(x, w0, b0, g1, c1, wa1, g2, c2, wb1, g3, c3, wa2, g4, c4, wb2, g5, c5,
                     wf, bf):
    """Pre-activation residual net with group normalization (8 groups, via a reshape to
    [n, h, w, groups, c / groups]): stem conv, two pre-activation blocks, pooled head."""
    h = _conv(x, w0) + b0
    for ga, ca, wa, gb, cb, wb in ((g1, c1, wa1, g2, c2, wb1), (g3, c3, wa2, g4, c4, wb2)):
        r = _conv(jax.nn.silu(_group_norm(h, ga, ca, 8)), wa)
        r = _conv(jax.nn.silu(_group_norm(r, gb, cb, 8)), wb)
        h = h + r
    h = jax.nn.silu(_group_norm(h, g5, c5, 8))
    return jnp.mean(h, axis=(1, 2)) @ wf + bf


def resnet_groupnorm_inputs():
    rng = np.random.default_rng(304)
    x = rng.standard_normal((4, 32, 32, 3), dtype=np.float32)
    params = [_conv_w(rng, 3, 3, 3, 64, gain=1.0), np.zeros((64,), np.float32)]
    for _ in range(2):
        params.extend((*_norm_params(64), _conv_w(rng, 3, 3, 64, 64, gain=1.0)))
        params.extend((*_norm_params(64), _conv_w(rng, 3, 3, 64, 64, gain=0.5)))
    params.extend(_norm_params(64))
    return (x, *params, *_dense(rng, 64, 10))
