"""Training the gnn family's weights with a ranking loss (needs torch: ``xlarank[gnn]``).

The torch model computes exactly what `xlarank.features.embedding` computes with numpy and
Numba (same inputs, layers and joins), plus a linear score over the embedding columns that
is used for training only. The loss is pairwise logistic over the configs sampled from each
training graph: for every pair with different runtimes, softplus(-(s_fast - s_slow)).
Only the network's weights are saved (`save_weights`); featurizing with them needs no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks, load_graph
from xlarank.errors import XlarankError
from xlarank.features.embedding import (
    LAYOUT_POSITIONS,
    N_LAYERS,
    NODE_INPUT_COLUMNS,
    WEIGHT_SHAPES,
    GnnWeights,
    gnn_column_names,
    random_weights,
)
from xlarank.features.prune import prune_graph
from xlarank.features.tables import tile_joined


def _torch():
    try:
        import torch
    except ImportError:
        raise XlarankError("training gnn weights needs torch: pip install 'xlarank[gnn]'") from None
    return torch


@dataclass
class GraphBatch:
    """One training graph as tensors: node inputs, edges, and sampled configs."""

    raw: object        # float32 (n, len(NODE_INPUT_COLUMNS))
    opcode: object     # int64 (n,)
    consumers: object  # int64 (m,)
    producers: object  # int64 (m,)
    config_ids: object | None  # layout: int64 (nc,) configurable nodes of the pruned graph
    choice: object     # layout: int64 (c, nc, 2) dimension ids + 1; tile: float (c, T)
    target: object     # float64 (c,), smaller is faster


def graph_batch(path: Path, collection: Collection, k: int, configs_per_graph: int,
                rng: np.random.Generator, allowed: np.ndarray | None = None
                ) -> GraphBatch | None:
    """Tensors of one graph with at most ``configs_per_graph`` configs sampled from
    ``allowed`` (config indices; all when None), or None when they hold fewer than two
    distinct runtimes."""
    torch = _torch()
    # Layout configs are streamed, keeping only the sampled rows: a graph's whole config
    # tensor can be gigabytes.
    graph = load_graph(path, collection, configs=False)
    pool = np.arange(graph.n_configs) if allowed is None else np.asarray(allowed)
    keep = np.sort(rng.choice(pool, min(len(pool), configs_per_graph), replace=False))
    target = graph.config_runtime[keep].astype(np.float64)
    if isinstance(graph, TileGraph):
        target = target / graph.config_runtime_normalizers[keep]
    if len(np.unique(target)) < 2:
        return None
    if isinstance(graph, LayoutGraph):
        pruned, _ = prune_graph(graph, k)
        choice = torch.as_tensor(sampled_layout_configs(graph, keep)[:, :, LAYOUT_POSITIONS]
                                 .astype(np.int64) + 1)
        config_ids = torch.as_tensor(pruned.node_config_ids.copy())
        source = pruned
    else:
        choice = torch.as_tensor(tile_joined(graph, graph.config_feat[keep]) / 10.0,
                                 dtype=torch.float64)
        config_ids, source = None, graph
    return GraphBatch(
        raw=torch.as_tensor(source.node_feat[:, NODE_INPUT_COLUMNS], dtype=torch.float64),
        opcode=torch.as_tensor(source.node_opcode.astype(np.int64)),
        consumers=torch.as_tensor(source.edge_index[:, 0].copy()),
        producers=torch.as_tensor(source.edge_index[:, 1].copy()),
        config_ids=config_ids, choice=choice, target=torch.as_tensor(target))


def sampled_layout_configs(graph: LayoutGraph, keep: np.ndarray) -> np.ndarray:
    """int8 (len(keep), nc, 18): the configs at the sorted indices ``keep``, read block by
    block."""
    parts, start = [], 0
    with config_blocks(graph) as blocks:
        for block, _ in blocks:
            inside = keep[(keep >= start) & (keep < start + len(block))]
            if len(inside):
                parts.append(block[inside - start])
            start += len(block)
    return np.concatenate(parts)


class GnnModel:
    """The network's parameters as float64 torch tensors keyed like WEIGHT_SHAPES, and a
    training-only linear score."""

    def __init__(self, start: GnnWeights, n_columns: int, seed: int):
        torch = _torch()
        self.torch = torch
        self.params = {k: torch.tensor(start[k], dtype=torch.float64, requires_grad=True)
                       for k in WEIGHT_SHAPES}
        generator = torch.Generator().manual_seed(seed)
        self.score = torch.randn(n_columns, generator=generator, dtype=torch.float64) * 0.1
        self.score.requires_grad_(True)

    def parameters(self) -> list:
        return [*self.params.values(), self.score]

    def node_embeddings(self, batch: GraphBatch):
        torch, p = self.torch, self.params
        x = torch.sign(batch.raw) * torch.log1p(batch.raw.abs()) / 10.0
        h = torch.tanh(p["opcode_embedding"][batch.opcode] + x @ p["feat_proj"])
        n = h.shape[0]
        ones = torch.ones(len(batch.consumers), dtype=torch.float64)
        in_count = torch.zeros(n, dtype=torch.float64).index_add(0, batch.consumers, ones)
        out_count = torch.zeros(n, dtype=torch.float64).index_add(0, batch.producers, ones)
        for layer in range(N_LAYERS):
            inbound = torch.zeros_like(h).index_add(0, batch.consumers, h[batch.producers])
            outbound = torch.zeros_like(h).index_add(0, batch.producers, h[batch.consumers])
            inbound = inbound / in_count.clamp(min=1.0)[:, None]
            outbound = outbound / out_count.clamp(min=1.0)[:, None]
            h = torch.tanh(h @ p[f"self_{layer}"] + inbound @ p[f"in_{layer}"]
                           + outbound @ p[f"out_{layer}"] + p[f"bias_{layer}"])
        return h

    def columns(self, batch: GraphBatch):
        """(c, n_columns): the gnn family's columns of the batch's configs."""
        torch, p = self.torch, self.params
        h = self.node_embeddings(batch)
        if batch.config_ids is None:
            return torch.tanh(batch.choice @ p["tile_config"] + h.mean(0) @ p["tile_graph"])
        heads = torch.tanh(h[batch.config_ids] @ p["head"])          # (nc, d)
        table = p["layout_table"]
        mix = sum(table[q][batch.choice[:, :, q]] for q in range(batch.choice.shape[2]))
        values = heads[None, :, :] * mix                              # (c, nc, d)
        return torch.cat([values.mean(1), values.max(1).values], dim=1)

    def weights(self) -> GnnWeights:
        return GnnWeights({k: v.detach().numpy().copy() for k, v in self.params.items()})


def pairwise_loss(score, target):
    """Mean softplus(-(s_i - s_j)) over pairs where config i is faster than config j."""
    torch = _torch()
    faster = target[:, None] < target[None, :]
    if not bool(faster.any()):
        return score.sum() * 0.0
    diff = score[:, None] - score[None, :]
    return torch.nn.functional.softplus(-diff[faster]).mean()


def train_gnn_weights(files: list[Path], collection: Collection, k: int = 2, seed: int = 0,
                      epochs: int = 5, configs_per_graph: int = 64, learning_rate: float = 0.01,
                      on_epoch: Callable[[int, float], None] | None = None,
                      allowed: dict[Path, np.ndarray] | None = None
                      ) -> tuple[GnnWeights, list[float]]:
    """Weights trained from random:SEED on the files' graphs (each file's configs sampled
    once, from ``allowed[file]`` when given); returns them and the mean training loss of
    each epoch."""
    torch = _torch()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    batches = [b for b in (graph_batch(f, collection, k, configs_per_graph, rng,
                                       None if allowed is None else allowed.get(f))
                           for f in files) if b is not None]
    if not batches:
        raise XlarankError("no training graph has two configs with different runtimes")
    n_columns = len(gnn_column_names(collection.is_tile))
    model = GnnModel(random_weights(seed), n_columns, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    history = []
    for epoch in range(epochs):
        losses = []
        for index in rng.permutation(len(batches)):
            batch = batches[index]
            optimizer.zero_grad()
            score = model.columns(batch) @ model.score
            loss = pairwise_loss(score, batch.target)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        history.append(float(np.mean(losses)))
        if on_epoch is not None:
            on_epoch(epoch, history[-1])
    return model.weights(), history
