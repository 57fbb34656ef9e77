"""Frames: feature blocks of many graphs as one parquet file, rows contiguous per graph.

The parquet file's key-value metadata holds, under the key ``xlarank``, a JSON record of the
feature spec (name, hash, families), the collection, the split, the feature names and the
writer's version, so a frame says what it is without its file name. This module is the
format alone; featurizing files into frames is `xlarank.featurize`.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlarank import __version__
from xlarank.atomic import atomic_path
from xlarank.data.collections import Collection, get_collection
from xlarank.errors import MismatchError, XlarankError
from xlarank.features.build import FeatureBlock
from xlarank.features.spec import FEATURE_SCHEMA_VERSION, FeatureSpec
from xlarank.files import input_path, regular_file

if TYPE_CHECKING:  # pandas loads on first use: featurizing never needs it
    import pandas as pd

META_KEY = b"xlarank"
# Graphs are gathered into row groups of at least this many rows: a row group per small
# tile kernel makes a slow file of thousands of tiny column chunks.
ROW_GROUP_ROWS = 65_536


@dataclass(frozen=True)
class FrameMeta:
    collection: str
    split: str | None
    spec: dict
    feature_names: list[str]
    skipped: list[str] = field(default_factory=list)
    dedup: bool = False
    xlarank_version: str = __version__
    # Where the graphs came from (`xlarank.data.origin`): synthetic, real, mixed, unknown.
    data_origin: str = "unknown"

    @property
    def spec_hash(self) -> str:
        return self.spec["hash"]

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def frame_schema(names: list[str]) -> pa.Schema:
    """The key columns, then one float32 column per feature name."""
    return _frame_schema(tuple(names))


@functools.lru_cache(maxsize=16)
def _frame_schema(names: tuple[str, ...]) -> pa.Schema:
    # Made once per spec: every part of a frame has the same schema, and a schema of 184
    # fields took 0.23 ms, twice a part: about 5% of featurizing a tile kernel.
    fields = [pa.field("graph_id", pa.string()), pa.field("config_index", pa.int32()),
              pa.field("runtime", pa.int64()), pa.field("normalizer", pa.int64())]
    return pa.schema(fields + [pa.field(n, pa.float32()) for n in names])


def block_table(block: FeatureBlock) -> pa.Table:
    """A graph's feature block (`xlarank.features.build.feature_block`) as an arrow table
    of `frame_schema`, the same values `featurize_graph`'s DataFrame converts to.

    Built from the arrays' buffers, without a copy: ``pa.array`` imports pandas (to look
    for pandas inputs), and a featurize never needs pandas, whose import is a tenth of a
    one-file command.
    """
    n = len(block)
    name = block.graph_id.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(name)
    if offsets[-1] > np.iinfo(np.int32).max:
        raise XlarankError(f"graph {block.graph_id!r}: its name on every config row exceeds "
                           "an arrow string column; give the file a shorter name")
    columns = [pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)),
                                           pa.py_buffer(name * n)),
               _numbers(block.config_index, np.int32), _numbers(block.runtime, np.int64),
               _numbers(block.normalizer, np.int64)]
    columns += [_numbers(column, np.float32) for column in block.feature_columns()]
    return pa.Table.from_arrays(columns, schema=frame_schema(block.names))


_ARROW_TYPES = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64(),
                np.dtype(np.float32): pa.float32()}


def _numbers(values: np.ndarray, dtype) -> pa.Array:
    """values (n,) as an arrow array of ``dtype`` over the same memory where it can be."""
    values = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(_ARROW_TYPES[values.dtype], len(values),
                                 [None, pa.py_buffer(values)])


def write_frame(path: str | Path, blocks: Iterable[pd.DataFrame | pa.Table],
                collection: Collection, split: str | None, spec: FeatureSpec,
                names: list[str], skipped: Iterable[str] = (), dedup: bool = False,
                data_origin: str = "unknown") -> int:
    """Write feature blocks (one per graph) to a parquet frame; ``names`` are the spec's
    feature columns (`xlarank.features.feature_names`); ``data_origin`` where the graphs
    came from (`xlarank.data.origin`).

    Blocks are consumed as they come and written in row groups of whole graphs (at least
    ROW_GROUP_ROWS rows, or one large graph), so the frame never has to fit in memory and
    no graph spans two row groups. The file appears at ``path`` only when complete.
    ``skipped`` is read after the blocks, so a list that a block generator fills with the
    files it skipped can be passed. Returns the rows.
    """
    schema = frame_schema(names)
    rows = 0
    pending: list[pa.Table] = []
    pending_rows = 0
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, schema) as writer:
            for block in blocks:
                table = (block if isinstance(block, pa.Table)
                         else pa.Table.from_pandas(block, schema=schema, preserve_index=False))
                pending.append(table)
                pending_rows += table.num_rows
                rows += table.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), row_group_size=pending_rows)
                    pending, pending_rows = [], 0
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=pending_rows)
            meta = FrameMeta(collection=collection.id, split=split, spec=spec.to_dict(),
                             feature_names=names, skipped=[str(s) for s in skipped],
                             dedup=dedup, data_origin=data_origin)
            # Footer metadata is written at close, so it can name what was skipped.
            writer.add_key_value_metadata({META_KEY: meta.to_json().encode()})
    return rows


KEY_TYPES = {"graph_id": "text", "config_index": "integer", "runtime": "number",
             "normalizer": "number"}
_META_FIELDS = {"collection": str, "split": (str, type(None)), "spec": dict,
                "feature_names": list, "skipped": list, "dedup": bool,
                "xlarank_version": str, "data_origin": str}
_REQUIRED_META = ("collection", "split", "spec", "feature_names")


def _meta_from_json(path: Path, raw: bytes) -> FrameMeta:
    """FrameMeta of the ``xlarank`` metadata value, XlarankError naming the frame and the
    fault otherwise: the record is written by `write_frame`, but a frame is a file that
    anything can have edited."""
    def fault(what: str) -> XlarankError:
        return XlarankError(f"{path}: frame metadata ('xlarank' key) {what}; make frames "
                            "with 'xlarank featurize'")

    try:
        record = json.loads(raw)
    except RecursionError:
        raise fault("is nested too deeply") from None
    except ValueError:  # not JSON, not UTF-8, or an integer of too many digits
        raise fault("is not JSON") from None
    if not isinstance(record, dict):
        raise fault(f"is a JSON {type(record).__name__}, expected an object")
    missing = [k for k in _REQUIRED_META if k not in record]
    if missing:
        raise fault(f"lacks {', '.join(missing)}")
    # Fields of other xlarank versions are left out rather than refused.
    known = {k: v for k, v in record.items() if k in _META_FIELDS}
    for key, value in known.items():
        if not isinstance(value, _META_FIELDS[key]):
            raise fault(f"field {key!r} is a {type(value).__name__}")
    if not all(isinstance(n, str) for n in known["feature_names"]):
        raise fault("field 'feature_names' holds non-strings")
    if len(set(known["feature_names"])) != len(known["feature_names"]):
        raise fault("field 'feature_names' names a column twice")
    if set(known["feature_names"]) & set(KEY_TYPES):
        raise fault("field 'feature_names' names a key column")
    if not isinstance(known["spec"].get("hash"), str) or not isinstance(
            known["spec"].get("name"), str):
        raise fault("field 'spec' lacks its name or hash")
    try:
        get_collection(known["collection"])
    except XlarankError as exc:
        raise fault(f"names an {exc}") from None
    return FrameMeta(**known)


def _kind(dtype: pa.DataType) -> str | None:
    """What an arrow column holds, in KEY_TYPES' words."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "text"
    if pa.types.is_integer(dtype):
        return "integer"
    if pa.types.is_floating(dtype):
        return "float"
    return None


