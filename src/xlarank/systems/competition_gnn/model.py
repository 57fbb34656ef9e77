"""The networks (jax): the layout model (every node computed per config, cross-config
attention) and the tile model (the graph once, the config joined after pooling), their
blocks, the pairwise hinge loss and the initial weights.

Node-major arrays throughout: a layout activation is (N, C, F), nodes by configs by
channels, so the graph's segment sums run over axis 0 and the cross-config softmax over
axis 1. Padding rows (nodes, edges, configurable nodes, configs) are masked wherever they
could reach a real row: the instance norm and the mean pooling count real nodes only,
the softmax over configs sees real configs only, padding edges carry nothing.
"""

from __future__ import annotations

import numpy as np

from xlarank.compat import jax, jnp

NUM_OPS = 121           # FORMAT.md's largest opcode id (120) plus one
LAYOUT_VALUES = 8       # the shared layout embedding's rows: values -2..5 shifted by 2
NODE_COLUMNS = 134      # node_feat columns scaled as numbers; 134-139 are embedded
LAYOUT_COLUMNS = 6      # node_feat 134-139: the node's own output layout
CONFIG_COLUMNS = 18     # a configurable node's config columns
NORM_EPS = 1e-5         # torch InstanceNorm1d's eps
CROSS_TEMPERATURE = 0.5  # CrossConfigAttention's learnt temperature starts here
SQUEEZE = 8             # ChannelAttention's reduction


def _gelu(x):
    return jax.nn.gelu(x, approximate=False)   # torch nn.GELU: the exact erf form


def _dense(p, name, x):
    y = x @ p[f"{name}_w"]
    bias = p.get(f"{name}_b")
    return y if bias is None else y + bias


def _instance_norm(x, node_mask):
    """x (N, C, F) normalised over the real nodes, per config and channel (torch
    InstanceNorm1d on (C, F, N), no affine weights, biased variance)."""
    m = node_mask.astype(x.dtype)[:, None, None]
    count = jnp.maximum(m.sum(), 1.0)
    mean = (x * m).sum(0, keepdims=True) / count
    var = (((x - mean) * m) ** 2).sum(0, keepdims=True) / count
    return (x - mean) / jnp.sqrt(var + NORM_EPS)


def _channel_attention(p, name, x):
    """Squeeze-excite per element: x * sigmoid(W2 relu(W1 x))."""
    gate = jax.nn.relu(_dense(p, f"{name}_se1", x))
    return x * jax.nn.sigmoid(_dense(p, f"{name}_se2", gate))


def _cross_config(p, name, x, config_mask):
    """x * softmax over the real configs (axis 1) of x / t, t learnt per block."""
    logits = jnp.where(config_mask[None, :, None], x / p[f"{name}_t"], -jnp.inf)
    return x * jax.nn.softmax(logits, axis=1)


def _finish(p, name, x, config_mask, cross):
    x = _channel_attention(p, name, x)
    if cross:
        x = jnp.concatenate([x, _cross_config(p, name, x, config_mask)], axis=-1)
    return x


def _dropout(x, rate, key):
    if key is None or not rate:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def _linear_block(p, name, x, node_mask, config_mask, cross):
    """LinearActNorm: Dense, instance norm, channel attention, [cross-config], GELU."""
    x = _dense(p, name, x)
    x = _instance_norm(x, node_mask)
    return _gelu(_finish(p, name, x, config_mask, cross))


def _sage_block(p, name, x, a, cross, rate, key):
    """SageGraphBlock: instance norm, SAGE (mean of the in-neighbours' states, Dense with
    bias, plus a bias-free Dense of the node's own), channel attention, [cross-config],
    the residual, GELU, dropout. Messages run along edge_index rows [u, v] from u (the
    consumer) to v: each node averages its consumers."""
    shortcut = x
    x = _instance_norm(x, a["node_mask"])
    n = x.shape[0]
    w = a["edge_mask"].astype(x.dtype)
    count = jnp.maximum(jax.ops.segment_sum(w, a["dst"], n), 1.0)[:, None, None]
    agg = jax.ops.segment_sum(x[a["src"]] * w[:, None, None], a["dst"], n) / count
    x = _dense(p, f"{name}_l", agg) + x @ p[f"{name}_r_w"]
    x = _finish(p, name, x, a["config_mask"], cross)
    return _dropout(_gelu(x + shortcut), rate, key)


