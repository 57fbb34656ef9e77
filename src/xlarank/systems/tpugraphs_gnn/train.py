"""The loss (ListMLE, plus MSE for tile, plus the L2 terms) and the training step: Adam as
Keras writes it, each gradient clipped to its own norm; both jitted once per process."""

from __future__ import annotations

import functools

from xlarank.compat import jax, jnp, require_jax
from xlarank.systems.tpugraphs_gnn.model import layout_forward, tile_forward

L2_REG = 1e-4           # kernel and activity regularisers (models.py)
ADAM = (0.9, 0.999, 1e-7)  # Keras Adam's beta_1, beta_2, epsilon


def listmle(scores, order, valid, temperature=1.0):
    """Mean over lists of sum_i [logsumexp(s_order[i:]) - s_order[i]] on scores (L, C) /
    temperature, order (L, C) from `label_order`; invalid positions take no part."""
    s = jnp.take_along_axis(scores / temperature, order, axis=1)
    v = jnp.take_along_axis(valid, order, axis=1)
    c = s.shape[1]
    later = jnp.arange(c)[None, :] >= jnp.arange(c)[:, None]        # (i, j): j >= i
    masked = jnp.where(later[None] & v[:, None, :], s[:, None, :], -1e9)
    per = jnp.where(v, jax.nn.logsumexp(masked, axis=-1) - s, 0.0).sum(1)
    has = v.any(1)
    return jnp.sum(jnp.where(has, per, 0.0)) / jnp.maximum(has.sum(), 1)


def ranking_loss(out, a, temperature, mse_weight):
    """The official loss without L2 terms: (ListMLE + w MSE) / (1 + w)."""
    scores = out.reshape(a["order"].shape)
    loss = listmle(scores, a["order"], a["valid"], temperature)
    if mse_weight:
        err = jnp.where(a["valid"], (scores - a["label"]) ** 2, 0.0)
        mse = err.sum() / jnp.maximum(a["valid"].sum(), 1)
        loss = (loss + mse_weight * mse) / (1.0 + mse_weight)
    return loss


def _objective(p, a, arch):
    kind, gnn_layers, mlp_layers, temperature, mse_weight, segmented = arch
    forward = layout_forward if kind == "layout" else tile_forward
    out, activity = forward(p, a, gnn_layers, mlp_layers, segmented)
    loss = ranking_loss(out, a, temperature, mse_weight)
    l2 = sum((w * w).sum() for k, w in p.items() if k.endswith("_w"))
    return loss + L2_REG * (l2 + activity), loss


def clip_by_norm(g, clip):
    """Keras clipnorm for one tensor: g * clip / max(||g||, clip)."""
    return g * clip / jnp.maximum(jnp.sqrt(jnp.sum(g * g)), clip)


def _train_step(p, moments, a, step, lr, clip, arch):
    (_, loss), grads = jax.value_and_grad(_objective, has_aux=True)(p, a, arch)
    grads = {k: clip_by_norm(g, clip) for k, g in grads.items()}
    beta1, beta2, eps = ADAM
    first = {k: m + (grads[k] - m) * (1 - beta1) for k, m in moments[0].items()}
    second = {k: v + (grads[k] ** 2 - v) * (1 - beta2) for k, v in moments[1].items()}
    rate = lr * jnp.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    p = {k: w - rate * first[k] / (jnp.sqrt(second[k]) + eps) for k, w in p.items()}
    return p, (first, second), loss


def _eval(p, a, arch):
    kind, gnn_layers, mlp_layers, temperature, mse_weight, _ = arch
    forward = layout_forward if kind == "layout" else tile_forward
    out, _ = forward(p, a, gnn_layers, mlp_layers, False)
    return out, ranking_loss(out, a, temperature, mse_weight)


@functools.cache
def _jitted():
    require_jax()
    return (jax.jit(_train_step, static_argnames="arch"),
            jax.jit(_eval, static_argnames="arch"))

