"""Kernels that turn configs into per-config feature rows.

They are serial on purpose: they run on one block of configs at a time while a reader
thread inflates the next block (`xlarank.data.graph.config_blocks`), and files are
featurized in parallel by worker processes. Parallel regions on small blocks wait for a
core the reader holds (measured: 1.5 ms per hash of 7 configs on the 40,000-node
benchmark graph, against microseconds serial).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Output columns of layout_config_joined, in order; what each means is the glossary's
# (xlarank.features.glossary, as c_<name>), the one place it is written.
LAYOUT_JOINED_NAMES = (
    "default_out_frac", "default_out_bytes_frac", "minor_unaligned_log_bytes",
    "second_unaligned_log_bytes", "pad_ratio_mean", "pad_waste_log_bytes",
    "pad_waste_max_log_bytes", "relayout_log_bytes", "relayout_count",
    "relayout_max_log_bytes", "read_pad_waste_log_bytes",
)
# Per slot of layout_node_slots, in order; meanings in the glossary (as n{slot}_<name>).
NODE_SLOT_STATS = (
    "changed", "fixed", "pad_ratio", "input_pad_ratio", "kernel_pad_ratio",
    "relayout_log_bytes", "out_minor", "out_second", "input_minor", "input_second",
    "kernel_minor", "kernel_second",
)
NODE_SLOT_WIDTH = len(NODE_SLOT_STATS)

# The largest finite float32: where feature columns that could overflow are held.
F32_MAX = float(np.finfo(np.float32).max)


@njit(cache=True, inline="always")
def _tile_pad(size, multiple):
    if size <= 0:
        return 1.0
    return np.ceil(size / multiple) * multiple / size


# Real configs fix only a prefix of minor-most positions and leave the rest -1 ("not
# fixed": the compiler keeps its own choice there, FORMAT.md). So a config is compared with
# the default layout position by position where it fixes one, and where it fixes none the
# default stands: the *effective* layout.
@njit(cache=True, inline="always")
def _effective(configs, i, j, s, default_layout):
    """Dimension id at position s of configurable node j's output under config i."""
    value = configs[i, j, s]
    return value if value >= 0 else default_layout[j, s]


@njit(cache=True, inline="always")
def _keeps_default(configs, i, j, default_layout):
    """Whether every output position config i fixes for node j equals its default."""
    for s in range(6):
        value = configs[i, j, s]
        if value >= 0 and value != default_layout[j, s]:
            return False
    return True


@njit(cache=True, inline="always")
def _pad_ratio(configs, i, j, dims, default_layout):
    """(padded / real size, minor dim, second-minor dim) of node j's output under config i,
    with the minor dim padded to 128 and the second-minor to 8 (TPU tiles)."""
    minor_id = _effective(configs, i, j, 0, default_layout)
    second_id = _effective(configs, i, j, 1, default_layout)
    minor = dims[j, minor_id] if minor_id >= 0 else 1
    second = dims[j, second_id] if second_id >= 0 else 1
    return _tile_pad(minor, 128) * _tile_pad(second, 8), minor, second


@njit(cache=True, inline="always")
def _relayouts(configs, i, j, default_layout, operand_pos, operand_info):
    """(bytes, count, largest bytes) of node j's operand reads under config i whose fixed
    read positions differ from the layout the operand is made in (its producer's effective
    output if configurable, else its default)."""
    total = 0.0
    count = 0.0
    largest = 0.0
    for slot in range(2):
        pos = operand_pos[j, slot]
        if pos == -2:
            continue
        differs = False
        for s in range(6):
            read = configs[i, j, 6 + 6 * slot + s]
            if read < 0:
                continue
            if pos >= 0:
                made = _effective(configs, i, pos, s, default_layout)
            else:
                made = operand_info[j, slot, 1 + s]
            if read != made:
                differs = True
        if differs:
            b = operand_info[j, slot, 0]
            total += b
            count += 1.0
            if b > largest:
                largest = b
    return total, count, largest


