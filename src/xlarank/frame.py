"""Frames: feature blocks of many graphs as one parquet file, rows contiguous per graph.

The parquet file's key-value metadata holds, under the key ``xlarank``, a JSON record of the
feature spec (name, hash, families), the collection, the split, the feature names and the
writer's version, so a frame says what it is without its file name. This module is the
format alone; featurizing files into frames is `xlarank.featurize`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from xlarank import __version__
from xlarank.atomic import atomic_path
from xlarank.data.collections import Collection
from xlarank.errors import MismatchError, XlarankError
from xlarank.features.spec import FEATURE_SCHEMA_VERSION, FeatureSpec

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

    @property
    def spec_hash(self) -> str:
        return self.spec["hash"]

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def frame_schema(names: list[str]) -> pa.Schema:
    """The key columns, then one float32 column per feature name."""
    fields = [pa.field("graph_id", pa.string()), pa.field("config_index", pa.int32()),
              pa.field("runtime", pa.int64()), pa.field("normalizer", pa.int64())]
    return pa.schema(fields + [pa.field(n, pa.float32()) for n in names])


def write_frame(path: str | Path, blocks: Iterable[pd.DataFrame | pa.Table],
                collection: Collection, split: str | None, spec: FeatureSpec,
                names: list[str], skipped: Iterable[str] = (), dedup: bool = False) -> int:
    """Write feature blocks (one per graph) to a parquet frame; ``names`` are the spec's
    feature columns (`xlarank.features.feature_names`).

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
                             dedup=dedup)
            # Footer metadata is written at close, so it can name what was skipped.
            writer.add_key_value_metadata({META_KEY: meta.to_json().encode()})
    return rows


def read_meta(path: str | Path) -> FrameMeta:
    """The metadata of a frame, without reading its rows."""
    path = Path(path)
    try:
        raw = pq.read_metadata(path).metadata or {}
    except FileNotFoundError:
        raise XlarankError(f"{path}: frame not found") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise XlarankError(f"{path}: not a readable parquet frame ({exc})") from None
    if META_KEY not in raw:
        raise XlarankError(f"{path}: parquet file without xlarank metadata; "
                           "make frames with 'xlarank featurize'")
    meta = FrameMeta(**json.loads(raw[META_KEY]))
    if meta.spec.get("schema") != FEATURE_SCHEMA_VERSION:
        raise MismatchError(f"{path}: frame of feature schema {meta.spec.get('schema')}, "
                            f"this xlarank reads {FEATURE_SCHEMA_VERSION}; featurize again")
    return meta


def read_frame(path: str | Path) -> tuple[pd.DataFrame, FrameMeta]:
    """A frame's rows and metadata; rows stay contiguous per graph, in file order."""
    meta = read_meta(path)
    frame = pq.read_table(path).to_pandas()
    return frame, meta


def row_group_graph_sizes(path: str | Path) -> list[np.ndarray]:
    """Per row group of a frame, int64 (graphs,): the rows of each graph in it, in order.

    Reads only the graph_id column. Graphs never span row groups (see `write_frame`).
    """
    parquet = pq.ParquetFile(path)
    out = []
    for group in range(parquet.metadata.num_row_groups):
        ids = parquet.read_row_group(group, columns=["graph_id"])["graph_id"]
        codes = ids.combine_chunks().dictionary_encode().indices.to_numpy()
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        out.append(np.diff(np.r_[starts, len(codes)]).astype(np.int64))
    return out


def group_sizes(frame: pd.DataFrame) -> np.ndarray:
    """int64 (n_graphs,): rows per graph, in order; the frame's graphs must be contiguous."""
    ids = frame["graph_id"].to_numpy()
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, len(ids)])
    if len(starts) != len(pd.unique(ids)):
        raise XlarankError("frame rows are not contiguous per graph")
    return sizes
