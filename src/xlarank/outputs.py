"""Whether a command may write its outputs, given what it reads: `check_outputs`, called by
each command before its work with the command's inputs, refuses an output that is one of
them or lies inside one (or would replace a folder holding one), or that two outputs
share, and passes each output to `xlarank.atomic.check_output`."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from xlarank.atomic import check_output
from xlarank.errors import XlarankError


@dataclass(frozen=True)
class Output:
    """What a command writes: a ``kind`` path, and for a folder replaced whole the file
    that marks it as xlarank's (`check_output`)."""

    path: Path
    kind: Literal["file", "dir"] = "file"
    marker: str | None = None


@dataclass(frozen=True)
class Input:
    """What a command reads. A folder is read whole (a model) unless ``reads`` names the
    files it is searched for (a glob such as ``*.npz``): then new files of other names
    may go inside it (reports/summary.csv beside the summaries it lists)."""

    path: Path
    reads: str | None = None


def _real(path: Path) -> Path:
    # Follows every link and .. of what exists; the rest is kept as given.
    return Path(os.path.realpath(path))


def _same_file_inside(target: os.stat_result, folder: Path, reads: str | None) -> Path | None:
    """A file under ``folder`` (of the names ``reads`` matches) that is ``target``'s inode."""
    for root, _, names in os.walk(folder):
        for name in names:
            if reads is not None and not fnmatch.fnmatch(name, reads):
                continue
            with contextlib.suppress(OSError):
                found = os.stat(os.path.join(root, name))
                if (found.st_dev, found.st_ino) == (target.st_dev, target.st_ino):
                    return Path(root) / name
    return None


def _aliases(output: Output, source: Input) -> str | None:
    """Why writing ``output`` would change the input ``source``; None if it would not."""
    out, given = Path(output.path), Path(source.path)
    try:
        real_out, real_in = _real(out), _real(given)
        in_info = os.stat(real_in)
    except (OSError, ValueError):  # an input that is not there fails when it is read
        return None
    try:
        out_info = os.stat(out)
    except (OSError, ValueError):
        out_info = None
    if real_out == real_in or (out_info is not None and os.path.samestat(out_info, in_info)):
        how = ("" if out == given else " by a hard link" if real_out != real_in
               else " (through a link or ..)")
        return f"output is the input {given}{how}; it would be replaced: give another path"
    if stat.S_ISDIR(in_info.st_mode) and real_out.is_relative_to(real_in):
        if source.reads is None:
            return (f"output lies inside the input {given}, which it would change: give a "
                    "path outside it")
        if fnmatch.fnmatch(real_out.name, source.reads):
            return (f"output lies inside the input {given} and is named like the "
                    f"{source.reads} files read from it: give another path")
    if (output.kind == "dir" and real_in != real_out and real_in.is_relative_to(real_out)
            and os.path.lexists(real_out)):
        return (f"output folder holds the input {given} and would be replaced whole: "
                "give another folder")
    if (out_info is not None and out_info.st_nlink > 1 and stat.S_ISDIR(in_info.st_mode)
            and stat.S_ISREG(out_info.st_mode)):
        linked = _same_file_inside(out_info, real_in, source.reads)
        if linked is not None:
            return f"output is the input {linked} by a hard link; give another path"
    return None


def check_outputs(outputs: Sequence[Output | Path],
                  inputs: Iterable[Input | Path | None] = ()) -> list[Path]:
    """The outputs' paths, if a command reading ``inputs`` may write every one of them;
    XlarankError naming the output otherwise. Called by each command before its work.

    An output must not be an input (the same path, or the same file by a link, .. or a
    hard link, or the file a leading ~ names, as a reader may expand it), lie inside a
    folder input (for a searched folder: be named like the files searched for), or be a
    folder that holds an input and would be replaced whole; no two outputs may be one
    file; and each must pass `check_output`. A plain Path is a file output or a whole
    input; None inputs (options not given) are skipped.
    """
    wanted = [o if isinstance(o, Output) else Output(Path(o)) for o in outputs]
    sources = [i if isinstance(i, Input) else Input(Path(i)) for i in inputs if i is not None]
    # Some readers expand a leading ~ (pandas does), others do not: an input is compared
    # as either file it may open.
    sources += [Input(Path(os.path.expanduser(s.path)), s.reads) for s in sources
                if str(s.path).startswith("~")]
    for output in wanted:
        for source in sources:
            why = _aliases(output, source)
            if why is not None:
                raise XlarankError(f"{output.path}: {why}")
    paths = [check_output(o.path, o.kind, o.marker) for o in wanted]
    for i, path in enumerate(paths):
        for other in paths[:i]:
            if _real(path) == _real(other):
                raise XlarankError(f"{path}: given for two outputs (also as {other}); give "
                                   "each its own path")
    return paths
