"""MLP-Mixer style models: token mixing across patches (transpose, dense over the token axis,
transpose back, or the same as one einsum) and channel mixing, with layer norms and residuals;
a full small Mixer from images with reshape-based patching, and a ConvMixer (depthwise and
pointwise convolutions)."""

import jax
import jax.numpy as jnp
import numpy as np


def _layer_norm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def _dense(rng, fan_in, fan_out):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
    return w * np.float32(1.0 / np.sqrt(fan_in)), np.zeros((fan_out,), np.float32)


def _ln(d):
    return np.ones((d,), np.float32), np.zeros((d,), np.float32)


def _mixer_block(x, g1, c1, wt1, bt1, wt2, bt2, g2, c2, wc1, bc1, wc2, bc2):
    """x [b, tokens, channels]; token MLP applied over a transposed [b, channels, tokens]."""
    y = _layer_norm(x, g1, c1).transpose(0, 2, 1)
    y = jax.nn.gelu(y @ wt1 + bt1) @ wt2 + bt2
    x = x + y.transpose(0, 2, 1)
    y = _layer_norm(x, g2, c2)
    return x + jax.nn.gelu(y @ wc1 + bc1) @ wc2 + bc2


def _block_params(rng, tokens, channels, dt, dc):
    return (*_ln(channels), *_dense(rng, tokens, dt), *_dense(rng, dt, tokens), *_ln(channels),
            *_dense(rng, channels, dc), *_dense(rng, dc, channels))


def mixer_block(feat, g1, c1, wt1, bt1, wt2, bt2, g2, c2, wc1, bc1, wc2, bc2):
    """One Mixer block on a [4, 14, 14, 256] feature map reshaped to 196 tokens: token MLP
    196 -> 128 -> 196 over the transposed tensor, channel MLP 256 -> 1024 -> 256, reshaped
    back to the map."""
    n, hgt, wid, c = feat.shape
    x = feat.reshape(n, hgt * wid, c)
    x = _mixer_block(x, g1, c1, wt1, bt1, wt2, bt2, g2, c2, wc1, bc1, wc2, bc2)
    return x.reshape(n, hgt, wid, c)


def mixer_block_inputs():
    rng = np.random.default_rng(901)
    feat = rng.standard_normal((4, 14, 14, 256), dtype=np.float32)
    return (feat, *_block_params(rng, 196, 256, 128, 1024))


def mixer_small(images, wp, bp, g1a, c1a, wt1a, bt1a, wt2a, bt2a, g2a, c2a, wc1a, bc1a, wc2a,
                bc2a, g1b, c1b, wt1b, bt1b, wt2b, bt2b, g2b, c2b, wc1b, bc1b, wc2b, bc2b, gf, cf,
                wh, bh):
    """A small Mixer: [8, 64, 64, 3] images cut into 8x8 patches by reshape + transpose
    (64 tokens), linear embedding to 192 channels, two Mixer blocks, pooled 100-way head."""
    n, hgt, wid, c = images.shape
    p = 8
    x = images.reshape(n, hgt // p, p, wid // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    x = x.reshape(n, (hgt // p) * (wid // p), p * p * c) @ wp + bp
    x = _mixer_block(x, g1a, c1a, wt1a, bt1a, wt2a, bt2a, g2a, c2a, wc1a, bc1a, wc2a, bc2a)
    x = _mixer_block(x, g1b, c1b, wt1b, bt1b, wt2b, bt2b, g2b, c2b, wc1b, bc1b, wc2b, bc2b)
    return jnp.mean(_layer_norm(x, gf, cf), axis=1) @ wh + bh


def mixer_small_inputs():
    rng = np.random.default_rng(902)
    images = rng.standard_normal((8, 64, 64, 3), dtype=np.float32)
    return (images, *_dense(rng, 192, 192), *_block_params(rng, 64, 192, 96, 768),
            *_block_params(rng, 64, 192, 96, 768), *_ln(192), *_dense(rng, 192, 100))


def mixer_einsum(x, g1, c1, wt1, wt2, g2, c2, wc1, wc2, g3, c3, wt3, wt4, g4, c4, wc3, wc4):
    """Two Mixer blocks on [4, 144, 256] (12x12 patches) whose token mixing is written as
    einsums over the token axis ("bsc,st->btc"), no explicit transposes; bias-free dense
    layers."""
    for ga, ca, wa, wb, gb, cb, wc, wd in ((g1, c1, wt1, wt2, g2, c2, wc1, wc2),
                                           (g3, c3, wt3, wt4, g4, c4, wc3, wc4)):
        y = jax.nn.gelu(jnp.einsum("bsc,st->btc", _layer_norm(x, ga, ca), wa))
        x = x + jnp.einsum("btc,ts->bsc", y, wb)
        y = jax.nn.gelu(jnp.einsum("bsc,cd->bsd", _layer_norm(x, gb, cb), wc))
        x = x + jnp.einsum("bsd,dc->bsc", y, wd)
    return x


def mixer_einsum_inputs():
    rng = np.random.default_rng(903)
    s, c = 144, 256
    x = rng.standard_normal((4, s, c), dtype=np.float32)
    params = []
    for _ in range(2):
        params.extend((*_ln(c), _dense(rng, s, 96)[0], _dense(rng, 96, s)[0]))
        params.extend((*_ln(c), _dense(rng, c, 512)[0], _dense(rng, 512, c)[0]))
    return (x, *params)


def _conv(x, w, stride=1, groups=1, padding="SAME"):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding=padding,
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups,
    )


def _bn(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=(0, 1, 2), keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=(0, 1, 2), keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def mixer_convmixer(images, w0, b0, g0, c0, dw1, db1, gd1, cd1, pw1, pb1, gp1, cp1, dw2, db2,
                    gd2, cd2, pw2, pb2, gp2, cp2, wh, bh):
    """ConvMixer: a 4x4 stride-4 patch conv, then two blocks of depthwise 7x7 conv
    (feature_group_count = channels) with a residual and a pointwise 1x1 conv, batch norm and
    GELU; pooled 10-way head. [2, 64, 64, 3] -> 16x16x128."""
    x = _bn(jax.nn.gelu(_conv(images, w0, stride=4, padding="VALID") + b0), g0, c0)
    for dw, db, gd, cd, pw, pb, gp, cp in ((dw1, db1, gd1, cd1, pw1, pb1, gp1, cp1),
                                           (dw2, db2, gd2, cd2, pw2, pb2, gp2, cp2)):
        x = x + _bn(jax.nn.gelu(_conv(x, dw, groups=x.shape[-1]) + db), gd, cd)
        x = _bn(jax.nn.gelu(_conv(x, pw) + pb), gp, cp)
    return jnp.mean(x, axis=(1, 2)) @ wh + bh


def mixer_convmixer_inputs():
    rng = np.random.default_rng(904)
    c = 128
    images = rng.standard_normal((2, 64, 64, 3), dtype=np.float32)

    def conv_w(k, cin, cout):
        w = rng.standard_normal((k, k, cin, cout), dtype=np.float32)
        return w * np.float32(1.0 / np.sqrt(k * k * cin))

    zero = np.zeros((c,), np.float32)
    params = [conv_w(4, 3, c), zero, *_ln(c)]
    for _ in range(2):
        params.extend((conv_w(7, 1, c), zero.copy(), *_ln(c)))
        params.extend((conv_w(1, c, c), zero.copy(), *_ln(c)))
    return (images, *params, *_dense(rng, c, 10))