@njit(cache=True, inline="always")
def _read_pad_ratio(configs, i, j, slot, default_layout, operand_pos, operand_info,
                    read_pads):
    """Padded / real size of node j's operand in ``slot`` (0 input, 1 kernel) in the layout
    config i reads it in: the fixed read positions, else how the operand is made. 1 when
    there is no such operand. read_pads: `_read_pad_table` of the operands."""
    pos = operand_pos[j, slot]
    if pos == -2:
        return 1.0
    minor_id = _read_position(configs, i, j, slot, 0, pos, default_layout, operand_info)
    second_id = _read_position(configs, i, j, slot, 1, pos, default_layout, operand_info)
    return read_pads[j, slot, minor_id + 1, second_id + 1]


@njit(cache=True)
def _made_minor_pairs(operand_info):
    """int64 (nc, 2, 2): the dim ids of the two minor-most positions of each operand's
    default layout (operand_info float64 (nc, 2, 7) columns 1-2), as integers."""
    nc = operand_info.shape[0]
    out = np.empty((nc, 2, 2), dtype=np.int64)
    for j in range(nc):
        for slot in range(2):
            for s in range(2):
                out[j, slot, s] = np.int64(operand_info[j, slot, 1 + s])
    return out


@njit(cache=True)
def _read_pad_table(operand_dims):
    """float64 (nc, 2, 7, 7): the pad ratio of each operand read with minor dim id a - 1
    and second-minor dim id b - 1 (-1: no such dim, size 1), from operand_dims int64
    (nc, 2, 6). Made once per call, so the per-config loop looks pads up (this halved the
    join's time on the real nlp sample)."""
    nc = operand_dims.shape[0]
    out = np.empty((nc, 2, 7, 7), dtype=np.float64)
    for j in range(nc):
        for slot in range(2):
            for a in range(7):
                minor = operand_dims[j, slot, a - 1] if a > 0 else 1
                for b in range(7):
                    second = operand_dims[j, slot, b - 1] if b > 0 else 1
                    out[j, slot, a, b] = _tile_pad(minor, 128) * _tile_pad(second, 8)
    return out


@njit(cache=True, inline="always")
def _read_position(configs, i, j, slot, s, pos, default_layout, operand_info):
    """Dimension id at position s of the layout node j reads its operand in ``slot`` under
    config i: the config's where it fixes it, else how the operand is made."""
    read = np.int64(configs[i, j, 6 + 6 * slot + s])
    if read >= 0:
        return read
    if pos >= 0:
        return np.int64(_effective(configs, i, pos, s, default_layout))
    return np.int64(operand_info[j, slot, 1 + s])


@njit(cache=True, nogil=True)
def layout_config_means(configs):
    """float32 (n_configs, 18): mean over configurable nodes of each config column.

    configs: int8 (n_configs, n_configurable, 18). Zero when there is no configurable node.
    """
    c, nc, k = configs.shape
    out = np.zeros((c, k), dtype=np.float32)
    for i in range(c):
        for j in range(nc):
            for f in range(k):
                out[i, f] += configs[i, j, f]
        if nc > 0:
            for f in range(k):
                out[i, f] /= nc
    return out


@njit(cache=True, inline="always")
def _packed(configs, i, j, start, count):
    """uint64: configs[i, j, start:start + count] (count <= 8) as the bytes of one word."""
    word = np.uint64(0)
    for s in range(count):
        word |= np.uint64(np.uint8(configs[i, j, start + s])) << np.uint64(8 * s)
    return word


