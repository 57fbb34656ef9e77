"""xlarank: rank XLA compiler configurations by predicted runtime.

Graph features from Numba kernels, gradient-boosted rankers (LightGBM, XGBoost) per
TpuGraphs collection. The small public API:

    load_graph(path)              -> TileGraph | LayoutGraph
    featurize_graph(graph, spec)  -> DataFrame, a row per config
    load_feature_spec(path)       -> FeatureSpec
    load_model(directory)         -> a trained model (load once, score many graphs)
    ranked_configs(graph, model)  -> (config indices best first, their scores)
    rank_graph(graph, measured)   -> DataFrame, every config best first, from the
                                     runtimes of some (in-graph ranking)
    Tuner(graph, prior, seed)     -> ask(k) / tell(indices, runtimes) / best(): which
                                     configs to measure next
    BoosterStrategy(kappa=...)    -> the tuner's default strategy, with its settings;
                                     RandomStrategy, or any TunerStrategy, in its place

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
    imports Numba (each xlarank module imports this package first); None, and Numba's
    own default, where that folder cannot be made or written."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return os.environ["NUMBA_CACHE_DIR"]
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
    folder = os.path.join(base, "xlarank", "numba")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    os.environ["NUMBA_CACHE_DIR"] = folder
    return folder


NUMBA_CACHE_DIR = _numba_cache_dir()

_PUBLIC = {
    "LayoutGraph": "xlarank.data.graph",
    "TileGraph": "xlarank.data.graph",
    "load_graph": "xlarank.data.graph",
    "featurize_graph": "xlarank.features",
    "load_feature_spec": "xlarank.features",
    "load_model": "xlarank.rank.model",
    "ranked_configs": "xlarank.score",
    "rank_graph": "xlarank.rank.ingraph",
    "Tuner": "xlarank.rank.tuner",
    "TunerStrategy": "xlarank.rank.strategies",
    "BoosterStrategy": "xlarank.rank.strategies",
    "RandomStrategy": "xlarank.rank.strategies",
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
