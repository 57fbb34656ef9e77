"""The published systems beside xlarank, behind one small interface.

Each system is one module here: xlarank itself (the booster pipeline, `xlarank.systems.
booster`), the TpuGraphs paper's GNN baselines (`tpugraphs_gnn`), the GRU runtime model
(`gru`) and the GNN-plus-trees hybrid (`hybrid`). A system is trained either across graphs
(`RankingSystem.fit` on the labelled npz files of one collection's train split) or inside
one graph (`RankingSystem.fit_graph` on the measured configs of that graph), and then
scores every config of a graph (`RankingSystem.score`, higher is faster). The booster
pipeline (`xlarank.rank`, `xlarank.features`) does not know about this package; the CLI
(``rank-graph --system``) and bench/systems.py pick a system by name from `SYSTEMS`.

jax is imported inside the GNN modules only, on first use (the ``gnn`` extra).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph
from xlarank.errors import XlarankError, XlarankWarning, checked_type
from xlarank.seeds import check_seed

# One epoch's record: {"epoch": int, "train_loss": float, "valid_loss": float or None}.
EpochCallback = Callable[[dict], None]

# name -> "module:class", imported on first use so that no system's libraries load with
# the package.
SYSTEMS = {
    "xlarank": "xlarank.systems.booster:BoosterSystem",
    "tpugraphs-gnn": "xlarank.systems.tpugraphs_gnn:TpuGraphsGnn",
    "gru": "xlarank.systems.gru:GruSystem",
    "hybrid": "xlarank.systems.hybrid:HybridSystem",
    "competition-gnn": "xlarank.systems.competition_gnn:CompetitionGnn",
}
SYSTEM_FILE = "system.json"
# Bounds the systems' settings share (`RankingSystem.SETTING_RANGES`): far past every
# official setting (the competition's 1,000 epochs and 100,000 tile steps, the in-graph
# rule's 1,500 steps; a graph has up to ~100,000 configs), yet loops that end.
MOST_EPOCHS = 100_000
MOST_STEPS = 10_000_000
MOST_CONFIGS = 10_000_000
# A learning rate: a number in (0, 10].
LEARNING_RATE = (0.0, 10.0, False, True)
# A learning-rate grid holds 1 to this many rates.
MOST_RATES = 16
# Bump when a saved system's layout or settings change; a newer one is refused.
SYSTEM_FORMAT = 1


class RankingSystem(ABC):
    """A ranker of one collection's configs.

    Constructors only store settings (``seed``, ``threads``: None is the process's chosen
    count, `xlarank.threads`); `fit` and `fit_graph` return self; fitted attributes end in
    ``_``. ``history_`` is the list of epoch records of the last fit (empty for systems
    without epochs); ``settings()`` is what the system was built with, stated beside the
    authors' defaults where they differ (``defaults()``).
    """

    name: str = ""
    # Numeric settings: name -> (low, high, whole number?, low excluded?), checked when the
    # system is made, and so when one is loaded (`check_settings`); a setting whose
    # default is None (its collection's official value) may be left None. FLAG_SETTINGS
    # are True or False; GRID_SETTINGS are learning-rate grids (1 to `MOST_RATES` rates,
    # each in `LEARNING_RATE`).
    SETTING_RANGES: ClassVar[dict] = {}
    FLAG_SETTINGS: ClassVar[tuple] = ()
    GRID_SETTINGS: ClassVar[tuple] = ()
    # The setting that counts a cross-graph fit's epochs (None: a system without training
    # steps, fitted at once); the cross-graph rule (`xlarank.systems.cross`) sets it.
    epoch_setting: str | None = None

    def __init__(self, seed: int = 0, threads: int | None = None, **settings):
        self.seed = seed
        self.threads = threads
        unknown = set(settings) - set(self.defaults())
        if unknown:
            raise XlarankError(f"system {self.name}: unknown settings {sorted(unknown)}; "
                               f"known: {sorted(self.defaults())}")
        self.overrides = check_settings(self, dict(settings))
        self.history_: list[dict] = []

    @classmethod
    def defaults(cls) -> dict:
        """The settings this system runs with unless told otherwise."""
        return {}

    def settings(self) -> dict:
        return {**self.defaults(), **self.overrides}

    @abstractmethod
    def fit(self, files: Sequence[Path], collection: Collection,
            valid_files: Sequence[Path] = (), on_epoch: EpochCallback | None = None
            ) -> RankingSystem:
        """Train across graphs on labelled npz files of ``collection`` (valid_files, when
        given, for early stopping and the valid loss curve)."""

    @abstractmethod
    def fit_graph(self, graph: TileGraph | LayoutGraph, runtime: pd.Series,
                  on_epoch: EpochCallback | None = None) -> RankingSystem:
        """Train inside one graph: ``runtime`` is float64 indexed by config index (the
        measured configs, one median each, at least two distinct); the file's own
        runtimes are never read."""

    @abstractmethod
    def score(self, graph: TileGraph | LayoutGraph) -> np.ndarray:
        """float64 (n_configs,): every config's score, higher is predicted faster."""

    def score_rows(self, graph: TileGraph | LayoutGraph, rows: np.ndarray) -> np.ndarray:
        """float64 (len(rows),): the scores of the configs ``rows`` (config indices) as
        `score` gives them; systems that can score a few configs alone override it."""
        return self.score(graph)[np.asarray(rows, np.int64)]

    def rank_measured(self, graph: TileGraph | LayoutGraph, runtime: pd.Series,
                      groups: np.ndarray) -> pd.DataFrame:
        """The ranked table (`xlarank.rank.measured.ranked_table`) of a system trained inside
        the graph on ``runtime`` (measured medians indexed by config index; groups:
        `config_groups`): `fit_graph`, then `score` on the measured configs' scale. A
        score that is one value over every unmeasured config says nothing (its order would
        be index order): warned about, and xlarank's graph-local booster ranks instead."""
        from xlarank.rank.ingraph import rank_runtimes
        from xlarank.rank.measured import constant_unmeasured, interleaved_scores, ranked_table

        score = self.fit_graph(graph, runtime).score(graph)
        if constant_unmeasured(score, runtime, groups):
            warnings.warn(XlarankWarning(
                f"{graph.path}: system {self.name} gave every unmeasured config one score "
                f"from {len(runtime)} measured configs; ranked by xlarank's graph-local "
                "booster instead"), stacklevel=3)
            return rank_runtimes(graph, runtime, groups, seed=self.seed,
                                 threads=self.threads)
        return ranked_table(interleaved_scores(score, runtime), runtime, tiebreak=score,
                            groups=groups)

    def save(self, out_dir: Path) -> None:
        """Write the fitted system into ``out_dir`` (made by the caller): system.json (its
        name, seed and settings, history) plus the system's own files (`_save`)."""
        out_dir = Path(out_dir)
        from xlarank import __version__

        if not self.fitted():
            raise XlarankError(f"system {self.name} is not fitted: call fit or fit_graph "
                               "before save; nothing was written")
        card = {"format": SYSTEM_FORMAT, "system": self.name, "seed": self.seed,
                "settings": self.settings(), "history": self.history_,
                "versions": {"xlarank": __version__}}
        before = set(os.listdir(out_dir)) if out_dir.is_dir() else set()
        try:
            self._save(out_dir)
            # Last, so a folder with a system.json holds a whole system.
            (out_dir / SYSTEM_FILE).write_text(json.dumps(card, indent=2, default=float))
        except BaseException:
            # What this save wrote goes: no half-written system is left to load.
            for name in set(os.listdir(out_dir)) - before if out_dir.is_dir() else ():
                written = out_dir / name
                with contextlib.suppress(OSError):
                    if written.is_dir() and not written.is_symlink():
                        shutil.rmtree(written)
                    else:
                        written.unlink()
            raise

    def fitted(self) -> bool:
        """Whether `fit` or `fit_graph` has run: a fitted attribute (ending in ``_``,
        besides ``history_``) is set."""
        return any(name.endswith("_") and not name.startswith("_") and name != "history_"
                   and value is not None for name, value in vars(self).items())

    def _save(self, out_dir: Path) -> None:
        raise XlarankError(f"system {self.name} cannot be saved")

    def _load(self, out_dir: Path) -> None:
        raise XlarankError(f"system {self.name} cannot be loaded")


