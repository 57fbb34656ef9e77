"""The GRU runtime model, complete: the network of xlarank's ``gru`` family (opcode-weighted
node scaling, edge dependencies, configurable-node flags, a convolution over each config,
a GRU over the configurable nodes in program order) trained end to end with its own
readout by regressing runtime, and used as the ranker.

Training is `xlarank.features.gru_train.fit_gru`: the mean squared error of log runtime
(tile: of runtime / normalizer), prediction and target centred per graph over its sampled
configs, since a ranker needs only the order within a graph and runtimes of different
graphs differ by orders of magnitude. Inference is the family's Numba network
(`xlarank.features.gru.gru_state`, equal to the jax one) times the trained readout, so
scoring needs no jax.

Settings beside the published system's: the whitepaper's model regresses (log) runtime
with a recurrent network over the program; its sizes are far larger (hundreds of hidden
units, trained on GPUs for days). Here the sizes are the family's (GRU_HIDDEN, N_STEPS in
`xlarank.features.gru`), chosen for a laptop CPU; that is the one deliberate deviation.

| setting | here | note |
|---|---|---|
| epochs (across graphs) | 20 | loss per epoch in history_ |
| configs per graph | 64 | sampled once per graph |
| learning rate | 0.01 | Adam (0.9, 0.999) |
| in-graph epochs | 60 | every measured config each epoch, chunks of 64 |
"""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks
from xlarank.errors import XlarankError
from xlarank.features.embedding import load_family_weights, save_weights
from xlarank.systems import RankingSystem, measured_target

WEIGHTS_FILE = "gru_weights.npz"
READOUT_FILE = "gru_readout.npy"


class GruSystem(RankingSystem):
    """The GRU runtime model with its readout as the ranker."""

    name = "gru"

    @classmethod
    def defaults(cls) -> dict:
        return {"epochs": 20, "configs_per_graph": 64, "learning_rate": 0.01,
                "in_graph_epochs": 60}

    def fit(self, files, collection, valid_files=(), on_epoch=None):
        from xlarank.features.gru_train import fit_gru, gru_batches

        s = self.settings()
        rng = np.random.default_rng(self.seed)
        batches = gru_batches(list(files), collection, s["configs_per_graph"], rng)
        valid = (gru_batches(list(valid_files), collection, s["configs_per_graph"],
                             np.random.default_rng([self.seed, 1])) if valid_files else [])
        return self._fit(fit_gru(batches, collection.is_tile, self.seed, s["epochs"],
                                 s["learning_rate"], rng, self._recorder(on_epoch),
                                 valid=valid))

    def fit_graph(self, graph, runtime, on_epoch=None):
        from xlarank.features.gru import CONTEXT_HOPS
        from xlarank.features.gru_train import fit_gru, gru_graph_batch_options
        from xlarank.features.jax_common import measured_batches

        s = self.settings()
        rng = np.random.default_rng(self.seed)
        batches = measured_batches(graph, measured_target(graph, runtime),
                                   s["configs_per_graph"], rng,
                                   k=CONTEXT_HOPS, **gru_graph_batch_options())
        return self._fit(fit_gru(batches, isinstance(graph, TileGraph), self.seed,
                                 s["in_graph_epochs"], s["learning_rate"], rng,
                                 self._recorder(on_epoch)))

    def _recorder(self, on_epoch):
        self.history_ = []

        def record(epoch: int, loss: float) -> None:
            self.history_.append({"epoch": epoch, "train_loss": loss, "valid_loss": None})
            if on_epoch is not None:
                on_epoch(self.history_[-1])
        return record

    def _fit(self, fitted):
        self.weights_, self.readout_ = fitted.weights, fitted.readout
        for record, valid in zip(self.history_, fitted.valid_history):
            record["valid_loss"] = valid
        return self

    def score(self, graph: TileGraph | LayoutGraph) -> np.ndarray:
        from xlarank.features.gru import gru_state

        if getattr(self, "weights_", None) is None:
            raise XlarankError("system gru: fit, fit_graph or load first")
        state = gru_state(graph, self.weights_)
        if isinstance(graph, TileGraph):
            columns = state.columns(graph.config_feat)
        else:
            with config_blocks(graph) as blocks:
                parts = [state.columns(block) for block, _ in blocks]
            columns = (np.concatenate(parts) if parts
                       else np.zeros((0, len(self.readout_)), np.float32))
        # The readout predicts centred log runtime: higher is slower.
        return -(columns.astype(np.float64) @ self.readout_)

    def _save(self, out_dir) -> None:
        save_weights(self.weights_, out_dir / WEIGHTS_FILE)
        np.save(out_dir / READOUT_FILE, self.readout_)

    def _load(self, out_dir) -> None:
        from xlarank.features.gru import GRU_WEIGHT_SHAPES, random_gru_weights

        self.weights_ = load_family_weights(str(out_dir / WEIGHTS_FILE), "gru",
                                            GRU_WEIGHT_SHAPES, random_gru_weights)
        self.readout_ = np.load(out_dir / READOUT_FILE, allow_pickle=False).astype(np.float64)
