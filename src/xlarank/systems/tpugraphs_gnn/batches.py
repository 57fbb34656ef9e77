"""Batches (numpy): config sampling, ListMLE's orders, graphs joined into one padded
disjoint graph per step, the configs' regions (layout), and configs read in chunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks
from xlarank.features.jax_common import sampled_layout_configs
from xlarank.systems.tpugraphs_gnn.stats import GraphArrays


def label_order(label: np.ndarray, valid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int (L, C): per list, positions sorted by label descending (slowest first), ties in
    a random order, invalid positions last: ListMLE's permutation."""
    order = np.empty(label.shape, dtype=np.int32)
    for i in range(label.shape[0]):
        perm = rng.permutation(label.shape[1])
        key = np.where(valid[i, perm], -label[i, perm], np.inf)
        order[i] = perm[np.argsort(key, kind="stable")]
    return order


def skewed_sample(runtime: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of k of the configs (all when fewer), without replacement, by
    Gumbel-top-k on logits (N - r) / N where r is the rank by runtime (0 = fastest)."""
    n = len(runtime)
    if k >= n:
        return np.arange(n)
    rank = np.empty(n)
    rank[np.argsort(runtime, kind="stable")] = np.arange(n)
    logits = (n - rank) / n
    return np.sort(np.argsort(-(logits + rng.gumbel(size=n)))[:k])


def uniform_sample(runtime: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = len(runtime)
    return np.arange(n) if k >= n else np.sort(rng.choice(n, k, replace=False))


def _bucket(size: int) -> int:
    """size rounded up to a power of two from 8 to 1024, past that to one of 2^k x (1,
    1.25, 1.5, 1.75): few compiled shapes, and at most 25% padding on big graphs."""
    top = 1 << max(3, (size - 1).bit_length())
    if top <= 1024:
        return top
    for step in (top // 2 + top // 8 * i for i in range(1, 5)):
        if step >= size:
            return step
    return top


@dataclass
class Item:
    """One graph with sampled configs for a batch: layout cfg float32 (c, nc, Fc), tile
    cfg float32 (c, Fc); label float64 (c,), larger is slower."""

    graph: GraphArrays
    cfg: np.ndarray
    label: np.ndarray


def union_batch(items: Sequence[Item], n_graphs: int, n_configs: int, kind: str,
                keep_nodes: int = 0, rng: np.random.Generator | None = None,
                lists: int = 1, hops: int = 2, sizes: tuple[int, ...] = (0,) * 5
                ) -> tuple[dict, bool]:
    """The items as one padded disjoint graph with ``n_graphs`` graph slots (empty slots
    masked) of ``n_configs`` configs each; the configs of a graph form ``lists`` lists of
    n_configs / lists configs for the loss. Returns (arrays, segmented): ``segmented``
    when a graph has more than ``keep_nodes`` nodes (keep_nodes > 0) and one random
    segment of it was chosen with ``rng``. Layout: ``hops`` is the number of graph
    convolutions (`region_arrays`). ``sizes``: at least this many (nodes, edges,
    configurable nodes, local nodes, local edges) after padding (one compiled shape for a
    whole fit, `_largest_batch`)."""
    n_total = sum(it.graph.n for it in items)
    m_total = sum(len(it.graph.edges) for it in items)
    big_n, big_m = max(_bucket(n_total + 1), sizes[0]), max(_bucket(m_total), sizes[1])
    pad = big_n - 1
    feat_width = items[0].graph.feat.shape[1]
    cfg_width = items[0].cfg.shape[-1]
    a = {
        "feat": np.zeros((big_n, feat_width), np.float32),
        "op": np.zeros(big_n, np.int32),
        "node_graph": np.full(big_n, n_graphs, np.int32),
        "node_mask": np.zeros(big_n, bool),
        "src": np.full(big_m, pad, np.int32), "dst": np.full(big_m, pad, np.int32),
        "edge_mask": np.zeros(big_m, bool),
        "label": np.zeros((n_graphs, n_configs), np.float32),
        "valid": np.zeros((n_graphs, n_configs), bool),
    }
    seg_node = np.zeros(big_n, bool)
    segmented = False
    if kind == "layout":
        k_total = sum(len(it.graph.config_ids) for it in items)
        big_k = max(_bucket(k_total), sizes[2])
        a["cfg_node"] = np.full(big_k, pad, np.int32)
        a["cfg_graph"] = np.full(big_k, n_graphs, np.int32)
        a["cfg_mask"] = np.zeros(big_k, bool)
        a["cfg"] = np.zeros((big_k, n_configs, cfg_width), np.float32)
    else:
        a["cfg"] = np.zeros((n_graphs, n_configs, cfg_width), np.float32)
    node0 = edge0 = cfg0 = 0
    for g, it in enumerate(items):
        n, m, c = it.graph.n, len(it.graph.edges), len(it.label)
        a["feat"][node0:node0 + n] = it.graph.feat
        a["op"][node0:node0 + n] = it.graph.op
        a["node_graph"][node0:node0 + n] = g
        a["node_mask"][node0:node0 + n] = True
        a["src"][edge0:edge0 + m] = it.graph.edges[:, 0] + node0
        a["dst"][edge0:edge0 + m] = it.graph.edges[:, 1] + node0
        a["edge_mask"][edge0:edge0 + m] = True
        a["label"][g, :c] = it.label
        a["valid"][g, :c] = True
        if keep_nodes and n > keep_nodes:
            segmented = True
            start = int(rng.integers(0, -(-n // keep_nodes))) * keep_nodes
            seg_node[node0 + start:node0 + min(n, start + keep_nodes)] = True
        else:
            seg_node[node0:node0 + n] = True
        if kind == "layout":
            nc = len(it.graph.config_ids)
            a["cfg_node"][cfg0:cfg0 + nc] = it.graph.config_ids + node0
            a["cfg_graph"][cfg0:cfg0 + nc] = g
            a["cfg_mask"][cfg0:cfg0 + nc] = True
            a["cfg"][cfg0:cfg0 + nc, :c] = it.cfg.transpose(1, 0, 2)
            cfg0 += nc
        else:
            a["cfg"][g, :c] = it.cfg
        node0, edge0 = node0 + n, edge0 + m
    if kind == "layout":
        a.update(region_arrays(a, n_graphs, hops, sizes[3:]))
    if segmented and kind == "layout":
        a["seg_node"] = seg_node
        a["seg_edge"] = seg_node[a["src"]] & seg_node[a["dst"]] & a["edge_mask"]
        a["seg_cfg"] = seg_node[a["cfg_node"]] & a["cfg_mask"]
    per_list = n_configs // lists
    a["label"] = a["label"].reshape(n_graphs * lists, per_list)
    a["valid"] = a["valid"].reshape(n_graphs * lists, per_list)
    a["order"] = label_order(a["label"], a["valid"], rng or np.random.default_rng(0))
    return a, segmented


def region_masks(edges: np.ndarray, edge_mask: np.ndarray, config_nodes: np.ndarray,
                 n: int, hops: int) -> tuple[np.ndarray, np.ndarray]:
    """(region, local) bool (n,): the nodes within ``hops`` undirected hops of a
    configurable node, and those plus their neighbours."""
    src, dst = edges[0][edge_mask], edges[1][edge_mask]
    region = np.zeros(n, bool)
    region[config_nodes] = True
    masks = []
    for _ in range(hops + 1):
        masks.append(region)
        grown = region.copy()
        grown[dst[region[src]]] = True
        grown[src[region[dst]]] = True
        region = grown
    return masks[-1], region


def region_arrays(a: dict, n_graphs: int, hops: int, sizes: Sequence[int] = (0, 0)
                  ) -> dict[str, np.ndarray]:
    """The padded batch's local arrays for `layout_forward`: loc_node (NL,) the global id
    of each local node (region and its neighbours), loc_region, loc_graph, loc_cfg (K,)
    each configurable node's local id, the local edges (every edge touching the region:
    loc_src, loc_dst local ids, loc_edge global ids, loc_edge_mask) and node_region (N,)."""
    big_n = len(a["op"])
    region, local = region_masks((a["src"], a["dst"]), a["edge_mask"],
                                 a["cfg_node"][a["cfg_mask"]], big_n, hops)
    ids = np.flatnonzero(local & a["node_mask"])
    big_l = max(_bucket(len(ids) + 1), sizes[0])
    local_id = np.full(big_n, big_l - 1, np.int32)
    local_id[ids] = np.arange(len(ids))
    out = {"node_region": region & a["node_mask"],
           "loc_node": np.full(big_l, big_n - 1, np.int32),
           "loc_region": np.zeros(big_l, bool),
           "loc_graph": np.full(big_l, n_graphs, np.int32)}
    out["loc_node"][:len(ids)] = ids
    out["loc_region"][:len(ids)] = region[ids]
    out["loc_graph"][:len(ids)] = a["node_graph"][ids]
    touching = np.flatnonzero(a["edge_mask"] & (region[a["src"]] | region[a["dst"]]))
    big_e = max(_bucket(len(touching)), sizes[1])
    out["loc_src"] = np.full(big_e, big_l - 1, np.int32)
    out["loc_dst"] = np.full(big_e, big_l - 1, np.int32)
    out["loc_edge"] = np.zeros(big_e, np.int32)
    out["loc_edge_mask"] = np.zeros(big_e, bool)
    out["loc_src"][:len(touching)] = local_id[a["src"][touching]]
    out["loc_dst"][:len(touching)] = local_id[a["dst"][touching]]
    out["loc_edge"][:len(touching)] = touching
    out["loc_edge_mask"][:len(touching)] = True
    out["loc_cfg"] = local_id[a["cfg_node"]]
    return out


def _largest_batch(prepared: list, batch: int, hops: int) -> tuple[int, ...]:
    """Padded sizes (nodes, edges, configurable nodes, local nodes, local edges) that hold
    any ``batch`` of the prepared graphs (`union_batch`'s ``sizes``)."""
    if not prepared:
        return (0,) * 5
    counts = []
    for _, arrays, _ in prepared:
        src, dst = arrays.edges[:, 0], arrays.edges[:, 1]
        region, local = region_masks((src, dst), np.ones(len(src), bool), arrays.config_ids,
                                     arrays.n, hops)
        counts.append((arrays.n, len(src), len(arrays.config_ids), int(local.sum()),
                       int((region[src] | region[dst]).sum())))
    top = [sum(sorted(column, reverse=True)[:batch]) for column in zip(*counts)]
    return (_bucket(top[0] + 1), _bucket(top[1]), _bucket(top[2]), _bucket(top[3] + 1),
            _bucket(top[4]))


def _configs_at(graph: LayoutGraph, rows: np.ndarray) -> np.ndarray:
    """int8 (len(rows), nc, 18): the configs at ``rows`` (any order) of a streamed graph."""
    unique, inverse = np.unique(rows, return_inverse=True)
    return sampled_layout_configs(graph, unique)[inverse.ravel()]


def _config_chunks(graph, chunk: int):
    """(first index, raw configs) of consecutive chunks of at most ``chunk`` configs: tile
    float32 (b, 24), layout int8 (b, nc, 18) from memory or streamed."""
    if isinstance(graph, TileGraph):
        for start in range(0, graph.n_configs, chunk):
            yield start, graph.config_feat[start:start + chunk]
        return
    held, start = [], 0
    with config_blocks(graph) as blocks:
        for block, _ in blocks:
            held.append(block)
            while sum(len(b) for b in held) >= chunk:
                joined = np.concatenate(held)
                yield start, joined[:chunk]
                start += chunk
                held = [joined[chunk:]]
    rest = np.concatenate(held) if held else np.zeros((0, graph.n_configurable, 18))
    if len(rest):
        yield start, rest

