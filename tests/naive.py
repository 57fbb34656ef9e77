"""Slow, obviously correct references for every Numba kernel (plain numpy/pandas/python)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def opcode_histogram(opcode: np.ndarray, n_bins: int) -> np.ndarray:
    return np.bincount(opcode.astype(np.int64), minlength=n_bins)


def operands_by_node(src: np.ndarray, dst: np.ndarray, n_nodes: int) -> list[list[int]]:
    """For each node, the dst of its edges in file order."""
    table = pd.DataFrame({"src": src, "dst": dst})
    grouped = table.groupby("src", sort=True)["dst"].apply(list).to_dict()
    return [grouped.get(i, []) for i in range(n_nodes)]


def column_mean_max(values: np.ndarray) -> np.ndarray:
    return np.stack([values.mean(axis=0), values.max(axis=0)])


def layout_config_means(configs: np.ndarray) -> np.ndarray:
    if configs.shape[1] == 0:
        return np.zeros((configs.shape[0], configs.shape[2]))
    return configs.astype(np.float64).mean(axis=1)


def _pad(size: float, multiple: int) -> float:
    return 1.0 if size <= 0 else math.ceil(size / multiple) * multiple / size


def effective_layout(config_out: np.ndarray, default: np.ndarray) -> np.ndarray:
    """A node's output layout (6,) under a config: the config where it fixes a position
    (>= 0), the default elsewhere."""
    return np.where(config_out >= 0, config_out, default)


def keeps_default(config_out: np.ndarray, default: np.ndarray) -> bool:
    fixed = config_out >= 0
    return bool((config_out[fixed] == default[fixed]).all())


def _pad_of(dims_row, layout):
    minor = dims_row[layout[0]] if layout[0] >= 0 else 1
    second = dims_row[layout[1]] if layout[1] >= 0 else 1
    return _pad(minor, 128) * _pad(second, 8), minor, second


def _relayout_list(layouts, j, default_layout, operand_pos, operand_info):
    """Bytes of node j's operand reads whose fixed positions differ from how it is made."""
    moved = []
    for slot in range(2):
        pos = operand_pos[j, slot]
        if pos == -2:
            continue
        read = layouts[j, 6 + 6 * slot: 12 + 6 * slot]
        made = (effective_layout(layouts[pos, :6], default_layout[pos]) if pos >= 0
                else np.asarray(operand_info[j, slot, 1:]))
        fixed = read >= 0
        if (read[fixed].astype(np.float64) != np.asarray(made, np.float64)[fixed]).any():
            moved.append(operand_info[j, slot, 0])
    return moved


def _read_pad(layouts, j, slot, default_layout, operand_pos, operand_info, operand_dims):
    """Pad ratio of node j's operand in the layout it is read in (1 without an operand)."""
    pos = operand_pos[j, slot]
    if pos == -2:
        return 1.0
    made = (effective_layout(layouts[pos, :6], default_layout[pos]) if pos >= 0
            else np.asarray(operand_info[j, slot, 1:]).astype(np.int64))
    read = layouts[j, 6 + 6 * slot: 12 + 6 * slot]
    layout = np.where(read >= 0, read, made).astype(np.int64)
    return _pad_of(operand_dims[j, slot], layout)[0]


def layout_config_joined(configs, dims, node_bytes, default_layout, operand_pos, operand_info,
                         operand_dims):
    """Per config, per node, in plain Python; mirrors the kernel's documented meaning."""
    c, nc, _ = configs.shape
    out = np.zeros((c, 11))
    total = float(sum(node_bytes))
    for i in range(c):
        layouts = configs[i]
        keeps = [keeps_default(layouts[j, :6], default_layout[j]) for j in range(nc)]
        pads = [_pad_of(dims[j], effective_layout(layouts[j, :6], default_layout[j]))
                for j in range(nc)]
        ratio = [p[0] for p in pads]
        minor = [p[1] for p in pads]
        second = [p[2] for p in pads]
        waste = [node_bytes[j] * (ratio[j] - 1) for j in range(nc)]
        relayouts = []
        for j in range(nc):
            relayouts += _relayout_list(layouts, j, default_layout, operand_pos, operand_info)
        out[i, 0] = sum(keeps) / nc if nc else 0.0
        if total > 0:
            out[i, 1] = sum(b for b, k in zip(node_bytes, keeps) if k) / total
            out[i, 4] = sum(r * b for r, b in zip(ratio, node_bytes)) / total
        out[i, 2] = math.log1p(sum(b for b, m in zip(node_bytes, minor) if m % 128))
        out[i, 3] = math.log1p(sum(b for b, s in zip(node_bytes, second) if s % 8))
        out[i, 5] = math.log1p(sum(waste))
        out[i, 6] = math.log1p(max(waste, default=0.0))
        out[i, 7] = math.log1p(sum(relayouts))
        out[i, 8] = len(relayouts)
        out[i, 9] = math.log1p(max(relayouts, default=0.0))
        out[i, 10] = math.log1p(sum(
            operand_info[j, slot, 0] * (_read_pad(layouts, j, slot, default_layout, operand_pos,
                                                  operand_info, operand_dims) - 1)
            for j in range(nc) for slot in range(2)))
    return out


