"""Featurizing graphs: feature specs, the family registry (`families/`), the per-graph
tables the families share (`tables`) and the builder that loops over a spec's families
(`build`)."""

from xlarank.features.build import KEY_COLUMNS, feature_names, featurize_graph
from xlarank.features.spec import FeatureSpec, load_feature_spec

__all__ = ["KEY_COLUMNS", "FeatureSpec", "feature_names", "featurize_graph", "load_feature_spec"]
