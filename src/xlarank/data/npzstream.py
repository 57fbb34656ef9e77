"""Reading arrays out of an npz (a zip of .npy members) without holding the whole file.

``np.load`` decompresses a member in one piece; for a layout file's ``node_config_feat``
that can be gigabytes of float32. Here the member is read as a stream, one block of
leading-axis rows at a time.
"""

from __future__ import annotations

import io
import queue
import re
import struct
import threading
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from xlarank.errors import BadGraphError, BadInputError
from xlarank.files import open_regular

try:
    # ISA-L's inflate takes a third to a quarter of zlib's time on config members
    # (bench/featurize.py) and has zlib's streaming interface; zlib stays the fallback
    # where its wheel is missing.
    from isal import isal_zlib as inflate_library
except ImportError:  # pragma: no cover - the wheel exists for the supported platforms
    inflate_library = zlib
# The inflate in use, for the benches' records: "isal_zlib" or "zlib".
INFLATE = inflate_library.__name__.rsplit(".", 1)[-1]

# Reading a damaged archive fails in many ways; all of them mean the same to a user.
# numpy parses .npy headers as Python literals, so a damaged header can also raise
# SyntaxError or tokenize.TokenError; zipfile answers damaged flag bits with
# NotImplementedError (unsupported features) or RuntimeError (the encryption bit).
READ_ERRORS = (zipfile.BadZipFile, zlib.error, inflate_library.error, EOFError, ValueError,
               OSError, KeyError, SyntaxError, tokenize.TokenError, OverflowError,
               NotImplementedError, RuntimeError)


READ_PIECE = 1 << 20
# Reads up to this size are taken whole, without a copy; a config block is one such read.
WHOLE_READ_LIMIT = 4 << 20
# Compressed bytes fed to zlib per call. Small, because zlib hands back what a call
# could not use as a fresh copy, and a config member can compress 80x.
COMPRESSED_PIECE = 1 << 16
_LOCAL_HEADER = struct.Struct("<4s22xHH")
# Deflate expands at most 1032 to 1: a member that claims more bytes from its compressed
# size is corrupt (or a zip bomb), refused before its claim is allocated.
MAX_DEFLATE_RATIO = 1032


class _MemberStream:
    """A zip member's bytes, inflated straight from the archive file.

    zipfile's reader inflates at most what each read asks for in 4 KiB-minimum steps and
    hands back joined copies; reading a block of n bytes here is one zlib call per
    compressed piece, and when one call yields the whole block it is returned without a copy.
    The CRC is checked when the last byte has been read, as zipfile does.
    """

    def __init__(self, archive, info: zipfile.ZipInfo):
        if info.flag_bits & 0x1:
            raise RuntimeError("encrypted member")
        self._file = archive
        self._info = info
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size:
            # A header offset past the file's end (a damaged or cut central directory).
            raise zipfile.BadZipFile("local file header past the end of the file")
        magic, name_len, extra_len = _LOCAL_HEADER.unpack(header)
        if magic != b"PK\x03\x04":
            raise zipfile.BadZipFile("bad local file header")
        # Its own position, so two members open on one file do not disturb each other.
        self._position = info.header_offset + 30 + name_len + extra_len
        self._compressed_left = info.compress_size
        self._inflate = (inflate_library.decompressobj(-zlib.MAX_WBITS)
                         if info.compress_type == zipfile.ZIP_DEFLATED else None)
        self._pending = b""
        self._crc = 0
        self._done = 0

    def __enter__(self) -> _MemberStream:
        return self

    def __exit__(self, *exc_info) -> None:
        pass

    def tell(self) -> int:
        return self._done

    def read(self, n: int) -> bytes:
        """Up to n bytes (fewer only at the member's end)."""
        parts = []
        need = min(n, self._info.file_size - self._done)
        while need > 0:
            # Topped up before it runs dry, so one zlib call usually yields a whole block.
            if len(self._pending) < COMPRESSED_PIECE // 4 and self._compressed_left > 0:
                self._file.seek(self._position)
                more = self._file.read(min(COMPRESSED_PIECE, self._compressed_left))
                self._position += len(more)
                # A file cut short ends the member; the caller reports it truncated.
                self._compressed_left = self._compressed_left - len(more) if more else 0
                self._pending += more
            if self._inflate is None:
                if not self._pending:
                    break
                piece, self._pending = self._pending[:need], self._pending[need:]
            else:
                if self._inflate.eof:
                    break
                # ISA-L takes in more input than it hands out and keeps the output for the
                # next call, so an empty input can still yield bytes.
                fed = bool(self._pending)
                piece = self._inflate.decompress(self._pending, need)
                self._pending = self._inflate.unconsumed_tail
                if not piece and not fed:
                    break
            parts.append(piece)
            need -= len(piece)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self._crc = inflate_library.crc32(data, self._crc)
        self._done += len(data)
        if self._done == self._info.file_size and self._crc != self._info.CRC:
            raise zipfile.BadZipFile(f"bad CRC-32 for {self._info.filename}")
        return data


