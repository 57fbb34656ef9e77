"""Transformer encoder blocks: layer norm, multi-head self-attention written with reshapes,
transposes and einsum / dot_general, and a GELU feed-forward network. Pre-norm and post-norm
blocks, a two-layer stack, per-head projection weights and a small ViT with patch embedding."""

import jax
import jax.numpy as jnp
import numpy as np


def _layer_norm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def _mha(x, wqkv, bqkv, wo, bo, heads):
    """Self-attention with a fused QKV projection; heads split by reshape + transpose."""
    b, s, d = x.shape
    dh = d // heads
    qkv = x @ wqkv + bqkv
    qkv = qkv.reshape(b, s, 3, heads, dh).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.float32(np.sqrt(dh))
    probs = jax.nn.softmax(logits, axis=-1)
    o = jnp.einsum("bhqk,bhkd->bhqd", probs, v)
    o = o.transpose(0, 2, 1, 3).reshape(b, s, d)
    return o @ wo + bo


def _ffn(x, w1, b1, w2, b2):
    return jax.nn.gelu(x @ w1 + b1) @ w2 + b2


def _dense(rng, fan_in, fan_out, gain=1.0):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
    w = w * np.float32(gain / np.sqrt(fan_in))
    return w, np.zeros((fan_out,), np.float32)


def _ln(d):
    return np.ones((d,), np.float32), np.zeros((d,), np.float32)


def _block_params(rng, d, f):
    return (*_ln(d), *_dense(rng, d, 3 * d), *_dense(rng, d, d), *_ln(d), *_dense(rng, d, f),
            *_dense(rng, f, d))


def _pre_ln_block(x, p, heads):
    g1, c1, wqkv, bqkv, wo, bo, g2, c2, w1, b1, w2, b2 = p
    x = x + _mha(_layer_norm(x, g1, c1), wqkv, bqkv, wo, bo, heads)
    return x + _ffn(_layer_norm(x, g2, c2), w1, b1, w2, b2)


def transformer_encoder(x, g1, c1, wqkv, bqkv, wo, bo, g2, c2, w1, b1, w2, b2):
    """One pre-norm encoder block: d=256, 8 heads, FFN 1024, on [4, 128, 256]."""
    p = (g1, c1, wqkv, bqkv, wo, bo, g2, c2, w1, b1, w2, b2)
    return _pre_ln_block(x, p, heads=8)


def transformer_encoder_inputs():
    rng = np.random.default_rng(501)
    x = rng.standard_normal((4, 128, 256), dtype=np.float32)
    return (x, *_block_params(rng, 256, 1024))


def transformer_2layer(x, g1a, c1a, wqkva, bqkva, woa, boa, g2a, c2a, w1a, b1a, w2a, b2a,
                       g1b, c1b, wqkvb, bqkvb, wob, bob, g2b, c2b, w1b, b1b, w2b, b2b, gf, cf):
    """Two pre-norm encoder blocks and a final layer norm: d=128, 4 heads, FFN 512, on
    [8, 64, 128]."""
    h = _pre_ln_block(x, (g1a, c1a, wqkva, bqkva, woa, boa, g2a, c2a, w1a, b1a, w2a, b2a), 4)
    h = _pre_ln_block(h, (g1b, c1b, wqkvb, bqkvb, wob, bob, g2b, c2b, w1b, b1b, w2b, b2b), 4)
    return _layer_norm(h, gf, cf)


def transformer_2layer_inputs():
    rng = np.random.default_rng(502)
    x = rng.standard_normal((8, 64, 128), dtype=np.float32)
    return (x, *_block_params(rng, 128, 512), *_block_params(rng, 128, 512), *_ln(128))


def transformer_postln(x, mask, wq, wk, wv, wo, g1, c1, w1, b1, w2, b2, g2, c2):
    """BERT-style post-norm block with per-head [d, heads, dh] projections (einsum), a padding
    mask over keys and lax.dot_general for the attention products; [8, 96, 192], 6 heads."""
    dh = wq.shape[-1]
    q = jnp.einsum("bsd,dhk->bhsk", x, wq)
    k = jnp.einsum("bsd,dhk->bhsk", x, wk)
    v = jnp.einsum("bsd,dhk->bhsk", x, wv)
    # batch dims (b, h); contract the head dim: [b, h, q, k]
    logits = jax.lax.dot_general(q, k, (((3,), (3,)), ((0, 1), (0, 1))))
    logits = logits / np.float32(np.sqrt(dh)) + (mask[:, None, None, :] - 1.0) * 1e9
    probs = jax.nn.softmax(logits, axis=-1)
    o = jax.lax.dot_general(probs, v, (((3,), (2,)), ((0, 1), (0, 1))))
    attn = jnp.einsum("bhsk,hkd->bsd", o, wo)
    h = _layer_norm(x + attn, g1, c1)
    return _layer_norm(h + _ffn(h, w1, b1, w2, b2), g2, c2)


def transformer_postln_inputs():
    rng = np.random.default_rng(503)
    b, s, d, heads = 8, 96, 192, 6
    dh = d // heads
    x = rng.standard_normal((b, s, d), dtype=np.float32)
    lengths = rng.integers(s // 2, s + 1, size=b)
    mask = (np.arange(s)[None, :] < lengths[:, None]).astype(np.float32)
    scale = np.float32(1 / np.sqrt(d))
    wq, wk, wv = (rng.standard_normal((d, heads, dh), dtype=np.float32) * scale for _ in "qkv")
    wo = rng.standard_normal((heads, dh, d), dtype=np.float32) * scale
    return (x, mask, wq, wk, wv, wo, *_ln(d), *_dense(rng, d, 4 * d), *_dense(rng, 4 * d, d),
            *_ln(d))


def transformer_vit(images, wp, bp, cls, pos, g1, c1, wqkv, bqkv, wo, bo, g2, c2, w1, b1, w2,
                    b2, gf, cf, wh, bh):
    """A tiny ViT: 4x4 patches of [8, 32, 32, 3] images cut out with reshape + transpose,
    linear patch embedding, a class token, one encoder block (d=192, 3 heads) and a
    10-way head on the class token."""
    n, hgt, wid, c = images.shape
    p = 4
    patches = images.reshape(n, hgt // p, p, wid // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    patches = patches.reshape(n, (hgt // p) * (wid // p), p * p * c)
    tok = patches @ wp + bp
    tok = jnp.concatenate([jnp.broadcast_to(cls, (n, 1, tok.shape[-1])), tok], axis=1) + pos
    h = _pre_ln_block(tok, (g1, c1, wqkv, bqkv, wo, bo, g2, c2, w1, b1, w2, b2), heads=3)
    return _layer_norm(h[:, 0], gf, cf) @ wh + bh


def transformer_vit_inputs():
    rng = np.random.default_rng(504)
    d = 192
    images = rng.standard_normal((8, 32, 32, 3), dtype=np.float32)
    wp, bp = _dense(rng, 48, d)
    cls = rng.standard_normal((1, 1, d), dtype=np.float32) * np.float32(0.02)
    pos = rng.standard_normal((1, 65, d), dtype=np.float32) * np.float32(0.02)
    return (images, wp, bp, cls, pos, *_block_params(rng, d, 4 * d), *_ln(d),
            *_dense(rng, d, 10))
