"""Feature families and specs; the only caller of `xlarank.kernels`."""

from xlarank.features.build import KEY_COLUMNS, feature_names, featurize_graph
from xlarank.features.spec import FeatureSpec, load_feature_spec

__all__ = ["KEY_COLUMNS", "FeatureSpec", "feature_names", "featurize_graph", "load_feature_spec"]
