"""Reading arrays out of an npz (a zip of .npy members) without holding the whole file.

``np.load`` decompresses a member in one piece; for a layout file's ``node_config_feat``
that can be gigabytes of float32. Here the member is read as a stream, one block of
leading-axis rows at a time.
"""

from __future__ import annotations

import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from xlarank.errors import BadGraphError

# Reading a damaged archive fails in many ways; all of them mean the same to a user.
# numpy parses .npy headers as Python literals, so a damaged header can also raise
# SyntaxError or tokenize.TokenError; zipfile answers damaged flag bits with
# NotImplementedError (unsupported features) or RuntimeError (the encryption bit).
READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError,
               SyntaxError, tokenize.TokenError, OverflowError, NotImplementedError,
               RuntimeError)


READ_PIECE = 1 << 20


class NpzStream:
    """An open npz file whose members are read whole or in row blocks.

    Use as a context manager. Errors become `BadGraphError` naming the file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
            self.keys = {
                info.filename[: -len(".npy")]
                for info in self._zip.infolist()
                if info.filename.endswith(".npy")
            }
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"not a readable npz archive ({exc})") from None

    def __enter__(self) -> NpzStream:
        return self

    def __exit__(self, *exc_info) -> None:
        self._zip.close()

    def header(self, key: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype of a member, read from its .npy header alone."""
        with self._open(key) as stream:
            shape, _, dtype = self._read_header(key, stream)
        return shape, dtype

    def read(self, key: str) -> np.ndarray:
        """The whole member as an array."""
        try:
            with self._open(key) as stream:
                shape, fortran, dtype = self._read_header(key, stream)
                data = self._read_exact(key, stream, int(np.prod(shape)) * dtype.itemsize)
        except BadGraphError:
            raise
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: cannot be read ({exc})") from None
        order = "F" if fortran else "C"
        return data.view(dtype).reshape(shape, order=order)

    def iter_rows(self, key: str, rows_per_block: int) -> Iterator[np.ndarray]:
        """Yield consecutive blocks of leading-axis rows, each of shape (<= rows_per_block, ...).

        Only one block is held at a time. A Fortran-ordered member has no contiguous rows,
        so it is read whole and then cut.
        """
        try:
            with self._open(key) as stream:
                shape, fortran, dtype = self._read_header(key, stream)
                if fortran or len(shape) == 0:
                    whole = self.read(key)
                    for start in range(0, max(len(whole), 1), rows_per_block):
                        yield whole[start : start + rows_per_block]
                    return
                row_shape = shape[1:]
                row_bytes = int(np.prod(row_shape)) * dtype.itemsize
                for start in range(0, shape[0], rows_per_block):
                    n = min(rows_per_block, shape[0] - start)
                    data = self._read_exact(key, stream, n * row_bytes)
                    yield data.view(dtype).reshape((n, *row_shape))
        except BadGraphError:
            raise
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: cannot be read ({exc})") from None

    def _open(self, key: str):
        if key not in self.keys:
            raise BadGraphError(self.path, f"missing array {key!r}")
        try:
            return self._zip.open(key + ".npy")
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: cannot be opened ({exc})") from None

    def _read_header(self, key: str, stream) -> tuple[tuple[int, ...], bool, np.dtype]:
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: not a valid .npy header ({exc})") from None
        if dtype.hasobject:
            raise BadGraphError(self.path, f"{key}: holds Python objects, expected numbers")
        # The header must describe exactly the bytes stored, before anything is allocated.
        stored = self._zip.getinfo(key + ".npy").file_size - stream.tell()
        if int(np.prod(shape, dtype=np.float64)) * dtype.itemsize != stored:
            raise BadGraphError(self.path, f"{key}: header says shape {tuple(shape)} of {dtype}, "
                                           f"but {stored} bytes are stored")
        return tuple(shape), bool(fortran), dtype

    def _read_exact(self, key: str, stream, nbytes: int) -> np.ndarray:
        """uint8 (nbytes,), filled in READ_PIECE steps: one read of n bytes would hold the
        decompressed pieces and their join at once, twice the memory."""
        out = np.empty(nbytes, dtype=np.uint8)
        view = memoryview(out)
        filled = 0
        while filled < nbytes:
            piece = stream.read(min(READ_PIECE, nbytes - filled))
            if not piece:
                raise BadGraphError(
                    self.path, f"{key}: truncated ({filled} of {nbytes} bytes present)")
            view[filled : filled + len(piece)] = piece
            filled += len(piece)
        return out
