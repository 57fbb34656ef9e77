"""``config_raw``: the config columns themselves; layout: their mean over configurable
nodes (the public "config aggregates" peer's features)."""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import TileGraph
from xlarank.kernels.configs import layout_config_means

LAYOUT_RAW_NAMES = tuple(f"{part}{d}" for part in ("out", "in", "kernel") for d in range(6))


class ConfigRawFamily:
    name = "config_raw"
    description = "the config columns themselves; layout: their mean over configurable nodes"

    def names(self, spec, is_tile: bool) -> list[str]:
        return ([f"c_cfg{k:02d}" for k in range(24)] if is_tile
                else [f"c_mean_{n}" for n in LAYOUT_RAW_NAMES])

    def prepare(self, graph, tables, spec) -> bool:
        return isinstance(graph, TileGraph)

    def columns(self, is_tile: bool, configs: np.ndarray) -> np.ndarray:
        return configs if is_tile else layout_config_means(configs)


FAMILY = ConfigRawFamily()