def _default_place(value, part, j, default_layout, operand_pos, operand_info) -> float:
    if value < 0:
        return -1.0
    if part > 0 and operand_pos[j, part - 1] == -2:
        return 6.0
    reference = (list(default_layout[j]) if part == 0
                 else [int(v) for v in operand_info[j, part - 1, 1:7]])
    return float(reference.index(value)) if value in reference else 6.0


def layout_node_slots(configs, slots, dims, default_layout, operand_pos, operand_info,
                      operand_dims):
    """Per config, per slot: changed, fixed count, pad ratio, input and kernel read pad
    ratios, log1p relayout bytes, then the minor and second-minor dims of the output, input
    and kernel layouts as places in their default layouts."""
    c = configs.shape[0]
    width = 12
    out = np.zeros((c, width * len(slots)))
    for i in range(c):
        layouts = configs[i]
        for k, j in enumerate(slots):
            if j < 0:
                continue
            col = width * k
            out[i, col] = 0.0 if keeps_default(layouts[j, :6], default_layout[j]) else 1.0
            out[i, col + 1] = int((layouts[j, :6] >= 0).sum())
            out[i, col + 2] = _pad_of(dims[j],
                                      effective_layout(layouts[j, :6], default_layout[j]))[0]
            for slot in range(2):
                out[i, col + 3 + slot] = _read_pad(layouts, j, slot, default_layout,
                                                   operand_pos, operand_info, operand_dims)
            out[i, col + 5] = math.log1p(sum(_relayout_list(layouts, j, default_layout,
                                                            operand_pos, operand_info)))
            for part in range(3):
                for s in range(2):
                    out[i, col + 6 + 2 * part + s] = _default_place(
                        int(layouts[j, 6 * part + s]), part, j, default_layout, operand_pos,
                        operand_info)
    return out


def tile_config_joined(config_feat, out_dims, element_bytes, n_operands, input_bytes=0.0,
                       contracts=False, n_nodes=1):
    live = np.flatnonzero(out_dims > 0)
    rank = len(live)
    size = out_dims[live].astype(np.float64)
    tile = config_feat[:, 8 + live].astype(np.float64)
    tile = np.where(tile < 1, size[None, :], tile)
    n = np.ceil(size[None, :] / tile)
    elems = tile.prod(axis=1)
    minor = tile[:, -1] if rank >= 1 else np.ones(len(tile))
    second = tile[:, -2] if rank >= 2 else np.ones(len(tile))
    # Inputs are read once per row or column of output tiles when the kernel contracts.
    rereads = n[:, -2:].mean(axis=1) if contracts and rank else np.ones(len(tile))
    return np.stack([
        (n * tile).prod(axis=1) / size.prod(),
        np.log(n.prod(axis=1)),
        np.log(elems * element_bytes) if element_bytes > 0 else np.zeros(len(tile)),
        [_pad(m, 128) for m in minor],
        [_pad(s, 8) for s in second],
        elems / size.prod(),
        (np.log(elems * element_bytes) if element_bytes > 0 else np.zeros(len(tile)))
        + np.log(max(n_operands, 1)),
        np.log(n.prod(axis=1) * elems * element_bytes * [_pad(m, 128) for m in minor]
               * [_pad(s, 8) for s in second]) if element_bytes > 0
        else np.log(n.prod(axis=1) * [_pad(m, 128) * _pad(s, 8) for m, s in zip(minor, second)]),
        np.log1p(input_bytes * rereads),
        np.log(n.prod(axis=1)) + np.log(max(n_nodes, 1)),
    ], axis=1)


