"""Featurizing many graph files of one collection into a frame, resumably.

Each file becomes a part (one Arrow IPC file per graph, named by the file's checksum and
the spec's hash) in a hidden folder beside the frame, so a rerun after a kill only redoes
missing or changed files; then the parts are joined, in input order, into the frame
(`xlarank.frame`). Files run in local processes or on Dask (`xlarank.engine`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc

from xlarank.atomic import (
    atomic_path,
    check_output,
    output_lock,
    write_faults,
    write_text_atomic,
)
from xlarank.data.collections import (
    COLLECTIONS,
    SPLITS,
    Collection,
    get_collection,
    npz_root,
    split_files,
)
from xlarank.data.graph import load_graph
from xlarank.data.origin import files_origin
from xlarank.engine import map_ordered
from xlarank.errors import ArgumentTypeError, BadGraphError, XlarankError, checked_type
from xlarank.features.build import feature_block, feature_names
from xlarank.features.spec import FeatureSpec, load_feature_spec, weighted_families
from xlarank.frame import block_table, frame_schema, write_frame
from xlarank.outputs import Input, check_outputs
from xlarank.specs import spec_path


@dataclass(frozen=True)
class PartJob:
    """One file to featurize into its own part, for `featurize_part` in any process."""

    path: Path
    collection: Collection
    spec: FeatureSpec
    parts_dir: Path
    skip_bad: bool
    dedup: bool


@dataclass(frozen=True)
class PartResult:
    path: Path
    checksum: str | None
    part: Path | None
    reused: bool
    error: str | None


def file_checksum(path: Path) -> str:
    """sha256 of a file's bytes, hex."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# Parts are Arrow IPC files: a part is written once and read once, and parquet's
# per-column cost (a few hundred columns) made a tile kernel's part 13 ms to write and
# 12 ms to read back, against 3.8 and 1.6 ms; a large layout graph's part, compressed, is
# as small as parquet's (bench/featurize.py's graph: 1.6 MB against 1.5 MB).
PART_SUFFIX = ".arrow"
# Parts past this size are zstd-compressed. Below it compression saves little (a tile
# kernel's part: 36 KB against 42 KB) and costs more than the write itself (per-column
# buffers: 5.1 ms against 3.8 ms to write, 4.4 against 1.6 ms to read back).
PART_COMPRESS_BYTES = 1 << 20
# Parts of earlier versions, swept as stale.
OLD_PART_SUFFIXES = (".parquet",)


def featurize_part(job: PartJob) -> PartResult:
    """Featurize one file into ``parts_dir/<name>-<checksum>-<spec hash><kind>.arrow``.

    A part that already exists for the file's current checksum is reused, so a rerun after
    a kill only redoes missing or changed files. Parts are written atomically.
    """
    try:
        checksum = file_checksum(job.path)
    except OSError as exc:
        error = BadGraphError(job.path, f"cannot be read ({exc})")
        if not job.skip_bad:
            raise error from None
        return PartResult(job.path, None, None, False, str(error))
    kind = "d" if job.dedup else "a"  # distinct configs only, or all
    part = job.parts_dir / (f"{job.path.stem}-{checksum[:16]}-{job.spec.hash[:8]}{kind}"
                            f"{PART_SUFFIX}")
    if part.exists():
        return PartResult(job.path, checksum, part, True, None)
    try:
        # Layout configs stay on disk: featurize_graph streams them block by block.
        graph = load_graph(job.path, collection=job.collection, configs=False)
        block = feature_block(graph, job.spec, dedup=job.dedup)
    except BadGraphError as exc:
        if not job.skip_bad:
            raise
        return PartResult(job.path, checksum, None, False, str(exc))
    # A killed writer's temporaries go in the frame's sweep of the folder (`_sweep_stale`):
    # looking for them at every part made featurize quadratic in the files of a split
    # (5,709 parts in the real dataset's tile train split).
    with atomic_path(part, leftovers=False) as tmp:
        write_part(block_table(block), tmp)
    return PartResult(job.path, checksum, part, False, None)


