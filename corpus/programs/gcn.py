"""Graph neural nets on dense adjacency matrices: a Kipf-Welling GCN (A_hat @ X @ W stacks),
GraphSAGE with mean aggregation, a GIN with per-layer MLPs and a GCN over a batch of small
graphs whose node features are stored flat and reshaped per graph."""

import jax
import jax.numpy as jnp
import numpy as np


def _w(rng, fan_in, fan_out):
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
    return w * np.float32(np.sqrt(2.0 / fan_in))


def _random_adjacency(rng, n, p):
    """Symmetric 0/1 adjacency without self loops."""
    a = (rng.random((n, n)) < p).astype(np.float32)
    a = np.triu(a, 1)
    return a + a.T


def _sym_normalize(a):
    """D^-1/2 (A + I) D^-1/2."""
    a = a + np.eye(a.shape[-1], dtype=np.float32)
    d = 1.0 / np.sqrt(a.sum(-1))
    return (a * d[..., :, None] * d[..., None, :]).astype(np.float32)


def gcn_dense(a_hat, x, w1, b1, w2, b2, w3, b3):
    """Three GCN layers H' = A_hat @ H @ W on 1024 nodes (128 -> 128 -> 128 -> 16 features),
    log-softmax node classification."""
    h = jax.nn.relu(a_hat @ (x @ w1) + b1)
    h = jax.nn.relu(a_hat @ (h @ w2) + b2)
    return jax.nn.log_softmax(a_hat @ (h @ w3) + b3, axis=-1)


def gcn_dense_inputs():
    rng = np.random.default_rng(801)
    n = 1024
    a_hat = _sym_normalize(_random_adjacency(rng, n, 8.0 / n))
    x = rng.standard_normal((n, 128), dtype=np.float32)
    zero = np.zeros((128,), np.float32)
    return (a_hat, x, _w(rng, 128, 128), zero, _w(rng, 128, 128), zero.copy(), _w(rng, 128, 16),
            np.zeros((16,), np.float32))


def gcn_sage(adj, x, ws1, wn1, b1, ws2, wn2, b2):
    """Two GraphSAGE layers with mean aggregation (neighbour sum divided by degree), self and
    neighbour weights, L2-normalized embeddings; 768 nodes, 256 -> 256 -> 128 features."""
    deg = jnp.maximum(jnp.sum(adj, axis=-1, keepdims=True), 1.0)
    h = x
    for ws, wn, b in ((ws1, wn1, b1), (ws2, wn2, b2)):
        neigh = (adj @ h) / deg
        h = jax.nn.relu(h @ ws + neigh @ wn + b)
        h = h / jnp.sqrt(jnp.sum(jnp.square(h), axis=-1, keepdims=True) + 1e-6)
    return h


def gcn_sage_inputs():
    rng = np.random.default_rng(802)
    n = 768
    adj = _random_adjacency(rng, n, 12.0 / n)
    x = rng.standard_normal((n, 256), dtype=np.float32)
    return (adj, x, _w(rng, 256, 256), _w(rng, 256, 256), np.zeros((256,), np.float32),
            _w(rng, 256, 128), _w(rng, 256, 128), np.zeros((128,), np.float32))


def gcn_gin(adj, x, wa1, ba1, wb1, bb1, wa2, ba2, wb2, bb2, wa3, ba3, wb3, bb3, wr, br):
    """Three GIN layers, h' = MLP((1 + eps) h + A h) with two-layer MLPs (width 128), sum
    readout of every layer concatenated, linear graph-level head; 1024 nodes, 64 features."""
    eps = 0.1
    h = x
    readouts = []
    for wa, ba, wb, bb in ((wa1, ba1, wb1, bb1), (wa2, ba2, wb2, bb2), (wa3, ba3, wb3, bb3)):
        m = (1.0 + eps) * h + adj @ h
        h = jax.nn.relu(jax.nn.relu(m @ wa + ba) @ wb + bb)
        readouts.append(jnp.sum(h, axis=0))
    return jnp.concatenate(readouts) @ wr + br, h


def gcn_gin_inputs():
    rng = np.random.default_rng(803)
    n = 1024
    adj = _random_adjacency(rng, n, 6.0 / n)
    x = rng.standard_normal((n, 64), dtype=np.float32)
    params = []
    for fan_in in (64, 128, 128):
        # the sum aggregation grows a node's input by about its degree: scale that back
        params.extend((_w(rng, fan_in, 128) * np.float32(1 / 3), np.zeros((128,), np.float32)))
        params.extend((_w(rng, 128, 128), np.zeros((128,), np.float32)))
    wr = _w(rng, 3 * 128, 8) * np.float32(1 / n)
    return (adj, x, *params, wr, np.zeros((8,), np.float32))


def gcn_batched(a_hat, x, w1, b1, w2, b2, w3, b3, wc, bc):
    """A batch of 128 graphs of 48 nodes: node features stored flat [graphs * nodes, f] for the
    dense layers and reshaped to [graphs, nodes, f] for per-graph aggregation with batched
    A_hat [graphs, nodes, nodes]; mean-pooled graph classification."""
    g, n, _ = a_hat.shape
    h = x
    for w, b in ((w1, b1), (w2, b2), (w3, b3)):
        hw = (h @ w).reshape(g, n, -1)
        h = jax.nn.relu(jnp.einsum("gij,gjf->gif", a_hat, hw) + b)
        h = h.reshape(g * n, -1)
    pooled = jnp.mean(h.reshape(g, n, -1), axis=1)
    return pooled @ wc + bc


def gcn_batched_inputs():
    rng = np.random.default_rng(804)
    g, n, f = 128, 48, 64
    a_hat = np.stack([_sym_normalize(_random_adjacency(rng, n, 0.1)) for _ in range(g)])
    x = rng.standard_normal((g * n, f), dtype=np.float32)
    zero = np.zeros((128,), np.float32)
    return (a_hat, x, _w(rng, f, 128), zero, _w(rng, 128, 128), zero.copy(), _w(rng, 128, 128),
            zero.copy(), _w(rng, 128, 2), np.zeros((2,), np.float32))
