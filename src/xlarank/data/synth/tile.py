"""Tile configs shaped after the real tuning record and the tile cost model (the package
docstring, "Tile configs" and "Tile cost model")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TILE_OVERHEAD_NS = 350.0
TILE_NODE_OVERHEAD_NS = 30.0
VMEM_BYTES = 16 << 20
TILE_NOISE = 0.02
# Tile kernels move bytes at TILE_NS_PER_BYTE (500 GB/s, HBM-like; layout's NS_PER_BYTE
# is 10x slower), re-reads and the pipeline fill at the same ratios as before. Set so
# that a kernel N times finer than its default slows down about as much as the real
# record's kernels (16x finer: 3.7x-5.5x; 64x-139x: 4.4x-8.5x; 288x: 26x).
TILE_NS_PER_BYTE = 0.002
TILE_READ_NS_PER_BYTE = 0.001
TILE_FILL_NS_PER_BYTE = 0.005
# The compiler's own cost model, by which it picks a kernel's default tile: the true cost
# times a lognormal error of this sigma (real record: the default is the fastest config
# in 11 of 15 kernels, the others' best is 2-12% faster).
TILE_DEFAULT_ERROR = 0.05
# Hardware tile of the two minor-most dims (sublanes x lanes): the real record's output
# bounds count whole ones.
LANES, SUBLANES = 128, 8
# Per tile kernel: how many times the default's output tiles its finest candidate makes,
# log-uniform (the real record: 4x to 288x over its 12 tiled kernels); the other
# candidates make at most that many and at least 1 / TILE_COARSEST as many (real: up to
# 8x coarser than the default); draws outside are redrawn TILE_DRAW_ROUNDS times, then
# repeat the default.
TILE_FINEST = (4.0, 300.0)
TILE_COARSEST = 8.0
TILE_DRAW_ROUNDS = 30


def tile_units(out_dims: np.ndarray) -> np.ndarray:
    """int64 (rank,): elements per hardware tile along each output dim: LANES on the
    minor-most dim, SUBLANES on the second-minor, 1 on the others."""
    rank = int((out_dims > 0).sum())
    units = np.ones(rank, dtype=np.int64)
    if rank:
        units[-1] = LANES
    if rank >= 2:
        units[-2] = SUBLANES
    return units


def default_tile(out_dims: np.ndarray, fit_bytes: float | None) -> np.ndarray:
    """int64 (rank,): hardware tiles per dim of the largest tile that fits on chip: the
    whole output, its major-most dims halved until ``fit_bytes`` (on-chip bytes per tile
    element) times the tile's elements fits VMEM_BYTES (the whole output if None)."""
    rank = int((out_dims > 0).sum())
    size = out_dims[:rank].astype(np.int64)
    units = tile_units(out_dims)
    tile = -(-size // units)
    while fit_bytes and (tile > 1).any() and \
            np.minimum(tile * units, size).prod() * fit_bytes > VMEM_BYTES:
        d = int(np.flatnonzero(tile > 1)[0])
        tile[d] = -(-tile[d] // 2)
    return tile


def generate_tile_configs(rng: np.random.Generator, out_dims: np.ndarray, n_configs: int,
                          fit_bytes: float | None = None,
                          rate: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """float32 (n_configs, 24): output bounds (columns 8-15, in elements) tile the output
    shape; config 0 is the default.

    Shaped after the 15 kernels of the real tuning record (docs/synthetic.md, "Tile configs
    and runtimes"): tiles are whole hardware tiles (multiples of LANES on the minor-most
    dim and of SUBLANES on the second-minor, or the whole dim); the default is the
    compiler's pick, ``rate`` (true runtimes of configs, float64 (c,)) times a lognormal
    error of TILE_DEFAULT_ERROR, among the candidates that fit on chip (``default_tile``
    when ``rate`` is None); the finest candidate makes ``finest`` times the default's
    output tiles, ``finest`` drawn per kernel log-uniformly from TILE_FINEST, and the
    other candidates make between 1 / TILE_COARSEST and ``finest`` times as many."""
    rank = int((out_dims > 0).sum())
    size = out_dims[:rank].astype(np.int64)
    units = tile_units(out_dims)
    n_units = -(-size // units)
    finest = float(np.exp(rng.uniform(np.log(TILE_FINEST[0]), np.log(TILE_FINEST[1]))))
    n_distinct = max(1, int(round(n_configs * rng.uniform(0.6, 0.95))))
    choices = []
    for d in range(rank):
        n = int(n_units[d])
        cand = {n, -(-n // 2), -(-n // 3), -(-n // 4)}
        cand |= {1 << k for k in range(n.bit_length())}
        choices.append(np.array(sorted(cand)))

    def n_tiles(tiles: np.ndarray) -> np.ndarray:
        return (-(-n_units // tiles)).prod(axis=1)

    def elements(tiles: np.ndarray) -> np.ndarray:
        return np.minimum(tiles * units, size)

    def draw(tiles: np.ndarray, rows: np.ndarray, anchor: np.ndarray) -> None:
        # Redraw ``rows`` until their tile counts lie in the range around ``anchor``'s;
        # rows still outside after TILE_DRAW_ROUNDS become the anchor.
        base = n_tiles(anchor[None, :])[0]
        for _ in range(TILE_DRAW_ROUNDS):
            if not len(rows) or not rank:
                return
            drawn = np.stack([rng.choice(c, len(rows)) for c in choices], axis=1)
            count = n_tiles(drawn)
            ok = (count <= base * finest) & (count * TILE_COARSEST >= base)
            tiles[rows[ok]] = drawn[ok]
            rows = rows[~ok]
        tiles[rows] = anchor

    tiles = np.tile(default_tile(out_dims, fit_bytes), (n_distinct, 1))
    draw(tiles, np.arange(1, n_distinct), tiles[0].copy())
    if rate is not None and n_distinct > 1:
        rows = np.zeros((n_distinct, 24), dtype=np.float32)
        rows[:, 8:8 + rank] = elements(tiles)
        rated = rate(rows) * rng.lognormal(0.0, TILE_DEFAULT_ERROR, n_distinct)
        if fit_bytes:
            on_chip = np.prod(elements(tiles), axis=1) * fit_bytes
            rated = np.where(on_chip <= VMEM_BYTES, rated, np.inf)
        pick = int(np.argmin(rated))
        tiles[[0, pick]] = tiles[[pick, 0]]
        anchor = tiles[0].copy()
        base = n_tiles(anchor[None, :])[0]
        count = n_tiles(tiles)
        draw(tiles, np.flatnonzero((count > base * finest) | (count * TILE_COARSEST < base)),
             anchor)
    if n_distinct > 1 and rank:
        # The finest candidate is always measured (the slowest config of the real kernels
        # is their finest or nearly): the default's dims halved, minor-most first, while
        # the tile count stays within ``finest`` times the default's.
        fine, base = tiles[0].copy(), n_tiles(tiles[:1])[0]
        for d in range(rank - 1, -1, -1):
            while fine[d] > 1:
                finer = fine.copy()
                finer[d] = -(-finer[d] // 2)
                if n_tiles(finer[None, :])[0] > base * finest:
                    break
                fine = finer
        tiles[1] = fine
    distinct = np.zeros((n_distinct, 24), dtype=np.float32)
    distinct[:, 8:8 + rank] = elements(tiles)
    pick = np.concatenate([np.arange(n_distinct),
                           rng.integers(0, n_distinct, n_configs - n_distinct)])
    order = np.concatenate([[0], rng.permutation(pick[1:])])
    configs = distinct[order[:n_configs]]
    live = configs[:, 8:14]
    configs[:, 14] = live.sum(axis=1)
    configs[:, 15] = np.where(live > 0, live, 1).prod(axis=1)
    return configs


@dataclass(frozen=True)
class TileKernel:
    """What the tile cost model needs of a kernel: its output shape (int64 (6,), zero past
    the rank), output bytes per element, operands holding a tile on chip (inputs + output),
    arithmetic intensity, total bytes of its inputs, whether it contracts (convolution or
    dot) and its node count."""

    out_dims: np.ndarray
    element_bytes: int
    n_operands: int
    intensity: float
    input_bytes: float
    contracts: bool
    n_nodes: int


def tile_runtime(kernel: TileKernel, configs: np.ndarray,
                 rng: np.random.Generator | None, noise: float = TILE_NOISE) -> np.ndarray:
    """int64 (c,): measured runtime in ns of each tile config (float32 (c, 24)): the true
    runtime times lognormal noise of sigma ``noise``; with ``rng`` None, float64 (c,): the
    true (noise-free) runtimes."""
    out_dims = kernel.out_dims
    rank = int((out_dims > 0).sum())
    dims = out_dims[:rank].astype(np.float64)[None, :]
    tile = np.maximum(configs[:, 8:8 + rank].astype(np.float64), 1.0)
    per_dim = np.ceil(dims / tile)
    n_tiles = per_dim.prod(axis=1)
    tile_elems = tile.prod(axis=1)
    lane = np.ceil(tile[:, -1] / 128) * 128 / tile[:, -1] if rank else 1.0
    sublane = np.ceil(tile[:, -2] / 8) * 8 / tile[:, -2] if rank >= 2 else 1.0
    work = n_tiles * tile_elems * kernel.element_bytes * lane * sublane * kernel.intensity
    # Double-buffered: each operand holds two tiles on chip, one computed, one loading.
    tile_bytes = 2.0 * tile_elems * kernel.element_bytes * kernel.n_operands
    spill = np.where(tile_bytes > VMEM_BYTES, 2.0 * work * TILE_NS_PER_BYTE, 0.0)
    # A contraction reads each input once per row or column of output tiles.
    rereads = (reread_factor(per_dim) if kernel.contracts else np.ones(len(configs)))
    reads = kernel.input_bytes * rereads * TILE_READ_NS_PER_BYTE
    overhead = n_tiles * (TILE_OVERHEAD_NS + TILE_NODE_OVERHEAD_NS * kernel.n_nodes)
    # The pipeline's first tile loads with nothing to overlap it: a fill cost per config.
    fill = tile_elems * kernel.element_bytes * kernel.n_operands * TILE_FILL_NS_PER_BYTE
    runtime = work * TILE_NS_PER_BYTE + reads + overhead + fill + spill + 500.0
    if rng is None:
        return runtime
    factor = rng.lognormal(0.0, noise, size=len(configs))
    return np.maximum(1, np.round(runtime * factor)).astype(np.int64)


def reread_factor(tiles_per_dim: np.ndarray) -> np.ndarray:
    """float64 (c,): times a contraction's inputs are read, for tile counts per output dim
    (c, rank): the mean of the tile counts along the two minor-most dims."""
    if tiles_per_dim.shape[1] == 0:
        return np.ones(len(tiles_per_dim))
    return tiles_per_dim[:, -2:].mean(axis=1)
