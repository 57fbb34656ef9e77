"""The first-place GNN of Kaggle's "Google - Fast or Slow? Predict AI Model Runtime"
(2023), reimplemented in JAX for CPU (needs ``xlarank[gnn]``; jax is imported on first use).

Followed: github.com/thanhhau097/google_fast_or_slow at ``626c463`` (2023-11-23, "Merge
pull request #19 ... reproduce_layout"), the newest commit of the snapshot read, so HEAD
as far as could be told: no later change is known. ``model.py`` last changed at
``a8130a1`` (2023-11-16), ``engine.py`` and ``loss.py`` at ``20f80cc`` (2023-11-22). Its
README links the write-up (kaggle.com/competitions/predict-ai-model-runtime/discussion/
456343), which could not be read here: every fact below is from the code, the training
scripts (``train_xla_default.sh`` and the other three, ``train_tile.sh``) and the
README. The code is written anew; nothing is copied.

**Layout** (``LayoutModel``, ``train_kfold.py``). The graph is pruned to the configurable
nodes, the edges touching one, and those edges' other ends (``data_compression.
prune_graph``). Every node is computed per config, as (nodes, configs, channels): its
input joins node_feat 0-133 (StandardScaler over the train graphs' pruned nodes), node_feat
134-139 and, at configurable nodes, the config's 18 values (all -2 elsewhere) through one
shared embedding of the values -2..5 (8 rows, width 4), and a 16-wide opcode embedding.
Two LinearActNorm blocks (Dense, instance norm over the nodes per config and channel,
squeeze-excite channel attention with reduction 8, cross-config attention, GELU), then
two SageGraphBlocks (instance norm, SAGEConv with mean aggregation along edge_index rows
[u, v] from u to v, channel attention, cross-config attention, the residual, GELU,
dropout 0.2), the mean over nodes and a Dense to one output (higher = slower).
Cross-config attention (default collections only): a block's Dense gives half the
width, and x * softmax over the configs of the pass (x / t, t learnt from 0.5) is joined
to x, so every config's output depends on the other configs scored with it; passes of
``eval_configs`` consecutive configs at inference, as the original's. Loss: pairwise
hinge, max(0, 1 - (s_i - s_j)) for every pair with runtime_i > runtime_j, mean over all
c^2 pairs. AdamW (torch; weight decay on every tensor), learning rate 1e-3 with 5% linear
warmup then cosine to 0 over the whole run, gradients clipped to a global norm of 1.0;
one graph per step, ``configs`` of its distinct configs drawn uniformly; every
``eval_steps`` steps the mean Kendall tau over the valid graphs, the best weights kept.

**Tile** (``TileModel``, ``train_tile.py``). The same two LinearActNorm and two SAGE blocks
on the kernel's nodes without any config (inputs: scaled node_feat 0-133, the layout and
opcode embeddings; cross-config attention is on, over a config axis of one, where it
joins x with x); mean and max over nodes, joined with an MLP[256, 256] (GELU, dropout 0.2)
of the config's 24 columns (StandardScaler over the train configs) into an MLP[256, 256,
1] (GELU, dropout 0.2). Every config of one kernel per step, the runtime over its
normaliser as label, the same hinge loss and optimiser; best of score_tile_mean (2 - the
mean runtime of the 50 predicted fastest over that of the 50 fastest) every 5,000 steps.

Weights start as torch and PyG start them (LinearActNorm's Dense Xavier-normal with
biases 0.01, embeddings N(0, 1), every other Dense uniform in +-1/sqrt(fan_in)), drawn
with numpy from the seed.

Settings (`CompetitionGnn.defaults`): a setting left at None takes its collection's
value in `OFFICIAL`; the resolved values are kept in ``resolved_`` and saved.

==================  ==============================  =========================================
setting             original (per collection)       note
==================  ==============================  =========================================
epochs              xla 750, nlp 1000, tile None    one epoch = every train graph once
max_steps           tile 100000, layout None        tile counts steps (``--max_steps``)
configs             default 64, random 128, tile 0  configs per graph per step (0: all)
eval_configs        xla:default 128, nlp:default    configs per inference pass (0: all;
                    256, random 512, tile 0         random: data_args' default 512)
cross_attention     default True, random False,     ``--use_cross_attn``
                    tile True
eval_steps          xla 2000, nlp 6000, tile 5000   steps between valid checks
learning_rate       1e-3                            AdamW
weight_decay        1e-5                            decoupled, every tensor
warmup_ratio        0.05                            then cosine to 0 (``lr_scheduler_type``)
max_grad_norm       1.0                             global norm
hidden              256                             ``graph_in`` = ``hidden_dim`` = 256
op_embed            16                              ``op_embedding_dim``
layout_embed        4                               ``layout_embedding_dim``
sage_blocks         2                               ``hidden_channels=256,256``: its length
dropout             0.2                             ``gat_dropout``, in the SAGE blocks
head_dropout        0.2                             ``dropout``: the tile MLPs (the layout
                                                    model takes it and uses none)
==================  ==============================  =========================================

Batch: one graph per step (``per_device_train_batch_size=1``) in a new random order each
epoch. In-graph (`CompetitionGnn.fit_graph`, not in the original: the competition
trained across graphs only) follows the rule every GNN system here follows
(`xlarank.systems.inner`, its ``in_graph_*`` settings): 20% of the measured configs held
out as inner validation, Kendall tau on them every 100 steps, a learning rate stopping
when it gains less than 0.005 over 3 checkpoints, the grid {1e-3 (the original's),
3e-3, 1e-2} by successive halving (500 steps each, the best on to 1,500), the best
checkpoint kept; each step draws ``configs`` of the inner-training configs (tile: all),
and the warmup and cosine span the 1,500 steps.

Deviations, each with its reason:
- float32 throughout: the original trains in fp16 (random collections) or bf16 (default
  ones, tile) mixed precision on a GPU; CPUs here have neither.
- One model: the original's submission averages 5-20 models per collection (seeds and
  folds of ``train_kfold.py``, ``NB_FOLDS = 20`` runs of the same split; folds with a bad
  seed dropped by hand), whose predictions its predict.sh averages; a system here is one
  seed.
- node_feat 134-139 as the files give them (0 where a dimension is unused): the original's
  layout files were extracted again with -1 there (``tomirol/layout-npz-padding``), which
  its README says its weights need; those files are not public TpuGraphs.
- 121 opcode rows, not 120: FORMAT.md's opcode ids reach 120.
- The valid check runs also after the last step, not only every ``eval_steps``: otherwise
  the steps after the last check are never candidates (the HF Trainer's best model is of
  the checks alone). Without valid files the last weights stay, as there.
- The runtime's StandardScaler is left out: the hinge reads only which runtime is larger.
- Inference passes are consecutive runs of ``eval_configs`` configs split evenly but the
  last (the original: ``np.array_split``, sizes differing by one at most); `score_rows`
  passes the rows it is given, so with cross-config attention its scores differ a
  little from `score`'s.
- Across graphs on a CPU the original's 750-1,000 epochs (100,000 steps for tile) do not
  fit: bench/systems.py cuts them (its ``SYNTH_SETTINGS``, stated beside each row).

Modules: ``model`` (the networks, the loss, the initial weights) and ``system``
(`CompetitionGnn`: the pruned graph's inputs, the scalers, the optimiser and schedule,
fitting, scoring, saved files: system.json, gnn.json and weights.npz, no pickle).
"""

from xlarank.systems.competition_gnn.model import (
    init_params,
    layout_forward,
    pairwise_hinge,
    tile_forward,
)
from xlarank.systems.competition_gnn.system import (
    OFFICIAL,
    CompetitionGnn,
    Inputs,
    Scaler,
    graph_inputs,
    lr_factor,
)

__all__ = ["OFFICIAL", "CompetitionGnn", "Inputs", "Scaler", "graph_inputs", "init_params",
           "layout_forward", "lr_factor", "pairwise_hinge", "tile_forward"]
