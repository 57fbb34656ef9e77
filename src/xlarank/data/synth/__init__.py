"""Synthetic TpuGraphs: real file format and layout, runtimes from an analytic cost model.

The full dataset cannot be had on every machine, so xlarank makes data that looks like it
for scale tests and learning curves. Nothing here is a TpuGraphs result.

Programs
    Nodes are made in topological order from a mix of HLO opcodes (parameters, constants,
    elementwise ops, broadcast, reshape, transpose, convolution, dot, reduce, fusion, copy)
    with shapes that follow the operands (elementwise keeps the shape, reduce drops a dim,
    convolution maps (b, h, w, c) to (b, h', w', c_out), ...). Dimension sizes mix powers of
    two with sizes such as 7, 14, 28, 96, 100 or 1000 that do not fill hardware tiles.
    Edges are [consumer, producer], so every edge points to a lower node id, as in real files.
    Layout programs also hold 3-D convolutions on rank-5 tensors, reshapes that flatten to
    rank 1 and reshapes to a scalar (``generate_program(layout=True)``); tile kernels do not.

Layout configs (``generate_layout_configs``), in the real encoding (FORMAT.md, "Layout
configs as they really are")
    Configurable nodes are convolution, dot and reshape of any rank (rank 0 to 5 occur) and
    transposes of rank >= 2. A config gives, per configurable node, an output layout
    (columns 0-5), the layout its first operand is read in (input, 6-11) and the layout of
    its second operand (kernel, 12-17, convolution and dot), each minor-to-major with -1
    where the config does not fix a position. Each slot takes one of a node's 1-3 options:
    mostly the two minor-most positions fixed (the default pair r-1, r-2, its swap, or a
    pair with another dim), sometimes nothing fixed (all -1), rarely one position (rank 1)
    or the whole order (some rank-3 reshapes). "default" search keeps most nodes on their
    first option and moves a few per config; "random" search picks near-uniformly. A node
    mostly reads its configurable producer's chosen output; reshapes and transposes read
    their operand in the layout that goes with their output choice. Per file, the option
    mix, duplicate rate (0-45%), runtime spread and repeat agreement are drawn so that the
    file statistics (``xlarank.data.config_stats``) fall in the ranges FORMAT.md measured.

Layout cost model (``layout_runtime``, ``layout_cost_terms``)
    The effective layout of a tensor under a config is the config's fixed prefix, the
    remaining dims following the tensor's default minor-to-major order r-1, ..., 0 (so all
    -1 is the default layout, and [r-1, r-2, -1, ...] is the same layout). Only its two
    minor-most dims matter below. The true runtime of a config is

        fixed = sum over nodes of  bytes(node) * op_weight * NS_PER_BYTE  (+ 10 us)
      + (a) padding: sum over configurable nodes of
                bytes(node) * op_weight * NS_PER_BYTE * (pad(node) - 1),
            pad = (minor padded to a multiple of 128 / minor)
                  * (second-minor padded to a multiple of 8 / second-minor)
            under the node's effective output layout (``pad_factor``)
      + (b) relayout: sum over configurable nodes and read operands (input, kernel) of
                COPY_NS_PER_BYTE * bytes(operand)
            whenever the effective read layout's two minor-most dims differ from those the
            operand is produced in (its effective chosen output if it is configurable,
            else its default layout)
      + (c) unmodelled: sum over configurable nodes of  u(node, effective minor pair),
            a cost drawn once per file for each (node, effective minor, second-minor),
            lognormal (sigma 1) times bytes(node) * NS_PER_BYTE: hardware effects no
            feature sees. It is scaled so that its standard deviation over the file's
            configs is share / (1 - share) times that of (a) + (b), share drawn per file
            from 30-50%: which nodes flip, and what each flip costs, decide the runtime.

    In generated files the variable part (a + b + c) is then rescaled: each file draws a
    runtime spread log-uniformly from 1.02x to 3x, and the variable part is scaled so that
    max / min of the measured runtimes equals it (FORMAT.md: 3.05x on unet3d down to
    ~1.02x, both measured). Measured runtimes are the true ones times lognormal noise,
    one draw per config (repeated configs get their own draws): its sigma is set per file
    so that two measurements of the same configs agree to a Kendall tau drawn from
    0.6-0.95 (unet3d: 0.82), and at least MIN_LAYOUT_NOISE; LAYOUT_NOISE (0.5%) when
    ``layout_runtime`` is called without a target tau.

Tile configs (``generate_tile_configs``), shaped after the 15 kernels of the real tuning
record (../shared/tpugraphs/raw/op_tuning_data.pb; docs/synthetic.md)
    Output bounds are in elements and tile whole hardware tiles: multiples of LANES (128)
    on the minor-most dim and of SUBLANES (8) on the second-minor, or the whole dim (the
    record's bounds count hardware tiles). The default (config 0) is the compiler's
    pick: of the candidates whose double-buffered tiles fit in VMEM_BYTES, the one the cost
    model below, times a lognormal error (TILE_DEFAULT_ERROR), rates fastest; so, as in the
    record, it is the fastest config or close to it. Each kernel draws how many times the
    default's tile count its finest candidate makes (TILE_FINEST, 4x-300x; the record:
    4x-288x) and always measures that finest candidate (the slowest config of the real
    kernels); the others lie between 1 / TILE_COARSEST and that many tiles.

Tile cost model (``tile_runtime``)
    A kernel's config tiles its output shape (output bounds, columns 8-15 of config_feat).
    runtime = padded_work * lane_pad * sublane_pad * TILE_NS_PER_BYTE
              + input_bytes * rereads * TILE_READ_NS_PER_BYTE
              + n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel nodes)
              + tile bytes * operands * TILE_FILL_NS_PER_BYTE   (the pipeline's first
                load, which nothing overlaps)
              + a spill term when two tiles per operand (double buffering; operands are
                the kernel's inputs and output) exceed the on-chip memory VMEM_BYTES,
    where padded_work counts the bytes of whole tiles (tiles that do not divide the shape
    waste the remainder), lane/sublane pads apply the 128/8 rule to the tile itself, and
    rereads is 1 for elementwise kernels but, for kernels with a convolution or dot, the
    mean tile count along the two minor-most output dims (a contraction reads its inputs
    once per row or column of output tiles). The re-read and per-node overhead terms make
    the best tile depend on the kernel, not on the tile alone, as on real hardware.
    The normalizer is the default config's runtime, measured separately. Measured over
    the default, the runtimes then sit where the record's do (``tile_runtime_stats``):
    per kernel, max / min is a few times (the record: median 5.5x, at most 29x).

Duplicates
    Each tile kernel draws fewer distinct configs than it has configs (60% to 95%) and
    repeats some, so identical configs with different measured runtimes occur; layout
    files do the same with their drawn duplicate rate.

Modules
    ``programs`` (the generated graphs and their opcode mix), ``layout`` (layout configs
    and the layout cost model), ``tile`` (tile configs and the tile cost model) and
    ``dataset`` (presets and the file and tree writers). The names below are re-exported
    here; the tuning constants of each model live in its module.
"""