@njit(cache=True, nogil=True)
def layout_node_groups(configs, j, operand_pos, ids):
    """int64 (n_groups,): one config of each group of configs that agree on all that the
    per-node features of configurable node j read: its own 18 columns and the output
    layouts of its configurable operands. ids (n_configs,) is filled with each config's
    group, numbered by first appearance.

    Why: per node, real configs take a handful of such values (FORMAT.md: 1.4-2.0
    distinct output layouts; at most 24 of these 30-byte keys on the real samples), so the
    features are computed once a group and copied, where computing them per config was
    most of featurizing an nlp random file besides inflating it.
    """
    c = configs.shape[0]
    pos0 = operand_pos[j, 0]
    pos1 = operand_pos[j, 1]
    bits = 1
    while (1 << bits) < 2 * c:
        bits += 1
    size = 1 << bits
    mask = size - 1
    table = np.full(size, -1, dtype=np.int64)
    keys = np.empty((c, 4), dtype=np.uint64)
    reps = np.empty(c, dtype=np.int64)
    n_groups = 0
    for i in range(c):
        k0 = _packed(configs, i, j, 0, 8)
        k1 = _packed(configs, i, j, 8, 8)
        k2 = _packed(configs, i, j, 16, 2)
        if pos0 >= 0:
            k2 |= _packed(configs, i, pos0, 0, 6) << np.uint64(16)
        k3 = _packed(configs, i, pos1, 0, 6) if pos1 >= 0 else np.uint64(0)
        h = (k0 * np.uint64(0x9E3779B97F4A7C15)) ^ (k1 * np.uint64(0xC2B2AE3D27D4EB4F)) ^ (
            k2 * np.uint64(0x165667B19E3779F9)) ^ (k3 * np.uint64(0xD6E8FEB86659FD93))
        slot = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
        while True:
            g = table[slot]
            if g < 0:
                table[slot] = n_groups
                keys[n_groups, 0] = k0
                keys[n_groups, 1] = k1
                keys[n_groups, 2] = k2
                keys[n_groups, 3] = k3
                reps[n_groups] = i
                ids[i] = n_groups
                n_groups += 1
                break
            if (keys[g, 0] == k0 and keys[g, 1] == k1 and keys[g, 2] == k2
                    and keys[g, 3] == k3):
                ids[i] = g
                break
            slot = (slot + 1) & mask
    return reps[:n_groups]


@njit(cache=True, nogil=True)
def layout_config_joined(configs, dims, node_bytes, default_layout, operand_pos,
                         operand_info, operand_dims):
    """float32 (n_configs, 11): each config's layouts joined with the graph's tensors.

    configs: int8 (n_configs, nc, 18) output / input / kernel layouts, minor-to-major, -1
    where the config fixes no dimension;
    dims: int64 (nc, 6) output dims of each configurable node;
    node_bytes: float64 (nc,) output bytes of each configurable node;
    default_layout: int8 (nc, 6) default output layout, -1 past the rank;
    operand_pos: int64 (nc, 2) for the first (input) and second (kernel) operand, its index
    among configurable nodes, -1 if it is not configurable, -2 if there is no operand;
    operand_info: float64 (nc, 2, 7) per operand its bytes then its default layout (6);
    operand_dims: int64 (nc, 2, 6) per operand its dims, zero past the rank.
    Columns are named by LAYOUT_JOINED_NAMES. Layouts are the effective ones: the config's
    where it fixes a position, the default elsewhere.
    Each node's terms are computed once per `layout_node_groups` group and summed per config in
    node order, so the sums are the per-config loop's to the bit.
    """
    c, nc, _ = configs.shape
    out = np.zeros((c, 11), dtype=np.float32)
    read_pads = _read_pad_table(operand_dims)
    made = _made_minor_pairs(operand_info)
    total_bytes = 0.0
    for j in range(nc):
        total_bytes += node_bytes[j]
    n_default = np.zeros(c)
    default_bytes = np.zeros(c)
    minor_bad = np.zeros(c)
    second_bad = np.zeros(c)
    pad_sum = np.zeros(c)
    waste = np.zeros(c)
    waste_max = np.zeros(c)
    relayout = np.zeros(c)
    relayout_n = np.zeros(c)
    relayout_max = np.zeros(c)
    read_waste = np.zeros(c)
    ids = np.empty(c, dtype=np.int64)
    # Per group: kept default, minor unaligned, second unaligned, pad ratio, relayout
    # bytes, count and largest, and the read waste of each operand.
    terms = np.empty((c, 9))
    for j in range(nc):
        reps = layout_node_groups(configs, j, operand_pos, ids)
        for g in range(len(reps)):
            i = reps[g]
            for slot in range(2):
                terms[g, 7 + slot] = 0.0
                pos = operand_pos[j, slot]
                if pos == -2:
                    continue
                minor_id = configs[i, j, 6 + 6 * slot]
                second_id = configs[i, j, 7 + 6 * slot]
                if minor_id < 0:
                    minor_id = (made[j, slot, 0] if pos < 0
                                else _effective(configs, i, pos, 0, default_layout))
                if second_id < 0:
                    second_id = (made[j, slot, 1] if pos < 0
                                 else _effective(configs, i, pos, 1, default_layout))
                terms[g, 7 + slot] = operand_info[j, slot, 0] * (
                    read_pads[j, slot, minor_id + 1, second_id + 1] - 1.0)
            terms[g, 0] = 1.0 if _keeps_default(configs, i, j, default_layout) else 0.0
            ratio, minor, second = _pad_ratio(configs, i, j, dims, default_layout)
            terms[g, 1] = 1.0 if minor % 128 != 0 else 0.0
            terms[g, 2] = 1.0 if second % 8 != 0 else 0.0
            terms[g, 3] = ratio
            moved, moves, largest = _relayouts(configs, i, j, default_layout, operand_pos,
                                               operand_info)
            terms[g, 4] = moved
            terms[g, 5] = moves
            terms[g, 6] = largest
        has0 = operand_pos[j, 0] != -2
        has1 = operand_pos[j, 1] != -2
        b = node_bytes[j]
        # Flags are 0 or 1, and adding +0.0 to a sum of non-negative terms leaves it as it
        # is: the sums are those of the branches, with no branch to mispredict per config.
        for i in range(c):
            t = terms[ids[i]]
            if has0:
                read_waste[i] += t[7]
            if has1:
                read_waste[i] += t[8]
            n_default[i] += t[0]
            default_bytes[i] += t[0] * b
            minor_bad[i] += t[1] * b
            second_bad[i] += t[2] * b
            ratio = t[3]
            pad_sum[i] += ratio * b
            node_waste = b * (ratio - 1.0)
            waste[i] += node_waste
            waste_max[i] = max(waste_max[i], node_waste)
            relayout[i] += t[4]
            relayout_n[i] += t[5]
            relayout_max[i] = max(relayout_max[i], t[6])
    for i in range(c):
        if nc > 0:
            out[i, 0] = n_default[i] / nc
        if total_bytes > 0:
            out[i, 1] = default_bytes[i] / total_bytes
            out[i, 4] = pad_sum[i] / total_bytes
        out[i, 2] = np.log1p(minor_bad[i])
        out[i, 3] = np.log1p(second_bad[i])
        out[i, 5] = np.log1p(waste[i])
        out[i, 6] = np.log1p(waste_max[i])
        out[i, 7] = np.log1p(relayout[i])
        out[i, 8] = relayout_n[i]
        out[i, 9] = np.log1p(relayout_max[i])
        out[i, 10] = np.log1p(read_waste[i])
    return out


