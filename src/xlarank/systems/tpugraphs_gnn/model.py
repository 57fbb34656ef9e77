"""The networks (jax): ResModel (layout) and EarlyJoinSAGE (tile), their layers and their
initial weights."""

from __future__ import annotations

import numpy as np

from xlarank.compat import jax, jnp

NUM_OPS = 121           # FORMAT.md's largest opcode id (120) plus one, fixed
LEAKY_SLOPE = 0.2       # tf.nn.leaky_relu
CONFIG_SCALE = 100.0    # layout: config features times 100 before the prenet
GLOROT_EMBED = 0.05     # Keras Embedding's uniform initialiser


def _leaky(x):
    return jnp.where(x >= 0, x, LEAKY_SLOPE * x)


def _l2_normalize(x):
    """tf.nn.l2_normalize over the last axis."""
    return x * jax_rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


def jax_rsqrt(x):
    return jax.lax.rsqrt(x)


def _expand(w, y):
    return w.reshape(w.shape + (1,) * (y.ndim - 1))


def normalized_adjacency(src, dst, edge_mask, n):
    """(self weight (n,), edge weight (m,)) of A_hat = D^-1/2 (A + A^T + I) D^-1/2 where
    A has one entry per kept edge (masked edges are absent)."""
    w = edge_mask.astype("float32")
    degree = 1.0 + jax.ops.segment_sum(w, src, n) + jax.ops.segment_sum(w, dst, n)
    inv_sqrt = jax_rsqrt(degree)
    return inv_sqrt * inv_sqrt, w * inv_sqrt[src] * inv_sqrt[dst]


def apply_adjacency(y, src, dst, self_w, edge_w):
    """A_hat @ y for y (n, ...) given `normalized_adjacency`'s weights (self_w zero and
    edge_w the edge mask give (A + A^T) @ y)."""
    n = y.shape[0]
    ew = _expand(edge_w, y)
    return (_expand(self_w, y) * y + jax.ops.segment_sum(ew * y[dst], src, n)
            + jax.ops.segment_sum(ew * y[src], dst, n))


def _dense(p, name, x):
    y = x @ p[f"{name}_w"]
    bias = p.get(f"{name}_b")
    return y if bias is None else y + bias


def _mlp(p, prefix, x, depth):
    """Keras _mlp: Dense, then (leaky_relu, Dense) for each further layer."""
    for i in range(depth):
        if i:
            x = _leaky(x)
        x = _dense(p, f"{prefix}{i}", x)
    return x


def _layout_nodes(p, x0, a, edge_mask, cfg_mask, gnn_layers, mlp_layers):
    """(static (N, hidden), local (NL, C, hidden)): the node outputs of prenet and the
    residual convolutions, split exactly by where configs can reach.

    A node farther than ``gnn_layers`` hops from every configurable node (outside the
    region) has an output that no config changes: it is computed once, on all nodes with
    the configs zero (``static``). Only the region's nodes are computed per config
    (``local``, on the region and its neighbours, whose inputs at every layer are taken
    from the static pass). The same function as computing every node per config; the
    per-config arrays are a few times smaller. x0 (N, D): the config-free node inputs.
    """
    cfg = a["cfg"]
    n_local, fc = a["loc_node"].shape[0], cfg.shape[-1]
    values = CONFIG_SCALE * cfg * cfg_mask[:, None, None]
    cfg_local = jnp.zeros((n_local,) + cfg.shape[1:], values.dtype).at[a["loc_cfg"]].add(values)
    w = p["pre0_w"]
    # Dense(concat(cfg, broadcast x0)) without materialising the (NL, C, Fc + D) join.
    static = x0 @ w[fc:] + p["pre0_b"]
    local = cfg_local @ w[:fc] + static[a["loc_node"]][:, None, :]
    for i in range(1, mlp_layers):
        static = _dense(p, f"pre{i}", _leaky(static))
        local = _dense(p, f"pre{i}", _leaky(local))
    static, local = _leaky(static), _leaky(local)
    self_w, edge_w = normalized_adjacency(a["src"], a["dst"], edge_mask, x0.shape[0])
    local_self = self_w[a["loc_node"]]
    local_edge = edge_w[a["loc_edge"]] * a["loc_edge_mask"]
    region = a["loc_region"][:, None, None]
    for layer in range(gnn_layers):
        local = jnp.where(region, local, static[a["loc_node"]][:, None, :])
        y = apply_adjacency(jnp.concatenate([cfg_local, local], -1), a["loc_src"],
                            a["loc_dst"], local_self, local_edge)
        local = local + _leaky(_mlp(p, f"gc{layer}_", y, mlp_layers))
        # The static pass: its config columns are zero, so only the rows of x count.
        ys = apply_adjacency(static, a["src"], a["dst"], self_w, edge_w)
        first = ys @ p[f"gc{layer}_0_w"][fc:] + p[f"gc{layer}_0_b"]
        rest = first
        for i in range(1, mlp_layers):
            rest = _dense(p, f"gc{layer}_{i}", _leaky(rest))
        static = static + _leaky(rest)
    return static, local


