"""``config_nodes`` (layout): the configurable nodes that touch the most bytes, one by one,
so which node got which layout survives: per slot, whether the config moves the node off
its default, positions fixed, output padding, its operands' read padding, relayout bytes,
and which dims the config puts in the minor pair of its output, input and kernel layouts
(as places in their default layouts). Slots follow the bytes each node touches (its output
plus its first two operands), largest first (ties in topological order), so slot k means
"the configurable node with the k-th most traffic" on every graph.

Why bytes touched and not output bytes: a convolution's layout can decide the runtime while
its output is tiny (on the real unet3d, the weight-gradient convolutions: kilobytes out,
hundreds of megabytes in; ordered by output bytes they sat at slots 41-51 of 56)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlarank.kernels.configs import NODE_SLOT_STATS, layout_node_slots

NODE_SLOTS = 32


def node_slots(node_bytes: np.ndarray, n_slots: int = NODE_SLOTS) -> np.ndarray:
    """int64 (n_slots,): the configurable nodes (indices into node_config_ids) by bytes,
    largest first, ties in topological order; -1 fills slots past nc.

    node_bytes: float64 (nc,) bytes of the configurable nodes (`touched_bytes`), in node id
    order.
    """
    order = np.lexsort((np.arange(len(node_bytes)), -node_bytes))[:n_slots]
    return np.concatenate([order, np.full(n_slots - len(order), -1)]).astype(np.int64)


def touched_bytes(output_bytes: np.ndarray, operand_info: np.ndarray) -> np.ndarray:
    """float64 (nc,): output bytes (nc,) plus the bytes of the first two operands
    (operand_info float64 (nc, 2, 7), column 0; zero where there is no such operand)."""
    return output_bytes + operand_info[:, :, 0].sum(axis=1)


@dataclass(frozen=True)
class SlotTables:
    slots: np.ndarray  # int64 (NODE_SLOTS,) node_slots
    tables: object     # xlarank.features.tables.ConfigurableTables


class ConfigNodesFamily:
    name = "config_nodes"
    description = ("layout: the 32 configurable nodes that touch the most bytes, one by one "
                   "(whether the config moves each off its default, positions fixed, "
                   "padding, relayout bytes, the dims in its minor pairs), so which node got "
                   "which layout survives")

    def names(self, spec, is_tile: bool) -> list[str]:
        if is_tile:
            return []
        return [f"n{k:02d}_{stat}" for k in range(NODE_SLOTS) for stat in NODE_SLOT_STATS]

    def prepare(self, graph, tables, spec) -> SlotTables:
        configurable = tables.configurable
        touched = touched_bytes(configurable.nbytes, configurable.operand_info)
        return SlotTables(node_slots(touched), configurable)

    def columns(self, prepared: SlotTables, configs: np.ndarray) -> np.ndarray:
        t = prepared.tables
        return layout_node_slots(configs, prepared.slots, t.dims, t.layouts, t.operand_pos,
                                 t.operand_info, t.operand_dims)


FAMILY = ConfigNodesFamily()
