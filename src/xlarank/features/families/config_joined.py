"""``config_joined``: configs joined with the shapes they lay out: padding to the (8, 128)
tiles, relayout bytes, default-keeping (layout); tile padding, counts, footprint and work
(tile). Layouts are the effective ones: the config's where it fixes a position, the
default elsewhere (`xlarank.kernels.configs`)."""

from __future__ import annotations

import numpy as np

from xlarank.data.graph import TileGraph
from xlarank.kernels.configs import LAYOUT_JOINED_NAMES, TILE_JOINED_NAMES, layout_config_joined


class ConfigJoinedFamily:
    name = "config_joined"
    description = "configs joined with the graph's shapes: padding, alignment, relayouts"

    def names(self, spec, is_tile: bool) -> list[str]:
        return [f"c_{n}" for n in (TILE_JOINED_NAMES if is_tile else LAYOUT_JOINED_NAMES)]

    def prepare(self, graph, tables, spec):
        return tables, isinstance(graph, TileGraph)

    def columns(self, prepared, configs: np.ndarray) -> np.ndarray:
        tables, is_tile = prepared
        if is_tile:
            return tables.tile_joined(configs)
        t = tables.configurable
        return layout_config_joined(configs, t.dims, t.nbytes, t.layouts, t.operand_pos,
                                    t.operand_info, t.operand_dims)


FAMILY = ConfigJoinedFamily()
