"""Small 2-D U-Nets in NHWC: 3x3 conv stages going down (strided conv or reshape-based
pooling), coming up (nearest-neighbour upsampling by reshape/broadcast, or conv_transpose) and
skip connections concatenated on the channel axis."""

import jax
import jax.numpy as jnp
import numpy as np

_DIMS = ("NHWC", "HWIO", "NHWC")


def _conv(x, w, b, stride=1):
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding="SAME", dimension_numbers=_DIMS
    )
    return y + b


def _up_conv(x, w, b):
    """Transposed 2x2 conv with stride 2 (doubles height and width)."""
    return jax.lax.conv_transpose(x, w, strides=(2, 2), padding="SAME", dimension_numbers=_DIMS) + b


def _max_pool2(x):
    n, h, w, c = x.shape
    return jnp.max(x.reshape(n, h // 2, 2, w // 2, 2, c), axis=(2, 4))


def _avg_pool2(x):
    n, h, w, c = x.shape
    return jnp.mean(x.reshape(n, h // 2, 2, w // 2, 2, c), axis=(2, 4))


def _upsample2(x):
    """Nearest-neighbour 2x upsampling through a broadcast and a reshape."""
    n, h, w, c = x.shape
    y = jnp.broadcast_to(x[:, :, None, :, None, :], (n, h, 2, w, 2, c))
    return y.reshape(n, 2 * h, 2 * w, c)


def _conv_params(rng, k, cin, cout):
    w = rng.standard_normal((k, k, cin, cout), dtype=np.float32)
    w = w * np.float32(np.sqrt(2.0 / (k * k * cin)))
    return w, rng.standard_normal((cout,), dtype=np.float32) * np.float32(0.01)


def _params(rng, layers):
    out = []
    for k, cin, cout in layers:
        out.extend(_conv_params(rng, k, cin, cout))
    return out


def unet_strided(x, w1, b1, wd, bd, w2, b2, w3, b3, w4, b4, wo, bo):
    """Two-level U-Net: a stride-2 conv downsamples, nearest upsampling (reshape) brings it back,
    the skip is concatenated, 1x1 conv to 3 output channels."""
    e1 = jax.nn.relu(_conv(x, w1, b1))
    d = jax.nn.relu(_conv(e1, wd, bd, stride=2))
    d = jax.nn.relu(_conv(d, w2, b2))
    u = _upsample2(d)
    u = jnp.concatenate([u, e1], axis=-1)
    u = jax.nn.relu(_conv(u, w3, b3))
    u = jax.nn.relu(_conv(u, w4, b4))
    return _conv(u, wo, bo)


def unet_strided_inputs():
    rng = np.random.default_rng(401)
    x = rng.standard_normal((4, 64, 64, 3), dtype=np.float32)
    layers = ((3, 3, 32), (3, 32, 64), (3, 64, 64), (3, 96, 32), (3, 32, 32), (1, 32, 3))
    return (x, *_params(rng, layers))


def unet_pool_transpose(x, w1, b1, w2, b2, w3, b3, w4, b4, wt1, bt1, w5, b5, wt2, bt2, w6, b6,
                        wo, bo):
    """Three-level U-Net: reshape-based 2x2 max pooling down, 2x2 conv_transpose up, skip
    concatenations at both levels."""
    e1 = jax.nn.relu(_conv(x, w1, b1))
    e2 = jax.nn.relu(_conv(_max_pool2(e1), w2, b2))
    e3 = jax.nn.relu(_conv(_max_pool2(e2), w3, b3))
    e3 = jax.nn.relu(_conv(e3, w4, b4))
    u2 = _up_conv(e3, wt1, bt1)
    u2 = jax.nn.relu(_conv(jnp.concatenate([u2, e2], axis=-1), w5, b5))
    u1 = _up_conv(u2, wt2, bt2)
    u1 = jax.nn.relu(_conv(jnp.concatenate([u1, e1], axis=-1), w6, b6))
    return _conv(u1, wo, bo)


def unet_pool_transpose_inputs():
    rng = np.random.default_rng(402)
    x = rng.standard_normal((4, 64, 64, 1), dtype=np.float32)
    layers = (
        (3, 1, 16), (3, 16, 32), (3, 32, 64), (3, 64, 64),
        (2, 64, 32), (3, 64, 32), (2, 32, 16), (3, 32, 16), (1, 16, 2),
    )
    return (x, *_params(rng, layers))


def unet_avgpool(x, w1a, b1a, w1b, b1b, w2a, b2a, w2b, b2b, w3a, b3a, w3b, b3b, w4, b4, w5, b5,
                 wo, bo):
    """Three-level U-Net with double convs per level, reshape-based 2x2 average pooling, nearest
    upsampling by broadcast + reshape, skip concatenations."""
    e1 = jax.nn.relu(_conv(jax.nn.relu(_conv(x, w1a, b1a)), w1b, b1b))
    e2 = jax.nn.relu(_conv(jax.nn.relu(_conv(_avg_pool2(e1), w2a, b2a)), w2b, b2b))
    e3 = jax.nn.relu(_conv(jax.nn.relu(_conv(_avg_pool2(e2), w3a, b3a)), w3b, b3b))
    u2 = jax.nn.relu(_conv(jnp.concatenate([_upsample2(e3), e2], axis=-1), w4, b4))
    u1 = jax.nn.relu(_conv(jnp.concatenate([_upsample2(u2), e1], axis=-1), w5, b5))
    return _conv(u1, wo, bo)


def unet_avgpool_inputs():
    rng = np.random.default_rng(403)
    x = rng.standard_normal((4, 48, 48, 4), dtype=np.float32)
    layers = (
        (3, 4, 16), (3, 16, 16), (3, 16, 32), (3, 32, 32), (3, 32, 64), (3, 64, 64),
        (3, 96, 32), (3, 48, 16), (1, 16, 4),
    )
    return (x, *_params(rng, layers))


def unet_wide(x, w1, b1, wd1, bd1, w2, b2, wd2, bd2, w3, b3, w4, b4, w5, b5, wo, bo):
    """Shallow, wide U-Net at batch 1 on a 96x96 image: two stride-2 conv downsamplings, two
    nearest upsamplings with skip concatenations, a per-pixel softmax over 8 classes."""
    e1 = jax.nn.relu(_conv(x, w1, b1))
    e2 = jax.nn.relu(_conv(e1, wd1, bd1, stride=2))
    e2 = jax.nn.relu(_conv(e2, w2, b2))
    e3 = jax.nn.relu(_conv(e2, wd2, bd2, stride=2))
    e3 = jax.nn.relu(_conv(e3, w3, b3))
    u2 = jax.nn.relu(_conv(jnp.concatenate([_upsample2(e3), e2], axis=-1), w4, b4))
    u1 = jax.nn.relu(_conv(jnp.concatenate([_upsample2(u2), e1], axis=-1), w5, b5))
    return jax.nn.softmax(_conv(u1, wo, bo), axis=-1)


def unet_wide_inputs():
    rng = np.random.default_rng(404)
    x = rng.standard_normal((1, 96, 96, 3), dtype=np.float32)
    layers = (
        (3, 3, 32), (3, 32, 64), (3, 64, 64), (3, 64, 128), (3, 128, 128),
        (3, 192, 64), (3, 96, 32), (1, 32, 8),
    )
    return (x, *_params(rng, layers))
