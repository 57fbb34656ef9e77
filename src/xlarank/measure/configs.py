"""Candidate layout configs for a program's configurable nodes, shaped as real ones are.

Real layout configs (FORMAT.md, "Layout configs as they really are") fix the two
minor-most dimensions of a tensor, or none of them, and each node takes one small, often
binary, choice across a file's configs. So each configurable tensor gets two states,
drawn once per program: its *base* (free, the compiler's choice, for a quarter of the
tensors; else the row-major pair, the last two dimensions) and one *alternative* pair of
dimensions (drawn uniformly among the other ordered pairs). Each config then flips every
tensor to its alternative with a probability drawn for that config, uniform in 0.1-0.9,
so configs lie both near and far from the base. The default run, config 0, fixes nothing:
the compiler's own layouts.

A config's tensor layout is stored as the record stores it: the fixed minor-most
dimensions (minor-to-major), or none. It is realized as a full minor-to-major order by
putting the dimensions it does not fix after the fixed ones, in row-major order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xlarank.measure.trace import ConfigurableNode, NodeLayouts

# Share of configurable tensors whose base is free (no constraint) rather than row-major.
FREE_BASE = 0.25
FLIP_RANGE = (0.1, 0.9)
# Draws to find a config not yet listed before giving up on distinct ones.
DRAW_TRIES = 64

# A config: per node, per tensor, the fixed minor-most dims (minor-to-major), () if free.
Config = tuple[tuple[tuple[int, ...], ...], ...]


def full_layout(fixed: Sequence[int], rank: int) -> tuple[int, ...]:
    """A full minor-to-major order of ``rank`` dims whose first dims are ``fixed``; the rest
    follow in row-major order (the highest dimension most minor)."""
    rest = [d for d in range(rank - 1, -1, -1) if d not in fixed]
    return tuple(int(d) for d in fixed) + tuple(rest)


def node_layouts(config: Config, nodes: Sequence[ConfigurableNode]) -> list[NodeLayouts]:
    """The full layouts a config puts on each node's tensors (None where it fixes none)."""
    out = []
    for node, tensors in zip(nodes, config):
        out.append(tuple(full_layout(fixed, len(shape)) if fixed and shape is not None
                         else None for shape, fixed in zip(node.shapes, tensors)))
    return out


def free_config(nodes: Sequence[ConfigurableNode]) -> Config:
    """The default run's config: every tensor left to the compiler."""
    return tuple(tuple(() for _ in node.shapes) for node in nodes)


def draw_configs(nodes: Sequence[ConfigurableNode], count: int, seed: int) -> list[Config]:
    """``count`` configs: config 0 the free default, then distinct draws (fewer when the
    nodes allow fewer distinct configs)."""
    rng = np.random.default_rng(seed)
    slots = [(j, t, len(shape)) for j, node in enumerate(nodes)
             for t, shape in enumerate(node.shapes) if shape is not None]
    states = []
    for _, _, rank in slots:
        base = () if rng.random() < FREE_BASE else (rank - 1, rank - 2)
        pairs = [(a, b) for a in range(rank) for b in range(rank)
                 if a != b and (a, b) != (rank - 1, rank - 2)]
        states.append((base, tuple(int(d) for d in pairs[rng.integers(len(pairs))])))
    configs = [free_config(nodes)]
    seen = {configs[0]}
    while len(configs) < count:
        for _ in range(DRAW_TRIES):
            share = rng.uniform(*FLIP_RANGE)
            flips = rng.random(len(slots)) < share
            layout = [[() for _ in node.shapes] for node in nodes]
            for (j, t, _), (base, alternative), flip in zip(slots, states, flips):
                layout[j][t] = alternative if flip else base
            config = tuple(tuple(tensors) for tensors in layout)
            if config not in seen:
                break
        else:
            return configs
        seen.add(config)
        configs.append(config)
    return configs
