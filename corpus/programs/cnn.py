"""Convolutional image classifiers: a plain 3x3 conv stack, a VGG-like net with strided
downsampling, a MobileNet-like depthwise-separable net (feature_group_count) and a
PyTorch-style NCHW net with reshape-based max pooling."""

import jax
import jax.numpy as jnp
import numpy as np

_NHWC = ("NHWC", "HWIO", "NHWC")
_NCHW = ("NCHW", "OIHW", "NCHW")


def _conv(x, w, stride=1, groups=1, dims=_NHWC):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding="SAME", dimension_numbers=dims,
        feature_group_count=groups,
    )


def _conv_w(rng, kh, kw, cin, cout):
    """HWIO conv weights, He-scaled by fan_in = kh * kw * cin."""
    w = rng.standard_normal((kh, kw, cin, cout), dtype=np.float32)
    return w * np.float32(np.sqrt(2.0 / (kh * kw * cin)))


def _bias(rng, n):
    return rng.standard_normal((n,), dtype=np.float32) * np.float32(0.01)


def _dense_w(rng, fan_in, fan_out):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
    return w * np.float32(1.0 / np.sqrt(fan_in))


def cnn_plain4(x, w1, b1, w2, b2, w3, b3, w4, b4, wf, bf):
    """Four 3x3 SAME convs (3 -> 32 -> 32 -> 64 -> 64) on 32x32 NHWC images, global average
    pool, dense head."""
    h = x
    for w, b in ((w1, b1), (w2, b2), (w3, b3), (w4, b4)):
        h = jax.nn.relu(_conv(h, w) + b)
    h = jnp.mean(h, axis=(1, 2))
    return h @ wf + bf


def cnn_plain4_inputs():
    rng = np.random.default_rng(201)
    x = rng.standard_normal((8, 32, 32, 3), dtype=np.float32)
    chans = (3, 32, 32, 64, 64)
    params = []
    for cin, cout in zip(chans[:-1], chans[1:]):
        params.extend((_conv_w(rng, 3, 3, cin, cout), _bias(rng, cout)))
    return (x, *params, _dense_w(rng, 64, 10), _bias(rng, 10))


def cnn_strided(x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5, wf1, bf1, wf2, bf2):
    """VGG-like: 3x3 convs with stride-2 convs for downsampling (32 -> 16 -> 8), flattened
    into a two-layer dense head."""
    h = jax.nn.relu(_conv(x, w1) + b1)
    h = jax.nn.relu(_conv(h, w2, stride=2) + b2)
    h = jax.nn.relu(_conv(h, w3) + b3)
    h = jax.nn.relu(_conv(h, w4, stride=2) + b4)
    h = jax.nn.relu(_conv(h, w5) + b5)
    h = h.reshape(h.shape[0], -1)
    h = jax.nn.relu(h @ wf1 + bf1)
    return h @ wf2 + bf2


def cnn_strided_inputs():
    rng = np.random.default_rng(202)
    x = rng.standard_normal((8, 32, 32, 3), dtype=np.float32)
    chans = (3, 32, 64, 64, 128, 128)
    params = []
    for cin, cout in zip(chans[:-1], chans[1:]):
        params.extend((_conv_w(rng, 3, 3, cin, cout), _bias(rng, cout)))
    flat = 8 * 8 * 128
    return (x, *params, _dense_w(rng, flat, 256), _bias(rng, 256), _dense_w(rng, 256, 10),
            _bias(rng, 10))


def cnn_depthwise(x, w0, b0, dw1, pw1, b1, dw2, pw2, b2, dw3, pw3, b3, dw4, pw4, b4, wf, bf):
    """MobileNet-like: a stem conv, then four depthwise 3x3 (feature_group_count = channels) +
    pointwise 1x1 blocks, two of them with stride 2, global pool and dense head."""
    h = jax.nn.relu6(_conv(x, w0, stride=2) + b0)
    blocks = ((dw1, pw1, b1, 1), (dw2, pw2, b2, 2), (dw3, pw3, b3, 1), (dw4, pw4, b4, 2))
    for dw, pw, b, stride in blocks:
        h = jax.nn.relu6(_conv(h, dw, stride=stride, groups=h.shape[-1]))
        h = jax.nn.relu6(_conv(h, pw) + b)
    h = jnp.mean(h, axis=(1, 2))
    return h @ wf + bf


def cnn_depthwise_inputs():
    rng = np.random.default_rng(203)
    x = rng.standard_normal((8, 64, 64, 3), dtype=np.float32)
    params = [_conv_w(rng, 3, 3, 3, 32), _bias(rng, 32)]
    chans = (32, 64, 128, 128, 256)
    for cin, cout in zip(chans[:-1], chans[1:]):
        params.append(_conv_w(rng, 3, 3, 1, cin))
        params.append(_conv_w(rng, 1, 1, cin, cout))
        params.append(_bias(rng, cout))
    return (x, *params, _dense_w(rng, 256, 10), _bias(rng, 10))


def _max_pool2_nchw(x):
    n, c, h, w = x.shape
    return jnp.max(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def cnn_nchw(x, w1, b1, w2, b2, w3, b3, wf1, bf1, wf2, bf2):
    """PyTorch-style NCHW/OIHW net: 5x5 and 3x3 convs, each followed by a 2x2 max pool done with
    a reshape, then a flattened dense head."""
    h = x
    for w, b in ((w1, b1), (w2, b2), (w3, b3)):
        h = jax.nn.relu(_conv(h, w, dims=_NCHW) + b[None, :, None, None])
        h = _max_pool2_nchw(h)
    h = h.reshape(h.shape[0], -1)
    h = jax.nn.relu(h @ wf1 + bf1)
    return h @ wf2 + bf2


def cnn_nchw_inputs():
    rng = np.random.default_rng(204)
    x = rng.standard_normal((16, 3, 32, 32), dtype=np.float32)
    params = []
    for k, cin, cout in ((5, 3, 32), (5, 32, 64), (3, 64, 128)):
        w = _conv_w(rng, k, k, cin, cout).transpose(3, 2, 0, 1).copy()
        params.extend((w, _bias(rng, cout)))
    flat = 128 * 4 * 4
    return (x, *params, _dense_w(rng, flat, 256), _bias(rng, 256), _dense_w(rng, 256, 10),
            _bias(rng, 10))
