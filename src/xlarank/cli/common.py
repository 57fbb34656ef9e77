"""What the command modules share: the consoles, error and warning display, progress bars,
tables and the option types used by several commands."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from xlarank.errors import XlarankError, XlarankWarning

console = Console()
err_console = Console(stderr=True)


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except XlarankError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise typer.Exit(2) from None


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr that appears with the first finished item, so an error
    raised before any work leaves stderr holding only its one line. Yields tick(item=None)."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=err_console, transient=True)
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
    for line in lines:
        err_console.print(f"[yellow]skipped[/yellow] {escape(line)}", highlight=False,
                          soft_wrap=True)


_python_showwarning = warnings.showwarning


def _show_warning(message, category, *args, **kwargs) -> None:
    """xlarank's own warnings as one ``warning:`` line; others as Python shows them."""
    if not issubclass(category, XlarankWarning):
        return _python_showwarning(message, category, *args, **kwargs)
    err_console.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False,
                      soft_wrap=True)


def _show_table(title: str, columns: Sequence[tuple[str, str]],
                rows: Iterable[Sequence[str]]) -> None:
    """Print a table; columns are (header, justify) pairs."""
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
WorkersOption = Annotated[int, typer.Option(help="Parallel workers: local processes, or with "
                                            "--engine dask the processes of the local Dask "
                                            "cluster (unused with --scheduler).")]
ThreadsOption = Annotated[int, typer.Option(min=0, help="Threads for the boosters and kernels, "
                                            "shared by local --workers; 0: the cores, shared "
                                            "among make's parallel jobs. A Dask task uses 1.")]


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise XlarankError(f"--seeds {text!r}: expected comma-separated integers") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise XlarankError(f"--seeds {text!r}: give one or more distinct integers")
    return seeds
