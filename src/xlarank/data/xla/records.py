"""TpuGraphs tuning records and XLA's HLO dumps, read into the dataset's own arrays.

Four kinds of file are read, told apart by their contents (or named with ``kind``):

- ``TuningData`` (tuning.proto): tile kernels, each a ModuleTuningData with HloOpConfig
  runs; one tile file per kernel, as the official converter's OpTuningDataIterator keeps
  them (kernels with one run, or with a run lacking a tile config, are left out).
- ``ModuleTuningData`` with HloModuleConfig runs: one layout file.
- ``HloProto`` (what ``--xla_dump_hlo_as_proto`` writes as ``*.hlo.pb``) or a bare
  ``HloModuleProto``: one layout file of the test split with no measurements, whose
  configurable nodes and candidate configs xlarank chooses (`candidate_layouts`).

The official converter drops failed runs (``ConfigProfile.error``) and, for tile, runs
of at most 1 ns; here they are an error unless ``drop_failed_runs`` is set, so that a
record's failures are never silently thrown away.
"""

from __future__ import annotations

import mmap
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlarank.data.collections import Collection, get_collection
from xlarank.data.xla.encode import (
    EncodedModule,
    ModuleError,
    encode_module,
    tile_config_features,
    warn_unknown_opcodes,
)
from xlarank.data.xla.messages import Message, decode
from xlarank.data.xla.opcodes import OPCODE_IDS
from xlarank.data.xla.wire import WireError, fields
from xlarank.errors import BadGraphError, XlarankError, XlarankWarning
from xlarank.files import open_regular

KINDS = ("auto", "tuning-data", "module-tuning-data", "hlo-proto", "hlo-module")
LAYOUT_DIMS = 6
# nlp random files hold up to ~100,000 configs; more candidates than that is a mistake.
MAX_CANDIDATES = 100_000
# Tile bounds count tiles of a tensor's dimension: positive, and far below this.
MAX_TILE_BOUND = 2**31
# A dump's candidate configs are float32 (candidates, nodes, 18) in memory before writing.
MAX_CANDIDATE_BYTES = 1 << 30
LAYOUT_TENSORS = 3
# Instructions whose layouts the TPU compiler leaves open in the dataset's layout records
# (all configurable nodes of the real samples are one of these, outside fusions).
CONFIGURABLE_OPCODES = tuple(OPCODE_IDS[name] for name in ("convolution", "dot", "reshape"))
# Tensors a configurable node's config fixes: output and input; kernel for two-operand ops.
KERNEL_OPCODES = tuple(OPCODE_IDS[name] for name in ("convolution", "dot"))


