"""What the command modules share: the consoles, error and warning display, progress bars,
tables and the option types used by several commands."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import typer._click as click
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from xlarank.errors import XlarankError, XlarankWarning

if TYPE_CHECKING:
    from rich.console import Console

# rich is imported where a command prints, not here: start-up and `xlarank --help` (plain
# click help, the app's rich_markup_mode=None) go without it.


class _PlainArgument(TyperArgument):
    """An argument shown by its upper-case name alone (DATA, not {data} and <path>)."""

    def display_type_rich(self, ctx: click.Context) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


class _PlainOption(TyperOption):
    """An option shown with a plain metavar (PATH, INT, SPEC), a flag with none."""

    def display_type_rich(self, ctx: click.Context) -> str | None:
        return None if self.is_flag else self.metavar


def _metavar(param: TyperOption) -> str:
    kind = param.type_descriptor.annotation
    if typing.get_origin(kind) is list:
        kind = typing.get_args(kind)[0]
    if param.type_descriptor.is_path or (isinstance(kind, type) and issubclass(kind, Path)):
        return "PATH"
    if kind is int:
        return "INT"
    if kind is float:
        return "NUMBER"
    return (param.name or "value").upper()


def _plain(params: list[click.Parameter]) -> list[click.Parameter]:
    # Typer builds its own parameter classes, so they are retyped here, once each.
    for param in params:
        if isinstance(param, TyperArgument) and not isinstance(param, _PlainArgument):
            param.__class__ = _PlainArgument
            param.metavar = param.metavar or (param.name or "value").upper()
        elif isinstance(param, TyperOption) and not isinstance(param, _PlainOption):
            param.__class__ = _PlainOption
            param.metavar = param.metavar or _metavar(param)
    return params


# Stands for "-" while click wraps a help text: a line then breaks at spaces only, never
# inside an option's name (--max-minutes) or a word such as cold-start.
_UNBROKEN_HYPHEN = "\u2011"


class _PlainFormatter(click.HelpFormatter):
    """click's help formatter, its lines wrapped at spaces only."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", _UNBROKEN_HYPHEN))

    def write_dl(self, rows: Sequence[tuple[str, str]], *args, **kwargs) -> None:
        super().write_dl([(term, text.replace("-", _UNBROKEN_HYPHEN)) for term, text in rows],
                         *args, **kwargs)

    def getvalue(self) -> str:
        return super().getvalue().replace(_UNBROKEN_HYPHEN, "-")


class _PlainContext(click.Context):
    formatter_class = _PlainFormatter


class PlainCommand(TyperCommand):
    """A command whose help shows plain metavars (its help texts are plain text, as the
    app's rich_markup_mode=None has them: '[gnn]' shows as written)."""

    context_class = _PlainContext

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _plain(super().get_params(ctx))

    def get_short_help_str(self, limit: int = 45) -> str:
        # The root's list of commands shows each one's first sentence whole, wrapped,
        # rather than cut at the width left beside the names.
        return super().get_short_help_str(limit=1_000)


ROOT_FLAGS = ("--verbose", "-v")


def _root_flags_first(group: TyperGroup, args: list[str]) -> list[str]:
    """``args`` with the root's ``--verbose`` (``-v``) given after the command's name moved
    before it, so `xlarank train F --out M -v` is `xlarank -v train F --out M`. Not moved:
    the value of a command's option that takes one, anything after ``--``, and a flag a
    command has of its own."""
    # The root's options are flags, so the first word that is not an option names the
    # command.
    at = next((i for i, arg in enumerate(args) if not arg.startswith("-")), None)
    command = group.commands.get(args[at]) if at is not None else None
    if command is None:
        return args
    options = [p for p in command.params if p.param_type_name == "option"]
    if any(set(ROOT_FLAGS) & {*p.opts, *p.secondary_opts} for p in options):
        return args
    takes_value = {o for p in options if not getattr(p, "is_flag", False) for o in p.opts}
    moved, kept = [], []
    for i, arg in enumerate(args[at + 1:], at + 1):
        if arg == "--":
            kept += args[i:]
            break
        if arg in ROOT_FLAGS and args[i - 1] not in takes_value:
            moved.append(arg)
        else:
            kept.append(arg)
    return [*args[:at], *moved, args[at], *kept]


