"""Commands that measure and show results: evaluate, compare, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xlarank.cli.app import app
from xlarank.cli.common import (
    OwnThreadsOption,
    _show_table,
    _user_errors,
    console,
    err_console,
)
from xlarank.errors import XlarankError


@app.command()
def evaluate(
    frame: Annotated[Path, typer.Argument(help="Labelled frame (e.g. valid split).")],
    model: Annotated[Path | None, typer.Option(help="Model directory.")] = None,
    random_order: Annotated[bool, typer.Option("--random", help="Score a random order "
                                               "instead of a model (the floor).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of --random.")] = 0,
    eval_indices: Annotated[Path | None, typer.Option(help="Official eval_indices JSON.")] = None,
    out_csv: Annotated[Path | None, typer.Option("--out", help="Per-graph metrics CSV; a "
                                                 "summary JSON is written beside it.")] = None,
    name: Annotated[str | None, typer.Option(help="Run name in the summary.")] = None,
    threads: OwnThreadsOption = 0,
) -> None:
    """Per-graph and mean metrics: Kendall tau and OPA (layout), slowdown@K (tile)."""
    from xlarank.outputs import check_outputs
    from xlarank.score import SUMMARY_SUFFIX, evaluate_model
    from xlarank.threads import use_threads

    with _user_errors():
        check_outputs([out_csv, out_csv.with_suffix(SUMMARY_SUFFIX)] if out_csv else [],
                      [frame, model, eval_indices])
        use_threads(threads)
        if (model is None) == (not random_order):
            raise XlarankError("give exactly one of --model DIR or --random")
        result = evaluate_model(frame, model, seed, eval_indices, name, out_csv)
    run, summary = result.record, result.summary
    _show_table(f"{run['run']} on {run['collection']} {run['split']} "
                f"({int(summary['graphs'])} graphs)", [("metric", "left"), ("mean", "right")],
                [(k, f"{v:.4f}") for k, v in summary.items() if k != "graphs"])

@app.command()
def compare(
    reports: Annotated[Path, typer.Argument(
        help="Folder searched for *.summary.json.")] = Path("reports"),
    out_csv: Annotated[Path | None, typer.Option("--out", help="Table as CSV.")] = None,
) -> None:
    """Table of each collection's headline metric across runs (models, random, baseline)."""
    from xlarank.evaluate import HEADLINE_LABELS, SUMMARY_SUFFIX, compare_runs
    from xlarank.outputs import Input, check_outputs

    with _user_errors():
        check_outputs([out_csv] if out_csv else [], [Input(reports, "*" + SUMMARY_SUFFIX)])
        wide = compare_runs(reports, out_csv)
    _show_table("headline metric per collection (higher is better)",
                [("collection", "left"), ("metric", "left"),
                 *[(str(run), "right") for run in wide.columns]],
                [(coll, HEADLINE_LABELS.get(metric, metric), *[f"{v:.4f}" for v in row])
                 for (coll, metric), row in wide.iterrows()])

@app.command()
def report(
    frame: Annotated[Path, typer.Argument(help="Labelled frame to report on (e.g. valid).")],
    model: Annotated[list[str], typer.Option(help="Model directory, or NAME=DIR; repeat to "
                                             "compare (the first is the main one).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder to write.")],
    train_frame: Annotated[Path | None, typer.Option("--train", help="Training frame, "
                                                     "for its learning curve.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random-order peer.")] = 0,
    frame_of: Annotated[list[str] | None, typer.Option(
        "--frame-of", metavar="NAME=FRAME",
        help="The frame a --model of another feature spec is scored on (the same graphs "
             "featurized with its spec), e.g. the config-aggregates peer's; repeatable.")]
        = None,
    threads: OwnThreadsOption = 0,
) -> None:
    """HTML page with PNG plots and a metrics CSV: per-graph metric, rank scatter, feature
    importance, learning curve, next to the peers."""
    from xlarank.outputs import Output, check_outputs
    from xlarank.report import REPORT_PAGE, report_from_paths
    from xlarank.threads import use_threads

    with _user_errors():
        models = [(name, Path(path)) for name, _, path in (m.rpartition("=") for m in model)]
        frames_of = {}
        for item in frame_of or []:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                raise XlarankError(f"--frame-of {item!r}: expected NAME=FRAME")
            frames_of[name] = Path(path)
        check_outputs([Output(out_dir, "dir", REPORT_PAGE)],
                      [frame, train_frame, *(path for _, path in models), *frames_of.values()])
        use_threads(threads)
        meta = report_from_paths(frame, models, out_dir, train_frame, seed,
                                 status=err_console.status, frames_of=frames_of)
    console.print(f"report on {meta.collection} {meta.split} -> {out_dir / 'index.html'}")
