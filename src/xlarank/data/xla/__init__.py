"""Reading XLA's own data: HLO modules and TpuGraphs tuning records, in pure Python.

The rooms, from the bytes up: `wire` (the protobuf wire format), `messages` (the fields
of hlo.proto, xla_data.proto and tuning.proto that are read, and a strict decoder),
`opcodes` (the dataset's opcode ids), `encode` (a module's nodes, features and edges, as
the official converter makes them) and `records` (records and dumps to the dataset's
arrays). `import_records` writes the dataset's own tree, so everything downstream reads
an import as it reads the real dataset.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from xlarank.atomic import atomic_dir
from xlarank.data.graph import load_graph
from xlarank.data.npzwrite import write_npz
from xlarank.data.xla.records import (
    KINDS,
    ImportedGraph,
    candidate_layouts,
    configurable_nodes,
    read_records,
)
from xlarank.errors import (
    ArgumentTypeError,
    BadGraphError,
    XlarankError,
    XlarankWarning,
    checked_type,
)
from xlarank.outputs import Input, Output, check_outputs

MANIFEST = "xlarank-import.json"


def import_records(sources: Sequence[str | Path], out_dir: str | Path, *,
                   on_file: Callable[[Path], None] | None = None,
                   **options) -> list[ImportedGraph]:
    """Read every source (`read_records` with ``options``) and write its npz files under
    ``out_dir`` in the dataset's tree, with a manifest naming the sources.

    Every source is read and checked before anything is written, and the folder appears
    only when complete. Raises XlarankError naming the file at the first bad source.
    """
    if isinstance(sources, str | os.PathLike) or not isinstance(sources, Iterable):
        raise ArgumentTypeError(f"import_records: sources: expected a list of record or "
                                f"dump paths, got {type(sources).__name__}")
    sources = list(sources)
    for source in sources:
        checked_type(source, (str, os.PathLike), "import_records: sources",
                     "a list of paths (str or Path)")
    checked_type(out_dir, (str, os.PathLike), "import_records: out_dir",
                 "a path (str or Path)")
    graphs: list[ImportedGraph] = []
    # Warnings wait for the import to succeed: a failed one says only its error.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", XlarankWarning)
        for source in sources:
            graphs.extend(read_records(source, **options))
    seen: dict[Path, Path] = {}
    for graph in graphs:
        if graph.relative_path in seen:
            raise XlarankError(f"{graph.source}: would write {graph.relative_path}, as "
                               f"{seen[graph.relative_path]} does; give --name, or import "
                               "them into separate folders")
        seen[graph.relative_path] = graph.source
    # As the command checks: the folder replaced whole holds no source and is one an
    # import made (or new), whoever calls.
    check_outputs([Output(Path(out_dir), "dir", marker=MANIFEST)],
                  [Input(Path(s)) for s in sources])
    with atomic_dir(out_dir) as building:
        for graph in graphs:
            written = building / graph.relative_path
            write_npz(written, graph.arrays)
            # Read back with the dataset reader's own checks, so an import is never a
            # file that featurize would then refuse.
            try:
                load_graph(written, graph.collection)
            except BadGraphError as exc:
                raise XlarankError(f"{graph.source}: makes no valid TpuGraphs file "
                                   f"({exc.fault})") from None
            if on_file is not None:
                on_file(graph.relative_path)
        manifest = {"generator": "xlarank import", "origin": "real",
                    "files": [{"path": str(g.relative_path), "source": str(g.source),
                               "note": g.note} for g in graphs]}
        (building / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=2)
    return graphs


__all__ = ["KINDS", "MANIFEST", "ImportedGraph", "candidate_layouts", "configurable_nodes",
           "import_records", "read_records"]
