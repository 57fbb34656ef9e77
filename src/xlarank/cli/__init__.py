"""The ``xlarank`` command line (typer): parse options, call the library, show progress
and results.

train, evaluate, compare, tune and report each call one library function
(`train_from_specs`, `evaluate_model`, `compare_runs`, `tune_spec_file`,
`report_from_paths`); synth, gnn-train, score, submit, rank-graph and suggest call their stage's
functions, after listing the files a progress bar counts; featurize resolves its spec
and plans its frames (`resolve_feature_spec`, `frame_jobs`), then featurizes each with its
own progress bar. Progress goes to stderr, results to stdout, and
every `XlarankError` becomes one ``error:`` line on stderr and exit code 2. Every command
that writes passes its outputs and inputs to `check_outputs` first, before any work, so
no input is ever overwritten. The root
``--verbose`` flag travels in the typer context (``ctx.obj``), not in module state.
"""

from __future__ import annotations

import warnings
from typing import Annotated

import typer

from xlarank import __version__
from xlarank.cli.common import XlarankTyper, _show_warning, console, tolerant_streams

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
    tolerant_streams()
    warnings.showwarning = _show_warning


# The command modules register on `app` as they are imported, so they come after it; the
# order here is the order of `xlarank --help`.
from xlarank.cli import data, training, results, scoring  # noqa: E402, F401, I001

__all__ = ["app", "main"]