def layout_forward(p, a, gnn_layers, mlp_layers, segmented):
    """(outputs (G, C), activity): ResModel's output per graph slot and config (higher =
    slower) and the embedding's mean squared norm over real nodes."""
    emb = p["op_embedding"][a["op"]]
    x0 = jnp.concatenate([a["feat"], emb], axis=-1)
    if segmented:
        full = _layout_nodes(p, jax.lax.stop_gradient(x0), a, a["edge_mask"], a["cfg_mask"],
                             gnn_layers, mlp_layers)
        part = _layout_nodes(p, x0, a, a["seg_edge"], a["seg_cfg"], gnn_layers, mlp_layers)
        static = jnp.where(a["seg_node"][:, None], part[0], full[0])
        local = jnp.where(a["seg_node"][a["loc_node"]][:, None, None], part[1], full[1])
    else:
        static, local = _layout_nodes(p, x0, a, a["edge_mask"], a["cfg_mask"], gnn_layers,
                                      mlp_layers)
    g = a["valid"].shape[0] * a["valid"].shape[1] // a["cfg"].shape[1]
    mask = a["node_mask"].astype(static.dtype)
    outside = mask * (1.0 - a["node_region"].astype(static.dtype))
    inside = a["loc_region"].astype(static.dtype)[:, None, None]
    total = (jax.ops.segment_sum(static * outside[:, None], a["node_graph"], g + 1)[:g, None]
             + jax.ops.segment_sum(local * inside, a["loc_graph"], g + 1)[:g])
    count = jax.ops.segment_sum(mask, a["node_graph"], g + 1)[:g]
    mean = total / jnp.maximum(count, 1.0)[:, None, None]
    at_config = local[a["loc_cfg"]] * a["cfg_mask"][:, None, None]
    config_sum = jax.ops.segment_sum(at_config, a["cfg_graph"], g + 1)[:g]
    pooled = jnp.concatenate([mean, _l2_normalize(total), _l2_normalize(config_sum)], -1)
    out = _mlp(p, "post", pooled, 2)[..., 0]
    activity = jnp.sum(emb * emb * mask[:, None]) / jnp.maximum(mask.sum(), 1.0)
    return out, activity


