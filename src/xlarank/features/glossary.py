"""What each feature column means, by name: the vocabulary of frames, model cards and the
report's importance plot.

`COLUMNS` holds one entry per column pattern: a placeholder in braces stands for a number
(``{node}``: a node_feat column of FORMAT.md; ``{slot}``: a config_nodes slot, 00 the
configurable node touching the most bytes; ``{i}``: a position or unit), except ``{pool}``:
mean, min or max. docs/features.md
holds the same table (`glossary_markdown`), and a test holds every family's columns to
exactly one entry each, so a new column without a meaning fails the suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class ColumnMeaning:
    pattern: str
    family: str
    meaning: str

    @property
    def regex(self) -> re.Pattern:
        regex = re.escape(self.pattern).replace(r"\{pool\}", "(?:mean|min|max)")
        return re.compile(re.sub(r"\\\{[a-z]+\\\}", r"\\d+", regex) + r"\Z")

    def filled(self, name: str) -> str:
        """The meaning for the column ``name`` this entry matches, its placeholders
        ({slot}, {i}, {node}, {pool}) filled from the name: n03_changed is about slot 03."""
        slots = re.findall(r"\{([a-z]+)\}", self.pattern)
        regex = re.escape(self.pattern)
        for slot in slots:
            value = "(mean|min|max)" if slot == "pool" else r"(\d+)"
            regex = regex.replace(re.escape("{" + slot + "}"), value, 1)
        found = re.fullmatch(regex, name)
        meaning = self.meaning
        if found is not None:
            for slot, value in zip(slots, found.groups()):
                meaning = meaning.replace("{" + slot + "}", value)
        return meaning


def _entry(pattern: str, family: str, meaning: str) -> ColumnMeaning:
    return ColumnMeaning(pattern, family, meaning)


_LOG1P = "log1p bytes"
COLUMNS: tuple[ColumnMeaning, ...] = (
    # graph: one value per graph, the same on every config row.
    _entry("g_log_nodes", "graph", "log1p of the graph's node count"),
    _entry("g_log_edges", "graph", "log1p of its edge count"),
    _entry("g_log_configurable", "graph", "log1p of its configurable node count (0 for tile)"),
    _entry("g_op_{i}", "graph", "share of the graph's nodes with opcode {i} (FORMAT.md's ids)"),
    _entry("g_node{node}_mean", "graph",
           "mean over nodes of log1p |node_feat[{node}]|: shape dims 21-26, their sum 27 and "
           "product 28, tuple size 29, window size sum 43 and product 44, convolution "
           "feature / batch groups 107-108"),
    _entry("g_node{node}_max", "graph", "the same, the largest over nodes"),
    # config_raw
    _entry("c_cfg{i}", "config_raw",
           "tile: config_feat column {i} as given (kernel bounds 0-7, output bounds 8-15, "
           "input bounds 16-23)"),
    _entry("c_mean_out{i}", "config_raw",
           "layout: position {i} of the output layout, mean over configurable nodes (-1: "
           "not fixed)"),
    _entry("c_mean_in{i}", "config_raw", "the same for the input layout"),
    _entry("c_mean_kernel{i}", "config_raw", "the same for the kernel layout"),
    # config_joined, tile
    _entry("c_pad_ratio", "config_joined", "tile: padded output elements / real ones"),
    _entry("c_log_tiles", "config_joined", "tile: log of the number of output tiles"),
    _entry("c_log_tile_bytes", "config_joined", "tile: log of one output tile's bytes"),
    _entry("c_lane_pad", "config_joined", "tile: minor tile dim padded to 128, over itself"),
    _entry("c_sublane_pad", "config_joined",
           "tile: second-minor tile dim padded to 8, over itself"),
    _entry("c_tile_frac", "config_joined", "tile: tile elements / output elements"),
    _entry("c_log_tile_footprint", "config_joined",
           "tile: log of the on-chip bytes of one tile of every operand and the output "
           "(output-tile bytes x the operand count: an approximation)"),
    _entry("c_log_effective_work", "config_joined",
           "tile: log of tiles x tile bytes x the (8, 128) padding"),
    _entry("c_log_input_reads", "config_joined",
           "tile: log1p of input bytes read (a convolution or dot rereads its inputs per row "
           "or column of output tiles)"),
    _entry("c_log_tile_node_work", "config_joined",
           "tile: log of tiles x the kernel's fused nodes"),
    # config_joined, layout
    _entry("c_default_out_frac", "config_joined",
           "layout: share of configurable nodes whose fixed output positions all equal "
           "their default layout's"),
    _entry("c_default_out_bytes_frac", "config_joined", "the same, weighted by output bytes"),
    _entry("c_minor_unaligned_log_bytes", "config_joined",
           f"layout: {_LOG1P} of outputs whose minor dim is not a multiple of 128 under the "
           "effective layout"),
    _entry("c_second_unaligned_log_bytes", "config_joined",
           f"layout: {_LOG1P} of outputs whose second-minor dim is not a multiple of 8"),
    _entry("c_pad_ratio_mean", "config_joined",
           "layout: bytes-weighted mean of padded / real output size"),
    _entry("c_pad_waste_log_bytes", "config_joined",
           f"layout: {_LOG1P} of the outputs' padding waste, summed"),
    _entry("c_pad_waste_max_log_bytes", "config_joined",
           f"layout: {_LOG1P} of the largest single node's padding waste"),
    _entry("c_relayout_log_bytes", "config_joined",
           f"layout: {_LOG1P} of operands read in another layout than they were made in"),
    _entry("c_relayout_count", "config_joined", "layout: how many operand reads relayout"),
    _entry("c_relayout_max_log_bytes", "config_joined",
           f"layout: {_LOG1P} of the largest single relayout"),
    _entry("c_read_pad_waste_log_bytes", "config_joined",
           f"layout: {_LOG1P} of the padding waste of the layouts operands (input, kernel) "
           "are read in"),
    # khop
    _entry("k_pruned_frac", "khop",
           "share of the graph's nodes within k hops of a configurable node"),
    _entry("k_changed_sum_log_nodes", "khop",
           "over the nodes a config moves off their default layout, the sum of log1p of "
           "their k-hop neighbourhood's node count"),
    _entry("k_changed_sum_log_bytes", "khop", "the same, of log1p of the neighbourhood's bytes"),
    _entry("k_changed_sum_mean_rank", "khop", "the same, of the neighbourhood's mean rank"),
    _entry("k_changed_sum_half_frac", "khop",
           "the same, of its share of half-precision (f16, bf16) nodes"),
    _entry("k_changed_sum_layout_ops", "khop",
           "the same, of its layout-sensitive ops (bitcast, copy, pad, reduce-window, "
           "reshape, reverse, slice, transpose)"),
    _entry("k_changed_sum_conv_dot", "khop", "the same, of its convolutions and dots"),
    _entry("k_changed_sum_elementwise", "khop", "the same, of its elementwise ops"),
    *(_entry(f"k_changed_{pool}_{stat}", "khop", f"as k_changed_sum_{stat}, the {word}")
      for pool, word in (("mean", "mean"), ("max", "largest"))
      for stat in ("log_nodes", "log_bytes", "mean_rank", "half_frac", "layout_ops",
                   "conv_dot", "elementwise")),
    # config_nodes
    _entry("n{slot}_changed", "config_nodes",
           "1 if the config fixes an output position of slot {slot}'s node off its default "
           "(a graph with fewer configurable nodes than slots leaves the rest all 0)"),
    _entry("n{slot}_fixed", "config_nodes", "how many output positions the config fixes there"),
    _entry("n{slot}_pad_ratio", "config_nodes",
           "padded / real output size under the effective layout"),
    _entry("n{slot}_input_pad_ratio", "config_nodes",
           "the same for its first operand, in the layout it is read in"),
    _entry("n{slot}_kernel_pad_ratio", "config_nodes",
           "the same for its second operand (a convolution's or dot's kernel)"),
    _entry("n{slot}_relayout_log_bytes", "config_nodes",
           f"{_LOG1P} of the node's operands read in another layout"),
    _entry("n{slot}_out_minor", "config_nodes",
           "which dim the config makes minor-most in the node's output, named by its place "
           "in the default layout (0: the default minor-most; -1: not fixed; 6: a dim the "
           "default lacks, or no such operand)"),
    _entry("n{slot}_out_second", "config_nodes", "the same for the second-minor place"),
    _entry("n{slot}_input_minor", "config_nodes", "as out_minor, its first operand as read"),
    _entry("n{slot}_input_second", "config_nodes", "as out_second, its first operand"),
    _entry("n{slot}_kernel_minor", "config_nodes", "as out_minor, its second operand as read"),
    _entry("n{slot}_kernel_second", "config_nodes", "as out_second, its second operand"),
    # graph_metrics
    _entry("gm_log_longest_nodes", "graph_metrics", "log1p of the longest path's node count"),
    _entry("gm_log_longest_bytes", "graph_metrics",
           "log1p of the heaviest path's output bytes"),
    _entry("gm_longest_frac", "graph_metrics", "longest path's nodes / all nodes"),
    _entry("gm_log_width_max", "graph_metrics",
           "log1p of the widest topological level's node count"),
    _entry("gm_log_width_mean", "graph_metrics", "log1p of the mean level width"),
    _entry("gm_log_width_p{i}", "graph_metrics", "log1p of the {i}th percentile level width"),
    _entry("gm_deg_mean", "graph_metrics", "mean in-degree (edges / nodes)"),
    _entry("gm_log_in_deg_max", "graph_metrics", "log1p of the largest in-degree"),
    _entry("gm_in_deg_std", "graph_metrics", "standard deviation of the in-degrees"),
    _entry("gm_log_out_deg_max", "graph_metrics", "log1p of the largest out-degree"),
    _entry("gm_out_deg_std", "graph_metrics", "standard deviation of the out-degrees"),
    _entry("gm_inputs_frac", "graph_metrics", "share of nodes without operands"),
    _entry("gm_outputs_frac", "graph_metrics", "share of nodes without users"),
    _entry("gm_lp_layout_ops", "graph_metrics",
           "layout-sensitive ops (khop's, plus convolution, dot, reduce) on the longest path"),
    _entry("gm_lp_layout_frac", "graph_metrics", "their share of the longest path"),
    _entry("gm_lp_log_layout_bytes", "graph_metrics", "log1p of their output bytes"),
    _entry("gm_cfg_depth_{pool}", "graph_metrics",
           "layout: configurable nodes' depth (longest path from the inputs, over the longest "
           "path's length), pooled as named (mean, min, max)"),
    _entry("gm_cfg_height_{pool}", "graph_metrics",
           "layout: the same for their height (longest path to the outputs)"),
    _entry("gm_cfg_critical_frac", "graph_metrics",
           "layout: share of configurable nodes on a longest path"),
    _entry("gm_cfg_betweenness_{pool}", "graph_metrics",
           "layout: their betweenness on the k-hop pruned graph (mean, max)"),
    # gnn and gru embeddings
    _entry("e_gnn{i}", "gnn",
           "tile: unit {i} of the kernel's mean node embedding joined with the config's "
           "tile features"),
    _entry("e_gnn_mean{i}", "gnn",
           "layout: unit {i} of the configurable nodes' config-modulated embeddings, mean"),
    _entry("e_gnn_max{i}", "gnn", "the same, max over configurable nodes"),
    _entry("e_gru_last{i}", "gru", "unit {i} of the GRU's last hidden state"),
    _entry("e_gru_mean{i}", "gru", "layout: unit {i} of its mean state over the config steps"),
)

@cache
def _compiled() -> tuple[tuple[re.Pattern, ColumnMeaning], ...]:
    return tuple((entry.regex, entry) for entry in COLUMNS)


def describe_column(name: str) -> ColumnMeaning | None:
    """The entry whose pattern matches column ``name`` (a frame's feature column), or None
    for a name no family makes (rank-graph's ``raw{i}`` columns, ``prior_score``)."""
    if name == "prior_score":
        return ColumnMeaning(name, "rank-graph", "the --prior model's score of the config")
    if re.fullmatch(r"raw\d+", name):
        return ColumnMeaning("raw{i}", "rank-graph",
                             "column {i} of the config rows themselves (layout: node by "
                             "node, 18 each; tile: the 24)")
    for regex, entry in _compiled():
        if regex.match(name):
            return entry
    return None


def glossary_markdown() -> str:
    """The glossary as a Markdown table (the block in docs/features.md)."""
    lines = ["| column | family | meaning |", "|---|---|---|"]
    lines += [f"| `{e.pattern}` | `{e.family}` | {e.meaning} |" for e in COLUMNS]
    return "\n".join(lines) + "\n"