def check_schema(path: str | Path, meta: FrameMeta, schema: pa.Schema) -> None:
    """Refuse (XlarankError naming the frame) a frame whose columns are not those its
    metadata promises: key columns or feature columns missing (renamed, dropped), or of
    the wrong type (a runtime of strings)."""
    names = set(schema.names)
    twice = sorted(n for n in names if schema.names.count(n) > 1)
    if twice:
        raise XlarankError(f"{path}: frame has more than one column named "
                           f"{', '.join(map(repr, twice[:3]))}; featurize again")
    missing = [k for k in KEY_TYPES if k not in names]
    if missing:
        raise XlarankError(f"{path}: frame lacks the key column(s) {', '.join(missing)}; "
                           "make frames with 'xlarank featurize'")
    absent = [n for n in meta.feature_names if n not in names]
    if absent:
        more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
        raise XlarankError(f"{path}: feature column(s) {', '.join(map(repr, absent[:3]))}"
                           f"{more} named in the frame's metadata are missing (renamed or "
                           "dropped); featurize again")
    for name in [*KEY_TYPES, *meta.feature_names]:
        kind = _kind(schema.field(name).type)
        wanted = KEY_TYPES.get(name, "number")
        ok = kind == wanted or (wanted == "number" and kind in ("integer", "float"))
        if not ok:
            raise XlarankError(f"{path}: column {name!r} holds {schema.field(name).type}, "
                               f"expected {'numbers' if wanted == 'number' else wanted}")