class NpzStream:
    """An open npz file whose members are read whole or in row blocks.

    Use as a context manager. Errors become `BadGraphError` naming the file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            # Never a FIFO or a device: reading one would wait, or never end.
            self._file = open_regular(self.path, "npz")
        except BadInputError as exc:
            fault = str(exc).removeprefix(f"{self.path}: npz ")
            raise BadGraphError(self.path, fault.replace("cannot be read", "cannot be opened")
                                ) from None
        # key -> (header bytes, (shape, fortran, dtype)) of members whose header was read.
        self._headers: dict[str, tuple[int, tuple[tuple[int, ...], bool, np.dtype]]] = {}
        try:
            self._zip = zipfile.ZipFile(self._file)
            names = [info.filename for info in self._zip.infolist()]
        except READ_ERRORS as exc:
            self._file.close()
            raise BadGraphError(self.path, f"not a readable npz archive ({exc})") from None
        # Two members of one name: zipfile would read the last one silently.
        seen: set[str] = set()
        for name in names:
            if name in seen:
                self._zip.close()
                self._file.close()
                raise BadGraphError(self.path, f"the archive holds two members named "
                                    f"{name[:80]!r}; an npz has one of each")
            seen.add(name)
        self.keys = {name[: -len(".npy")] for name in names if name.endswith(".npy")}

    def __enter__(self) -> NpzStream:
        return self

    def __exit__(self, *exc_info) -> None:
        self._zip.close()
        self._file.close()

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
        except MemoryError:
            raise BadGraphError(self.path, f"{key}: too large to fit in memory") from None
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
            info = self._zip.getinfo(key + ".npy")
            if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                return _MemberStream(self._file, info)
            return self._zip.open(info)
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: cannot be opened ({exc})") from None

    def _read_header(self, key: str, stream) -> tuple[tuple[int, ...], bool, np.dtype]:
        if key in self._headers:
            # Read before (header() then read()): skip its bytes, parse nothing again.
            size, parsed = self._headers[key]
            if len(stream.read(size)) != size:
                raise BadGraphError(self.path, f"{key}: not a valid .npy header (truncated)")
            return parsed
        try:
            shape, fortran, dtype = _parse_npy_header(stream)
        except READ_ERRORS as exc:
            raise BadGraphError(self.path, f"{key}: not a valid .npy header ({exc})") from None
        if dtype.hasobject:
            raise BadGraphError(self.path, f"{key}: holds Python objects, expected numbers")
        # The header must describe exactly the bytes stored, before anything is allocated.
        info = self._zip.getinfo(key + ".npy")
        stored = info.file_size - stream.tell()
        if int(np.prod(shape, dtype=np.float64)) * dtype.itemsize != stored:
            raise BadGraphError(self.path, f"{key}: header says shape {tuple(shape)} of {dtype}, "
                                           f"but {stored} bytes are stored")
        limit = (info.compress_size if info.compress_type == zipfile.ZIP_STORED
                 else MAX_DEFLATE_RATIO * info.compress_size + 1024)
        if info.file_size > limit:
            raise BadGraphError(self.path, f"{key}: claims {info.file_size:,} bytes from "
                                           f"{info.compress_size:,} compressed, more than "
                                           "compression can make: the archive is corrupt")
        parsed = (tuple(shape), bool(fortran), dtype)
        self._headers[key] = (stream.tell(), parsed)
        return parsed

    def _read_exact(self, key: str, stream, nbytes: int) -> np.ndarray:
        """uint8 (nbytes,), read-only when read in one piece. Up to WHOLE_READ_LIMIT in one
        read, taken as it comes; beyond, filled in READ_PIECE steps: one read of n bytes would
        hold the pieces and their join at once, twice the memory."""
        if nbytes <= WHOLE_READ_LIMIT:
            piece = stream.read(nbytes)
            if len(piece) != nbytes:
                raise BadGraphError(
                    self.path, f"{key}: truncated ({len(piece)} of {nbytes} bytes present)")
            return np.frombuffer(piece, dtype=np.uint8)
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


# The header numpy writes (np.lib.format), exactly: a dict literal of these three keys in
# this order, space-padded. Parsed here by pattern; any other header goes to numpy's own
# reader (ast.literal_eval), which took two thirds of a tile file's load_graph.
_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=][a-zA-Z][0-9]{0,2})', 'fortran_order': (True|False), "
    r"'shape': \(((?:[0-9]+, )*(?:[0-9]+,?)?)\), \} *\n")
_NPY_MAGIC = b"\x93NUMPY"


def _parse_npy_header(stream) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy header at the stream's start, the stream
    left at the data. numpy's parser (`np.lib.format`) for anything but its usual text."""
    lead = stream.read(8)
    if len(lead) == 8 and lead[:6] == _NPY_MAGIC and lead[6] in (1, 2, 3) and lead[7] == 0:
        width = 2 if lead[6] == 1 else 4
        size_bytes = stream.read(width)
        if len(size_bytes) == width:
            size = int.from_bytes(size_bytes, "little")
            text = stream.read(size)
            match = (_NPY_HEADER.fullmatch(text.decode("latin1"))
                     if len(text) == size else None)
            if match:
                descr, fortran, dims = match.groups()
                shape = tuple(int(d) for d in dims.replace(",", " ").split())
                try:
                    dtype = np.dtype(descr)
                except TypeError:
                    # numpy raises TypeError for a well-formed but unknown code ('<b8');
                    # its own header parser turns that into ValueError, as here.
                    raise ValueError(f"{descr!r} is not a valid dtype descriptor") from None
                return shape, fortran == "True", dtype
            raw = lead + size_bytes + text
        else:
            raw = lead + size_bytes
    else:
        raw = lead
    reader = io.BytesIO(raw)
    version = np.lib.format.read_magic(reader)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(reader)
    return np.lib.format.read_array_header_2_0(reader)


T = TypeVar("T")
_END = object()


class ReadAhead(Generic[T]):
    """The items of an iterator, made ahead by a thread from entering the context on.

    zlib and the nogil kernels release the GIL, so inflating the next blocks of configs
    overlaps the caller's work (on this block, or on the graph before the first). At most
    ``depth`` items wait; an error raised while making an item is raised to the reader, in
    order. Leaving the context stops the thread.
    """

    def __init__(self, items: Iterator[T], depth: int = 1):
        self._items = items
        self._ready: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._make, name="xlarank-read-ahead",
                                        daemon=True)

    def __enter__(self) -> ReadAhead[T]:
        self._worker.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._worker.join()

    def __iter__(self) -> Iterator[T]:
        while True:
            item, error = self._ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item

    def _hand_over(self, entry) -> bool:
        while not self._stop.is_set():
            try:
                self._ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _make(self) -> None:
        try:
            for item in self._items:
                if not self._hand_over((item, None)):
                    return
            self._hand_over((_END, None))
        except BaseException as exc:  # handed to the reader, who raises it
            self._hand_over((None, exc))
