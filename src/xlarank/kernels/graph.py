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


@njit(cache=True, parallel=True, nogil=True)
def gnn_input_layer(raw, opcode, opcode_embedding, feat_proj):
    """float64 (n, d): tanh(opcode_embedding[opcode] + x @ feat_proj) with x the signed
    log1p of raw float32 (n, f) node features, / 10; opcode uint8 (n,). In Numba, not
    BLAS: on small matrices BLAS threads spin beside Numba's and cost more than the work."""
    n, f_in = raw.shape
    d = feat_proj.shape[1]
    out = np.empty((n, d), dtype=np.float64)
    for v in prange(n):
        for f in range(d):
            out[v, f] = opcode_embedding[opcode[v], f]
        for k in range(f_in):
            x = np.float64(raw[v, k])
            x = np.log1p(x) / 10.0 if x >= 0 else -np.log1p(-x) / 10.0
            if x != 0.0:
                for f in range(d):
                    out[v, f] += x * feat_proj[k, f]
        for f in range(d):
            out[v, f] = np.tanh(out[v, f])
    return out


@njit(cache=True, parallel=True, nogil=True)
def gnn_message_layer(h, operand_ptr, operand_idx, user_ptr, user_idx, w_self, w_in, w_out,
                      bias):
    """float64 (n, d): tanh(h @ w_self + mean over operands of h @ w_in + mean over users
    of h @ w_out + bias) for h float64 (n, d); operands and users as CSR; a node without
    operands (users) gets zero from that side."""
    n, d = h.shape
    out = np.empty((n, d), dtype=np.float64)
    for v in prange(n):
        inbound = np.zeros(d)
        outbound = np.zeros(d)
        count_in = operand_ptr[v + 1] - operand_ptr[v]
        for e in range(operand_ptr[v], operand_ptr[v + 1]):
            for f in range(d):
                inbound[f] += h[operand_idx[e], f]
        count_out = user_ptr[v + 1] - user_ptr[v]
        for e in range(user_ptr[v], user_ptr[v + 1]):
            for f in range(d):
                outbound[f] += h[user_idx[e], f]
        for f in range(d):
            if count_in > 0:
                inbound[f] /= count_in
            if count_out > 0:
                outbound[f] /= count_out
        for g in range(d):
            acc = bias[g]
            for f in range(d):
                acc += h[v, f] * w_self[f, g] + inbound[f] * w_in[f, g] + outbound[f] * w_out[f, g]
            out[v, g] = np.tanh(acc)
    return out


@njit(cache=True)
def cycle_edge(src, dst, n_nodes):
    """Index of an edge that lies on a directed cycle (a self-loop included) of the graph
    of edges src[e] -> dst[e], or -1 if it is acyclic.

    Kahn's algorithm removes every node no remaining edge points to; what is left each
    has a remaining in-edge, so walking in-edges backwards from any of them must return
    to a node of the walk, closing a cycle whose last step is the edge returned.
    src, dst: int64 (n_edges,).
    """
    n_edges = src.shape[0]
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)  # in-edges grouped by their head
    for e in range(n_edges):
        indptr[dst[e] + 1] += 1
    for i in range(n_nodes):
        indptr[i + 1] += indptr[i]
    fill = indptr[:-1].copy()
    in_edges = np.empty(n_edges, dtype=np.int64)
    out_deg = np.zeros(n_nodes + 1, dtype=np.int64)  # out-edges grouped by their tail
    for e in range(n_edges):
        in_edges[fill[dst[e]]] = e
        fill[dst[e]] += 1
        out_deg[src[e] + 1] += 1
    for i in range(n_nodes):
        out_deg[i + 1] += out_deg[i]
    fill = out_deg[:-1].copy()
    out_edges = np.empty(n_edges, dtype=np.int64)
    for e in range(n_edges):
        out_edges[fill[src[e]]] = e
        fill[src[e]] += 1
    indegree = np.diff(indptr)
    stack = np.empty(n_nodes, dtype=np.int64)
    top = 0
    for i in range(n_nodes):
        if indegree[i] == 0:
            stack[top] = i
            top += 1
    removed = np.zeros(n_nodes, dtype=np.bool_)
    while top > 0:
        top -= 1
        node = stack[top]
        removed[node] = True
        for k in range(out_deg[node], out_deg[node + 1]):
            head = dst[out_edges[k]]
            indegree[head] -= 1
            if indegree[head] == 0:
                stack[top] = head
                top += 1
    start = -1
    for i in range(n_nodes):
        if not removed[i]:
            start = i
            break
    if start < 0:
        return -1
    on_walk = np.zeros(n_nodes, dtype=np.bool_)
    node = start
    while True:
        on_walk[node] = True
        for k in range(indptr[node], indptr[node + 1]):
            edge = in_edges[k]
            if not removed[src[edge]]:
                break
        tail = src[edge]
        if on_walk[tail]:
            return edge
        node = tail