def check_columns(where: str, meta: FrameMeta, frame: pd.DataFrame) -> None:
    """`check_schema` of a frame in memory: the key and feature columns are there, and
    all but graph_id hold numbers."""
    import pandas as pd

    missing = [n for n in [*KEY_TYPES, *meta.feature_names] if n not in frame.columns]
    if missing:
        raise XlarankError(f"{where}: lacks column(s) {', '.join(map(repr, missing[:3]))}"
                           f"{' and more' if len(missing) > 3 else ''}")
    for name in [*KEY_TYPES, *meta.feature_names][1:]:
        if not pd.api.types.is_numeric_dtype(frame[name]) or frame[name].dtype == bool:
            raise XlarankError(f"{where}: column {name!r} holds {frame[name].dtype}, "
                               "expected numbers")


# Runtimes and normalizers are compared as float64 (`xlarank.target.ranking_target`),
# which holds every whole number up to 2^53 exactly; above it distinct runtimes tie.
MAX_EXACT_RUNTIME = 2**53


def check_rows(path: str | Path, graph_ids: np.ndarray, runtime: np.ndarray,
               normalizer: np.ndarray | None = None,
               config_index: np.ndarray | None = None) -> None:
    """Refuse (XlarankError naming the frame, and the graph and row at fault) a frame with
    no rows, an empty graph_id, rows not contiguous per graph, runtimes that no
    measurement gives (NaN, infinite, negative or past 2^53 anywhere, zero in a labelled
    frame: one with any runtime), normalizers (when given) that are not positive
    numbers up to 2^53 in a labelled frame, or config indices (when given) negative or
    twice in a graph. A
    test split's runtimes (and a tile test split's normalizers) are all zero."""
    import pandas as pd

    if len(graph_ids) == 0:
        raise XlarankError(f"{path}: the frame has no rows")
    empty = np.flatnonzero(pd.isna(graph_ids) | (graph_ids == ""))
    if len(empty):
        raise XlarankError(f"{path}: row {int(empty[0])}: graph_id is empty; every row "
                           "names its graph (featurize again)")
    starts = np.flatnonzero(np.r_[True, graph_ids[1:] != graph_ids[:-1]])
    if len(starts) != len(pd.unique(graph_ids)):
        seen: set = set()
        for start in starts:
            if graph_ids[start] in seen:
                raise XlarankError(f"{path}: frame rows are not contiguous per graph: graph "
                                   f"{graph_ids[start]} starts again at row {start}")
            seen.add(graph_ids[start])
    runtime = np.asarray(runtime, dtype=np.float64)
    labelled = bool((runtime > 0).any())
    bad = ~np.isfinite(runtime) | (runtime < 0) | (runtime > MAX_EXACT_RUNTIME)
    if labelled:
        bad |= runtime == 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise XlarankError(f"{path}: row {row} (graph {graph_ids[row]}): runtime "
                           f"{runtime[row]:g} is not a positive number up to 2^53, in a "
                           "labelled frame; featurize again")
    if normalizer is not None and labelled:
        normalizer = np.asarray(normalizer, dtype=np.float64)
        bad = ~(normalizer > 0) | ~np.isfinite(normalizer) | (normalizer > MAX_EXACT_RUNTIME)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise XlarankError(f"{path}: row {row} (graph {graph_ids[row]}): normalizer "
                               f"{normalizer[row]:g} is not a positive number up to 2^53, "
                               "in a labelled frame (runtime / normalizer is what a tile "
                               "graph ranks); featurize again")
    if config_index is not None:
        config_index = np.asarray(config_index)
        bad = np.flatnonzero(pd.isna(config_index) | (config_index < 0))
        if len(bad):
            row = int(bad[0])
            raise XlarankError(f"{path}: row {row} (graph {graph_ids[row]}): config_index "
                               f"{config_index[row]} is not a config index (a whole number "
                               ">= 0); featurize again")
        graph_of = np.cumsum(np.r_[True, graph_ids[1:] != graph_ids[:-1]]) - 1
        pairs = graph_of.astype(np.int64) << 32 | config_index.astype(np.int64)
        order = np.argsort(pairs, kind="stable")
        twice = np.flatnonzero(pairs[order][1:] == pairs[order][:-1])
        if len(twice):
            row = int(order[twice[0] + 1])
            raise XlarankError(f"{path}: row {row} (graph {graph_ids[row]}): config_index "
                               f"{config_index[row]} appears more than once in the graph; "
                               "each config is one row (featurize again)")