def _keys(key, n):
    return [None] * n if key is None else list(jax.random.split(key, n))


def layout_forward(p, a, blocks: int, cross: bool, rate: float, key=None):
    """float (C,): the layout model's output per config (higher = slower).

    a: feat (N, 134) scaled node columns, layout (N, 6) and op (N,) int ids, node_mask
    (N,), src/dst/edge_mask (M,), cfg_node (K,) the configurable nodes, cfg_mask (K,), cfg
    (K, C, 18) int ids (config value + 2), config_mask (C,). key: dropout's (None: off).
    """
    table = p["layout_embedding"]
    n, e = a["feat"].shape[0], table.shape[1]
    w = p["lin0_w"]
    # Rows of lin0: [node columns; config embeddings (18 x e); layout embeddings (6 x e);
    # opcode embedding]. Nodes that are not configurable hold the config value -2 (row
    # 0) everywhere, so the config part is one constant row except at configurable nodes.
    fc = NODE_COLUMNS
    fe = fc + CONFIG_COLUMNS * e
    fl = fe + LAYOUT_COLUMNS * e
    static = (a["feat"] @ w[:fc]
              + table[a["layout"]].reshape(n, -1) @ w[fe:fl]
              + p["op_embedding"][a["op"]] @ w[fl:] + p["lin0_b"])
    constant = jnp.tile(table[0], CONFIG_COLUMNS) @ w[fc:fe]
    k, c = a["cfg"].shape[:2]
    at_config = table[a["cfg"]].reshape(k, c, -1) @ w[fc:fe]
    delta = (at_config - constant) * a["cfg_mask"][:, None, None]
    x = jnp.broadcast_to((static + constant)[:, None, :], (n, c, static.shape[1]))
    x = x.at[a["cfg_node"]].add(delta)
    x = _instance_norm(x, a["node_mask"])
    x = _gelu(_finish(p, "lin0", x, a["config_mask"], cross))
    x = _linear_block(p, "lin1", x, a["node_mask"], a["config_mask"], cross)
    for i, block_key in enumerate(_keys(key, blocks)):
        x = _sage_block(p, f"sage{i}", x, a, cross, rate, block_key)
    m = a["node_mask"].astype(x.dtype)[:, None, None]
    pooled = (x * m).sum(0) / jnp.maximum(m.sum(), 1.0)
    return _dense(p, "head", pooled)[:, 0]


def tile_forward(p, a, blocks: int, cross: bool, rate: float, head_rate: float, key=None):
    """float (C,): the tile model's output per config (higher = slower).

    The node path sees no config (its config axis has length one, where the cross-config
    softmax is 1 and the block joins x with itself, as the original's does); mean and max
    over the real nodes, joined with an MLP of each config's scaled 24 columns, into the
    head. a: feat, layout, op, node_mask, src/dst/edge_mask as layout; cfg (C, 24) scaled,
    config_mask (C,)."""
    table = p["layout_embedding"]
    n = a["feat"].shape[0]
    x0 = jnp.concatenate([a["feat"], table[a["layout"]].reshape(n, -1),
                          p["op_embedding"][a["op"]]], axis=-1)[:, None, :]
    one = jnp.ones(1, bool)
    x = _linear_block(p, "lin0", x0, a["node_mask"], one, cross)
    x = _linear_block(p, "lin1", x, a["node_mask"], one, cross)
    keys = _keys(key, blocks + 3)
    for i in range(blocks):
        x = _sage_block(p, f"sage{i}", x, {**a, "config_mask": one}, cross, rate, keys[i])
    m = a["node_mask"][:, None, None]
    x_mean = (x * m).sum(0)[0] / jnp.maximum(m.sum(), 1.0)
    x_max = jnp.where(m, x, -jnp.inf).max(0)[0]
    cfg = _dense(p, "cfg1", _gelu(_dropout(_dense(p, "cfg0", a["cfg"]), head_rate,
                                           keys[blocks])))
    c = cfg.shape[0]
    h = jnp.concatenate([cfg, jnp.broadcast_to(x_max, (c, x_max.shape[0])),
                         jnp.broadcast_to(x_mean, (c, x_mean.shape[0]))], axis=-1)
    h = _gelu(_dropout(_dense(p, "head0", h), head_rate, keys[blocks + 1]))
    h = _gelu(_dropout(_dense(p, "head1", h), head_rate, keys[blocks + 2]))
    return _dense(p, "head2", h)[:, 0]