@njit(cache=True, inline="always")
def _default_place(configs, i, j, part, s, default_layout, operand_pos, operand_info):
    """The place in its default layout of the dim that config i fixes at position s of node
    j's output (part 0), input (1) or kernel (2) layout; -1 where it fixes none, 6 where the
    default layout has no such dim (or there is no such operand)."""
    value = configs[i, j, 6 * part + s]
    if value < 0:
        return -1.0
    if part > 0 and operand_pos[j, part - 1] == -2:
        return 6.0
    for place in range(6):
        made = default_layout[j, place] if part == 0 else operand_info[j, part - 1, 1 + place]
        if made == value:
            return float(place)
    return 6.0


@njit(cache=True, nogil=True)
def layout_node_slots(configs, slots, dims, default_layout, operand_pos, operand_info,
                      operand_dims):
    """float32 (n_configs, NODE_SLOT_WIDTH * n_slots): NODE_SLOT_STATS of chosen
    configurable nodes.

    slots: int64 (n_slots,) index among configurable nodes of the node in each slot, -1
    for an empty slot (its columns stay 0); the other arguments as for
    `layout_config_joined`. Columns run slot by slot, NODE_SLOT_STATS within a slot.
    """
    c = configs.shape[0]
    n_slots = slots.shape[0]
    width = NODE_SLOT_WIDTH
    out = np.zeros((c, width * n_slots), dtype=np.float32)
    read_pads = _read_pad_table(operand_dims)
    ids = np.empty(c, dtype=np.int64)
    stats = np.empty((c, width))
    for k in range(n_slots):
        j = slots[k]
        if j < 0:
            continue
        # Once per `layout_node_groups` group, then copied to its configs.
        reps = layout_node_groups(configs, j, operand_pos, ids)
        for g in range(len(reps)):
            i = reps[g]
            stats[g, 0] = 0.0 if _keeps_default(configs, i, j, default_layout) else 1.0
            fixed = 0.0
            for s in range(6):
                if configs[i, j, s] >= 0:
                    fixed += 1.0
            stats[g, 1] = fixed
            stats[g, 2] = _pad_ratio(configs, i, j, dims, default_layout)[0]
            for slot in range(2):
                stats[g, 3 + slot] = _read_pad_ratio(configs, i, j, slot, default_layout,
                                                     operand_pos, operand_info, read_pads)
            stats[g, 5] = np.log1p(_relayouts(configs, i, j, default_layout, operand_pos,
                                              operand_info)[0])
            for part in range(3):
                for s in range(2):
                    stats[g, 6 + 2 * part + s] = _default_place(
                        configs, i, j, part, s, default_layout, operand_pos, operand_info)
        col = width * k
        for i in range(c):
            g = ids[i]
            for f in range(width):
                out[i, col + f] = stats[g, f]
    return out