@dataclass
class ImportedGraph:
    """One npz file to be: its collection, split and name, and its arrays with the dataset's
    keys and dtypes (FORMAT.md)."""

    collection: Collection
    split: str
    name: str
    arrays: dict[str, np.ndarray] = field(repr=False)
    source: Path = Path()
    note: str = ""

    @property
    def relative_path(self) -> Path:
        return Path("npz") / self.collection.folder / self.split / f"{self.name}.npz"


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, mapped rather than read, so a large record costs page cache, not
    heap. Anything but a regular file is refused before it is read (`open_regular`)."""
    with open_regular(path, "tuning record") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            raise BadGraphError(path, "empty file")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mapped)
        try:
            yield view
        finally:
            view.release()
            mapped.close()


def _top_numbers(buf: memoryview) -> set[int]:
    return {number for number, _, _ in fields(buf)}


def _looks_like_module(buf: memoryview, span) -> bool:
    """Whether ``buf[span]`` decodes as an HloModuleProto whose last computation has an
    instruction with an opcode; WireError from the decoder passes through."""
    module = decode(buf, "HloModuleProto", span)
    comps = module.get("computations")
    if not comps:
        return False
    comp = decode(buf, "HloComputationProto", comps[-1])
    insts = comp.get("instructions")
    return bool(insts) and bool(decode(buf, "HloInstructionProto", insts[0]).get("opcode"))


def detect_kind(buf: memoryview) -> str:
    """Which of KINDS the bytes hold; WireError if none."""
    try:
        numbers = _top_numbers(buf)
    except WireError as exc:
        raise WireError(f"not a protobuf message ({exc}), so not a TpuGraphs tuning record "
                        "or an HLO module") from None
    reasons: list[str] = []

    def attempt(kind: str, test) -> bool:
        try:
            return bool(test())
        except WireError as exc:
            reasons.append(f"read as {kind}: {exc}")
            return False

    def module_tuning() -> bool:
        top = decode(buf, "ModuleTuningData")
        return top.get("runs") and _looks_like_module(buf, top["module"])

    def tuning() -> bool:
        for span in decode(buf, "TuningData").get("modules"):
            inner = decode(buf, "ModuleTuningData", span)
            if inner.get("module"):
                return _looks_like_module(buf, inner["module"])
        return False

    if 1 in numbers and numbers & {2, 3, 4} and attempt("ModuleTuningData", module_tuning):
        return "module-tuning-data"
    if numbers == {1} and attempt("TuningData", tuning):
        return "tuning-data"
    # What --xla_dump_hlo_as_proto writes: the module, and after optimizations the buffer
    # assignment (field 3).
    if numbers <= {1, 3} and attempt(
            "HloProto",
            lambda: _looks_like_module(buf, decode(buf, "HloProto").get("hlo_module"))):
        return "hlo-proto"
    if attempt("HloModuleProto", lambda: _looks_like_module(buf, None)):
        return "hlo-module"
    raise WireError("not a TpuGraphs tuning record (TuningData, ModuleTuningData) or an "
                    "HLO module (HloProto, HloModuleProto)"
                    + (f" ({'; '.join(reasons)})" if reasons else ""))


def read_records(path: str | Path, *, kind: str = "auto", collection: str | None = None,
                 split: str | None = None, name: str | None = None,
                 drop_failed_runs: bool = False, candidates: int = 16,
                 seed: int = 0) -> list[ImportedGraph]:
    """The npz files one record or HLO dump makes, checked whole before any is written.

    ``collection`` and ``split`` are what the record cannot tell: a layout record's source
    and search (layout:xla:default unless given), and the split (train for measured
    records, test for a dump, whose runtimes are 0). ``name`` names a layout file
    (`graph_name` otherwise); a tile file is named ``<kernel>_<fingerprint>`` as the
    dataset's are. ``candidates`` and ``seed`` shape a dump's candidate configs.
    """
    path = Path(path)
    if kind not in KINDS:
        raise XlarankError(f"unknown record kind {kind!r}; known: {', '.join(KINDS)}")
    if seed < 0:
        raise XlarankError(f"--seed must be 0 or more, not {seed}")
    if not 1 <= candidates <= MAX_CANDIDATES:
        raise XlarankError(f"--candidates must lie in 1..{MAX_CANDIDATES:,} (the most configs "
                           f"a real layout file has), not {candidates}")
    with _mapped(path) as buf:
        try:
            found = detect_kind(buf) if kind == "auto" else kind
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", XlarankWarning)
                if found == "tuning-data":
                    graphs = _tile_graphs(buf, path, collection, split, drop_failed_runs)
                elif found == "module-tuning-data":
                    graphs = [_layout_graph(buf, path, decode(buf, "ModuleTuningData"),
                                            collection, split, name, drop_failed_runs)]
                else:
                    span = decode(buf, "HloProto").get("hlo_module") if found == "hlo-proto" \
                        else None
                    graphs = [_dump_graph(buf, path, span, collection, split, name,
                                          candidates, seed)]
        except (WireError, ModuleError) as exc:
            raise BadGraphError(path, f"{exc}") from None
    for warning in caught:
        warnings.warn(f"{path}: {warning.message}", XlarankWarning, stacklevel=2)
    return graphs


def _split(split: str | None, default: str) -> str:
    from xlarank.data.collections import SPLITS

    split = split or default
    if split not in SPLITS:
        raise XlarankError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return split


def _layout_collection(collection: str | None, path: Path) -> Collection:
    found = get_collection(collection or "layout:xla:default")
    if found.is_tile:
        raise XlarankError(f"{path}: --collection {found}, but it holds a layout graph; give "
                           "a layout collection, or import it on its own")
    return found


# Entry-computation names XLA gives a module that was not named ("main", "main__.10904",
# "jit_main"): they say nothing of the program.
_GENERIC_MODULE = re.compile(r"(?:jit_)?_*main[._\d]*")


def graph_name(module_name: str, path: Path) -> str:
    """The file name of a layout import: the module's name without JAX's ``jit_`` prefix
    (a measured ``cnn_plain`` lowers as ``jit_cnn_plain``), or the record's own file name
    when the module's name is one XLA gives every module."""
    if not module_name or _GENERIC_MODULE.fullmatch(module_name):
        return _safe_name(path.stem)
    return _safe_name(module_name.removeprefix("jit_") or module_name)


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "module"
    return cleaned[:200]