def brute_force_opa(score: np.ndarray, runtime: np.ndarray) -> float:
    """Pairs with different runtimes; correct when the faster one scores higher; ties 1/2."""
    good, pairs = 0.0, 0
    for a in range(len(score)):
        for b in range(a + 1, len(score)):
            if runtime[a] == runtime[b]:
                continue
            pairs += 1
            fast, slow = (a, b) if runtime[a] < runtime[b] else (b, a)
            if score[fast] > score[slow]:
                good += 1
            elif score[fast] == score[slow]:
                good += 0.5
    return good / pairs if pairs else float("nan")


def khop_neighbourhoods(edges: np.ndarray, n_nodes: int, seeds, k: int) -> list[set[int]]:
    """Per seed, the nodes within k undirected hops (networkx)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n_nodes))
    graph.add_edges_from(map(tuple, edges))
    return [set(nx.single_source_shortest_path_length(graph, int(s), cutoff=k)) for s in seeds]


def khop_sums(edges, n_nodes, seeds, k, node_values):
    hoods = khop_neighbourhoods(edges, n_nodes, seeds, k)
    return np.array([node_values[sorted(h)].sum(axis=0) for h in hoods]).reshape(
        len(seeds), node_values.shape[1])


def khop_union(edges, n_nodes, seeds, k):
    mask = np.zeros(n_nodes, dtype=bool)
    for h in khop_neighbourhoods(edges, n_nodes, seeds, k):
        mask[sorted(h)] = True
    return mask


def layout_changed_aggregates(configs, default_layout, weights):
    c, nc, _ = configs.shape
    w = weights.shape[1]
    out = np.zeros((c, 3 * w))
    for i in range(c):
        changed = [j for j in range(nc)
                   if not keeps_default(configs[i, j, :6], default_layout[j])]
        if changed:
            out[i, :w] = weights[changed].sum(axis=0)
            out[i, w:2 * w] = weights[changed].mean(axis=0)
            out[i, 2 * w:] = weights[changed].max(axis=0)
    return out


def config_to_int8(block):
    ok = bool(np.all(np.isfinite(block)) and np.all(block == np.round(block))
              and (block.size == 0 or (block.min() >= -1 and block.max() <= 5)))
    return (block.astype(np.int8) if ok else None), ok


def distinct_groups(configs: np.ndarray) -> np.ndarray:
    """Distinct id per config, numbered by first appearance (np.unique over rows)."""
    _, first, inverse = np.unique(configs.reshape(len(configs), -1), axis=0,
                                  return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(len(order))
    return renumber[inverse.reshape(-1)]


def gnn_node_embeddings(node_feat, node_opcode, edge_index, weights) -> np.ndarray:
    """The gnn family's message passing with networkx: operands are a node's successors
    in the [consumer, producer] digraph, users its predecessors."""
    import networkx as nx

    n = len(node_opcode)
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((int(a), int(b)) for a, b in edge_index)
    columns = [0, *range(2, 21), *range(21, 30), 43, 44, 107, 108, *range(134, 140)]
    x = node_feat[:, columns].astype(np.float64)
    h = np.tanh(weights["opcode_embedding"][node_opcode.astype(int)]
                + (np.sign(x) * np.log1p(np.abs(x)) / 10.0) @ weights["feat_proj"])
    for layer in range(2):
        new = np.empty_like(h)
        for v in range(n):
            operands = [u for _, u in graph.out_edges(v)]
            users = [u for u, _ in graph.in_edges(v)]
            inbound = np.mean(h[operands], axis=0) if operands else np.zeros(h.shape[1])
            outbound = np.mean(h[users], axis=0) if users else np.zeros(h.shape[1])
            new[v] = np.tanh(h[v] @ weights[f"self_{layer}"] + inbound @ weights[f"in_{layer}"]
                             + outbound @ weights[f"out_{layer}"] + weights[f"bias_{layer}"])
        h = new
    return h


def layout_embedding_join(configs, heads, tables, positions) -> np.ndarray:
    """Per config, mean and max over nodes of heads[j] * sum of the table rows its
    dimension ids pick, with pandas doing the pooling."""
    import pandas as pd

    rows = []
    for i in range(len(configs)):
        for j in range(configs.shape[1]):
            mix = sum(tables[p, int(configs[i, j, pos]) + 1] for p, pos in enumerate(positions))
            rows.append({"config": i, **{f: v for f, v in enumerate(heads[j] * mix)}})
    if not rows:
        return np.zeros((len(configs), 2 * heads.shape[1]))
    grouped = pd.DataFrame(rows).groupby("config")
    return np.hstack([grouped.mean().to_numpy(), grouped.max().to_numpy()])


# ---------------------------------------------------------------- graph_metrics (networkx)


def data_flow_digraph(edges: np.ndarray, n_nodes: int):
    """networkx DiGraph of the data flow: an edge producer -> consumer per [consumer,
    producer] row (duplicates merged)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n_nodes))
    graph.add_edges_from((int(p), int(c)) for c, p in edges)
    return graph