def write_part(table: pa.Table, path: Path) -> None:
    """A part: ``table`` as an Arrow IPC file (the Feather V2 format), zstd past
    PART_COMPRESS_BYTES. pyarrow.ipc, where pyarrow.feather imports pandas."""
    compression = "zstd" if table.nbytes > PART_COMPRESS_BYTES else None
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(
            sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)
    ) as writer:
        writer.write_table(table)


def read_part(path: Path) -> pa.Table:
    """A part written by `write_part`, read into memory."""
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def parts_dir_for(out: Path) -> Path:
    """Where a frame's per-file parts live: a hidden folder beside it, named by the frame's
    whole file name (train.parquet and train.pq get folders of their own)."""
    out = Path(out)
    return out.parent / f".{out.name}.parts"


# The file that marks a parts folder as xlarank's: only such a folder is ever swept.
PARTS_MARKER = ".xlarank-parts"


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (None: it exists)."""
    missing = None
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            break
        missing = folder
    return missing


def _own_parts_dir(parts_dir: Path) -> Path:
    """``parts_dir``, made if missing, after refusing (XlarankError) a path that is not a
    folder xlarank made: a symbolic link (dangling or not: its target is not the frame's
    to change), a file, or a folder of files without `PARTS_MARKER`."""
    try:
        mode = os.lstat(parts_dir).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise XlarankError(f"{parts_dir}: the frame's parts folder cannot be checked "
                           f"({exc.strerror})") from None
    move = "move it away or give another --out"
    if mode is not None and stat.S_ISLNK(mode):
        raise XlarankError(f"{parts_dir}: the frame's parts folder is a symbolic link; "
                           f"xlarank keeps parts only in a folder of its own: {move}")
    if mode is not None and not stat.S_ISDIR(mode):
        raise XlarankError(f"{parts_dir}: the frame's parts folder is a file, not a folder: "
                           f"{move}")
    marker = parts_dir / PARTS_MARKER
    if mode is not None and not marker.is_file() and any(parts_dir.iterdir()):
        raise XlarankError(f"{parts_dir}: a folder of this name holds files but xlarank did "
                           f"not make it (no {PARTS_MARKER}), and its stale parts would be "
                           f"deleted: {move}")
    with write_faults(parts_dir):
        parts_dir.mkdir(parents=True, exist_ok=True)
        if not marker.is_file():
            marker.write_text("xlarank keeps a frame's per-file parts here; the next "
                              "featurize of that frame deletes the stale ones.\n")
    return parts_dir


def _sweep_stale(parts_dir: Path, keep: set[str]) -> None:
    """Delete the parts and temporary files in ``parts_dir`` not named in ``keep``:
    regular files (or links, never followed) named *.arrow (or an earlier version's
    *.parquet) or .*.part, read through a
    descriptor opened without following a link; folders and other names stay."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(parts_dir, flags)
    except OSError:
        return  # gone or replaced since it was checked: nothing of xlarank's to sweep
    try:
        with os.scandir(fd) as entries:
            stale = [e.name for e in entries
                     if e.name not in keep and not e.is_dir(follow_symlinks=False)
                     and (e.name.endswith((PART_SUFFIX, *OLD_PART_SUFFIXES))
                          or (e.name.startswith(".") and e.name.endswith(".part")))]
        for name in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def featurize_files(paths: Iterable[str | Path], out: str | Path, collection: Collection,
                    split: str | None, spec: FeatureSpec, skip_bad: bool = False,
                    on_file: Callable[[Path], None] | None = None,
                    workers: int = 1, dedup: bool | None = None,
                    client=None) -> tuple[int, list[str], int]:
    """Featurize many graph files of one collection into one frame, resumably.

    Each file becomes a part (see `featurize_part`) in `parts_dir_for(out)`, one Arrow
    IPC file per graph; then the parts are joined in input order into
    ``out``, so the frame is the same for any ``workers`` or a Dask ``client``.
    ``manifest.json`` there records each file's checksum and part. A bad file raises
    `BadGraphError` and no frame is written, unless ``skip_bad``: then it is left out and
    named in the result and the frame's metadata. ``dedup`` keeps one row per distinct
    config (see `featurize_graph`); by default only for the train split, since scoring and
    evaluation need every config. Returns (rows, skipped, parts reused).
    """
    if isinstance(paths, str | os.PathLike) or not isinstance(paths, Iterable):
        raise ArgumentTypeError(f"featurize_files: paths: expected a list of npz paths, got "
                                f"{type(paths).__name__}")
    paths = [Path(checked_type(p, (str, os.PathLike), "featurize_files: paths",
                               "a list of npz paths (str or Path)")) for p in paths]
    checked_type(out, (str, os.PathLike), "featurize_files: out", "a path (str or Path)")
    checked_type(collection, Collection, "featurize_files: collection",
                 "a Collection (xlarank.get_collection)")
    if split is not None:
        checked_type(split, str, "featurize_files: split", "a split name or None")
    checked_type(spec, FeatureSpec, "featurize_files: spec",
                 "a FeatureSpec (xlarank.load_feature_spec)")
    checked_type(workers, int, "featurize_files: workers", "an int")
    # As the command checks: no frame over an input, whoever calls.
    out = check_outputs([Path(out)], [Input(p) for p in paths])[0]
    made = _first_missing(out.parent)
    try:
        # Two runs on one frame would delete each other's parts (the stale-part sweep
        # below): the frame's lock covers its parts folder, named by the same file name.
        with output_lock(out):
            return _featurize_locked(paths, out, collection, split, spec, skip_bad,
                                     on_file, workers,
                                     (split == "train") if dedup is None else dedup, client)
    except BaseException:
        # The folders this run made for the frame go with it when they hold no file.
        if made is not None and not any(f for _, _, f in os.walk(made)):
            shutil.rmtree(made, ignore_errors=True)
        raise


