"""Kernels over a graph's nodes and edges."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def opcode_histogram(opcode, n_bins):
    """int64 (n_bins,): how many nodes carry each opcode id; opcode: uint8 (n_nodes,)."""
    counts = np.zeros(n_bins, dtype=np.int64)
    for i in range(opcode.shape[0]):
        counts[opcode[i]] += 1
    return counts


@njit(cache=True)
def csr_by_row(src, dst, n_nodes):
    """Group edges by source node, keeping their file order within a node.

    src, dst: int64 (n_edges,). Returns indptr int64 (n_nodes + 1,) and indices int64
    (n_edges,): the neighbours of node i are indices[indptr[i]:indptr[i + 1]]. Called with
    (consumer, producer) it lists each node's operands in operand order.
    """
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        indptr[src[e] + 1] += 1
    for i in range(n_nodes):
        indptr[i + 1] += indptr[i]
    fill = indptr[:-1].copy()
    indices = np.empty(src.shape[0], dtype=np.int64)
    for e in range(src.shape[0]):
        indices[fill[src[e]]] = dst[e]
        fill[src[e]] += 1
    return indptr, indices


@njit(cache=True)
def column_mean_max(values):
    """float64 (2, k): per column mean and max of values float64 (n, k), n >= 1."""
    n, k = values.shape
    out = np.zeros((2, k), dtype=np.float64)
    for j in range(k):
        out[1, j] = values[0, j]
    for i in range(n):
        for j in range(k):
            v = values[i, j]
            out[0, j] += v
            if v > out[1, j]:
                out[1, j] = v
    for j in range(k):
        out[0, j] /= n
    return out


@njit(cache=True)
def _expand(indptr, indices, k, depth, queue, size):
    """Breadth-first from the nodes already in queue[:size] (depth set), up to depth k.

    Appends every newly reached node to queue and returns the new size: the reached
    nodes are queue[:size], each once.
    """
    head = 0
    while head < size:
        u = queue[head]
        head += 1
        if depth[u] >= k:
            continue
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if depth[v] < 0:
                depth[v] = depth[u] + 1
                queue[size] = v
                size += 1
    return size


@njit(cache=True)
def khop_union(indptr, indices, seeds, k):
    """bool (n_nodes,): nodes within k hops of any seed (seeds included).

    indptr, indices: CSR of the undirected graph (both edge directions); seeds: int64.
    """
    n = indptr.shape[0] - 1
    depth = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    size = 0
    for s in seeds:
        if depth[s] < 0:
            depth[s] = 0
            queue[size] = s
            size += 1
    _expand(indptr, indices, k, depth, queue, size)
    return depth >= 0


@njit(cache=True, parallel=True)
def khop_sums(indptr, indices, seeds, k, node_values):
    """float64 (n_seeds, n_values): per seed, node_values summed over its k-hop neighbourhood.

    indptr, indices: undirected CSR; seeds: int64 (n_seeds,); node_values: float64
    (n_nodes, n_values). The neighbourhood holds the seed and every node at most k
    undirected hops away, each counted once.
    """
    n = indptr.shape[0] - 1
    n_seeds = seeds.shape[0]
    out = np.zeros((n_seeds, node_values.shape[1]), dtype=np.float64)
    for j in prange(n_seeds):
        # Each seed gets its own scratch arrays, so threads never share one.
        depth = np.full(n, -1, dtype=np.int64)
        queue = np.empty(n, dtype=np.int64)
        queue[0] = seeds[j]
        depth[seeds[j]] = 0
        size = _expand(indptr, indices, k, depth, queue, 1)
        for q in range(size):
            for f in range(node_values.shape[1]):
                out[j, f] += node_values[queue[q], f]
    return out