from xlarank.data.synth.dataset import (
    BENCH_GRAPH,
    PRESETS,
    SynthJob,
    SynthNoise,
    SynthSize,
    draw_size,
    make_layout_file,
    make_tile_file,
    synth_dataset,
    synth_file_count,
    synth_jobs,
    write_synth_file,
)
from xlarank.data.synth.layout import (
    COPY_NS_PER_BYTE,
    NS_PER_BYTE,
    OP_WEIGHT,
    LayoutPlan,
    LayoutSetting,
    draw_layout_configs,
    draw_layout_plan,
    draw_unmodelled_costs,
    effective_minor_pair,
    generate_layout_configs,
    layout_cost_terms,
    layout_runtime,
    layout_setting,
    op_weights,
    pad_factor,
)
from xlarank.data.synth.programs import Program, default_layouts, generate_program
from xlarank.data.synth.tile import (
    TileKernel,
    default_tile,
    generate_tile_configs,
    reread_factor,
    tile_runtime,
    tile_units,
)

__all__ = [
    "BENCH_GRAPH",
    "COPY_NS_PER_BYTE",
    "NS_PER_BYTE",
    "OP_WEIGHT",
    "PRESETS",
    "LayoutPlan",
    "LayoutSetting",
    "Program",
    "SynthJob",
    "SynthNoise",
    "SynthSize",
    "TileKernel",
    "default_layouts",
    "default_tile",
    "draw_layout_configs",
    "draw_layout_plan",
    "draw_size",
    "draw_unmodelled_costs",
    "effective_minor_pair",
    "generate_layout_configs",
    "generate_program",
    "generate_tile_configs",
    "layout_cost_terms",
    "layout_runtime",
    "layout_setting",
    "make_layout_file",
    "make_tile_file",
    "op_weights",
    "pad_factor",
    "reread_factor",
    "synth_dataset",
    "synth_file_count",
    "synth_jobs",
    "tile_runtime",
    "tile_units",
    "write_synth_file",
]