def _measured_runs(runs: list[Message], config_field: str, what: str,
                   drop_failed_runs: bool, min_ns: int) -> list[Message]:
    """The runs the converter keeps, or XlarankError when runs failed and dropping them was
    not asked for, or when no default run is left."""
    failed = [i for i, r in enumerate(runs)
              if r.get("error") or "profile" not in r
              or r.get("profile").get("compute_time_ns") < min_ns]
    if failed and not drop_failed_runs:
        raise XlarankError(
            f"{what}: {len(failed)} of {len(runs)} runs failed (ConfigProfile.error, or no "
            f"runtime; first: run {failed[0]}); pass --drop-failed-runs to leave them out "
            "as the official converter does")
    kept = [r for i, r in enumerate(runs) if i not in set(failed)]
    other = [i for i, r in enumerate(kept) if config_field not in r]
    if other:
        raise XlarankError(f"{what}: run {other[0]} has no {config_field}; a record holds "
                           "one kind of config")
    if not any(r.get("is_default") for r in kept):
        raise XlarankError(f"{what}: no default run (is_default) among the measured runs; "
                           "the official converter needs one to normalize runtimes")
    return kept


def _layout_graph(buf, path: Path, record: Message, collection, split, name,
                  drop_failed_runs: bool) -> ImportedGraph:
    coll = _layout_collection(collection, path)
    if "module" not in record:
        raise ModuleError("the record holds no module")
    try:
        config_nodes = np.array(record.get("config_index_to_node"), dtype=np.int64)
    except OverflowError:
        raise XlarankError(f"{path}: config_index_to_node names a node past any "
                           "module's size") from None
    if not len(config_nodes):
        raise XlarankError(f"{path}: config_index_to_node is empty: the record names no "
                           "configurable node")
    if len(np.unique(config_nodes)) != len(config_nodes):
        raise XlarankError(f"{path}: config_index_to_node names a node twice")
    runs = _measured_runs(record.get("runs"), "module_config", str(path), drop_failed_runs, 1)
    layouts = [run["module_config"].get("layout_config").get("nodes") for run in runs]
    # Every run's node count is checked before the module is encoded and the (runs, nodes,
    # 18) array allocated: each (run, node) pair is then a NodeLayoutConfig of 2 bytes at
    # least in the file, so the array is bounded by the file's size, not by its counts.
    for i, nodes in enumerate(layouts):
        if len(nodes) != len(config_nodes):
            raise XlarankError(f"{path}: run {i} configures {len(nodes)} nodes, "
                               f"config_index_to_node names {len(config_nodes)}")
    encoded = encode_module(buf, record["module"])
    warn_unknown_opcodes("module " + encoded.name, encoded.unknown_opcodes)
    if config_nodes.max() >= len(encoded.node_opcode) or config_nodes.min() < 0:
        raise XlarankError(f"{path}: config_index_to_node names node {config_nodes.max()}, "
                           f"past the module's {len(encoded.node_opcode)} nodes")
    configs = np.full((len(runs), len(config_nodes), LAYOUT_TENSORS * LAYOUT_DIMS), -1,
                      dtype=np.float32)
    for i, nodes in enumerate(layouts):
        for j, node in enumerate(nodes):
            tensors = node.get("tensors")
            if len(tensors) > LAYOUT_TENSORS:
                raise XlarankError(f"{path}: run {i} gives node {j} {len(tensors)} tensor "
                                   f"layouts; at most {LAYOUT_TENSORS} are read")
            for t, tensor in enumerate(tensors):
                dims = tensor.get("dims")[:LAYOUT_DIMS]
                if any(not 0 <= d < LAYOUT_DIMS for d in dims):
                    raise XlarankError(f"{path}: run {i}, node {j}: layout dims {dims} are "
                                       f"not dimension numbers 0..{LAYOUT_DIMS - 1}")
                configs[i, j, t * LAYOUT_DIMS:t * LAYOUT_DIMS + len(dims)] = dims
    arrays = graph_arrays(encoded)
    arrays.update(node_config_ids=config_nodes, node_config_feat=configs,
                  config_runtime=np.array([r["profile"].get("compute_time_ns") for r in runs],
                                          dtype=np.int64))
    return ImportedGraph(coll, _split(split, "train"),
                         _safe_name(name) if name else graph_name(encoded.name, path),
                         arrays, path, f"{len(runs)} measured layout configs")