def pairwise_hinge(out, label, valid):
    """Mean over every (i, j) of the list's real configs of max(0, 1 - (s_i - s_j)) where
    label_i > label_j (i slower), 0 elsewhere: the mean is over all n^2 pairs, as the
    original's (pytorchltr's PairwiseHingeLoss, mean reduction). out, label, valid (C,)."""
    slower = (label[:, None] > label[None, :]) & valid[:, None] & valid[None, :]
    loss = jnp.where(slower, jnp.maximum(0.0, 1.0 - (out[:, None] - out[None, :])), 0.0)
    n = jnp.maximum(valid.sum(), 1)
    return loss.sum() / (n * n)


def _weights(kind: str, s: dict) -> list[tuple[str, tuple, str, float]]:
    """(name, shape, how, scale) of every weight in the order it is drawn: how is
    "normal" (N(0, 1) times scale), "uniform" (in +-scale) or "fill" (scale)."""
    h, e, le = int(s["hidden"]), int(s["op_embed"]), int(s["layout_embed"])
    cross = bool(s["cross_attention"])
    out = h // 2 if cross else h
    weights = [("op_embedding", (NUM_OPS, e), "normal", 1.0),
               ("layout_embedding", (LAYOUT_VALUES, le), "normal", 1.0)]

    def xavier(name, fan_in, fan_out):
        weights.append((f"{name}_w", (fan_in, fan_out), "normal",
                        np.sqrt(2.0 / (fan_in + fan_out))))
        weights.append((f"{name}_b", (fan_out,), "fill", 0.01))

    def torch_dense(name, fan_in, fan_out, bias=True):
        bound = 1.0 / np.sqrt(fan_in)
        weights.append((f"{name}_w", (fan_in, fan_out), "uniform", bound))
        if bias:
            weights.append((f"{name}_b", (fan_out,), "uniform", bound))

    def attention(name, width):
        torch_dense(f"{name}_se1", width, width // SQUEEZE)
        torch_dense(f"{name}_se2", width // SQUEEZE, width)
        if cross:
            weights.append((f"{name}_t", (), "fill", CROSS_TEMPERATURE))

    width0 = NODE_COLUMNS + LAYOUT_COLUMNS * le + e
    if kind == "layout":
        width0 += CONFIG_COLUMNS * le
    for i, fan_in in enumerate((width0, h)):
        xavier(f"lin{i}", fan_in, out)
        attention(f"lin{i}", out)
    for i in range(int(s["sage_blocks"])):
        torch_dense(f"sage{i}_l", h, out)
        torch_dense(f"sage{i}_r", h, out, bias=False)
        attention(f"sage{i}", out)
    if kind == "layout":
        torch_dense("head", h, 1)
    else:
        torch_dense("cfg0", 24, h)
        torch_dense("cfg1", h, h)
        torch_dense("head0", 3 * h, h)
        torch_dense("head1", h, h)
        torch_dense("head2", h, 1)
    return weights


def param_shapes(kind: str, s: dict) -> dict[str, tuple[int, ...]]:
    """The shape of every weight `init_params` makes, computed without making any: what
    a saved model's weights must be."""
    return {name: shape for name, shape, _, _ in _weights(kind, s)}


def init_params(kind: str, s: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float32 weights as torch and PyG start them: embeddings N(0, 1); LinearActNorm's
    Dense Xavier-normal with biases 0.01; every other Dense (channel attention, SAGE,
    heads) uniform in +-1/sqrt(fan_in), biases alike; the cross-config temperatures 0.5.
    Drawn with numpy from the seed."""
    params = {}
    for name, shape, how, scale in _weights(kind, s):
        if how == "normal":
            params[name] = rng.standard_normal(shape) * scale
        elif how == "uniform":
            params[name] = rng.uniform(-scale, scale, shape)
        else:
            params[name] = np.full(shape, scale)
    return {k: np.asarray(v, np.float32) for k, v in params.items()}
