"""The TpuGraphs paper's GNN baselines, reimplemented in JAX for CPU (needs ``xlarank[gnn]``).

Two models, one per kind of collection, as the official trainers build them
(google-research-datasets/tpu_graphs, TF-GNN; the architecture, loss and defaults were
read from ``baselines/layout`` and ``baselines/tiles``, the code is written anew here):

**Layout** (``ResModel``). Node inputs are the min-max normalised node_feat columns joined
with a 32-wide opcode embedding; each configurable node's normalised 18 config columns,
times 100, sit on its op node (zeros elsewhere). prenet = MLP[32, 32] on concat(config,
node) then leaky_relu; two residual graph convolutions y = leaky_relu(MLP[32, 32](A_hat @
concat(config, x))), x += y, with A_hat = D^-1/2 (A + A^T + I) D^-1/2; pooled per config
as concat(mean over nodes, l2_normalize(sum over nodes), l2_normalize(sum over the
configurable nodes)) into a bias-free MLP[32, 1]. Loss: ListMLE (temperature 1). Graphs of
more than ``keep_nodes`` nodes train on one random segment of that many consecutive node
ids: a forward pass on the whole graph with its inputs' gradients stopped, a second pass
that keeps only the segment's edges and config edges, and each node's output from the
second pass inside the segment and from the first outside (as the official
``ResModel.forward``: the first pass stops the gradient of its inputs, the opcode
embedding, not of the MLP weights).

**Tile** (``EarlyJoinSAGE``, the tile trainer's default model). Every node gets
concat(opcode embedding (64), the config's normalised 24 columns, normalised node_feat);
three SAGE layers x = l2_normalize(leaky_relu(Dense64(concat((A + A^T) @ x, x)))); sum over
nodes; MLP[64, 64, 1] with biases. Loss: ListMLE at temperature 10 on the runtime divided
by its normaliser, plus 0.02 x MSE against that label, weighted 1/1.02 and 0.02/1.02.

Both: Dense kernels carry an L2 regulariser of 1e-4 (sum of squares), the embedding an L2
activity regulariser of 1e-4 (Keras divides it by the batch's node count); Adam as Keras
writes it (epsilon 1e-7) with each gradient tensor clipped to its own L2 norm
(``clip_norm``, Keras' clipnorm); leaky_relu's slope is tf.nn.leaky_relu's 0.2; Dense
kernels start Glorot-uniform, biases at zero, the embedding uniform in +-0.05 (Keras'
initialisers), all drawn with numpy from the seed. A model's outputs grow with runtime
(the official convention); `TpuGraphsGnn.score` returns them negated, higher is faster.

Settings (``TpuGraphsGnn.defaults``): a setting left at None takes its collection's
official value below; the resolved values are kept in ``resolved_`` and saved.

==================  ========  ========  ==================================================
setting             layout    tile      note
==================  ========  ========  ==================================================
epochs              500       100       one epoch = every train graph once
early_stop          40        20        epochs without better valid OPA (0: off); best restored
learning_rate       1e-3      1e-3      Adam
clip_norm           1e-2      1e-3      per-tensor clipnorm
configs             16        10        configs per graph per step (fewer: graph skipped)
batch               8         10        graphs per step
keep_nodes          5000      (none)    segment size of layout graph-segment training
op_embed            32        64        opcode embedding width (121 opcodes, fixed)
hidden              32        64        hidden width
gnn_layers          2         3         graph convolutions (layout) / SAGE layers (tile)
mlp_layers          2         2         prenet and per-convolution MLP depth (layout),
                                        postnet hidden layers (tile)
temperature         1         10        ListMLE temperature
mse_weight          0         0.02      weight of the MSE term beside ListMLE's 1
validate_batches    10        10        valid batches per epoch (layout: official 10;
                                        tile: the same, see deviations)
infer_chunk         500       500       configs per inference pass, at most
in_graph_epochs     20        20        xlarank's choice: no official in-graph mode
==================  ========  ========  ==================================================

Deviations, each with its reason:
- ``infer_chunk`` is an upper bound: a chunk also stays within ``infer_budget_mb`` of
  float32 activations (default 256), because CPU memory here is shared and small. Each
  config is scored alone, so the chunk size does not change any score.
- Valid loss and OPA per epoch come from ``validate_batches`` batches of ``batch``
  graphs cycled over the valid files, each with a fresh sample of ``configs`` configs
  drawn as in training (layout's official ``validate_batches`` is 10; the tile trainer's
  validation loop is not reproduced, the same count is used). Without valid files no early
  stop happens and the last epoch's weights stay.
- The recorded ``train_loss``/``valid_loss`` are the ranking loss (ListMLE, plus the MSE
  term for tile) without the L2 terms, so train and valid compare; the L2 terms are
  trained on, as in Keras.
- Node arrays of the train graphs (normalised node features, opcodes, edges) are held in
  memory for the whole fit; configs are streamed from each file at each step, only the
  sampled rows kept (the official loader holds every config in memory).
- Layout nodes farther than ``gnn_layers`` hops from every configurable node get the
  same output under every config; they are computed once per step, and only the
  configs' region is computed per config (`_layout_nodes`). The same function, a few
  times less work (tests compare it with a plain per-config forward pass).
- Graphs are joined into one disjoint graph per step, padded (masked) to the sizes of the
  largest possible batch of the fit, so the step compiles once per fit (twice with
  segments); padding changes no output. The tile MSE term is the official one; on
  synthetic trees whose normalised runtimes reach 1e4 it dominates the train loss.
- In-graph training (`TpuGraphsGnn.fit_graph`, not in the paper): normalisation statistics
  come from the graph's nodes and its measured configs; each of ``in_graph_epochs``
  epochs is one step of ``batch`` lists of ``configs`` measured configs (layout: drawn
  with the fast-skewed sampling; tile: uniformly), or every measured config per list when
  fewer are measured; no early stop (no measured config is held out). 20 epochs: on the
  real unet3d (half of its distinct configs measured, seeds 0-2) a fit takes 9 s on two
  idle CPU cores (17 s with the first compile) and ranks the other half at Kendall tau
  0.13, 0.08, 0.12; 40 epochs give the same (0.13, 0.08, 0.13) in twice the time.

Modules: ``stats`` (normalisation statistics, a graph's node arrays), ``batches`` (config
sampling, the padded disjoint batch, the configs' regions), ``model`` (the two networks and
their initial weights), ``train`` (the loss and the Adam step) and ``system``
(`TpuGraphsGnn`); the names below are re-exported here.
"""

from xlarank.systems.tpugraphs_gnn.batches import (
    Item,
    label_order,
    region_arrays,
    region_masks,
    skewed_sample,
    uniform_sample,
    union_batch,
)
from xlarank.systems.tpugraphs_gnn.model import (
    apply_adjacency,
    init_params,
    layout_forward,
    normalized_adjacency,
    tile_forward,
)
from xlarank.systems.tpugraphs_gnn.stats import (
    GraphArrays,
    MinMax,
    Stats,
    graph_arrays,
    layout_stats,
)
from xlarank.systems.tpugraphs_gnn.system import OFFICIAL, TpuGraphsGnn
from xlarank.systems.tpugraphs_gnn.train import clip_by_norm, listmle, ranking_loss

__all__ = [
    "OFFICIAL",
    "GraphArrays",
    "Item",
    "MinMax",
    "Stats",
    "TpuGraphsGnn",
    "apply_adjacency",
    "clip_by_norm",
    "graph_arrays",
    "init_params",
    "label_order",
    "layout_forward",
    "layout_stats",
    "listmle",
    "normalized_adjacency",
    "ranking_loss",
    "region_arrays",
    "region_masks",
    "skewed_sample",
    "tile_forward",
    "uniform_sample",
    "union_batch",
]
