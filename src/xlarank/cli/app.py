"""The root typer app: ``--version``, ``--verbose`` (kept in the typer context, ``ctx.obj``),
the streams and warnings set up once. The command modules register on `app` as they are
imported (`xlarank.cli` imports them)."""

from __future__ import annotations

import warnings
from typing import Annotated

import typer

from xlarank import __version__
from xlarank.cli.common import XlarankTyper, _show_warning, console, tolerant_streams
from xlarank.threads import start_load_window

app = XlarankTyper(add_completion=False, no_args_is_help=True,
                  help="Rank XLA compiler configurations (TpuGraphs) by predicted runtime.")


def _version(value: bool) -> None:
    if value:
        console.print(f"xlarank {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say more.")] = False,
) -> None:
    ctx.obj = {"verbose": verbose}
    start_load_window()
    tolerant_streams()
    warnings.showwarning = _show_warning
