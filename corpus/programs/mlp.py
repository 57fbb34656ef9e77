"""Multilayer perceptrons: a deep 512-wide stack, a wide classifier over image-shaped inputs,
a residual MLP over token sequences and a batched ensemble of small MLPs."""

import jax
import jax.numpy as jnp
import numpy as np


def _dense(rng, fan_in, fan_out):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(
        np.sqrt(2.0 / fan_in)
    )
    b = rng.standard_normal((fan_out,), dtype=np.float32) * np.float32(0.01)
    return w, b


def _layer_norm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def mlp_deep(x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5, w6, b6):
    """Six dense layers, 512 wide, ReLU between them."""
    h = x
    for w, b in ((w1, b1), (w2, b2), (w3, b3), (w4, b4), (w5, b5)):
        h = jax.nn.relu(h @ w + b)
    return h @ w6 + b6


def mlp_deep_inputs():
    rng = np.random.default_rng(101)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    params = []
    for _ in range(6):
        params.extend(_dense(rng, 512, 512))
    return (x, *params)


def mlp_wide(x, w1, b1, w2, b2, w3, b3, w4, b4):
    """A wide classifier over [batch, 16, 16] inputs: 256 -> 2048 -> 2048 -> 2048 -> 10."""
    h = x.reshape(x.shape[0], -1)
    h = jax.nn.gelu(h @ w1 + b1)
    h = jax.nn.gelu(h @ w2 + b2)
    h = jax.nn.gelu(h @ w3 + b3)
    return jax.nn.log_softmax(h @ w4 + b4, axis=-1)


def mlp_wide_inputs():
    rng = np.random.default_rng(102)
    x = rng.standard_normal((64, 16, 16), dtype=np.float32)
    return (x, *_dense(rng, 256, 2048), *_dense(rng, 2048, 2048), *_dense(rng, 2048, 2048),
            *_dense(rng, 2048, 10))


def mlp_residual(x, g1, c1, wa1, ba1, wb1, bb1, g2, c2, wa2, ba2, wb2, bb2, g3, c3, wa3, ba3,
                 wb3, bb3):
    """Three pre-norm residual MLP blocks (d=256, hidden 1024) over [batch, tokens, d]."""
    h = x
    for g, c, wa, ba, wb, bb in ((g1, c1, wa1, ba1, wb1, bb1), (g2, c2, wa2, ba2, wb2, bb2),
                                 (g3, c3, wa3, ba3, wb3, bb3)):
        u = _layer_norm(h, g, c)
        u = jax.nn.gelu(jnp.einsum("btd,df->btf", u, wa) + ba)
        h = h + jnp.einsum("btf,fd->btd", u, wb) + bb
    return h


def mlp_residual_inputs():
    rng = np.random.default_rng(103)
    x = rng.standard_normal((16, 32, 256), dtype=np.float32)
    params = []
    for _ in range(3):
        params.append(np.ones((256,), np.float32))
        params.append(np.zeros((256,), np.float32))
        params.extend(_dense(rng, 256, 1024))
        wb, bb = _dense(rng, 1024, 256)
        params.extend((wb * np.float32(0.5), bb))
    return (x, *params)


def mlp_ensemble(x, w1, b1, w2, b2, w3, b3, w4, b4):
    """Eight independent 4-layer MLPs evaluated together as batched matmuls over [e, batch, d].

    Each member predicts a 4x4 row-stochastic matrix per sample; returns the ensemble mean and
    spread of those matrices.
    """
    h = jax.nn.relu(jnp.einsum("nd,edf->enf", x, w1) + b1[:, None, :])
    h = jax.nn.relu(jnp.einsum("enf,efg->eng", h, w2) + b2[:, None, :])
    h = jax.nn.relu(jnp.einsum("eng,egf->enf", h, w3) + b3[:, None, :])
    logits = jnp.einsum("enf,efk->enk", h, w4) + b4[:, None, :]
    e, n, _ = logits.shape
    probs = jax.nn.softmax(logits.reshape(e, n, 4, 4), axis=-1)
    return jnp.mean(probs, axis=0), jnp.std(probs, axis=0)


def mlp_ensemble_inputs():
    rng = np.random.default_rng(105)
    e = 8
    x = rng.standard_normal((384, 128), dtype=np.float32)

    def stacked(fan_in, fan_out):
        w = rng.standard_normal((e, fan_in, fan_out), dtype=np.float32)
        b = rng.standard_normal((e, fan_out), dtype=np.float32) * np.float32(0.01)
        return w * np.float32(np.sqrt(2.0 / fan_in)), b

    return (x, *stacked(128, 256), *stacked(256, 256), *stacked(256, 256), *stacked(256, 16))
