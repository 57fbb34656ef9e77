"""The exceptions xlarank raises for problems a user can fix.

The CLI turns every `XlarankError` into one line on stderr and exit code 2, and so an
OSError of a path the user gave that cannot be named (too long, a symlink loop: Python's
own path checks raise it); anything else is a bug in xlarank and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path


class XlarankError(Exception):
    """Base class: a problem with the user's input, not with xlarank."""


class BadGraphError(XlarankError):
    """A TpuGraphs file that cannot be read or breaks the format (FORMAT.md)."""

    def __init__(self, path: str | Path, fault: str):
        self.path = Path(path)
        self.fault = fault
        super().__init__(f"{path}: {fault}")

    def __reduce__(self):
        # Rebuilt from its two fields when it crosses from a worker process.
        return (BadGraphError, (self.path, self.fault))


class SpecError(XlarankError):
    """A feature spec or booster spec that is missing or malformed."""


class MismatchError(XlarankError):
    """Artifacts that do not belong together: a model and a frame of another feature spec,
    another collection, or a frame without runtimes given to training."""


class BadModelError(XlarankError):
    """A saved model whose card or booster file is missing, malformed or altered since it
    was saved."""


class BadInputError(XlarankError):
    """An input path that names no regular file: missing, a folder, or a FIFO, socket or
    device node (which would hang a read, or never end)."""


class XlarankWarning(UserWarning):
    """A result that is legal but dubious (a degenerate training frame, a partial
    submission); the CLI shows it as one ``warning:`` line."""


class ArgumentTypeError(XlarankError, TypeError):
    """An argument of the wrong type given to a public function (None, a float where an
    int is due, a list where a mapping is): an `XlarankError`, as every fault of the input
    is, and a TypeError, as Python's own for a wrong type is."""


def checked_type(value, kinds: type | tuple[type, ...], what: str, expected: str):
    """``value`` if it is one of ``kinds`` (a bool is no int here); `ArgumentTypeError`
    naming ``what`` (the argument) and ``expected`` (in words) otherwise."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise ArgumentTypeError(f"{what}: expected {expected}, got "
                                f"{type(value).__name__}")
    return value