# Output columns of tile_config_joined, in order; meanings in the glossary (as c_<name>).
TILE_JOINED_NAMES = (
    "pad_ratio", "log_tiles", "log_tile_bytes", "lane_pad", "sublane_pad", "tile_frac",
    "log_tile_footprint", "log_effective_work", "log_input_reads", "log_tile_node_work",
)


@njit(cache=True)
def tile_config_joined(config_feat, out_dims, element_bytes, n_operands, input_bytes,
                       contracts, n_nodes):
    """float32 (n_configs, 10): tile sizes against the kernel's output shape.

    config_feat: float32 (n_configs, 24), output bounds in columns 8-13, one per output
    dim; out_dims: int64 (6,) the output shape, zero past the rank (a zero or negative dim
    anywhere is left out); element_bytes: output bytes per element; n_operands: the
    kernel's inputs plus its output, each holding a tile on chip; input_bytes: bytes of
    the kernel's inputs; contracts: whether it has a convolution or dot; n_nodes: its
    node count. Columns are named by TILE_JOINED_NAMES; minor and second-minor are the
    last two dims left in.
    """
    c = config_feat.shape[0]
    out = np.zeros((c, 10), dtype=np.float32)
    for i in range(c):
        padded = 1.0
        real = 1.0
        tiles = 1.0
        elems = 1.0
        minor = 1.0
        second = 1.0
        minor_tiles = 0.0
        second_tiles = 0.0
        for d in range(6):
            if out_dims[d] <= 0:
                continue
            size = float(out_dims[d])
            t = config_feat[i, 8 + d]
            if t < 1.0:
                t = size  # an unset bound covers the whole dim
            n = np.ceil(size / t)
            tiles *= n
            padded *= n * t
            real *= size
            elems *= t
            second = minor
            minor = t
            second_tiles = minor_tiles
            minor_tiles = n
        # Ratios of products of six tile bounds can pass float32's range (a bound of
        # 3e38 in a file): held at its largest finite value, so features stay finite.
        out[i, 0] = min(padded / real, F32_MAX)
        out[i, 1] = np.log(tiles)
        out[i, 2] = np.log(elems * element_bytes) if element_bytes > 0 else 0.0
        out[i, 3] = _tile_pad(minor, 128)
        out[i, 4] = _tile_pad(second, 8)
        out[i, 5] = min(elems / real, F32_MAX)
        out[i, 6] = out[i, 2] + np.log(max(n_operands, 1))
        # Padding multiplies with tile count and size; one column saves the trees the product.
        out[i, 7] = out[i, 1] + out[i, 2] + np.log(out[i, 3]) + np.log(out[i, 4])
        rereads = 1.0
        if contracts and minor_tiles > 0.0:
            rereads = (minor_tiles + second_tiles) / 2.0 if second_tiles > 0.0 else minor_tiles
        out[i, 8] = np.log1p(input_bytes * rereads)
        out[i, 9] = out[i, 1] + np.log(max(n_nodes, 1))
    return out


@njit(cache=True, nogil=True)
def config_to_int8(block):
    """Validate and narrow float32 configs (b, nc, 18) to int8 in one pass.

    It runs in the config reading thread, beside the caller's work on the previous block.

    Returns (int8 array of the same shape, ok). ok is False if any value is NaN, infinite,
    fractional or outside -1..5; the array is then of no use.
    """
    flat = block.reshape(-1)
    out = np.empty(flat.size, dtype=np.int8)
    bad = np.int32(0)
    # Branch-free, so the loop vectorizes (through int32: 30% faster than int8 and a
    # select per value). NaN fails both comparisons; values outside -1..5 are not cast
    # (that would overflow); the round trip catches them and fractions.
    for i in range(flat.size):
        v = flat[i]
        inside = (v >= np.float32(-1.0)) & (v <= np.float32(5.0))
        whole = np.int32(v if inside else np.float32(0.0))
        bad |= np.int32(np.float32(whole) != v)
        out[i] = np.int8(whole)
    return out.reshape(block.shape), bad == 0


