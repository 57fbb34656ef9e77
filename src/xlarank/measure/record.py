"""What `xlarank measure` writes: the official ``ModuleTuningData`` record (tuning.proto),
its sidecar manifest, and the partial log a killed run resumes from.

The record is what an XLA autotuner writes for a TPU program, so `xlarank import` reads a
local record and a TPU one the same way: ``module`` the program's HloModuleProto before
optimization, ``fingerprint`` a hash of its graph, ``config_index_to_node`` the
configurable nodes' positions, and one ``ConfigProfile`` per config with its layouts
(``module_config.layout_config``: per node, the output, input and kernel tensors' fixed
minor-most dimensions, minor-to-major; none where the config leaves the tensor to the
compiler), its runtime (``profile.compute_time_ns``), ``is_default`` for the compiler's own
choice and ``error`` for a config that failed to compile, run or match the program's output.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xlarank.data.xla.encode import encode_module
from xlarank.data.xla.messages import decode
from xlarank.data.xla.wire import WireError, len_field, packed_field, varint_field
from xlarank.errors import XlarankError
from xlarank.files import open_regular
from xlarank.measure.configs import Config

PARTIAL_SUFFIX = ".partial.jsonl"


def sidecar_path(record: str | Path) -> Path:
    """The manifest beside a record: ``x.pb`` -> ``x.json``."""
    record = Path(record)
    return record.with_suffix(".json")


def partial_path(record: str | Path) -> Path:
    record = Path(record)
    return record.with_name(record.name + PARTIAL_SUFFIX)


def module_fingerprint(hlo_module: bytes) -> int:
    """A uint64 hash of the module's graph (opcodes, edges, node features): the same program
    gives the same fingerprint wherever it is lowered, whatever file names and line numbers
    its metadata holds."""
    encoded = encode_module(memoryview(hlo_module), None)
    digest = hashlib.sha256()
    for array in (encoded.node_opcode, encoded.edge_index, encoded.node_feat):
        digest.update(np.ascontiguousarray(array).tobytes())
    return int.from_bytes(digest.digest()[:8], "little")


def _config_profile(config: Config, runtime_ns: int | None, is_default: bool) -> bytes:
    nodes = b"".join(
        len_field(1, b"".join(len_field(1, packed_field(1, dims)) for dims in tensors))
        for tensors in config)
    module_config = len_field(1, nodes)  # HloModuleConfig.layout_config
    out = len_field(2, module_config)
    if runtime_ns is None:
        out += varint_field(3, 1)
    else:
        out += len_field(4, varint_field(4, max(int(runtime_ns), 1)))
    return out + varint_field(5, int(is_default))


def module_tuning_data(hlo_module: bytes, fingerprint: int, config_nodes: Sequence[int],
                       configs: Sequence[Config], runtimes_ns: Sequence[int | None],
                       default_index: int | None) -> bytes:
    """The serialized ModuleTuningData: one run per config, ``runtimes_ns[i]`` None for a
    config that failed (``error``); ``default_index`` the compiler's own choice."""
    runs = b"".join(len_field(3, _config_profile(c, r, i == default_index))
                    for i, (c, r) in enumerate(zip(configs, runtimes_ns)))
    return (len_field(1, hlo_module) + varint_field(2, fingerprint) + runs
            + packed_field(4, config_nodes))


def read_record_configs(path: str | Path) -> tuple[int, list[Config], list[int | None], int | None]:
    """A layout record's fingerprint, each run's config, its runtime (None if it failed)
    and the default run's index: what `--remeasure` measures again."""
    path = Path(path)
    with open_regular(path, "tuning record") as handle:
        data = handle.read()
    try:
        record = decode(memoryview(data), "ModuleTuningData")
        runs = record.get("runs")
        configs: list[Config] = []
        runtimes: list[int | None] = []
        default = None
        for i, run in enumerate(runs):
            if "module_config" not in run:
                raise WireError(f"run {i} holds no layout config")
            nodes = run["module_config"].get("layout_config").get("nodes")
            configs.append(tuple(tuple(tuple(int(d) for d in t.get("dims"))
                                       for t in node.get("tensors")) for node in nodes))
            # As the importer reads a run: an error, or no runtime of at least 1 ns.
            failed = (run.get("error") or "profile" not in run
                      or run["profile"].get("compute_time_ns") < 1)
            runtimes.append(None if failed else int(run["profile"].get("compute_time_ns")))
            if run.get("is_default") and default is None:
                default = i
    except WireError as exc:
        raise XlarankError(f"{path}: not a layout tuning record ({exc})") from None
    if not configs:
        raise XlarankError(f"{path}: the record holds no runs")
    return int(record.get("fingerprint")), configs, runtimes, default


def config_key(config: Config) -> str:
    """A config as one line of text, for the partial log and the sidecar."""
    return json.dumps(config, separators=(",", ":"))