def topological_levels(edges: np.ndarray, n_nodes: int) -> np.ndarray:
    """int64 (n,): each node's topological generation (networkx), which is its longest
    path from an input, in edges."""
    import networkx as nx

    level = np.empty(n_nodes, dtype=np.int64)
    for depth, nodes in enumerate(nx.topological_generations(data_flow_digraph(edges,
                                                                                n_nodes))):
        level[list(nodes)] = depth
    return level


def heaviest_path(edges: np.ndarray, n_nodes: int, weights: np.ndarray) -> np.ndarray:
    """float64 (k,): the heaviest path of the DAG for node weights (n, k) of whole
    non-negative numbers, paths compared column by column.

    networkx's dag_longest_path_length on the data flow plus a source feeding every node,
    each edge weighing its head node's weights packed into one Python int: column j in
    base (its total + 1), so packed sums compare as the columns do and never carry.
    """
    import networkx as nx

    rows = [[int(round(x)) for x in row] for row in weights]
    k = weights.shape[1]
    bases = [sum(row[j] for row in rows) + 1 for j in range(k)]

    def pack(row):
        value = 0
        for j in range(k):
            value = value * bases[j] + row[j]
        return value

    graph = data_flow_digraph(edges, n_nodes)
    for _, consumer, data in graph.edges(data=True):
        data["weight"] = pack(rows[consumer])
    graph.add_edges_from((n_nodes, v, {"weight": pack(rows[v])}) for v in range(n_nodes))
    value = nx.dag_longest_path_length(graph)
    out = []
    for j in reversed(range(k)):
        value, digit = divmod(value, bases[j])
        out.append(digit)
    return np.array(out[::-1], dtype=np.float64)


def betweenness(edges: np.ndarray, n_nodes: int, sources=None) -> np.ndarray:
    """float64 (n,): directed betweenness (networkx, unnormalised) of the graph with an
    edge per row of edges (duplicates merged), summed over pairs whose source is in
    sources (all nodes if None)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n_nodes))
    graph.add_edges_from(map(tuple, edges.tolist()))
    if sources is None:
        found = nx.betweenness_centrality(graph, normalized=False)
    else:
        found = nx.betweenness_centrality_subset(graph, [int(s) for s in sources],
                                                 list(graph), normalized=False)
    return np.array([found[v] for v in range(n_nodes)], dtype=np.float64)


def graph_metrics(edges, n_nodes, opcode, nbytes, layout_ops, config_ids=None, k=2,
                  pruned_betweenness=None) -> np.ndarray:
    """The graph_metrics family's values with networkx: per graph, then (config_ids given)
    per configurable node pooled. pruned_betweenness: the configurable nodes' betweenness
    if already known, else networkx on the k-hop pruned graph."""
    import networkx as nx

    flow = data_flow_digraph(edges, n_nodes)
    multi = nx.MultiDiGraph()
    multi.add_nodes_from(range(n_nodes))
    multi.add_edges_from((int(p), int(c)) for c, p in edges)
    level = topological_levels(edges, n_nodes)
    longest = int(level.max()) + 1
    widths = np.bincount(level).astype(np.float64)
    heaviest = heaviest_path(edges, n_nodes, nbytes[:, None])[0]
    layout = np.isin(opcode, layout_ops).astype(np.float64)
    _, lp_ops, lp_bytes = heaviest_path(
        edges, n_nodes, np.stack([np.ones(n_nodes), layout, layout * nbytes], axis=1))
    in_deg = np.array([multi.in_degree(v) for v in range(n_nodes)], dtype=np.float64)
    out_deg = np.array([multi.out_degree(v) for v in range(n_nodes)], dtype=np.float64)
    values = [math.log1p(longest), math.log1p(heaviest), longest / n_nodes,
              math.log1p(widths.max()), math.log1p(widths.mean()),
              math.log1p(np.quantile(widths, 0.5)), math.log1p(np.quantile(widths, 0.9)),
              in_deg.mean(), math.log1p(in_deg.max()), in_deg.std(),
              math.log1p(out_deg.max()), out_deg.std(), (in_deg == 0).mean(),
              (out_deg == 0).mean(), lp_ops, lp_ops / longest, math.log1p(lp_bytes)]
    if config_ids is None:
        return np.array(values)
    if len(config_ids) == 0:
        return np.array(values + [0.0] * 9)
    ids = [int(i) for i in config_ids]
    height = topological_levels(edges[:, ::-1], n_nodes)
    span = longest - 1
    depth_c = level[ids] / max(span, 1)
    height_c = height[ids] / max(span, 1)
    critical = np.mean([level[v] + height[v] == span for v in ids])
    if pruned_betweenness is None:
        kept = np.flatnonzero(khop_union(edges, n_nodes, ids, k))
        sub = nx.DiGraph(flow.subgraph(kept.tolist()))
        n_kept = len(kept)
        found = nx.betweenness_centrality(sub, normalized=False)
        pruned_betweenness = np.array([found[v] for v in ids]) / max(
            1.0, (n_kept - 1.0) * (n_kept - 2.0))
    return np.array(values + [depth_c.mean(), depth_c.min(), depth_c.max(), height_c.mean(),
                              height_c.min(), height_c.max(), critical,
                              pruned_betweenness.mean(), pruned_betweenness.max()])
def opcode_scaled_input(raw, opcode, opcode_scale, feat_proj, bias) -> np.ndarray:
    x = raw.astype(np.float64)
    x = np.sign(x) * np.log1p(np.abs(x)) / 10.0 * opcode_scale[opcode.astype(int)]
    return np.tanh(x @ feat_proj + bias)


def gru_step(gates, h, w_hidden, b_hidden) -> np.ndarray:
    """torch.nn.GRU's cell, input projections given."""
    d = len(h)
    rec = h @ w_hidden + b_hidden
    r = 1 / (1 + np.exp(-(gates[:d] + rec[:d])))
    z = 1 / (1 + np.exp(-(gates[d:2 * d] + rec[d:2 * d])))
    n = np.tanh(gates[2 * d:] + r * rec[2 * d:])
    return (1 - z) * n + z * h


