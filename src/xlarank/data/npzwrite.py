"""Writing npz files whose largest member arrives block by block, atomically."""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np


def write_npz(path: Path, arrays: dict[str, np.ndarray],
              streamed: dict[str, tuple[tuple[int, ...], np.dtype, Iterable[np.ndarray]]]
              | None = None, compress_level: int = 6) -> None:
    """Write a compressed npz that ``np.load`` reads, without holding streamed members whole.

    ``streamed`` maps a key to (shape, dtype, blocks): the blocks are C-ordered row blocks
    whose concatenation along axis 0 has that shape. The file appears under ``path`` only
    once it is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True,
                             compresslevel=compress_level) as zf:
            for key, array in arrays.items():
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.ascontiguousarray(array),
                                              allow_pickle=False)
            for key, (shape, dtype, blocks) in (streamed or {}).items():
                dtype = np.dtype(dtype)
                header = {"descr": np.lib.format.dtype_to_descr(dtype),
                          "fortran_order": False, "shape": tuple(shape)}
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array_header_2_0(member, header)
                    rows = 0
                    for block in blocks:
                        member.write(np.ascontiguousarray(block, dtype=dtype).tobytes())
                        rows += len(block)
                    if rows != shape[0]:
                        raise ValueError(f"{key}: blocks gave {rows} rows, header says {shape[0]}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