def graph_arrays(encoded: EncodedModule) -> dict[str, np.ndarray]:
    """The graph's arrays of a layout file (node features, opcodes, edges, splits)."""
    return {"node_feat": encoded.node_feat, "node_opcode": encoded.node_opcode,
            "edge_index": encoded.edge_index, "node_splits": encoded.node_splits[None, :]}


def _tile_graphs(buf, path: Path, collection, split, drop_failed_runs: bool
                 ) -> list[ImportedGraph]:
    coll = get_collection(collection or "tile:xla")
    if not coll.is_tile:
        raise XlarankError(f"{path}: --collection {coll}, but it holds tile kernels; give "
                           "tile:xla, or import it on its own")
    graphs = []
    skipped = []
    names: set[str] = set()
    for k, span in enumerate(decode(buf, "TuningData").get("modules")):
        record = decode(buf, "ModuleTuningData", span)
        runs = record.get("runs")
        what = f"{path}: kernel {k}"
        if "module" not in record or len(runs) <= 1:
            skipped.append(f"kernel {k} ({'no module' if 'module' not in record else 'one run'})")
            continue
        if any("tile_size_config" not in r.get("op_config") for r in runs):
            skipped.append(f"kernel {k} (a run without a tile config)")
            continue
        runs = _measured_runs(runs, "op_config", what, drop_failed_runs, 2)
        for r, run in enumerate(runs):
            tile = run["op_config"]["tile_size_config"]
            bounds = [b for field in ("kernel_bounds", "output_bounds", "input_bounds")
                      for b in tile.get(field)]
            if any(not 1 <= b <= MAX_TILE_BOUND for b in bounds):
                raise XlarankError(f"{what}: run {r} has tile bounds {bounds}, expected "
                                   f"whole numbers in 1..{MAX_TILE_BOUND:,}")
        encoded = encode_module(buf, record["module"])
        warn_unknown_opcodes(f"kernel {encoded.name}", encoded.unknown_opcodes)
        default = next(r for r in runs if r.get("is_default"))
        fingerprint = record.get("fingerprint")
        signed = fingerprint - (1 << 64) if fingerprint >= 1 << 63 else fingerprint
        tag = f"-{-signed:x}" if signed < 0 else f"{signed:x}"
        name = _safe_name(f"{encoded.name}_{tag}")
        # Refused at the first repeat, not after encoding thousands of copies.
        if name in names:
            raise XlarankError(f"{path}: two kernels share a name and fingerprint")
        names.add(name)
        arrays = graph_arrays(encoded)
        del arrays["node_splits"]
        runtimes = np.array([r["profile"].get("compute_time_ns") for r in runs], dtype=np.int64)
        arrays.update(
            config_feat=np.array([tile_config_features(r["op_config"]["tile_size_config"])
                                  for r in runs], dtype=np.int64).astype(np.float32),
            config_runtime=runtimes,
            config_runtime_normalizers=np.full(len(runs), default["profile"].get(
                "compute_time_ns"), dtype=np.int64))
        graphs.append(ImportedGraph(coll, _split(split, "train"), name, arrays, path,
                                    f"{len(runs)} measured tile configs"))
    if skipped:
        warnings.warn(f"left out as the official converter does: {', '.join(skipped)}",
                      XlarankWarning, stacklevel=2)
    if not graphs:
        raise XlarankError(f"{path}: no tile kernel with measured runs")
    return graphs