def tile_forward(p, a, gnn_layers, mlp_layers, segmented=False):
    """(outputs (G, C), activity): EarlyJoinSAGE's output per graph slot and config."""
    emb = p["op_embedding"][a["op"]]
    mask = a["node_mask"].astype(emb.dtype)
    src, dst = a["src"], a["dst"]
    edge_w = a["edge_mask"].astype(emb.dtype)
    zero = jnp.zeros(emb.shape[0], emb.dtype)
    e, fc = emb.shape[1], a["cfg"].shape[-1]
    d0 = e + fc + a["feat"].shape[1]
    w = p["sage0_w"]
    # Rows of w: [(A+A^T) x ; x], x = [op_e, config, feats]. A config is the same on every
    # node of its graph, so ((A+A^T) x)'s config part is the node's degree times it.
    node_x = jnp.concatenate([emb, a["feat"]], axis=-1)
    node_ax = apply_adjacency(node_x, src, dst, zero, edge_w)
    rows_y = jnp.concatenate([w[:e], w[e + fc:d0]])
    rows_x = jnp.concatenate([w[d0:d0 + e], w[d0 + e + fc:]])
    degree = jax.ops.segment_sum(edge_w, src, emb.shape[0]) + jax.ops.segment_sum(
        edge_w, dst, emb.shape[0])
    graph_of = jnp.minimum(a["node_graph"], a["cfg"].shape[0] - 1)
    cfg_y = (a["cfg"] @ w[e:e + fc])[graph_of]          # (N, C, H)
    cfg_x = (a["cfg"] @ w[d0 + e:d0 + e + fc])[graph_of]
    base = node_ax @ rows_y + node_x @ rows_x + p["sage0_b"]
    x = _l2_normalize(_leaky(base[:, None, :] + degree[:, None, None] * cfg_y + cfg_x))
    for layer in range(1, gnn_layers):
        y = apply_adjacency(x, src, dst, zero, edge_w)
        x = _l2_normalize(_leaky(_dense(p, f"sage{layer}", jnp.concatenate([y, x], -1))))
    g = a["cfg"].shape[0]
    pooled = jax.ops.segment_sum(x * mask[:, None, None], a["node_graph"], g + 1)[:g]
    out = _mlp(p, "post", pooled, mlp_layers + 1)[..., 0]
    activity = jnp.sum(emb * emb * mask[:, None]) / jnp.maximum(mask.sum(), 1.0)
    return out, activity


def _layers(kind: str, feat_width: int, cfg_width: int, s: dict) -> list[tuple[str, tuple]]:
    """(name, shape) of the embedding and of each Dense kernel, in the order they are
    drawn; a name ending in ``_nb`` has no bias."""
    e, h, depth = s["op_embed"], s["hidden"], s["mlp_layers"]
    shapes: list[tuple[str, tuple]] = [("op_embedding", (NUM_OPS, e))]
    if kind == "layout":
        widths = [cfg_width + feat_width + e] + [h] * depth
        shapes += [(f"pre{i}", (widths[i], h)) for i in range(depth)]
        for layer in range(s["gnn_layers"]):
            widths = [cfg_width + h] + [h] * depth
            shapes += [(f"gc{layer}_{i}", (widths[i], h)) for i in range(depth)]
        shapes += [("post0_nb", (3 * h, h)), ("post1_nb", (h, 1))]
    else:
        width = e + cfg_width + feat_width
        for layer in range(s["gnn_layers"]):
            shapes.append((f"sage{layer}", (2 * width, h)))
            width = h
        dims = [h] * depth + [1]
        shapes += [(f"post{i}", (h, dims[i])) for i in range(len(dims))]
    return shapes


def param_shapes(kind: str, feat_width: int, cfg_width: int, s: dict
                 ) -> dict[str, tuple[int, ...]]:
    """The shape of every weight `init_params` makes, computed without making any: what
    a saved model's weights must be."""
    out = {}
    for name, shape in _layers(kind, feat_width, cfg_width, s):
        if name == "op_embedding":
            out[name] = shape
            continue
        base = name.removesuffix("_nb")
        out[f"{base}_w"] = shape
        if not name.endswith("_nb"):
            out[f"{base}_b"] = (shape[1],)
    return out


def init_params(kind: str, feat_width: int, cfg_width: int, s: dict,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float32 weights: Glorot-uniform kernels, zero biases, embedding uniform +-0.05."""
    params = {}
    for name, shape in _layers(kind, feat_width, cfg_width, s):
        if name == "op_embedding":
            params[name] = rng.uniform(-GLOROT_EMBED, GLOROT_EMBED, shape)
            continue
        limit = np.sqrt(6.0 / (shape[0] + shape[1]))
        base = name.removesuffix("_nb")
        params[f"{base}_w"] = rng.uniform(-limit, limit, shape)
        if not name.endswith("_nb"):
            params[f"{base}_b"] = np.zeros(shape[1])
    return {k: v.astype(np.float32) for k, v in params.items()}

