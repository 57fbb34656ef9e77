"""The dataset writer: presets, one seeded stream per file, the tile and layout npz files,
and the whole tree written beside its target and renamed into place."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from xlarank.atomic import check_output
from xlarank.data.collections import COLLECTIONS, SPLITS, Collection
from xlarank.data.npzwrite import write_npz
from xlarank.data.synth.layout import (
    LAYOUT_REPEAT_TAU,
    LAYOUT_SPREAD,
    LayoutSetting,
    generate_layout_configs,
    layout_runtime,
    layout_setting,
)
from xlarank.data.synth.programs import (
    CONVOLUTION,
    DOT,
    PARAMETER,
    RESHAPE,
    TRANSPOSE,
    TUPLE,
    Program,
    generate_program,
)
from xlarank.data.synth.tile import TILE_NOISE, TileKernel, generate_tile_configs, tile_runtime
from xlarank.engine import map_ordered
from xlarank.errors import XlarankError
from xlarank.seeds import check_seed

MAX_CONFIG_TENSOR_BYTES = 2_600_000_000


@dataclass(frozen=True)
class SynthSize:
    """How many files and how large. Sizes are drawn log-uniformly from the (min, max)
    ranges, so small graphs are common and large ones rare, as in the real data."""

    tile_files: tuple[int, int, int]  # train, valid, test
    layout_files: tuple[int, int, int]  # per layout collection, unless layout_files_each
    tile_nodes: tuple[int, int]  # min, max
    tile_configs: tuple[int, int]
    layout_nodes: tuple[int, int]
    layout_configurable: tuple[int, int]
    layout_configs: tuple[int, int]  # unless layout_configs_each
    # Per layout collection (xla default, xla random, nlp default, nlp random), if they differ.
    layout_files_each: tuple[tuple[int, int, int], ...] | None = None
    layout_configs_each: tuple[tuple[int, int], ...] | None = None
    compress_level: int = 6

    def files(self, collection: Collection) -> tuple[int, int, int]:
        if collection.is_tile:
            return self.tile_files
        if self.layout_files_each:
            return self.layout_files_each[COLLECTIONS.index(collection) - 1]
        return self.layout_files

    def configs(self, collection: Collection) -> tuple[int, int]:
        if collection.is_tile:
            return self.tile_configs
        if self.layout_configs_each:
            return self.layout_configs_each[COLLECTIONS.index(collection) - 1]
        return self.layout_configs


# One layout graph at the scale of the largest real ones (FORMAT.md: 40,332 nodes,
# 2,251 configurable, 10,760 configs), for benchmarks.
BENCH_GRAPH = SynthSize((0, 0, 0), (0, 0, 1), (2, 2), (1, 1), (40_000, 40_000), (2_000, 2_000),
                        (10_000, 10_000))

PRESETS = {
    "tiny": SynthSize((6, 3, 2), (4, 2, 2), (2, 12), (8, 30), (40, 120), (4, 12), (12, 40)),
    # Tile kernels sized like the real ones (a few to a few hundred nodes, a few to thousands
    # of configs; FORMAT.md): with a few dozen configs per kernel the top five are nearly
    # always good, so tile quality could not be told apart from the noise floor.
    "demo": SynthSize((400, 100, 10), (30, 8, 3), (2, 300), (2, 8000), (200, 800), (16, 60),
                      (80, 300)),
    "small": SynthSize((400, 60, 20), (40, 8, 4), (2, 60), (20, 400), (500, 3000), (30, 200),
                       (200, 1500)),
    # The real dataset's file counts per collection and split (FORMAT.md) and its size
    # range: tile kernels of up to a few hundred nodes and thousands of configs; programs of
    # up to 40,000 nodes and 2,000 configurable nodes; up to 100,000 configs in nlp random.
    # Compressed fast (level 1): the point is reading it back.
    "real": SynthSize((5709, 676, 844), (0, 0, 0), (2, 300), (2, 8000), (300, 40_000),
                      (10, 2_000), (500, 15_000),
                      layout_files_each=((61, 7, 8), (69, 7, 8), (198, 20, 17), (207, 20, 17)),
                      layout_configs_each=((500, 15_000), (500, 15_000), (500, 15_000),
                                           (1_000, 100_000)),
                      compress_level=1),
}


@dataclass(frozen=True)
class SynthNoise:
    """How far repeated measurements agree in a generated tree.

    layout_repeat_tau: (lo, hi); each layout file draws, uniformly in it, the Kendall tau at
    which two measurements of its configs agree, and sizes its lognormal noise to that
    (`xlarank.data.synth.layout.layout_runtime`). The default, 0.6-0.95, is around
    unet3d's 0.82 (FORMAT.md); the layout record of ../shared/tpugraphs/raw/, imported,
    agrees to 0.36 only, so a tree as noisy as it takes (0.3, 0.45). tile_sigma: the
    lognormal sigma of each tile measurement (default 2%, as the dataset's normalizers are
    measured alongside; `xlarank.data.synth.tile.tile_runtime`).
    """

    layout_repeat_tau: tuple[float, float] = LAYOUT_REPEAT_TAU
    tile_sigma: float = TILE_NOISE

    def __post_init__(self):
        lo, hi = (float(t) for t in self.layout_repeat_tau)
        if not (0.0 < lo <= hi < 1.0):
            raise XlarankError(f"repeat tau {lo:g}-{hi:g}: give 0 < lo <= hi < 1 (two "
                               "measurements agreeing to tau 1 would be noise-free)")
        sigma = float(self.tile_sigma)
        if not (0.0 <= sigma <= 1.0):
            raise XlarankError(f"tile noise {sigma:g}: give a lognormal sigma from 0 to 1")
        object.__setattr__(self, "layout_repeat_tau", (lo, hi))
        object.__setattr__(self, "tile_sigma", sigma)


DEFAULT_NOISE = SynthNoise()


def draw_size(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    """An integer in [lo, hi], log-uniform."""
    lo, hi = bounds
    return int(np.clip(round(np.exp(rng.uniform(np.log(lo), np.log(hi + 0.999)))), lo, hi))


def _rng(seed: int, collection: Collection, split: str, index: int) -> np.random.Generator:
    # One stream per file, so any file can be made alone and in any order.
    return np.random.default_rng([seed, COLLECTIONS.index(collection), SPLITS.index(split), index])


def make_tile_file(path: Path, seed: int, split: str, index: int, size: SynthSize,
                   noise: SynthNoise = DEFAULT_NOISE) -> None:
    rng = _rng(seed, COLLECTIONS[0], split, index)
    n_nodes = draw_size(rng, size.tile_nodes)
    program = generate_program(rng, n_nodes)
    # The kernel's output is the last non-tuple value.
    out = int(np.flatnonzero((program.rank > 0) & (program.opcode != TUPLE))[-1])
    program = _truncate(program, out + 1)
    out_dims = program.dims[out]
    n_configs = draw_size(rng, size.tile_configs)
    inputs = program.opcode == PARAMETER
    contractions = int(np.isin(program.opcode, (CONVOLUTION, DOT)).sum())
    kernel = TileKernel(
        out_dims=out_dims, element_bytes=int(program.element_bytes[out]),
        n_operands=int(inputs.sum()) + 1,
        intensity=1.0 + contractions * 4.0,
        input_bytes=float(program.bytes[inputs].sum()),
        contracts=contractions > 0,
        n_nodes=len(program.opcode))
    # Double-buffered tiles of every operand (inputs and output) must fit on chip.
    fit_bytes = 2.0 * kernel.element_bytes * kernel.n_operands
    configs = generate_tile_configs(rng, out_dims, n_configs, fit_bytes,
                                    rate=lambda c: tile_runtime(kernel, c, None))
    runtime = tile_runtime(kernel, configs, rng, noise.tile_sigma)
    normalizer = tile_runtime(kernel, configs[:1], rng, noise.tile_sigma)[0]
    if split == "test":
        runtime = np.zeros_like(runtime)
        normalizer = 1
    write_npz(path, {
        "node_feat": program.node_feat(),
        "node_opcode": program.opcode.astype(np.uint8),
        "edge_index": program.edge_index(),
        "config_feat": configs,
        "config_runtime": runtime,
        "config_runtime_normalizers": np.full(n_configs, normalizer, dtype=np.int64),
    }, compress_level=size.compress_level)


def _truncate(program: Program, n: int) -> Program:
    """The first n nodes, with the last one as root."""
    return Program(program.opcode[:n], program.dims[:n], program.rank[:n],
                   program.element_col[:n], program.element_bytes[:n],
                   [list(o) for o in program.operands[:n]])


def make_layout_file(path: Path, collection: Collection, seed: int, split: str, index: int,
                     size: SynthSize, config_block: int = 512,
                     noise: SynthNoise = DEFAULT_NOISE) -> None:
    rng = _rng(seed, collection, split, index)
    n_nodes = draw_size(rng, size.layout_nodes)
    program = generate_program(rng, n_nodes, layout=True)
    setting = layout_setting(program)
    n_configs = draw_size(rng, size.configs(collection))
    # The largest real config tensor is ~2.6 GB as float32 (FORMAT.md): many configs come
    # with fewer configurable nodes.
    target = min(draw_size(rng, size.layout_configurable),
                 max(1, MAX_CONFIG_TENSOR_BYTES // (n_configs * 18 * 4)))
    if len(setting.config_ids) > target:
        # Keep a subset configurable; the others keep their default layout. Reshapes and
        # transposes are kept less often than convolutions and dots, by a weight drawn per
        # file: reshapes are 6-40% of the configurable nodes of the real samples.
        op = program.opcode[setting.config_ids]
        weight = np.where(np.isin(op, (RESHAPE, TRANSPOSE)),
                          np.exp(rng.uniform(np.log(0.1), 0.0)), 1.0)
        keep = np.sort(rng.choice(len(setting.config_ids), target, replace=False,
                                  p=weight / weight.sum()))
        setting = LayoutSetting(setting.config_ids[keep], setting.input_src[keep],
                                setting.kernel_src[keep])
    configs = generate_layout_configs(rng, program, setting, n_configs, collection.search)
    # Real files: runtime spread 1.02x to 3.05x, repeat tau 0.82 on unet3d (FORMAT.md).
    spread = float(np.exp(rng.uniform(np.log(LAYOUT_SPREAD[0]), np.log(LAYOUT_SPREAD[1]))))
    tau = float(rng.uniform(*noise.layout_repeat_tau))
    runtime = layout_runtime(program, setting, configs, rng, spread=spread, repeat_tau=tau,
                             block=config_block)
    if split == "test":
        runtime = np.zeros_like(runtime)
    blocks = (configs[s:s + config_block].astype(np.float32)
              for s in range(0, n_configs, config_block))
    write_npz(path, {
        "node_feat": program.node_feat(),
        "node_opcode": program.opcode.astype(np.uint8),
        "edge_index": program.edge_index(),
        "node_config_ids": setting.config_ids,
        "config_runtime": runtime,
        "node_splits": np.array([[0, program.opcode.shape[0]]], dtype=np.int64),
    }, streamed={"node_config_feat": ((n_configs, len(setting.config_ids), 18), np.float32,
                                      blocks)}, compress_level=size.compress_level)


@dataclass(frozen=True)
class SynthJob:
    """One file of a synthetic tree, to be written by `write_synth_file` in any process."""

    root: Path
    rel: Path
    collection: Collection
    split: str
    index: int
    seed: int
    size: SynthSize
    noise: SynthNoise = DEFAULT_NOISE


def write_synth_file(job: SynthJob) -> Path:
    path = job.root / job.rel
    if job.collection.is_tile:
        make_tile_file(path, job.seed, job.split, job.index, job.size, job.noise)
    else:
        make_layout_file(path, job.collection, job.seed, job.split, job.index, job.size,
                         noise=job.noise)
    return job.rel


def synth_jobs(root: Path, seed: int, size: SynthSize,
               noise: SynthNoise = DEFAULT_NOISE) -> list[SynthJob]:
    """Every file of a synthetic tree under ``root``."""
    return [SynthJob(root, Path("npz") / c.folder / split / f"synth_{split}_{i:04d}.npz",
                     c, split, i, seed, size, noise)
            for c in COLLECTIONS for split, count in zip(SPLITS, size.files(c))
            for i in range(count)]


def synth_dataset(out: Path, preset: str = "demo", seed: int = 0,
                  on_file: Callable[[Path], None] | None = None, workers: int = 1,
                  noise: SynthNoise = DEFAULT_NOISE) -> Path:
    """Write a synthetic dataset in the official tree under ``out``, its measurements as
    noisy as ``noise`` says (`SynthNoise`; the default leaves every file as it was before
    the setting existed: the same draws from the same streams).

    The tree is built beside ``out`` and renamed into place when complete, so ``out``
    either holds a whole dataset or does not exist. ``out/synth.json`` records how it was
    made. Files are the same for any ``workers``. Raises `XlarankError` if ``out`` exists.
    """
    if preset not in PRESETS:
        raise XlarankError(f"unknown synth preset {preset!r}; known: {', '.join(PRESETS)}")
    seed = check_seed(seed, "seed")
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise XlarankError(f"{out}: already exists; remove it or choose another folder")
    check_output(out, "dir")
    size = PRESETS[preset]
    building = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    try:
        jobs = synth_jobs(building, seed, size, noise)
        done = (lambda job: on_file(job.rel)) if on_file else None
        for _ in map_ordered(write_synth_file, jobs, workers, on_done=done):
            pass
        manifest = {"generator": "xlarank synth", "preset": preset, "seed": seed,
                    "size": asdict(size), "noise": asdict(noise),
                    "note": "synthetic data, not TpuGraphs"}
        (building / "synth.json").write_text(json.dumps(manifest, indent=2) + "\n")
        building.rename(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return out


def synth_file_count(preset: str) -> int:
    size = PRESETS[preset]
    return sum(sum(size.files(c)) for c in COLLECTIONS)
