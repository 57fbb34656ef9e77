"""Layout configs in the real encoding and the layout cost model (the package docstring,
"Layout configs" and "Layout cost model")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlarank.data.synth.programs import (
    CONFIGURABLE_OPCODES,
    CONVOLUTION,
    DOT,
    REDUCE,
    RESHAPE,
    TRANSPOSE,
    Program,
    default_layouts,
)

OP_WEIGHT = {CONVOLUTION: 6.0, DOT: 5.0, REDUCE: 1.5, TRANSPOSE: 1.2, RESHAPE: 0.6}
NS_PER_BYTE = 0.02
COPY_NS_PER_BYTE = 0.1
LAYOUT_NOISE = 0.005
MIN_LAYOUT_NOISE = 5e-5
# Per layout file: max/min of the measured runtimes (log-uniform) and the Kendall tau
# between two measurements of the same configs (uniform); FORMAT.md: 1.02x-3.05x, tau 0.82
# (unet3d).
LAYOUT_SPREAD = (1.02, 3.0)
LAYOUT_REPEAT_TAU = (0.6, 0.95)
CONFIG_CHUNK = 1 << 24  # int8 config values drawn at a time


@dataclass(frozen=True)
class LayoutSetting:
    """The configurable part of a layout program.

    config_ids: int64 (nc,); input_src / kernel_src: int64 (nc,) node id of the first and
    second operand (-1 if none).
    """

    config_ids: np.ndarray
    input_src: np.ndarray
    kernel_src: np.ndarray


def layout_setting(program: Program) -> LayoutSetting:
    """Configurable nodes: every convolution, dot and reshape, of any rank (the real files
    have configurable reshapes of rank 0 and 1, FORMAT.md), and transposes of rank >= 2."""
    op = program.opcode
    ids = np.flatnonzero(np.isin(op, CONFIGURABLE_OPCODES) & ((op != TRANSPOSE) |
                                                              (program.rank >= 2)))
    first = np.array([program.operands[i][0] if program.operands[i] else -1 for i in ids],
                     dtype=np.int64)
    second = np.array([program.operands[i][1] if len(program.operands[i]) > 1 else -1
                       for i in ids], dtype=np.int64)
    return LayoutSetting(ids.astype(np.int64), first, second)


# Kinds of option sets of one layout slot of one node (FORMAT.md: "1.4-2.0 distinct values"
# per node; a pair and its swap most often, "not fixed" or a constant otherwise).
CONST, PAIR, UNFIXED, TRIPLE = range(4)
MAX_OPTIONS = 3


@dataclass(frozen=True)
class LayoutPlan:
    """What a file's configs are drawn from.

    out_opts / in_opts / ker_opts: int8 (nc, MAX_OPTIONS, 6), the values a node's output,
    input (first operand) and kernel (second operand) layout can take, -1 where not fixed;
    out_p / in_p / ker_p: float64 (nc, MAX_OPTIONS), their pick probabilities (rows sum to
    1, zero past a node's options; default search: the first option dominates);
    in_tied: bool (nc,), the input option follows the output option (reshape, transpose);
    in_follow: float64 (nc,), the chance that a node reads its configurable producer's
    chosen output instead of its own input option (0 if the producer is not configurable);
    in_pos: int64 (nc,), the producer's position among the configurable nodes or -1;
    flip_rate: float (default search: the mean share of a slot's movable nodes a config
    moves off their first option; 0 for random search).
    """

    out_opts: np.ndarray
    out_p: np.ndarray
    in_opts: np.ndarray
    in_p: np.ndarray
    ker_opts: np.ndarray
    ker_p: np.ndarray
    in_tied: np.ndarray
    in_follow: np.ndarray
    in_pos: np.ndarray
    flip_rate: float


def _options(rng: np.random.Generator, rank: int, kind: int, default_pair: bool,
             full: bool) -> list[list[int]]:
    """The option values of one layout slot of a tensor of ``rank`` (first = dominant).

    A fixed option fixes the two minor-most positions: the default pair (r-1, r-2), or
    with ``default_pair`` False a pair (r-1, k) with another dim second; the swapped pair
    puts the other dim minor. ``full`` extends each fixed option to the whole order (the
    other dims in default order), as real rank-3 reshapes show. Rank 0 is never fixed;
    rank 1 fixes its single position or nothing.
    """
    none: list[int] = []
    if rank == 0:
        return [none]
    if rank == 1:
        return [[0]] if kind == CONST else ([[0], none] if rng.random() < 0.5 else [none, [0]])
    pair = [rank - 1, rank - 2] if default_pair or rank == 2 else \
        [rank - 1, int(rng.integers(rank - 2))]
    swapped = pair[::-1]
    if full:
        rest = [d for d in range(rank - 1, -1, -1) if d not in pair]
        pair, swapped = pair + rest, swapped + rest
    if kind == CONST:
        return [pair]
    if kind == PAIR:
        return [pair, swapped]
    if kind == UNFIXED:
        return [pair, none] if rng.random() < 0.5 else [none, pair]
    return [pair, swapped, none]


def _option_array(options: list[list[list[int]]]) -> np.ndarray:
    out = np.full((len(options), MAX_OPTIONS, 6), -1, dtype=np.int8)
    for j, opts in enumerate(options):
        for k, value in enumerate(opts):
            out[j, k, :len(value)] = value
    return out


def _pick_probabilities(rng: np.random.Generator, n_options: np.ndarray, search: str,
                        flip_rate: float) -> np.ndarray:
    """float64 (nc, MAX_OPTIONS): per node, how likely each option is picked.

    ``random`` search: near-uniform (Dirichlet, concentration 40 per option; real random
    files: 439/561 of 1000, a mean dominant share of 0.50-0.53). ``default`` search: the
    first option, except that a config moves ``flip_rate`` of the movable nodes (at least
    one) on average off it, nodes weighted lognormally (real default files: 3 of 21, 6 of
    35, 83 of 832 movable nodes per config; 22 to 500 of 1000 configs off the dominant
    option, depending on the node; a mean dominant share of 0.82-0.90).
    """
    nc = len(n_options)
    live = np.arange(MAX_OPTIONS)[None, :] < n_options[:, None]
    if search == "random":
        g = rng.gamma(40.0, size=(nc, MAX_OPTIONS)) * live
        return g / g.sum(axis=1, keepdims=True)
    movable = n_options > 1
    weight = rng.lognormal(0.0, 1.0, nc) * movable
    rate = np.zeros(nc)
    if weight.sum() > 0:
        flips = max(1.0, flip_rate * movable.sum())
        rate = np.minimum(0.6, flips * weight / weight.sum())
    p = np.where(live, rate[:, None] / np.maximum(1, n_options - 1)[:, None], 0.0)
    p[:, 0] = 1.0 - rate
    return p


def draw_layout_plan(rng: np.random.Generator, program: Program, setting: LayoutSetting,
                     search: str) -> LayoutPlan:
    """Per configurable node, the few layouts each slot can take, and how they are picked.

    Per file: the shares of node kinds (constant 5-55%, skewed low; pair and swap; pair or
    not fixed 8-40%; all three 0-8%), the share of pairs that are the default pair
    (60-95%), of rank-3 reshape options fixed in full (0-15%; a quarter of that on rank 4),
    of nodes whose input is read as its configurable producer's output (60-95%), of kernel
    slots that may be left unfixed (0-30%) and, for default search, the share of movable
    nodes a config moves (6-20%). These ranges put the file statistics where FORMAT.md
    measured them on the real samples.
    """
    ids = setting.config_ids
    nc = len(ids)
    rank = program.rank
    p_const = 0.05 + 0.5 * rng.random() ** 2
    p_unfixed = rng.uniform(0.08, 0.4)
    p_triple = rng.uniform(0.0, 0.08)
    shares = np.array([p_const, max(0.0, 1.0 - p_const - p_unfixed - p_triple), p_unfixed,
                       p_triple])
    shares /= shares.sum()
    p_default_pair = rng.uniform(0.6, 0.95)
    p_full = rng.uniform(0.0, 0.15)
    p_follow = rng.uniform(0.6, 0.95)
    p_kernel_unfixed = rng.uniform(0.0, 0.3)
    flip_rate = float(rng.uniform(0.06, 0.2)) if search == "default" else 0.0

    position = np.full(len(rank), -1, dtype=np.int64)
    position[ids] = np.arange(nc)
    kinds = rng.choice(4, size=nc, p=shares)
    in_kinds = rng.choice(4, size=nc, p=shares)
    tied = np.isin(program.opcode[ids], (RESHAPE, TRANSPOSE))
    out_opts, in_opts, ker_opts = [], [], []
    for j, node in enumerate(ids):
        r = int(rank[node])
        # Real files fix a whole order on some rank-3 reshapes, very rarely on rank 4.
        full = (program.opcode[node] == RESHAPE and (r == 3 or r == 4 and rng.random() < 0.25)
                and rng.random() < p_full)
        default = rng.random() < p_default_pair
        out = _options(rng, r, int(kinds[j]), default, bool(full))
        out_opts.append(out)
        src = int(setting.input_src[j])
        rs = int(rank[src]) if src >= 0 else 0
        in_full = bool(tied[j]) and (rs == 3 or rs == 4 and rng.random() < 0.25) and \
            rng.random() < p_full
        if src < 0:
            read = [[]]
        elif tied[j]:
            # A reshape or transpose reads its operand in the layout that goes with its
            # output choice: the operand's primary pair, its swap, or not fixed.
            pair, swapped = _options(rng, rs, PAIR, True, in_full)[:2] if rs >= 2 else \
                ([[0], [0]] if rs == 1 else [[], []])
            read = [[] if not o else (pair if o == out[0] or (not out[0] and k == 1)
                                      else swapped) for k, o in enumerate(out)]
        else:
            read = _options(rng, rs, int(in_kinds[j]), rng.random() < p_default_pair, in_full)
        in_opts.append(read)
        ksrc = int(setting.kernel_src[j])
        if ksrc < 0:
            ker_opts.append([[]])
        else:
            rk = int(rank[ksrc])
            kind = TRIPLE if rng.random() < p_kernel_unfixed else PAIR
            ker_opts.append(_options(rng, rk, kind, True, False))
    n_out = np.array([len(o) for o in out_opts], dtype=np.int64)
    n_in = np.array([len(o) for o in in_opts], dtype=np.int64)
    n_ker = np.array([len(o) for o in ker_opts], dtype=np.int64)
    in_pos = np.where(setting.input_src >= 0, position[np.maximum(setting.input_src, 0)], -1)
    follow = np.where(in_pos >= 0, p_follow, 0.0)
    return LayoutPlan(
        out_opts=_option_array(out_opts),
        out_p=_pick_probabilities(rng, n_out, search, flip_rate),
        in_opts=_option_array(in_opts), in_p=_pick_probabilities(rng, n_in, search, flip_rate),
        ker_opts=_option_array(ker_opts),
        ker_p=_pick_probabilities(rng, n_ker, search, flip_rate),
        in_tied=tied, in_follow=follow, in_pos=in_pos.astype(np.int64), flip_rate=flip_rate)


def _draw_picks(rng: np.random.Generator, p: np.ndarray, m: int) -> np.ndarray:
    """int64 (m, nc): option index per config and node, from probabilities (nc, k)."""
    cum = np.cumsum(p, axis=1)
    cum /= cum[:, -1:]  # exactly 1 from a node's last option on: never picks past it
    u = rng.random((m, p.shape[0]))
    return (u[:, :, None] >= cum[None, :, :-1]).sum(axis=2)


def draw_layout_configs(rng: np.random.Generator, plan: LayoutPlan, m: int) -> np.ndarray:
    """int8 (m, nc, 18): m configs drawn from a plan (duplicates possible)."""
    nc = plan.out_opts.shape[0]
    nodes = np.arange(nc)[None, :]
    out_pick = _draw_picks(rng, plan.out_p, m)
    in_pick = np.where(plan.in_tied[None, :], out_pick, _draw_picks(rng, plan.in_p, m))
    ker_pick = _draw_picks(rng, plan.ker_p, m)
    configs = np.empty((m, nc, 18), dtype=np.int8)
    configs[:, :, 0:6] = plan.out_opts[nodes, out_pick]
    configs[:, :, 6:12] = plan.in_opts[nodes, in_pick]
    configs[:, :, 12:18] = plan.ker_opts[nodes, ker_pick]
    follow = rng.random((m, nc)) < plan.in_follow[None, :]
    if follow.any():
        produced = configs[:, np.maximum(plan.in_pos, 0), 0:6]
        configs[:, :, 6:12] = np.where(follow[:, :, None], produced, configs[:, :, 6:12])
    return configs


def _row_hashes(configs: np.ndarray, salt: np.ndarray) -> np.ndarray:
    """uint64 (m,): a hash of each config row; equal rows hash equal."""
    flat = np.ascontiguousarray(configs).reshape(len(configs), -1)
    if flat.shape[1] % 8:
        flat = np.pad(flat, ((0, 0), (0, 8 - flat.shape[1] % 8)))
    words = flat.view(np.uint64)
    w = words.shape[1]
    with np.errstate(over="ignore"):
        low = (words * salt[:w][None, :]).sum(axis=1, dtype=np.uint64)
        high = (words * salt[w:2 * w][None, :]).sum(axis=1, dtype=np.uint64)
    return low ^ ((high << np.uint64(29)) | (high >> np.uint64(35)))


def generate_layout_configs(rng: np.random.Generator, program: Program, setting: LayoutSetting,
                            n_configs: int, search: str) -> np.ndarray:
    """int8 (n_configs, nc, 18): output, input and kernel layouts per configurable node, in
    the real encoding (FORMAT.md "Layout configs as they really are").

    Each slot takes one of a node's few options (`draw_layout_plan`): mostly the two
    minor-most positions fixed, sometimes none, rarely one or the whole order. A node
    reads its first operand mostly in its configurable producer's chosen output layout,
    else in its own input option. The file's duplicate rate is drawn (40% of files 0-2%,
    the others 2-45%; real: 0-1.3% on the test samples, 41% on unet3d): that many configs
    repeat a distinct one, so their runtimes differ by measurement noise only. When the
    options allow fewer distinct configs, the rate is higher (real openai_v0_rnn_optimized:
    20 configs, 1 distinct).
    """
    nc = len(setting.config_ids)
    plan = draw_layout_plan(rng, program, setting, search)
    rate = rng.uniform(0.0, 0.02) if rng.random() < 0.4 else rng.uniform(0.02, 0.45)
    want = max(1, int(round(n_configs * (1.0 - rate))))
    salt = rng.integers(1, 2**63, size=2 * (nc * 18 // 8 + 1), dtype=np.uint64) | np.uint64(1)
    distinct = np.empty((want, nc, 18), dtype=np.int8)
    seen: set[int] = set()
    have, drawn = 0, 0
    # Candidates in chunks of about CONFIG_CHUNK values, so memory stays near the output's.
    chunk = max(16, CONFIG_CHUNK // max(1, nc * 18))
    while have < want and drawn < 8 * want + 64:
        m = min(chunk, (want - have) * 5 // 4 + 16)
        block = draw_layout_configs(rng, plan, m)
        drawn += m
        hashes = _row_hashes(block, salt)
        _, first = np.unique(hashes, return_index=True)
        fresh = [i for i in np.sort(first) if int(hashes[i]) not in seen][: want - have]
        seen.update(int(hashes[i]) for i in fresh)
        distinct[have:have + len(fresh)] = block[fresh]
        have += len(fresh)
        if not fresh:
            break  # the options allow (nearly) no more distinct configs
    distinct = distinct[:have]
    pick = np.concatenate([np.arange(have), rng.integers(0, have, n_configs - have)])
    return distinct[rng.permutation(pick)]


def effective_minor_pair(prefix: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """int64 (..., 2): the two minor-most dims a layout config leaves in effect.

    prefix: int8 (..., 6) config layout (-1 where not fixed); rank: int (...) tensor rank.
    Fixed positions are kept; unfixed ones follow the tensor's default order r-1, ..., 0
    over the dims the prefix does not fix. -1 where the rank has no such position.
    """
    rank = np.broadcast_to(np.asarray(rank, dtype=np.int64), prefix.shape[:-1])
    p0, p1 = prefix[..., 0].astype(np.int64), prefix[..., 1].astype(np.int64)
    fixed0 = p0 >= 0
    fixed1 = fixed0 & (p1 >= 0)
    e0 = np.where(fixed0, p0, rank - 1)
    e1 = np.where(fixed1, p1, np.where(fixed0 & (p0 == rank - 1), rank - 2,
                                       np.where(fixed0, rank - 1, rank - 2)))
    e0 = np.where(rank >= 1, e0, -1)
    e1 = np.where(rank >= 2, e1, -1)
    return np.stack([e0, e1], axis=-1)


def pad_factor(dims: np.ndarray, layouts: np.ndarray) -> np.ndarray:
    """float64 (b, nc): waste of padding the minor dim to 128 and the second-minor to 8.

    dims: int64 (nc, 6); layouts: int (b, nc, >= 2) minor-to-major, the first two positions
    used (-1: no such dim, no padding). Pass effective layouts (`effective_minor_pair`).
    """
    nodes = np.arange(dims.shape[0])[None, :]
    minor_id, second_id = layouts[..., 0].astype(np.int64), layouts[..., 1].astype(np.int64)
    minor = np.where(minor_id >= 0, dims[nodes, minor_id.clip(0, 5)], 1).clip(min=1)
    second = np.where(second_id >= 0, dims[nodes, second_id.clip(0, 5)], 1).clip(min=1)
    return (np.ceil(minor / 128) * 128 / minor) * (np.ceil(second / 8) * 8 / second)


def op_weights(program: Program) -> np.ndarray:
    """float64 (n,): cost weight of each node's opcode (OP_WEIGHT, 0.3 otherwise)."""
    weight = np.full(len(program.opcode), 0.3)
    for op, w in OP_WEIGHT.items():
        weight[program.opcode == op] = w
    return weight


