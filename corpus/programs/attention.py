"""Multi-head attention layers on their own, from input projections to output projection:
multi-query (causal), grouped-query, local (windowed, by reshaping the sequence into blocks)
and cross-attention. Tensors are laid out [batch, heads, seq, head_dim] or kept as [batch, seq,
heads, head_dim] and contracted with einsum."""

import jax
import jax.numpy as jnp
import numpy as np


def _w(rng, *shape, fan_in):
    w = rng.standard_normal(shape, dtype=np.float32)
    return w * np.float32(1.0 / np.sqrt(fan_in))


def attention_mqa(x, wq, wk, wv, wo):
    """Causal multi-query attention: 8 query heads share one 64-wide key/value head;
    [2, 256, 512]."""
    b, s, d = x.shape
    dh = wk.shape[-1]
    heads = d // dh
    q = (x @ wq).reshape(b, s, heads, dh)
    k = x @ wk
    v = x @ wv
    logits = jnp.einsum("bqhd,bkd->bhqk", q, k) / np.float32(np.sqrt(dh))
    causal = jnp.arange(s)[:, None] >= jnp.arange(s)[None, :]
    logits = jnp.where(causal, logits, -1e9)
    o = jnp.einsum("bhqk,bkd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    return o.reshape(b, s, d) @ wo


def attention_mqa_inputs():
    rng = np.random.default_rng(602)
    d, dh = 512, 64
    x = rng.standard_normal((2, 256, d), dtype=np.float32)
    return (x, _w(rng, d, d, fan_in=d), _w(rng, d, dh, fan_in=d), _w(rng, d, dh, fan_in=d),
            _w(rng, d, d, fan_in=d))


def attention_gqa(x, wq, wk, wv, wo):
    """Grouped-query attention: 8 query heads in 2 groups, one key/value head per group;
    queries reshaped to [b, s, kv_heads, group, dh]; [2, 256, 512]."""
    b, s, d = x.shape
    dh = 64
    kv_heads = wk.shape[-1] // dh
    group = d // dh // kv_heads
    q = (x @ wq).reshape(b, s, kv_heads, group, dh)
    k = (x @ wk).reshape(b, s, kv_heads, dh)
    v = (x @ wv).reshape(b, s, kv_heads, dh)
    logits = jnp.einsum("bqngd,bknd->bngqk", q, k) / np.float32(np.sqrt(dh))
    o = jnp.einsum("bngqk,bknd->bqngd", jax.nn.softmax(logits, axis=-1), v)
    return o.reshape(b, s, d) @ wo


def attention_gqa_inputs():
    rng = np.random.default_rng(603)
    d, kv = 512, 128
    x = rng.standard_normal((2, 256, d), dtype=np.float32)
    return (x, _w(rng, d, d, fan_in=d), _w(rng, d, kv, fan_in=d), _w(rng, d, kv, fan_in=d),
            _w(rng, d, d, fan_in=d))


def attention_local(x, wqkv, wo):
    """Local attention: the 1024-long sequence is reshaped into 16 blocks of 64 and each block
    attends to itself and the block before it; 4 heads of 64 on [2, 1024, 256]."""
    b, s, d = x.shape
    heads, window = 4, 64
    dh = d // heads
    nblk = s // window
    qkv = (x @ wqkv).reshape(b, nblk, window, 3, heads, dh)
    q, k, v = qkv[:, :, :, 0], qkv[:, :, :, 1], qkv[:, :, :, 2]

    def with_prev(t):
        prev = jnp.concatenate([jnp.zeros_like(t[:, :1]), t[:, :-1]], axis=1)
        return jnp.concatenate([prev, t], axis=2)

    k2, v2 = with_prev(k), with_prev(v)
    logits = jnp.einsum("bnqhd,bnkhd->bnhqk", q, k2) / np.float32(np.sqrt(dh))
    # keys of the previous block are invisible to the first block (they are padding)
    first = (jnp.arange(nblk) == 0)[:, None] & (jnp.arange(2 * window) < window)[None, :]
    logits = jnp.where(first[None, :, None, None, :], -1e9, logits)
    o = jnp.einsum("bnhqk,bnkhd->bnqhd", jax.nn.softmax(logits, axis=-1), v2)
    return o.reshape(b, s, d) @ wo


def attention_local_inputs():
    rng = np.random.default_rng(604)
    d = 256
    x = rng.standard_normal((2, 1024, d), dtype=np.float32)
    return (x, _w(rng, d, 3 * d, fan_in=d), _w(rng, d, d, fan_in=d))


def attention_cross(x, memory, mem_mask, wq, wkv, wo, bo):
    """Cross-attention: 128 decoder positions attend over a 384-long encoder memory with a
    key padding mask; 6 heads of 64, d=384, batch 4."""
    b, sq, d = x.shape
    sk = memory.shape[1]
    heads = 6
    dh = d // heads
    q = (x @ wq).reshape(b, sq, heads, dh).transpose(0, 2, 1, 3)
    kv = (memory @ wkv).reshape(b, sk, 2, heads, dh).transpose(2, 0, 3, 1, 4)
    k, v = kv[0], kv[1]
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.float32(np.sqrt(dh))
    logits = logits + (mem_mask[:, None, None, :] - 1.0) * 1e9
    o = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, axis=-1), v)
    return o.transpose(0, 2, 1, 3).reshape(b, sq, d) @ wo + bo


def attention_cross_inputs():
    rng = np.random.default_rng(605)
    b, sq, sk, d = 4, 128, 384, 384
    x = rng.standard_normal((b, sq, d), dtype=np.float32)
    memory = rng.standard_normal((b, sk, d), dtype=np.float32)
    lengths = rng.integers(sk // 2, sk + 1, size=b)
    mem_mask = (np.arange(sk)[None, :] < lengths[:, None]).astype(np.float32)
    return (x, memory, mem_mask, _w(rng, d, d, fan_in=d), _w(rng, d, 2 * d, fan_in=d),
            _w(rng, d, d, fan_in=d), np.zeros((d,), np.float32))
