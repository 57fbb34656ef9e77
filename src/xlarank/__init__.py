"""xlarank: rank XLA compiler configurations by predicted runtime.

Graph features from Numba kernels, gradient-boosted rankers (LightGBM, XGBoost) per
TpuGraphs collection. The public API, each name with an example in docs/api.md:

- read: load_graph, TileGraph, LayoutGraph, import_records (XLA records and HLO dumps),
  get_collection, COLLECTIONS;
- featurize: load_feature_spec, featurize_graph (one graph), featurize_files (a frame);
- train and load: train_from_specs, load_model;
- score and evaluate: ranked_configs (one graph), score_files (many), evaluate_model,
  graph_headline, in_graph_split (the in-graph protocol's one split);
- one graph from some measurements: rank_graph; which to measure next: Tuner with a
  strategy (BoosterStrategy, RandomStrategy, GreedyStrategy, AutotvmStrategy,
  TpeStrategy, any TunerStrategy; make_strategy by name);
- the published systems: get_system, load_system, RankingSystem, rank_graph_with,
  fit_by_cross_validation;
- errors: XlarankError and its kinds (BadGraphError, BadInputError, BadModelError,
  MismatchError, SpecError, MeasuredError, ArgumentTypeError), XlarankWarning.

Each name is imported on first use, so ``import xlarank`` (and the CLI's start-up) stays
cheap: numpy, pandas, Numba and the boosters load only where a command needs them.
"""

from __future__ import annotations

import importlib
import os
import sys

__version__ = "0.1.0"


def _numba_cache_dir() -> str | None:
    """Where Numba keeps the compiled kernels (``cache=True``) unless NUMBA_CACHE_DIR says
    otherwise: the user's cache folder (XDG_CACHE_HOME or ~/.cache, ~/Library/Caches on
    macOS, LOCALAPPDATA on Windows) / xlarank / numba, not __pycache__ beside the
    sources, which for an editable install is the source tree. Set before anything
    imports Numba (each xlarank module imports this package first). Where the folder
    holding that cache folder is missing (HOME=/nonexistent, or XDG_CACHE_HOME below a
    missing folder), the temporary folder's private xlarank-numba-UID instead: a
    missing home is never made. None, and Numba's own default, where neither can be
    made or written."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return os.environ["NUMBA_CACHE_DIR"]
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or ""
        if not os.path.isabs(base):  # the XDG spec: a relative path is ignored
            base = os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "xlarank", "numba")
    if not os.path.isabs(folder):  # a relative or empty HOME: no folder of the user's
        return None
    if not os.path.isdir(os.path.dirname(os.path.normpath(base))):
        # The cache base (~/.cache) may be made, never the folder it belongs in (HOME):
        # then the temporary folder's own cache, private to the user (a shared /tmp
        # could hold another user's kernels, which Numba would load and run).
        import tempfile
        from pathlib import Path

        from xlarank.threads import private_folder

        uid = os.getuid() if hasattr(os, "getuid") else 0
        folder = os.path.join(tempfile.gettempdir(), f"xlarank-numba-{uid}")
        if not private_folder(Path(folder)):
            return None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    os.environ["NUMBA_CACHE_DIR"] = folder
    return folder


NUMBA_CACHE_DIR = _numba_cache_dir()

# Thread variables that Numba and OpenMP read once, when they load, are checked first
# (an invalid one is taken out and refused by name when a command sets its threads).
from xlarank.environment import screen_environment as _screen_environment  # noqa: E402

_screen_environment()

_PUBLIC = {
    "LayoutGraph": "xlarank.data.graph",
    "TileGraph": "xlarank.data.graph",
    "load_graph": "xlarank.data.graph",
    "import_records": "xlarank.data.xla",
    "get_collection": "xlarank.data.collections",
    "COLLECTIONS": "xlarank.data.collections",
    "featurize_graph": "xlarank.features",
    "load_feature_spec": "xlarank.features",
    "featurize_files": "xlarank.featurize",
    "train_from_specs": "xlarank.rank.train_specs",
    "load_model": "xlarank.rank.model",
    "ranked_configs": "xlarank.score",
    "score_files": "xlarank.score",
    "evaluate_model": "xlarank.score",
    "graph_headline": "xlarank.evaluate",
    "in_graph_split": "xlarank.evaluate",
    "rank_graph": "xlarank.rank.ingraph",
    "Tuner": "xlarank.rank.tuner",
    "TunerStrategy": "xlarank.rank.strategies",
    "BoosterStrategy": "xlarank.rank.strategies",
    "RandomStrategy": "xlarank.rank.strategies",
    "GreedyStrategy": "xlarank.rank.strategies",
    "AutotvmStrategy": "xlarank.rank.strategies",
    "TpeStrategy": "xlarank.rank.strategies",
    "make_strategy": "xlarank.rank.strategies",
    "RankingSystem": "xlarank.systems",
    "get_system": "xlarank.systems",
    "load_system": "xlarank.systems",
    "rank_graph_with": "xlarank.systems",
    "fit_by_cross_validation": "xlarank.systems.cross",
    "XlarankError": "xlarank.errors",
    "BadGraphError": "xlarank.errors",
    "BadInputError": "xlarank.errors",
    "BadModelError": "xlarank.errors",
    "MismatchError": "xlarank.errors",
    "SpecError": "xlarank.errors",
    "MeasuredError": "xlarank.rank.measured",
    "ArgumentTypeError": "xlarank.errors",
    "XlarankWarning": "xlarank.errors",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        # A plug-in point, by name on purpose: the public API is imported on first use, so
        # ``import xlarank`` stays light (_PUBLIC is the list of what is imported from where).
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'xlarank' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
