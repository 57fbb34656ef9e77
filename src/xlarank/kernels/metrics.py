"""Kernels of closed-form metrics over a graph's data flow: topological order, heaviest
paths (longest paths with node weights) and betweenness.

Graphs come as CSR (`xlarank.kernels.graph.csr_by_row`): the operand CSR lists each node's
producers, the user CSR each node's consumers.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def topological_order(operand_ptr, operand_idx, user_ptr, user_idx):
    """int64 (n_nodes,): every node after all its operands (Kahn's algorithm, first in first
    out from the nodes without operands).

    operand_ptr, operand_idx / user_ptr, user_idx: int64 CSR of each node's operands /
    users. Nodes on or behind a cycle (never in real files, which are DAGs) follow in id
    order, so a broken file still gets an order.
    """
    n = operand_ptr.shape[0] - 1
    waiting = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    size = 0
    for v in range(n):
        waiting[v] = operand_ptr[v + 1] - operand_ptr[v]
        if waiting[v] == 0:
            order[size] = v
            size += 1
    head = 0
    while head < size:
        u = order[head]
        head += 1
        for e in range(user_ptr[u], user_ptr[u + 1]):
            w = user_idx[e]
            waiting[w] -= 1
            if waiting[w] == 0:
                order[size] = w
                size += 1
    for v in range(n):
        if waiting[v] > 0:
            order[size] = v
            size += 1
    return order


@njit(cache=True)
def _heavier(best, a, b):
    """Whether row a of best beats row b, compared column by column."""
    for j in range(best.shape[1]):
        if best[a, j] != best[b, j]:
            return best[a, j] > best[b, j]
    return False


@njit(cache=True)
def heaviest_paths(order, ptr, idx, weights):
    """float64 (n_nodes, k): per node, the heaviest path that ends at it, as the sums of
    weights float64 (n_nodes, k) over its nodes (the node included).

    Paths step from a node to its neighbours in the CSR ptr, idx and are compared column
    by column (column 0 first, the next breaking ties), so weights [1, x] give the longest
    path in nodes and, among those, the largest sum of x. order: int64 (n_nodes,), every
    node after its neighbours (`topological_order` with the operand CSR for paths from
    the inputs; reversed, with the user CSR, for paths to the outputs). A neighbour not yet
    visited (an edge closing a cycle) is skipped.
    """
    n, k = weights.shape
    best = np.zeros((n, k), dtype=np.float64)
    done = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = order[i]
        pick = -1
        for e in range(ptr[v], ptr[v + 1]):
            u = idx[e]
            if done[u] and (pick < 0 or _heavier(best, u, pick)):
                pick = u
        for j in range(k):
            best[v, j] = weights[v, j] + (best[pick, j] if pick >= 0 else 0.0)
        done[v] = True
    return best


@njit(cache=True)
def betweenness(ptr, idx, sources):
    """float64 (n_nodes,): directed betweenness, unnormalised: per node, the sum over
    pairs (s, t), s in sources, of the share of the shortest s-t paths through it
    (Brandes).

    ptr, idx: int64 CSR of the directed graph, without duplicate edges (a duplicate would
    count a path twice); sources: int64, all nodes for the usual betweenness. Serial: on
    the pruned graphs it runs on (a few ms for 5,000 nodes) waking a thread pool cost more
    than the work.
    """
    n = ptr.shape[0] - 1
    out = np.zeros(n, dtype=np.float64)
    dist = np.full(n, -1, dtype=np.int64)
    sigma = np.zeros(n, dtype=np.float64)
    delta = np.zeros(n, dtype=np.float64)
    visited = np.empty(n, dtype=np.int64)
    for s in sources:
        dist[s] = 0
        sigma[s] = 1.0
        visited[0] = s
        size = 1
        head = 0
        while head < size:
            v = visited[head]
            head += 1
            for e in range(ptr[v], ptr[v + 1]):
                w = idx[e]
                if dist[w] < 0:
                    dist[w] = dist[v] + 1
                    visited[size] = w
                    size += 1
                if dist[w] == dist[v] + 1:
                    sigma[w] += sigma[v]
        # Breadth-first order read backwards: a node's successors on shortest paths have
        # their dependency complete before it.
        for i in range(size - 1, -1, -1):
            w = visited[i]
            for e in range(ptr[w], ptr[w + 1]):
                x = idx[e]
                if dist[x] == dist[w] + 1:
                    delta[w] += sigma[w] / sigma[x] * (1.0 + delta[x])
            if w != s:
                out[w] += delta[w]
        for i in range(size):
            w = visited[i]
            dist[w] = -1
            sigma[w] = 0.0
            delta[w] = 0.0
    return out