def check_settings(system: RankingSystem, settings: dict) -> dict:
    """``settings`` (a system's overrides), each of its kind and range: the numbers of
    ``SETTING_RANGES`` by `xlarank.rank.strategies.check_ranges` (the one range check of
    settings; whole numbers come back as ints), ``FLAG_SETTINGS`` True or False,
    ``GRID_SETTINGS`` lists of learning rates; a setting whose default is None may be
    None. Raises XlarankError (`ArgumentTypeError` for a value of the wrong type)."""
    from xlarank.rank.strategies import check_ranges

    cls, owner = type(system), f"system {system.name}"
    defaults = system.defaults()
    given = {name: value for name, value in settings.items()
             if not (value is None and defaults.get(name) is None)}
    numbers = {name: given[name] for name in cls.SETTING_RANGES if name in given}
    checked = {**settings, **check_ranges(owner, numbers, cls.SETTING_RANGES)}
    for name in cls.FLAG_SETTINGS:
        if name in given:
            checked_type(given[name], bool, f"{owner}: {name}", "True or False")
    for name in cls.GRID_SETTINGS:
        if name not in given:
            continue
        grid = checked_type(given[name], (list, tuple), f"{owner}: {name}",
                            "a list of learning rates")
        if not 1 <= len(grid) <= MOST_RATES:
            raise XlarankError(f"{owner}: {name} holds {len(grid)} learning rates; give "
                               f"1 to {MOST_RATES}")
        rates = {f"{name}[{i}]": rate for i, rate in enumerate(grid)}
        checked[name] = type(grid)(check_ranges(
            owner, rates, dict.fromkeys(rates, LEARNING_RATE)).values())
    return checked