def gru_sequence(inputs, w_input, b_input, w_hidden, b_hidden) -> np.ndarray:
    h = np.zeros(w_hidden.shape[0])
    for row in inputs:
        h = gru_step(row @ w_input + b_input, h, w_hidden, b_hidden)
    return h


def layout_gru_columns(configs, segment, heads, conv_table, start, cell) -> np.ndarray:
    """Per config: each node's code, pooled per segment with pandas, then the GRU over the
    non-empty segments in order: last state and mean of states."""
    w_input, b_input, w_hidden, b_hidden = cell
    out = []
    for config in configs.astype(int):
        codes = [heads[j] * sum(conv_table[ch, 7 * (config[j, 6 * ch] + 1)
                                           + config[j, 6 * ch + 1] + 1] for ch in range(3))
                 for j in range(len(segment))]
        steps = (pd.DataFrame(codes).groupby(segment).mean().sort_index().to_numpy()
                 if codes else np.zeros((0, heads.shape[1])))
        h, states = start.copy(), []
        for step in steps:
            h = gru_step(step @ w_input + b_input, h, w_hidden, b_hidden)
            states.append(h)
        out.append(np.concatenate([h, np.mean(states, axis=0) if states else h]))
    return np.array(out)


def tile_gru_columns(config_feat, start, conv, cell) -> np.ndarray:
    conv_w, conv_b = conv
    w_input, b_input, w_hidden, b_hidden = cell
    x = config_feat.astype(np.float64)
    x = np.sign(x) * np.log1p(np.abs(x))
    groups = x.reshape(-1, 3, 8)
    windows = np.stack([np.einsum("cgt,gtf->cf", groups[:, :, p:p + 2], conv_w) + conv_b
                        for p in range(5)], axis=1)
    step = np.concatenate([np.tanh(windows.max(axis=1)), groups[:, :, 6:8].reshape(-1, 6)],
                          axis=1)
    return np.array([gru_step(s @ w_input + b_input, start, w_hidden, b_hidden) for s in step])


def forest_predict(x, starts, feature, threshold, missing_left, left, right, value, is_leaf,
                   baseline, n_trees) -> np.ndarray:
    """kernels.trees.forest_predict: each row walked down each tree, one node at a time."""
    out = []
    for row in np.asarray(x, dtype=np.float64):
        total = baseline
        for t in range(n_trees):
            base, node = starts[t], 0
            while not is_leaf[base + node]:
                v = row[feature[base + node]]
                go_left = bool(missing_left[base + node]) if math.isnan(v) else (
                    v <= threshold[base + node])
                node = left[base + node] if go_left else right[base + node]
            total += value[base + node]
        out.append(total)
    return np.array(out)
