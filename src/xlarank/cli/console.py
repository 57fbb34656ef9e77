"""The rich consoles the commands print to, made on a command's first line of output
(`xlarank.cli.common.console` and ``err_console`` stand for them until then), so that
start-up and ``--help`` do not import rich."""

from __future__ import annotations

import contextlib
import os
import sys

from rich.console import Console


class _SafeConsole(Console):
    """A console whose lines never change a command's outcome: the result is written (or
    the error decided) before its message is printed, so a stream that cannot take the
    message (a full disk as /dev/full, a closed pipe) loses the message, not the exit
    code. Characters the stream's encoding lacks (a non-ASCII path under
    PYTHONIOENCODING=ascii) are escaped instead (`xlarank.cli.common.tolerant_streams`)."""

    def print(self, *objects, **kwargs) -> None:
        try:
            super().print(*objects, **kwargs)
        except OSError:
            _drop_stream(self.file)


def _drop_stream(stream) -> None:
    """Point the file descriptor under ``stream`` at /dev/null, so the interpreter's flush
    at exit (of what the failed write left buffered) cannot fail the process."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def make_console(stderr: bool = False) -> Console:
    """A console that wraps at the terminal's width, and off a terminal (a pipe, a log
    file, make's output) not at all: a table or line cut at rich's default 80 columns
    is harder to read and to grep."""
    stream = sys.stderr if stderr else sys.stdout
    wide = None if stream is not None and stream.isatty() else 10_000
    return _SafeConsole(stderr=stderr, width=wide, soft_wrap=wide is not None)
