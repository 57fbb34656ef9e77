"""``config_nodes`` (layout): the largest configurable nodes one by one, so which node got
which layout survives: per slot, whether the config moves the node off its default,
positions fixed, output padding, its operands' read padding, relayout bytes. Slots follow
output bytes, largest first (ties in topological order), so slot k means "the k-th largest
configurable tensor" on every graph."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlarank.kernels.configs import NODE_SLOT_STATS, layout_node_slots

NODE_SLOTS = 16


def node_slots(node_bytes: np.ndarray, n_slots: int = NODE_SLOTS) -> np.ndarray:
    """int64 (n_slots,): the configurable nodes (indices into node_config_ids) by output
    bytes, largest first, ties in topological order; -1 fills slots past nc.

    node_bytes: float64 (nc,) output bytes of the configurable nodes, in node id order.
    """
    order = np.lexsort((np.arange(len(node_bytes)), -node_bytes))[:n_slots]
    return np.concatenate([order, np.full(n_slots - len(order), -1)]).astype(np.int64)


@dataclass(frozen=True)
class SlotTables:
    slots: np.ndarray  # int64 (NODE_SLOTS,) node_slots
    tables: object     # xlarank.features.tables.ConfigurableTables


class ConfigNodesFamily:
    name = "config_nodes"
    description = ("layout: the 16 largest configurable nodes one by one (whether the config "
                   "moves each off its default, positions fixed, padding, relayout bytes), "
                   "so which node got which layout survives")

    def names(self, spec, is_tile: bool) -> list[str]:
        if is_tile:
            return []
        return [f"n{k:02d}_{stat}" for k in range(NODE_SLOTS) for stat in NODE_SLOT_STATS]

    def prepare(self, graph, tables, spec) -> SlotTables:
        configurable = tables.configurable
        return SlotTables(node_slots(configurable.nbytes), configurable)

    def columns(self, prepared: SlotTables, configs: np.ndarray) -> np.ndarray:
        t = prepared.tables
        return layout_node_slots(configs, prepared.slots, t.dims, t.layouts, t.operand_pos,
                                 t.operand_info, t.operand_dims)


FAMILY = ConfigNodesFamily()
