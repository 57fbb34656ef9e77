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
| configs per graph | 64 | sampled once per graph (across graphs) |
| learning rate | 0.01 | Adam (0.9, 0.999), across graphs |
| in_graph_configs | 0 | configs per in-graph step; 0: every inner-training config |
| in_graph_* | IN_GRAPH | the in-graph rule every system follows (below) |

In-graph (`GruSystem.fit_graph`) there is no published recipe, so it follows the rule
every system with training steps follows (`xlarank.systems.inner`, docs/systems.md): 20%
of the measured configs held out as inner validation (``in_graph_inner_share`` 0.2),
Kendall tau of the readout's order on them every ``in_graph_check_every`` 100 steps,
``in_graph_learning_rates`` 1e-3, 3e-3, 1e-2 (Adam) each trained ``in_graph_rung`` 500
steps, the best going on to ``in_graph_epochs`` 1,500 steps (one in-graph epoch is one
step), early stopping once the inner tau gains less than ``in_graph_min_gain`` 0.005
over ``in_graph_patience`` 3 checkpoints, and the checkpoint of the best inner tau kept
(``in_graph_refit`` False). A step is on every inner-training config
(``in_graph_configs`` 0): the loss is centred over a step's configs, and 64 drawn a step
centre it on noise (unet3d at half measured, seed 0: held-out tau 0.14 with 64 a step,
0.69 with every config, at 1e-2 for 1,500 steps). A gru saved before the rule (its
settings: epochs, configs_per_graph, learning_rate and in_graph_epochs 60, then epochs
over every measured config) still loads and scores as it did; fitted again from its
card, its in_graph_epochs would read as the rule's step budget of 60.
"""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import LayoutGraph, TileGraph, config_blocks
from xlarank.errors import BadInputError, XlarankError
from xlarank.features.embedding import load_family_weights, save_weights
from xlarank.systems import (
    LEARNING_RATE,
    MOST_CONFIGS,
    MOST_EPOCHS,
    RankingSystem,
    checked_scores,
    measured_target,
)
from xlarank.systems.inner import IN_GRAPH, IN_GRAPH_FLAGS, IN_GRAPH_GRIDS, IN_GRAPH_RANGES

WEIGHTS_FILE = "gru_weights.npz"
READOUT_FILE = "gru_readout.npy"


class GruSystem(RankingSystem):
    """The GRU runtime model with its readout as the ranker."""

    name = "gru"
    epoch_setting = "epochs"
    # Checked when made (`xlarank.systems.check_settings`): epochs 1..100,000, configs
    # per graph 2 and up (a ranking loss needs two), a learning rate in (0, 10], in-graph
    # configs a step 0 (all) and up, and the in-graph rule's (`IN_GRAPH_RANGES`).
    SETTING_RANGES = {"epochs": (1, MOST_EPOCHS, True, False),
                      "configs_per_graph": (2, MOST_CONFIGS, True, False),
                      "learning_rate": LEARNING_RATE,
                      "in_graph_configs": (0, MOST_CONFIGS, True, False), **IN_GRAPH_RANGES}
    FLAG_SETTINGS = IN_GRAPH_FLAGS
    GRID_SETTINGS = IN_GRAPH_GRIDS

    @classmethod
    def defaults(cls) -> dict:
        return {"epochs": 20, "configs_per_graph": 64, "learning_rate": 0.01,
                "in_graph_configs": 0, **IN_GRAPH}

    def fit(self, files, collection, valid_files=(), on_epoch=None):
        """Train across graphs (`fit_gru`); ``on_epoch`` gets each epoch's record while
        the system scores with that epoch's weights and readout."""
        from xlarank.features.gru_train import fit_gru, gru_batches

        def keep(params: dict) -> None:
            self.params_ = params
            self._keep()

        s = self.settings()
        rng = np.random.default_rng(self.seed)
        batches = gru_batches(list(files), collection, s["configs_per_graph"], rng)
        valid = (gru_batches(list(valid_files), collection, s["configs_per_graph"],
                             np.random.default_rng([self.seed, 1])) if valid_files else [])
        return self._fit(fit_gru(batches, collection.is_tile, self.seed, s["epochs"],
                                 s["learning_rate"], rng, self._recorder(on_epoch),
                                 valid=valid, on_params=None if on_epoch is None else keep))

    def fit_graph(self, graph, runtime, on_epoch=None):
        """Train on the measured configs ``runtime`` (float64 medians indexed by config
        index) by the in-graph recipe every system with training steps follows
        (`xlarank.systems.inner.fit_by_inner_validation`: inner validation, successive
        halving over the learning-rate grid, early stopping, the best checkpoint kept):
        each step is Adam on ``in_graph_configs`` of the inner-training configs drawn
        uniformly (0: all of them), the inner tau is the readout's order of the inner
        configs.
        ``history_`` holds one record per checkpoint, and ``on_epoch`` gets each while
        the system scores with that checkpoint's weights and readout; ``chosen_`` says
        what was chosen."""
        from xlarank.features.gru import CONTEXT_HOPS
        from xlarank.features.gru_train import gru_graph_batch_options, gru_network
        from xlarank.features.jax_common import batch_of_configs, configs_at, float64_context
        from xlarank.metrics import kendall_tau
        from xlarank.systems.inner import fit_by_inner_validation, network_step, uniform_draw

        s = self.settings()
        target = measured_target(graph, runtime)
        measured = target.to_numpy(np.float64)
        # Every measured config in one batch, read once; a step takes its rows.
        batch = batch_of_configs(graph, target.index.to_numpy(np.int64), measured,
                                 k=CONTEXT_HOPS, **gru_graph_batch_options())

        def tau(positions: np.ndarray) -> float:
            # The readout predicts centred log runtime: higher is slower.
            value = kendall_tau(-network.readout(self.params_, configs_at(batch, positions)),
                                measured[positions])
            return 0.0 if np.isnan(value) else float(value)

        def checkpoint(record: dict) -> None:
            self._keep()
            if on_epoch is not None:
                on_epoch(record)

        with float64_context():
            network = gru_network(isinstance(graph, TileGraph), self.seed)
            self.params_ = network.params
            self.chosen_ = fit_by_inner_validation(
                self, measured, s, uniform_draw(int(s["in_graph_configs"])),
                network_step(self, network, batch), tau, checkpoint)
        self._keep()
        return self

    def _keep(self) -> None:
        """The scoring weights and readout (numpy) of the jax ``params_``."""
        from xlarank.features.jax_common import numpy_weights

        self.weights_ = numpy_weights(self.params_["net"])
        self.readout_ = np.array(self.params_["score"], dtype=np.float64)

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
        from xlarank.features.gru import GRU_HIDDEN, gru_state

        if getattr(self, "weights_", None) is None:
            raise XlarankError("system gru: fit, fit_graph or load first")
        # The readout is as wide as the columns of the kind it was trained on.
        trained = "tile" if len(self.readout_) == GRU_HIDDEN else "layout"
        given = "tile" if isinstance(graph, TileGraph) else "layout"
        if trained != given:
            raise XlarankError(f"system gru: trained on {trained} graphs, given a {given} "
                               "graph")
        state = gru_state(graph, self.weights_)
        if isinstance(graph, TileGraph):
            columns = state.columns(graph.config_feat)
        else:
            with config_blocks(graph) as blocks:
                parts = [state.columns(block) for block, _ in blocks]
            columns = (np.concatenate(parts) if parts
                       else np.zeros((0, len(self.readout_)), np.float32))
        # The readout predicts centred log runtime: higher is slower.
        return checked_scores(self, graph, -(columns.astype(np.float64) @ self.readout_))

    def _save(self, out_dir) -> None:
        save_weights(self.weights_, out_dir / WEIGHTS_FILE)
        np.save(out_dir / READOUT_FILE, self.readout_)

    def _load(self, out_dir) -> None:
        from xlarank.features.gru import GRU_WEIGHT_SHAPES, random_gru_weights

        self.weights_ = load_family_weights(str(out_dir / WEIGHTS_FILE), "gru",
                                            GRU_WEIGHT_SHAPES, random_gru_weights)
        self.readout_ = _read_readout(out_dir / READOUT_FILE)


