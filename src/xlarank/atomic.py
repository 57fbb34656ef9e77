"""Writing outputs so that a killed run never leaves a partial file that looks complete.

Every output is written through here: `check_output` refuses a path that cannot or must
not be written (called by `xlarank.outputs.check_outputs` before a command's work, and
again at the write); `atomic_path` and `atomic_dir` write beside the target and rename,
with the modes the umask asks for, and `output_lock` keeps two runs off one output.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import glob
import inspect
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from xlarank.errors import XlarankError


def check_output(path: str | Path, kind: Literal["file", "dir"] = "file",
                 marker: str | None = None) -> Path:
    """``path`` as a Path, if xlarank may write it as a ``kind``; XlarankError otherwise.

    Outputs are replaced whole by a rename beside them, so a symbolic link would be
    replaced (not its target), a device node or FIFO would become a regular file, and a
    folder cannot become a file: all are refused. The nearest existing folder above
    ``path`` must be one this process can write in (checked with the effective ids, so
    root passes where the kernel lets it), so a read-only place fails before the work,
    not after it. A folder output is replaced whole: with ``marker`` (a file name such as
    card.json), an existing folder must be empty or hold that file, so a mistyped path
    cannot delete a folder xlarank did not write.
    """
    path = Path(path)
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        # A lone surrogate: no file system name decodes to it (argv never holds one).
        raise XlarankError(f"{path!r}: not a file name this system can encode") from None
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise XlarankError(f"{path}: output cannot be checked ({exc.strerror})") from None
    wanted = "a file" if kind == "file" else "a folder"
    if mode is not None:
        if stat.S_ISLNK(mode):
            raise XlarankError(f"{path}: output is a symbolic link; xlarank replaces outputs "
                               "whole and would replace the link, not its target; give the "
                               "target's own path")
        if stat.S_ISDIR(mode) and kind == "file":
            raise XlarankError(f"{path}: output is a folder, expected {wanted} path")
        if stat.S_ISREG(mode) and kind == "dir":
            raise XlarankError(f"{path}: output is a file, expected {wanted} path")
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            what = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "a device node")
            raise XlarankError(f"{path}: output is {what}, not {wanted}; give the path of "
                               f"{wanted} to write")
        if (stat.S_ISDIR(mode) and marker is not None and any(path.iterdir())
                and not (path / marker).is_file()):
            raise XlarankError(f"{path}: output folder exists and has no {marker}, so "
                               "xlarank did not write it; it would be replaced whole: give "
                               "a new or empty folder")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise XlarankError(f"{path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK,
                     effective_ids=os.access in os.supports_effective_ids):
        raise XlarankError(f"{path}: cannot write in {folder} (permission denied or a "
                           "read-only file system)")
    return path


def _umask() -> int:
    """The process's umask: from /proc on Linux (reading it leaves it alone), else by
    setting it and setting it back at once, the only portable way."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Faults of the place written to, not of xlarank: a full disk or quota, a read-only or
# forbidden place, a file larger than the file system takes.
_WRITE_FAULTS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG,
                 *([errno.EDQUOT] if hasattr(errno, "EDQUOT") else [])}


def _write_fault(exc: OSError) -> int | None:
    """The errno of a write fault (`_WRITE_FAULTS`), else None. pyarrow's OSError holds
    only the system's message, not its errno."""
    if exc.errno in _WRITE_FAULTS:
        return exc.errno
    if exc.errno is None:
        text = str(exc).lower()
        for code in _WRITE_FAULTS:
            if os.strerror(code).lower() in text:
                return code
    return None


@contextmanager
def write_faults(path: Path) -> Iterator[None]:
    """Turn a write fault while ``path`` is written into XlarankError naming the file and
    the fault (the callers have removed what was half written)."""
    try:
        yield
    except OSError as exc:
        code = _write_fault(exc)
        if code is None:
            raise
        # The temporaries beside the output are gone: only a file elsewhere is named.
        where = ("" if not isinstance(exc.filename, (str, bytes, os.PathLike))
                 or Path(os.fsdecode(exc.filename)).is_relative_to(path.parent)
                 else f" at {exc.filename}")
        raise XlarankError(f"{path}: cannot write the output{where}: "
                           f"{os.strerror(code).lower()} ({errno.errorcode[code]}); nothing "
                           "was written, and any older one is kept") from None