@contextmanager
def _usage_errors() -> Iterator[None]:
    """A usage error (an unknown option, a missing one, a value out of range, an unknown
    command) as one ``error:`` line naming the command, with exit code 2 as a user's
    error has: not typer's box of usage, hint and message."""
    try:
        yield
    except NoArgsIsHelpError:
        raise
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "xlarank"
        if isinstance(exc, NoSuchOption) and exc.possibilities:
            # difflib's order: the nearest spelling first.
            message = f"{exc.message}; did you mean {' or '.join(exc.possibilities)}?"
        else:
            message = exc.format_message()
        _error_line(f"{where}: {' '.join(message.split()).rstrip('.')} (see {where} --help)")
        raise typer.Exit(exc.exit_code) from None


class PlainGroup(TyperGroup):
    """The root group, shown as `PlainCommand` is. Its usage errors and its commands' are
    one line each (`_usage_errors`), and its flags may follow a command's name too."""

    context_class = _PlainContext

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _plain(super().get_params(ctx))

    def make_context(self, info_name, args, *rest, **kwargs) -> click.Context:
        with _usage_errors():
            return super().make_context(info_name, _root_flags_first(self, list(args)),
                                        *rest, **kwargs)

    def invoke(self, ctx: click.Context):
        # A command's own arguments are parsed within the root's invoke.
        with _usage_errors():
            return super().invoke(ctx)


class XlarankTyper(typer.Typer):
    """typer.Typer whose commands are `PlainCommand`s, so a command added later with a
    plain ``@app.command()`` shows its help like the others."""

    def __init__(self, **kwargs) -> None:
        # Plain click help, not typer's rich panels: those import rich and markdown-it at
        # every --help, more than the rest of the start-up together.
        super().__init__(cls=PlainGroup, rich_markup_mode=None, **kwargs)

    def command(self, name: str | None = None, *, cls: type | None = None, **kwargs):
        return super().command(name, cls=cls or PlainCommand, **kwargs)


def tolerant_streams() -> None:
    """Let stdout and stderr escape what their encoding cannot show (backslashreplace)
    rather than raise after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")


class _DeferredConsole:
    """Stands for the rich console of stdout (or stderr) until its first use, which makes
    it (`xlarank.cli.console.make_console`): rich loads when a command prints."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._made: Console | None = None

    @property
    def made(self) -> Console:
        if self._made is None:
            from xlarank.cli.console import make_console

            self._made = make_console(self._stderr)
        return self._made

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)  # copy and pickle ask before __init__ has run
        return getattr(self.made, name)


console = _DeferredConsole()
err_console = _DeferredConsole(stderr=True)


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except XlarankError as exc:
        _error_line(str(exc))
        raise typer.Exit(2) from None
    except OSError as exc:
        if exc.errno not in _NAME_ERRNOS or exc.filename is None:
            raise
        _error_line(f"{os.fsdecode(exc.filename)}: cannot be read ({exc.strerror})")
        raise typer.Exit(2) from None


# OS errors that only a path the user gave can cause, wherever a reader meets it: a name
# longer than the file system allows (pathlib's exists(), is_dir() and is_file() raise
# it rather than answer False) and a loop of symbolic links. Any other OSError is a bug
# and keeps its traceback.
_NAME_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP})