def check_row_groups(path: str | Path, row_groups: int, graphs: int) -> None:
    """Refuse (XlarankError naming the frame) a frame of more row groups than graphs:
    `write_frame` writes whole graphs per row group, and reading a file of many tiny row
    groups (one per row) takes memory out of all proportion to its size."""
    if row_groups > graphs:
        raise XlarankError(f"{path}: {row_groups} row groups for {graphs} graph(s); a frame "
                           "holds whole graphs per row group, and one of this many tiny "
                           "row groups would take memory far past its size to read; "
                           "featurize again (or rewrite it with one row group per graph "
                           "or more)")


# A parquet footer (the metadata of every column chunk of every row group) takes about
# ten times its bytes to parse. `write_frame`'s row groups of many rows keep it a small
# share of the file; a footer past both bounds is one of thousands of tiny row groups.
FOOTER_BYTES_FLOOR = 8 << 20
FOOTER_SHARE = 0.25


def check_footer(path: str | Path, local: Path) -> None:
    """Refuse (XlarankError naming the frame), before pyarrow parses it, a parquet footer
    larger than `FOOTER_BYTES_FLOOR` and than `FOOTER_SHARE` of the file: a file of many
    tiny row groups, whose metadata alone would take memory far past the file's size (a
    4,000-row frame of 1-row groups took gigabytes and aborted). A file too short to
    have a footer is left to pyarrow's own error."""
    try:
        with open(local, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < 12:
                return
            handle.seek(size - 8)
            tail = handle.read(8)
    except OSError:
        return  # pyarrow names the fault
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and footer > max(FOOTER_BYTES_FLOOR, FOOTER_SHARE * size):
        raise XlarankError(f"{path}: parquet footer of {footer:,} bytes in a file of "
                           f"{size:,}: a frame of far more row groups than its graphs "
                           "warrant, whose metadata alone would take memory far past the "
                           "file's size to read; featurize again (a frame holds whole "
                           "graphs per row group)")


def read_meta(path: str | Path) -> FrameMeta:
    """The metadata of a frame, without reading its rows; its columns are checked against
    it (`check_schema`)."""
    path = Path(path)
    local = input_path(path)
    if os.path.exists(local):
        regular_file(path, "frame")
        check_footer(path, local)
    try:
        parquet_meta = pq.read_metadata(local)
        schema = parquet_meta.schema.to_arrow_schema()
    except FileNotFoundError:
        raise XlarankError(f"{path}: frame not found") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise XlarankError(f"{path}: not a readable parquet frame ({exc})") from None
    except UnicodeEncodeError:
        # pyarrow takes a path as text: a name with bytes that are not text cannot reach it.
        raise XlarankError(f"{ascii(str(path))}: a frame's name must be text (UTF-8); "
                           "rename the file") from None
    raw = parquet_meta.metadata or {}
    if META_KEY not in raw:
        raise XlarankError(f"{path}: parquet file without xlarank metadata; "
                           "make frames with 'xlarank featurize'")
    meta = _meta_from_json(path, raw[META_KEY])
    if meta.spec.get("schema") != FEATURE_SCHEMA_VERSION:
        raise MismatchError(f"{path}: frame of feature schema {meta.spec.get('schema')}, "
                            f"this xlarank reads {FEATURE_SCHEMA_VERSION}; featurize again")
    check_schema(path, meta, schema)
    return meta


def read_keys(path: str | Path) -> pa.Table:
    """The graph_id, runtime, normalizer and config_index columns of a checked frame
    (`read_meta` first), after `check_rows` and `check_row_groups`."""
    parquet = pq.ParquetFile(input_path(path))
    keys = parquet.read(columns=["runtime", "graph_id", "normalizer", "config_index"])
    graph_ids = keys["graph_id"].to_numpy()
    check_rows(path, graph_ids, keys["runtime"].to_numpy(zero_copy_only=False),
               keys["normalizer"].to_numpy(zero_copy_only=False),
               keys["config_index"].to_numpy(zero_copy_only=False))
    graphs = int(np.count_nonzero(graph_ids[1:] != graph_ids[:-1])) + 1
    check_row_groups(path, parquet.metadata.num_row_groups, graphs)
    return keys


def read_frame(path: str | Path) -> tuple[pd.DataFrame, FrameMeta]:
    """A frame's rows and metadata; rows stay contiguous per graph, in file order. The
    metadata, columns, rows and row groups are checked (`read_meta`, `read_keys`) before
    the feature columns are read."""
    meta = read_meta(path)
    read_keys(path)
    frame = pq.read_table(input_path(path)).to_pandas()
    return frame, meta


def row_group_graph_sizes(path: str | Path) -> list[np.ndarray]:
    """Per row group of a frame, int64 (graphs,): the rows of each graph in it, in order.

    Reads only the graph_id column. Graphs never span row groups (see `write_frame`).
    """
    parquet = pq.ParquetFile(input_path(path))
    out = []
    for group in range(parquet.metadata.num_row_groups):
        ids = parquet.read_row_group(group, columns=["graph_id"])["graph_id"]
        codes = ids.combine_chunks().dictionary_encode().indices.to_numpy()
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        out.append(np.diff(np.r_[starts, len(codes)]).astype(np.int64))
    return out


def group_sizes(frame: pd.DataFrame) -> np.ndarray:
    """int64 (n_graphs,): rows per graph, in order; the frame's graphs must be contiguous."""
    import pandas as pd

    ids = frame["graph_id"].to_numpy()
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, len(ids)])
    if len(starts) != len(pd.unique(ids)):
        raise XlarankError("frame rows are not contiguous per graph")
    return sizes
