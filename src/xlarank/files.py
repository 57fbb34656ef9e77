"""Reading the files users hand to xlarank: only regular files (`regular_file`,
`open_regular`), and the small TOML and JSON ones with one-line errors."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import sys
import tomllib
from pathlib import Path
from typing import BinaryIO

from xlarank.errors import BadInputError, XlarankError


def input_path(path: str | Path) -> Path:
    """The file xlarank opens for an input path: a leading ``~`` expanded (pandas and
    pyarrow expand it too), made absolute so that no library takes it for a URL
    (``file:...``, ``s3://...``). `xlarank.outputs.check_outputs` compares outputs with
    it."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def not_regular(mode: int) -> str | None:
    """Why a file of ``st_mode`` ``mode`` is no input xlarank reads, or None for a regular
    file: a read of a FIFO waits for a writer, and a device such as /dev/zero never ends."""
    if stat.S_ISREG(mode):
        return None
    what = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device node")
    return f"is {what}, not a regular file; give the path of a file"


def regular_file(path: str | Path, what: str = "input") -> Path:
    """``path`` as a Path if it names a regular file (a link to one is followed), before
    anything opens it; `BadInputError` naming it and ``what`` it is otherwise (missing,
    a folder, a FIFO, a socket or a device node). Opening a FIFO to read it waits for a
    writer, and /dev/zero never ends: both would hang xlarank."""
    path = Path(path)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise BadInputError(f"{path}: {what} not found") from None
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: {what} cannot be read "
                            f"({getattr(exc, 'strerror', None) or exc})") from None
    why = not_regular(info.st_mode)
    if why is not None:
        raise BadInputError(f"{path}: {what} {why}")
    return path


def open_regular(path: str | Path, what: str = "input") -> BinaryIO:
    """``path`` open for reading in binary, if it is a regular file (`regular_file`'s
    faults otherwise, as `BadInputError`). Opened without blocking and checked on the
    open descriptor, so a FIFO put in the file's place after a check cannot hang it."""
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise BadInputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: {what} {not_regular(stat.S_IFDIR)}") from None
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: {what} cannot be read "
                            f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        why = not_regular(os.fstat(fd).st_mode)
        if why is not None:
            raise BadInputError(f"{path}: {what} {why}")
        if sys.platform != "win32":
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_structured(path: str | Path, what: str, error: type[XlarankError] = XlarankError,
                    missing_hint: str = "") -> object:
    """Parse a .toml or .json file (by suffix); ``what`` names it in error messages."""
    path = Path(path)
    toml = path.suffix == ".toml"
    if not os.path.exists(path):
        raise error(f"{path}: {what} not found{missing_hint}")
    try:
        with open_regular(path, what) as handle:
            text = handle.read().decode()
        return tomllib.loads(text) if toml else json.loads(text)
    except BadInputError as exc:
        raise error(str(exc)) from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: {what} is not valid {'TOML' if toml else 'JSON'} ({exc})") from None
    except RecursionError:
        raise error(f"{path}: {what} is nested too deeply to be a "
                    f"{'TOML' if toml else 'JSON'} file xlarank wrote") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise error(f"{path}: {what} is not valid {'TOML' if toml else 'JSON'} "
                    f"({' '.join(str(exc).split())})") from None
    except OSError as exc:
        raise error(f"{path}: {what} cannot be read ({exc.strerror})") from None


def toml_text(table: dict, header: str = "") -> str:
    """A flat TOML document: scalar keys, then one level of sub-tables (such as a booster
    spec's [params]). ``header`` lines become comments at the top."""
    # Only a newline ends a comment line; any other control character (a path can hold
    # one) is escaped, since TOML allows none in a comment.
    lines = [f"# {_escaped(line, comment=True)}" if line else "#"
             for line in header.split("\n")]
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    lines += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    for name, sub in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in sub.items()]
    return "\n".join(lines) + "\n"


def _escaped(text: str, comment: bool = False) -> str:
    """``text`` with the characters TOML allows neither in a comment nor in a basic
    string (control characters but tab, DEL) as \\u escapes of four hex digits. A lone surrogate (a
    file name's undecodable byte), which no UTF-8 file can hold, is escaped too in a
    ``comment``, and refused (XlarankError) in a string, whose value it would change."""
    if not comment:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise XlarankError(f"{text!r}: holds a character (an undecodable byte of a file "
                               "name) that a TOML file cannot hold; rename the file") from None
    return "".join(f"\\u{ord(c):04x}" if (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F
                   or 0xD800 <= ord(c) < 0xE000 else c for c in text)


def _toml_string(value: str) -> str:
    """A TOML basic string of ``value`` (UTF-8 kept, control characters escaped)."""
    return '"' + _escaped(value.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        # repr keeps every digit; TOML floats need a point or exponent, ints must not have one.
        return repr(float(value)) if isinstance(value, float) else str(int(value))
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