def _error_line(message: str) -> None:
    from rich.markup import escape

    # One line, even when a library's message that it quotes spans several.
    err_console.print(f"[red]error:[/red] {escape(' '.join(message.split()))}",
                      highlight=False, soft_wrap=True)


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr that appears with the first finished item, so an error
    raised before any work leaves stderr holding only its one line. Yields tick(item=None).
    Off a terminal there is no bar: its redraws would fill a log with lines."""
    if not err_console.is_terminal:
        yield lambda _item=None: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=err_console.made, transient=True)
    task = bar.add_task(label, total=total)

    def tick(_item: object = None) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.advance(task)

    try:
        yield tick
    finally:
        if bar.live.is_started:
            bar.stop()


def _named_files(names: Iterable[str | None]) -> list[Path]:
    """The options that name a file or a packaged spec (or 'random:SEED'): those naming
    a file, as inputs for `check_outputs`."""
    return [Path(n) for n in names if n and not n.startswith("random:") and Path(n).exists()]


NPZ = "*.npz"


def _show_skipped(lines: Iterable[str]) -> None:
    from rich.markup import escape

    for line in lines:
        err_console.print(f"[yellow]skipped[/yellow] {escape(line)}", highlight=False,
                          soft_wrap=True)


_python_showwarning = warnings.showwarning


def _show_warning(message, category, *args, **kwargs) -> None:
    """xlarank's own warnings as one ``warning:`` line; others as Python shows them."""
    if not issubclass(category, XlarankWarning):
        return _python_showwarning(message, category, *args, **kwargs)
    from rich.markup import escape

    # One line, as an error is: a name holding a newline must not start a line of its own.
    err_console.print(f"[yellow]warning:[/yellow] {escape(' '.join(str(message).split()))}",
                      highlight=False, soft_wrap=True)


def _show_table(title: str, columns: Sequence[tuple[str, str]],
                rows: Iterable[Sequence[str]]) -> None:
    """Print a table; columns are (header, justify) pairs."""
    from rich.table import Table

    grid = Table(title=title)
    for header, justify in columns:
        grid.add_column(header, justify=justify)
    for row in rows:
        grid.add_row(*row)
    console.print(grid)


EngineOption = Annotated[str, typer.Option(help="local, or dask: a Dask cluster (the one "
                                           "at --scheduler, else a local one of --workers "
                                           "processes).")]
SchedulerOption = Annotated[str | None, typer.Option(help="Address of a running Dask "
                                                     "scheduler, e.g. tcp://host:8786.")]
# One text for every command with --workers (synth has no --engine, so none is named).
# 1..1024 (`xlarank.distributed.MAX_WORKERS`, which the API checks); never more processes
# than the cores (nor, locally, than the files) are started.
WorkersOption = Annotated[int, typer.Option(
    min=1, max=1024, help="Parallel workers (1..1024): local processes, or with a Dask "
    "engine the processes of its local cluster (unused with a scheduler); at most one per "
    "core is started.")]
ThreadsOption = Annotated[int, typer.Option(min=0, help="Threads for the boosters and kernels, "
                                            "shared by local --workers; 0: the cores, shared "
                                            "among make's parallel jobs. A Dask task uses 1.")]
# For the commands without --workers: one process, its threads.
OwnThreadsOption = Annotated[int, typer.Option(min=0, help="Threads for the boosters and "
                                               "kernels; 0: the cores, shared among make's "
                                               "parallel jobs.")]


def _checked_seed(seed: int, option: str = "--seed") -> int:
    """A seed option's value if it is a whole number >= 0 (`xlarank.seeds.check_seed`, as
    every command takes it) within the range of seeds that reach a library
    (`xlarank.rank.spec.SEEDS`: numpy's legacy generators take none past 2**32 - 1, the
    boosters keep 31 bits); XlarankError naming ``option`` otherwise."""
    from xlarank.rank.spec import SEEDS
    from xlarank.seeds import check_seed

    seed = check_seed(seed, option)
    if seed > SEEDS[1]:
        raise XlarankError(f"{option} {seed}: a seed is a whole number in {SEEDS[0]}.."
                           f"{SEEDS[1]} here (the generators it seeds take no larger one)")
    return seed


def _parse_seeds(text: str) -> list[int]:
    """--seeds's comma-separated integers, each given once (`xlarank.rank.spec.check_seeds`);
    an empty text or item ('', '1,,2', '1,') is refused, not skipped."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise XlarankError(f"--seeds {text!r}: expected comma-separated integers, "
                           "none empty, e.g. 0,1,2") from None
    from xlarank.rank.spec import check_seeds

    return check_seeds(seeds, f"--seeds {text!r}", XlarankError)