def draw_unmodelled_costs(rng: np.random.Generator, program: Program,
                          setting: LayoutSetting) -> np.ndarray:
    """float64 (nc, 7, 7): the unmodelled cost in ns of each configurable node under each
    effective (minor, second-minor) pair, indexed by dim + 1 (0: no such dim); lognormal
    (sigma 1), scaled by the node's bytes. Drawn once per file."""
    nbytes = program.bytes[setting.config_ids]
    draws = rng.lognormal(0.0, 1.0, size=(len(nbytes), 7, 7))
    return draws * (nbytes * NS_PER_BYTE)[:, None, None]


def layout_cost_terms(program: Program, setting: LayoutSetting, configs: np.ndarray,
                      unmodelled: np.ndarray | None = None) -> np.ndarray:
    """float64 (b, 3): padding, relayout and (unscaled) unmodelled cost in ns of each
    config of configs int8 (b, nc, 18); see the package docstring. ``unmodelled`` is
    `draw_unmodelled_costs`' table (zero term if None)."""
    ids = setting.config_ids
    rank, dims, nbytes = program.rank, program.dims, program.bytes
    b, nc = configs.shape[0], len(ids)
    terms = np.zeros((b, 3))
    if nc == 0:
        return terms
    out = effective_minor_pair(configs[:, :, 0:6], rank[ids][None, :])
    node_cost = nbytes[ids] * op_weights(program)[ids] * NS_PER_BYTE
    terms[:, 0] = (node_cost[None, :] * (pad_factor(dims[ids], out) - 1)).sum(axis=1)
    defaults = default_layouts(rank)[:, :2].astype(np.int64)
    position = np.full(len(rank), -1, dtype=np.int64)
    position[ids] = np.arange(nc)
    for slot, src in ((6, setting.input_src), (12, setting.kernel_src)):
        live = (src >= 0) & (rank[np.maximum(src, 0)] >= 1)
        if not live.any():
            continue
        s = np.maximum(src, 0)
        read = effective_minor_pair(configs[:, :, slot:slot + 6], rank[s][None, :])
        pos = position[s]
        produced = np.where((pos >= 0)[None, :, None], out[:, np.maximum(pos, 0)],
                            defaults[s][None, :, :])
        moved = (read != produced).any(axis=2) & live[None, :]
        terms[:, 1] += (moved * (nbytes[s] * COPY_NS_PER_BYTE)[None, :]).sum(axis=1)
    if unmodelled is not None:
        terms[:, 2] = unmodelled[np.arange(nc)[None, :], out[..., 0] + 1, out[..., 1] + 1].sum(1)
    return terms


