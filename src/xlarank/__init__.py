"""xlarank: rank XLA compiler configurations by predicted runtime.

Graph features from Numba kernels, gradient-boosted rankers (LightGBM, XGBoost) per
TpuGraphs collection. The small public API:

    load_graph(path)              -> TileGraph | LayoutGraph
    featurize_graph(graph, spec)  -> DataFrame, a row per config
    load_feature_spec(path)       -> FeatureSpec
    rank_graph(graph, measured)   -> DataFrame, every config best first, from the
                                     runtimes of some (in-graph ranking)
"""

__version__ = "0.1.0"

from xlarank.data.graph import LayoutGraph, TileGraph, load_graph  # noqa: E402
from xlarank.features import featurize_graph, load_feature_spec  # noqa: E402
from xlarank.rank.ingraph import rank_graph  # noqa: E402

__all__ = ["LayoutGraph", "TileGraph", "__version__", "featurize_graph", "load_feature_spec",
           "load_graph", "rank_graph"]