def _featurize_locked(paths, out: Path, collection: Collection, split: str | None,
                      spec: FeatureSpec, skip_bad: bool, on_file, workers: int, dedup: bool,
                      client) -> tuple[int, list[str], int]:
    """`featurize_files` once it holds the frame's lock."""
    target = parts_dir_for(out)
    made = None if os.path.lexists(target) else target
    parts_dir = _own_parts_dir(target)
    jobs = [PartJob(Path(p), collection, spec, parts_dir, skip_bad, dedup) for p in paths]
    try:
        results = list(map_ordered(featurize_part, jobs, workers,
                                   on_done=(lambda job: on_file(job.path)) if on_file else None,
                                   client=client))
    except BaseException:
        # A refused input leaves nothing behind: the folders this run made hold no part.
        if made is not None and not any(parts_dir.glob(f"*{PART_SUFFIX}")):
            shutil.rmtree(made, ignore_errors=True)
        raise
    skipped = [r.error for r in results if r.error]
    names = feature_names(spec, collection.is_tile)
    made = [(job, r) for job, r in zip(jobs, results, strict=True) if r.part is not None]
    parts = [r.part for _, r in made]
    remade: list[Path] = []
    rows = write_frame(out, (_part_table(job, r, names, remade) for job, r in made), collection,
                       split, spec, names, skipped, dedup,
                       files_origin(r.path for _, r in made))
    manifest = {str(r.path): {"checksum": r.checksum, "part": r.part.name if r.part else None,
                              "error": r.error} for r in results}
    write_text_atomic(parts_dir / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    # Parts of files that changed or left the input are stale, and so are the temporary
    # files of parts whose writer was killed.
    _sweep_stale(parts_dir, {p.name for p in parts})
    return rows, skipped, sum(r.reused for r in results) - len(remade)


def _part_table(job: PartJob, result: PartResult, names: list[str],
                remade: list[Path]) -> pa.Table:
    """A part's table. A reused part that cannot be read back or holds other columns
    (damaged, or edited since) is made again from its file (parts are a cache) and its
    file put in ``remade``."""
    try:
        table = read_part(result.part)
        if table.schema.equals(frame_schema(names)):
            return table
    except (pa.ArrowException, OSError, ValueError):
        pass
    result.part.unlink(missing_ok=True)
    remade.append(job.path)
    return read_part(featurize_part(job).part)


def resolve_feature_spec(path: str | Path, embedding: str | None = None,
                         weights: dict[str, str | None] | None = None) -> FeatureSpec:
    """The feature spec at ``path`` (a file, or a packaged spec's name:
    `xlarank.specs.spec_path`), plus a family with trained weights (`weighted_families`)
    when ``embedding`` names it or ``weights`` gives its weights field a source
    ("random:SEED" or a weights .npz; featurize's ``--weights FIELD=SOURCE``). A weights
    field no family has, and a bad weights file, are refused here, before any work."""
    spec = load_feature_spec(spec_path(path, "feature"))
    embeddings = {family.name: field for field, family in weighted_families().items()}
    if embedding not in (None, *embeddings):
        raise XlarankError(f"--embedding {embedding!r}: the embeddings are "
                           f"{', '.join(map(repr, embeddings))}")
    weights = {field: source for field, source in (weights or {}).items()
               if source is not None}
    unknown = [field for field in weights if field not in weighted_families()]
    if unknown:
        raise XlarankError(f"weights of {unknown[0]!r}: the families with weights are "
                           f"{', '.join(map(repr, weighted_families()))}")
    for field, family in weighted_families().items():
        source = weights.get(field)
        name = family.name
        if source is not None and embedding != name and name not in spec.families:
            raise XlarankError(f"the {field} weights need --embedding {name} or a spec with "
                               f"the {name} family")
        if embedding == name or source is not None:
            source = source or spec.weights_for(field)
            if not source.startswith("random:"):
                source = str(Path(source).resolve())
            spec = spec.with_weights(field, source)
            family.load_weights(source)
    return spec


@dataclass(frozen=True)
class FrameJob:
    """One frame to make: a collection's split of a dataset, its files and its path."""

    collection: Collection
    split: str
    files: list[Path]
    out: Path


def loose_files(data: str | Path) -> list[Path] | None:
    """The npz files of a plain folder (recursive, sorted) or the one npz file ``data``
    is; None for a dataset root (its tree says which files are which)."""
    data = Path(data)
    if data.is_file():
        return [data]
    try:
        npz_root(data)
    except XlarankError:
        return sorted(data.rglob("*.npz")) if data.is_dir() else None
    return None


def frame_jobs(data: str | Path, spec: FeatureSpec, collection: str = "all",
               split: str = "all", out: Path | None = None,
               out_dir: Path | None = None) -> list[FrameJob]:
    """The frames to make of a dataset root: every (collection, split) with npz files, at
    ``out_dir/<collection>/<split>.parquet`` (default features/frames/<spec name>), or at
    ``out`` when exactly one is chosen. With one collection and one split, ``data`` may
    also be a plain folder of npz files (searched recursively) or one npz file, as
    ``xlarank score`` takes them."""
    chosen = list(COLLECTIONS) if collection == "all" else [get_collection(collection)]
    splits = list(SPLITS) if split == "all" else [split]
    if split != "all" and split not in SPLITS:
        raise XlarankError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    loose = loose_files(data)
    if loose is not None and (collection == "all" or split == "all"):
        raise XlarankError(f"{data}: not a TpuGraphs tree (npz/tile/xla/..., "
                           "npz/layout/...); to featurize a plain folder or file, give one "
                           "--collection and one --split")
    found = ([(chosen[0], split, loose)] if loose is not None
             else [(c, s, split_files(data, c, s)) for c in chosen for s in splits])
    found = [f for f in found if f[2]]
    if not found:
        raise XlarankError(f"{data}: no npz files for collection {collection}, split {split}")
    if out is not None and len(found) != 1:
        raise XlarankError("--out names one frame: give one --collection and one --split")
    base = Path(out_dir) if out_dir is not None else Path("features/frames") / spec.name
    jobs = [FrameJob(c, s, files, Path(out) if out is not None
                     else base / c.slug / f"{s}.parquet") for c, s, files in found]
    for job in jobs:
        check_output(job.out)
    return jobs