def _pair_agreement(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau of two tie-free samples (all pairs; cheap for a few hundred values)."""
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    n = len(x)
    return float((dx * dy).sum() / (n * (n - 1)))


def _noise_for_tau(rng: np.random.Generator, runtime: np.ndarray, tau: float) -> float:
    """The lognormal sigma at which two measurements of the same configs agree to Kendall
    ``tau``, found by bisection on a sample of up to 200 configs (common random draws)."""
    sample = runtime if len(runtime) <= 200 else rng.choice(runtime, 200, replace=False)
    z = rng.standard_normal((2, len(sample)))
    log = np.log(sample)
    if len(sample) < 3 or np.ptp(log) == 0:
        return MIN_LAYOUT_NOISE
    lo, hi = np.log(MIN_LAYOUT_NOISE), 0.0
    if _pair_agreement(log + np.exp(lo) * z[0], log + np.exp(lo) * z[1]) <= tau:
        return MIN_LAYOUT_NOISE
    for _ in range(14):
        mid = (lo + hi) / 2
        agree = _pair_agreement(log + np.exp(mid) * z[0], log + np.exp(mid) * z[1])
        lo, hi = (mid, hi) if agree > tau else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def layout_runtime(program: Program, setting: LayoutSetting, configs: np.ndarray,
                   rng: np.random.Generator, spread: float | None = None,
                   repeat_tau: float | None = None, unmodelled_share: float | None = None,
                   block: int = 512) -> np.ndarray:
    """int64 (b,): measured runtime in ns of each config of configs int8 (b, nc, 18).

    The true runtime is the fixed part plus the padding, relayout and unmodelled terms
    (package docstring), the unmodelled term scaled so that its standard deviation over
    the configs is share / (1 - share) times that of padding + relayout, share being
    ``unmodelled_share`` (drawn from 30-50% if None). Measurements are the true runtimes times
    lognormal noise: with ``repeat_tau``, its sigma is sized so that two measurements of
    the same configs agree to that Kendall tau; else it is LAYOUT_NOISE. With ``spread``,
    the variable part is scaled so that max/min of the measured runtimes is ``spread``
    (the noise sigma scaled along, so the tau holds).
    """
    table = draw_unmodelled_costs(rng, program, setting)
    share = rng.uniform(0.3, 0.5) if unmodelled_share is None else unmodelled_share
    terms = np.concatenate([layout_cost_terms(program, setting, configs[s:s + block], table)
                            for s in range(0, len(configs), block)] or [np.zeros((0, 3))])
    modelled = terms[:, 0] + terms[:, 1]
    sm, su = float(modelled.std()), float(terms[:, 2].std())
    scale = share / (1.0 - share) * sm / su if sm > 0 and su > 0 else 1.0
    variable = modelled + scale * terms[:, 2]
    fixed = float((program.bytes * op_weights(program)).sum()) * NS_PER_BYTE + 1e4
    z = rng.standard_normal(len(configs))
    scaled = spread is not None and len(variable) > 1 and np.ptp(variable) > 0
    v = (variable - variable.min()) / np.ptp(variable) if scaled else variable

    def true_at(s: float) -> np.ndarray:
        return fixed * (1.0 + (s - 1.0) * v) if scaled else fixed + variable

    def sigma_at(true: np.ndarray) -> float:
        if repeat_tau is None:
            return LAYOUT_NOISE
        return max(MIN_LAYOUT_NOISE, ratio * float(np.log(true).std()))

    if repeat_tau is not None:
        true = true_at(spread if scaled else 1.0)
        s = float(np.log(true).std())
        ratio = _noise_for_tau(rng, true, repeat_tau) / s if s > 0 else 0.0
    if scaled:
        # Bisect the true spread so that the measured one (noise draws fixed) is ``spread``.
        lo, hi = 1.0, 2.0 * spread
        for _ in range(22):
            mid = (lo + hi) / 2
            true = true_at(mid)
            measured = true * np.exp(sigma_at(true) * z)
            lo, hi = (lo, mid) if measured.max() / measured.min() > spread else (mid, hi)
        true = true_at((lo + hi) / 2)
    else:
        true = true_at(1.0)
    return np.maximum(1, np.round(true * np.exp(sigma_at(true) * z))).astype(np.int64)