def checked_scores(system: RankingSystem, graph: TileGraph | LayoutGraph,
                   score: np.ndarray) -> np.ndarray:
    """``score`` (float64 (n_configs,), a system's `RankingSystem.score` of ``graph``)
    once `xlarank.evaluate.check_scores` passes it: NaN or infinite scores are refused
    (`BadModelError`), one score for configs that differ is warned about."""
    from xlarank.data.distinct import config_columns
    from xlarank.evaluate import check_scores

    score = np.asarray(score, np.float64)
    check_scores(score, None, f"system {system.name} on {graph.path}",
                 lambda: config_columns(graph))
    return score


def check_scorable(system: RankingSystem, graph: TileGraph | LayoutGraph) -> None:
    """Refuse scoring before a fit (no ``params_``), or a graph of the other kind than the
    one the system was trained on (``kind_``: "tile" or "layout")."""
    if getattr(system, "params_", None) is None:
        raise XlarankError(f"system {system.name}: fit or fit_graph first")
    kind = "tile" if isinstance(graph, TileGraph) else "layout"
    if kind != system.kind_:
        raise XlarankError(f"system {system.name}: trained on {system.kind_} graphs, "
                           f"given a {kind} graph")


def measured_target(graph: TileGraph | LayoutGraph, runtime: pd.Series) -> pd.Series:
    """The in-graph training target of measured medians (indexed by config index): tile
    runtimes over their normalizers, as the tile metric compares them, unless the file's
    normalizers are zero (a test file), where the measured runtimes already compare
    within one kernel; layout runtimes as they are."""
    if isinstance(graph, TileGraph):
        normalizer = graph.config_runtime_normalizers[runtime.index.to_numpy()]
        if (normalizer > 0).all():
            return runtime / normalizer
    return runtime