@njit(cache=True, nogil=True)
def layout_changed_aggregates(configs, default_layout, weights):
    """float32 (n_configs, 3 * n_weights): sum, mean and max of per-node weights over the
    configurable nodes whose output layout differs from their default.

    configs: int8 (n_configs, nc, 18); default_layout: int8 (nc, 6); weights: float64
    (nc, n_weights), e.g. k-hop neighbourhood statistics. Zero when no node changed.
    """
    c, nc, _ = configs.shape
    w = weights.shape[1]
    out = np.zeros((c, 3 * w), dtype=np.float32)
    for i in range(c):
        changed = 0
        for j in range(nc):
            if _keeps_default(configs, i, j, default_layout):
                continue
            changed += 1
            for f in range(w):
                out[i, f] += weights[j, f]
                if changed == 1 or weights[j, f] > out[i, 2 * w + f]:
                    out[i, 2 * w + f] = weights[j, f]
        if changed > 0:
            for f in range(w):
                out[i, w + f] = out[i, f] / changed
    return out


@njit(cache=True, nogil=True)
def layout_embedding_table(heads, tables):
    """float32 (nc, n_pairs, 49, d): per configurable node and pair of config columns, the
    node's embedding modulated by each of the 49 pairs of dimension ids (-1..5, -1..5):
    heads[j] * (tables[2q, a + 1] + tables[2q + 1, b + 1]) at row 7 * (a + 1) + b + 1.

    heads: float64 (nc, d), one embedding per configurable node; tables: float64
    (2 * n_pairs, 7, d), one row per dimension id at each chosen config column. Made once
    per graph, so `layout_embedding_join` is lookups and adds.
    """
    nc, d = heads.shape
    n_pairs = tables.shape[0] // 2
    paired = np.empty((nc, n_pairs, 49, d), dtype=np.float32)
    for j in range(nc):
        for q in range(n_pairs):
            for a in range(7):
                for b in range(7):
                    for f in range(d):
                        paired[j, q, 7 * a + b, f] = heads[j, f] * (
                            tables[2 * q, a, f] + tables[2 * q + 1, b, f])
    return paired


@njit(cache=True, nogil=True)
def layout_embedding_join(configs, paired, positions):
    """float32 (n_configs, 2 * d): mean and max over configurable nodes of the sum over
    pairs q of paired[j, q, row], row picked by the dimension ids configs[i, j] holds at
    positions[2q] and positions[2q + 1].

    configs: int8 (n_configs, nc, 18); paired: float32 (nc, n_pairs, 49, d) from
    `layout_embedding_table`; positions: int64 (2 * n_pairs,) config columns. Zero when
    there is no configurable node.
    """
    c, nc, _ = configs.shape
    n_pairs, d = paired.shape[1], paired.shape[3]
    if positions.shape[0] != 2 * n_pairs:
        raise ValueError("positions must hold two config columns per table pair")
    out = np.zeros((c, 2 * d), dtype=np.float32)
    if nc == 0:
        return out
    # Table rows of every config, read in memory order; then nodes outer, configs inner,
    # so each node's 49-row tables stay in cache while the batch's configs use them.
    rows = np.empty((nc, c, n_pairs), dtype=np.uint8)
    for i in range(c):
        for j in range(nc):
            for q in range(n_pairs):
                rows[j, i, q] = (7 * (configs[i, j, positions[2 * q]] + 1)
                                 + configs[i, j, positions[2 * q + 1]] + 1)
    total = np.zeros((c, d), dtype=np.float32)
    best = np.full((c, d), -np.inf, dtype=np.float32)
    for j in range(nc):
        for i in range(c):
            for f in range(d):
                value = paired[j, 0, rows[j, i, 0], f]
                for q in range(1, n_pairs):
                    value += paired[j, q, rows[j, i, q], f]
                total[i, f] += value
                best[i, f] = max(best[i, f], value)
    for i in range(c):
        for f in range(d):
            out[i, f] = total[i, f] / nc
            out[i, d + f] = best[i, f]
    return out