def configurable_nodes(encoded: EncodedModule) -> np.ndarray:
    """Nodes whose layout a dump's candidate configs set: convolution, dot and reshape
    outside fused computations, of rank 2 or more (int64, sorted)."""
    keep = (np.isin(encoded.node_opcode, CONFIGURABLE_OPCODES) & ~encoded.node_fused
            & (encoded.node_rank >= 2))
    return np.flatnonzero(keep).astype(np.int64)


def candidate_layouts(encoded: EncodedModule, nodes: np.ndarray, count: int, seed: int
                      ) -> np.ndarray:
    """``count`` layout configs for ``nodes``, float32 (count, len(nodes), 18).

    Real configs fix the two minor-most dimensions of each tensor (FORMAT.md, "Layout
    configs as they really are") and flip between few choices per node. Config 0 fixes
    every tensor's two minor-most dimensions as the module has them; each other config
    swaps them, per tensor, with probability one half. Configs are distinct where the
    nodes allow it.
    """
    rng = np.random.default_rng(seed)
    tensors = []  # (node slot, tensor slot, its default two minor-most dims)
    for j, node in enumerate(nodes):
        members = [node, encoded.node_operands[node, 0]]
        if encoded.node_opcode[node] in KERNEL_OPCODES:
            members.append(encoded.node_operands[node, 1])
        for t, member in enumerate(members):
            if member < 0 or encoded.node_rank[member] < 2:
                continue
            rank = int(encoded.node_rank[member])
            layout = encoded.node_feat[member, 134:134 + min(rank, LAYOUT_DIMS)]
            minor, second = (int(v) for v in layout[:2])
            full = sorted(layout.tolist()) == list(range(rank)) if rank <= LAYOUT_DIMS else \
                minor != second and max(minor, second) < rank
            if not full:  # no layout in the dump: the default, row-major
                minor, second = rank - 1, rank - 2
            if max(minor, second) >= LAYOUT_DIMS:
                continue  # a config row names dimensions 0-5 only; leave it open
            tensors.append((j, t, minor, second))
    configs = np.full((count, len(nodes), LAYOUT_TENSORS * LAYOUT_DIMS), -1, dtype=np.float32)
    seen = set()
    for i in range(count):
        for _ in range(32):  # a few draws to find a config not yet listed
            flips = np.zeros(len(tensors), dtype=bool) if i == 0 else \
                rng.random(len(tensors)) < 0.5
            if flips.tobytes() not in seen:
                break
        seen.add(flips.tobytes())
        for (j, t, minor, second), flip in zip(tensors, flips):
            pair = (second, minor) if flip else (minor, second)
            configs[i, j, t * LAYOUT_DIMS:t * LAYOUT_DIMS + 2] = pair
    return configs


def _dump_graph(buf, path: Path, span, collection, split, name, candidates: int,
                seed: int) -> ImportedGraph:
    coll = _layout_collection(collection, path)
    if split not in (None, "test"):
        raise XlarankError(f"{path}: an HLO dump has no measured runtimes, so its file "
                           f"belongs to the test split, not {split}")
    encoded = encode_module(buf, span)
    warn_unknown_opcodes("module " + encoded.name, encoded.unknown_opcodes)
    nodes = configurable_nodes(encoded)
    if not len(nodes):
        raise XlarankError(f"{path}: the module has no configurable node (convolution, dot "
                           "or reshape of rank 2 or more outside a fusion)")
    need = candidates * len(nodes) * LAYOUT_TENSORS * LAYOUT_DIMS * 4
    if need > MAX_CANDIDATE_BYTES:
        raise XlarankError(f"{path}: {candidates:,} candidates of its {len(nodes):,} "
                           f"configurable nodes would take {need / 2**30:.1f} GiB; give at "
                           f"most {MAX_CANDIDATE_BYTES // (len(nodes) * 72):,} --candidates")
    arrays = graph_arrays(encoded)
    arrays.update(node_config_ids=nodes,
                  node_config_feat=candidate_layouts(encoded, nodes, candidates, seed),
                  config_runtime=np.zeros(candidates, dtype=np.int64))
    return ImportedGraph(coll, _split(split, "test"),
                         _safe_name(name) if name else graph_name(encoded.name, path), arrays,
                         path, f"{candidates} candidate layout configs, not measured")