def get_system(name: str) -> type[RankingSystem]:
    """The class of a system by its registry name."""
    checked_type(name, str, "system", f"a system's name ({', '.join(SYSTEMS)})")
    try:
        module, cls = SYSTEMS[name].split(":")
    except KeyError:
        raise XlarankError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None
    # A plug-in point, by name on purpose: SYSTEMS names each system's module, imported
    # only when the system is asked for (the JAX ones need the gnn extra).
    return getattr(importlib.import_module(module), cls)


def load_system(out_dir: str | Path) -> RankingSystem:
    """A system saved by `RankingSystem.save`. One written by a newer xlarank (a higher
    format), or holding settings this xlarank does not know, is refused: its settings
    would be dropped or misread, not used."""
    from xlarank import __version__
    from xlarank.files import read_structured
    from xlarank.rank.spec import check_seed

    out_dir = Path(checked_type(out_dir, (str, os.PathLike), "load_system: out_dir",
                                "a saved system's folder (str or Path)"))
    card = read_structured(out_dir / SYSTEM_FILE, "saved system card", XlarankError)
    try:
        name, seed, settings = card["system"], card["seed"], dict(card["settings"])
        fmt = card.get("format", 1)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise XlarankError(f"{out_dir}: not a saved system ({exc})") from None
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise XlarankError(f"{out_dir}: {SYSTEM_FILE} format {fmt!r} is not a format number")
    if fmt > SYSTEM_FORMAT:
        versions = card.get("versions")
        by = versions.get("xlarank") if isinstance(versions, dict) else None
        raise XlarankError(f"{out_dir}: system saved in format {fmt} by a newer xlarank "
                           f"({by}); this is {__version__}, which reads format "
                           f"{SYSTEM_FORMAT}: upgrade xlarank or fit the system again")
    if not isinstance(name, str):
        raise XlarankError(f"{out_dir}: not a saved system (system {name!r})")
    cls = get_system(name)
    check_seed(seed, f"{out_dir / SYSTEM_FILE}", XlarankError)
    unknown = sorted(set(settings) - set(cls.defaults()))
    if unknown:
        raise XlarankError(f"{out_dir}: system {name} saved with settings this xlarank "
                           f"does not know ({', '.join(map(str, unknown))}); known: "
                           f"{', '.join(sorted(cls.defaults()))}: saved by another xlarank?")
    try:
        # Each setting of its kind and range, as when the system is made.
        system = cls(seed=seed, **settings)
    except XlarankError as exc:
        raise XlarankError(f"{out_dir / SYSTEM_FILE}: {exc}") from None
    history = card.get("history", [])
    system.history_ = list(history) if isinstance(history, list) else []
    system._load(out_dir)
    return system


def rank_graph_with(system: str, graph, measured: pd.DataFrame, seed: int = 0,
                    threads: int | None = None, prior=None) -> pd.DataFrame:
    """`xlarank.rank.ingraph.rank_graph`'s table (every config best first) from the system
    named ``system`` trained inside the graph on ``measured`` (config_index, runtime: a
    DataFrame, a dict of columns or a CSV path). xlarank is `rank_graph` itself (its one
    in-graph path); a peer goes through `RankingSystem.rank_measured`. ``prior`` is
    xlarank's alone."""
    from xlarank.rank.ingraph import check_threads, rank_graph
    from xlarank.rank.measured import config_groups, graph_with_configs, measured_runtimes
    from xlarank.rank.measured import measured_table as as_table

    seed = check_seed(seed, "seed")
    checked_type(system, str, "rank_graph_with: system",
                 f"a system's name (xlarank, {', '.join(SYSTEMS)})")
    if system == "xlarank":
        return rank_graph(graph, measured, prior=prior, seed=seed, threads=threads)
    if prior is not None:
        raise XlarankError(f"--prior is xlarank's own option; system {system} takes none")
    cls = get_system(system)
    graph = graph_with_configs(graph)
    measured = as_table(measured)
    threads = check_threads(threads)
    groups = config_groups(graph)
    runtime = measured_runtimes(graph, measured, groups)
    return cls(seed=seed, threads=threads).rank_measured(graph, runtime, groups)