@contextmanager
def atomic_path(path: str | Path, leftovers: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed to ``path``.

    On any failure the temporary file is removed and ``path`` keeps its old content. The
    file gets the mode a plain open() would (0666 less the umask), not mkstemp's 0600.
    Then a killed run's temporaries of ``path`` are deleted (`remove_leftovers`), unless
    ``leftovers`` is False: that lists the folder, and a caller writing thousands of files
    into one folder sweeps it once itself.
    """
    path = check_output(path, "file")
    with write_faults(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".part", dir=path.parent)
        os.close(fd)
        try:
            os.chmod(tmp, 0o666 & ~_umask())
            yield Path(tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    if leftovers:
        remove_leftovers(path)


def _temp_prefix(path: Path) -> str:
    # The writer's pid in the name tells `remove_leftovers` whose temporary it is.
    return f".{path.name}.{os.getpid()}-"


def _writer_alive(leftover: Path, path: Path) -> bool:
    """Whether the run that made ``leftover`` (named by `_temp_prefix`) still runs; names
    of older xlarank versions, with no pid, are a killed run's."""
    found = re.match(rf"\.{re.escape(path.name)}\.([0-9]{{1,7}})-", leftover.name)
    if found is None:
        return False
    try:
        os.kill(int(found.group(1)), 0)
    except PermissionError:  # another user's live process
        return True
    except (OSError, OverflowError):
        return False
    return True


def remove_leftovers(path: Path) -> None:
    """Delete the temporary files and folders of ``path`` that a killed run left behind
    (no cleanup runs on SIGKILL): ``.NAME.*.part`` and ``.NAME.*.old`` whose writer is
    gone. A live writer's are kept: deleting them made a second run on the same output
    die with FileNotFoundError."""
    for suffix in ("part", "old"):
        for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.{suffix}"):
            if _writer_alive(leftover, path):
                continue
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                # The output is written: a leftover that cannot go is no failure of it.
                with contextlib.suppress(OSError):
                    leftover.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` whole.

    A kill at any moment leaves the old folder, or (between two renames) none, never a mix;
    the next success removes what such a kill left. The folder gets mode 0777 less the
    umask, not mkdtemp's 0700.
    """
    path = check_output(path, "dir")
    with write_faults(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".part",
                                    dir=path.parent))
        old = None
        try:
            os.chmod(tmp, 0o777 & ~_umask())
            yield tmp
            if path.exists():
                old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".old",
                                            dir=path.parent))
                os.replace(path, old / path.name)
            os.replace(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if old is not None:  # put the old folder back, if it was moved aside
                with contextlib.suppress(OSError):
                    if not path.exists():
                        os.replace(old / path.name, path)
                    old.rmdir()
            raise
    if old is not None:
        # The new folder is in place: a failure to delete the old is the next run's to
        # clean up (`remove_leftovers`), not this one's to fail on.
        shutil.rmtree(old, ignore_errors=True)
    remove_leftovers(path)


@contextmanager
def output_lock(path: str | Path) -> Iterator[None]:
    """Hold ``.NAME.lock`` beside ``path`` while one run makes it; a second run on the same
    output fails at once with XlarankError instead of deleting the first one's temporary
    files. The kernel drops the lock of a killed run; the lock file goes at the end."""
    path = Path(path)
    lock = path.parent / f".{path.name}.lock"
    while True:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise XlarankError(f"{path}: cannot lock the output: {lock} "
                               f"({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise XlarankError(f"{lock}: cannot lock the output ({exc.strerror})") from None
            raise XlarankError(f"{path}: another xlarank run is writing it now; run again "
                               "when that one has finished") from None
        # The previous holder may have removed the file between our open and our lock:
        # then we hold a lock nobody else can see, and take the new file's instead.
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)
    try:
        yield
    finally:
        # Removed while still held, so a waiting run can never lock the old file unseen.
        lock.unlink(missing_ok=True)
        os.close(fd)


def locks_outputs(*names: str) -> Callable[[Callable], Callable]:
    """Decorate a function that writes the outputs its arguments ``names`` give: it runs
    holding `output_lock` on each (those not None), so a second run on one output fails
    at once instead of racing the first."""
    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def locked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            with contextlib.ExitStack() as held:
                for name in names:
                    if bound.arguments.get(name) is not None:
                        held.enter_context(output_lock(bound.arguments[name]))
                return fn(*args, **kwargs)
        return locked
    return decorate