def _read_readout(path) -> np.ndarray:
    """float64 (GRU_HIDDEN,) for tile or (2 x GRU_HIDDEN,) for layout: a saved readout,
    its .npy header checked before its data is read (a header may claim any size);
    XlarankError naming the file for anything else."""
    from xlarank.data.npzstream import READ_ERRORS
    from xlarank.features.gru import GRU_HIDDEN
    from xlarank.files import open_regular

    widths = (GRU_HIDDEN, 2 * GRU_HIDDEN)
    try:
        with open_regular(path, "gru readout") as handle:
            version = np.lib.format.read_magic(handle)
            header = {(1, 0): np.lib.format.read_array_header_1_0,
                      (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if header is None:
                raise ValueError(f".npy version {version}")
            shape, _, dtype = header(handle)
            if dtype.kind != "f" or shape not in ((widths[0],), (widths[1],)):
                raise XlarankError(f"{path}: a gru readout is {widths[0]} or {widths[1]} "
                                   f"floats, not {dtype} of shape {shape}")
            handle.seek(0)
            readout = np.load(handle, allow_pickle=False).astype(np.float64)
    except BadInputError as exc:
        raise XlarankError(str(exc)) from None
    except READ_ERRORS as exc:
        raise XlarankError(f"{path}: not a gru readout .npy "
                           f"({' '.join(str(exc).split()) or type(exc).__name__})") from None
    if not np.isfinite(readout).all():
        raise XlarankError(f"{path}: the gru readout holds a value that is not finite")
    return readout
