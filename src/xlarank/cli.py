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

import json
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

from xlarank import __version__
from xlarank.atomic import Input, Output, check_outputs
from xlarank.data.collections import get_collection, split_files
from xlarank.errors import XlarankError, XlarankWarning
from xlarank.threads import use_threads

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Rank XLA compiler configurations (TpuGraphs) by predicted runtime.")
console = Console()
err_console = Console(stderr=True)


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
    warnings.showwarning = _show_warning


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


@app.command()
def synth(
    out_dir: Annotated[Path, typer.Argument(
        help="Folder to create; gets npz/<collection>/<split>/*.npz.")],
    preset: Annotated[str, typer.Option(help="Size: tiny, demo, small, or real (the real "
                                        "dataset's file counts and size mix).")] = "demo",
    seed: Annotated[int, typer.Option(help="Same seed, same files.")] = 0,
    workers: WorkersOption = 1,
) -> None:
    """Write a synthetic dataset in the official tree (all five collections).

    The files are the same for any --workers.
    """
    from xlarank.data.synth import PRESETS, synth_dataset, synth_file_count

    with _user_errors():
        check_outputs([Output(out_dir, "dir")])
        if preset not in PRESETS:
            raise XlarankError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        with _progress("synth", synth_file_count(preset)) as tick:
            synth_dataset(out_dir, preset, seed, on_file=tick, workers=workers)
    console.print(f"wrote synthetic dataset ({preset}, seed {seed}) to {out_dir} "
              "[dim](synthetic data, not TpuGraphs)[/dim]")


@app.command()
def specs(
    kind: Annotated[str | None, typer.Option(help="feature or booster [both].")] = None,
) -> None:
    """List the packaged specs: their names work as --spec from any folder."""
    from xlarank.specs import KINDS, packaged_specs

    with _user_errors():
        if kind not in (None, *KINDS):
            raise XlarankError(f"--kind {kind!r}: known kinds are {', '.join(KINDS)}")
        found = packaged_specs(kind)
    _show_table("packaged specs", [("kind", "left"), ("name", "left"), ("about", "left")],
                [(s.kind, s.name, s.summary) for s in found])


@app.command()
def featurize(
    ctx: typer.Context,
    data: Annotated[Path, typer.Argument(help="Dataset root (holding npz/) or its npz folder.")],
    spec: Annotated[str, typer.Option(help="Feature spec: a TOML file or a packaged spec's "
                                      "name (xlarank specs).")] = "default",
    collection: Annotated[str, typer.Option(help="A collection (e.g. tile-xla) or all.")] = "all",
    split: Annotated[str, typer.Option(help="train, valid, test or all.")] = "all",
    out_dir: Annotated[Path | None, typer.Option(
        help="Frames go to OUT_DIR/<collection>/<split>.parquet "
             "[features/frames/<spec name>].")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Exact frame path, for one collection and one split.")] = None,
    skip_bad: Annotated[bool, typer.Option(help="Leave out bad files and list them, "
                                           "instead of stopping at the first.")] = False,
    workers: WorkersOption = 1,
    dedup: Annotated[bool | None, typer.Option(
        "--dedup/--no-dedup", help="One row per distinct config, runtime the duplicates' "
        "median [default: only for the train split].")] = None,
    embedding: Annotated[str | None, typer.Option(
        help="'gnn' adds the gnn family (message-passing embedding columns) to the spec, "
             "'gru' the gru family (a GRU over the nodes, then the config).")] = None,
    gnn_weights: Annotated[str | None, typer.Option(
        help="With --embedding gnn: 'random:SEED' (no training) or a weights .npz "
             "[the spec's, else random:0].")] = None,
    gru_weights: Annotated[str | None, typer.Option(
        help="With --embedding gru: 'random:SEED' (no training) or a weights .npz "
             "[the spec's, else random:0].")] = None,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
    threads: ThreadsOption = 0,
) -> None:
    """Featurize graph files into parquet frames, one per collection and split.

    Each file's features are kept as a part beside the frame, keyed by the file's checksum:
    a rerun (after a kill, or with files added) redoes only what is missing or changed.
    The frames are the same for any --workers and --engine.
    """
    from xlarank.distributed import engine_client
    from xlarank.featurize import featurize_files, frame_jobs, resolve_feature_spec

    with _user_errors():
        use_threads(threads)
        feature_spec = resolve_feature_spec(spec, embedding, gnn_weights, gru_weights)
        jobs = frame_jobs(data, feature_spec, collection, split, out, out_dir)
        check_outputs([job.out for job in jobs],
                      [Input(data, NPZ), *_named_files([spec, gnn_weights, gru_weights])])
        with engine_client(engine, scheduler, workers) as client:
            for job in jobs:
                with _progress(f"{job.collection.slug}/{job.split}", len(job.files)) as tick:
                    rows, skipped, reused = featurize_files(
                        job.files, job.out, job.collection, job.split, feature_spec,
                        skip_bad=skip_bad, on_file=tick, workers=workers, dedup=dedup,
                        client=client)
                again = f" ({reused} unchanged files reused)" if reused else ""
                console.print(f"{job.collection.slug}/{job.split}: "
                              f"{len(job.files) - len(skipped)} graphs, {rows} configs"
                              f"{again} -> {job.out}")
                if ctx.obj["verbose"]:
                    console.print(f"  feature spec {feature_spec.name} "
                                  f"({', '.join(feature_spec.families)}), "
                                  f"hash {feature_spec.hash}")
                _show_skipped(skipped)


@app.command("gnn-train")
def gnn_train(
    data: Annotated[Path, typer.Argument(help="Dataset root (holding npz/).")],
    collection: Annotated[str, typer.Option(help="The collection whose train split is used.")],
    out: Annotated[Path, typer.Option(help="Weights .npz to write.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training graphs.")] = 5,
    configs_per_graph: Annotated[int, typer.Option(min=2, help="Configs sampled per graph.")] = 64,
    k: Annotated[int, typer.Option(min=0, max=8, help="Pruning radius (hops), as the "
                                   "feature spec's k (gnn only: gru prunes to one hop).")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the start weights and sampling.")] = 0,
    embedding: Annotated[str, typer.Option(
        help="'gnn' (pairwise ranking loss) or 'gru' (mean squared error of log runtime, "
             "centred per graph).")] = "gnn",
) -> None:
    """Train the gnn or gru family's weights (needs jax: pip install 'xlarank[gnn]');
    featurize with them by --gnn-weights or --gru-weights, without jax."""
    from xlarank.features.embedding import save_weights

    with _user_errors():
        check_outputs([out], [Input(data, NPZ)])
        if embedding not in ("gnn", "gru"):
            raise XlarankError(f"--embedding {embedding!r}: the embeddings are 'gnn', 'gru'")
        chosen = get_collection(collection)
        files = split_files(data, chosen, "train")
        if not files:
            raise XlarankError(f"{data}: no npz files for {chosen.id} train")
        with _progress(f"{embedding} epochs", epochs) as tick:
            if embedding == "gru":
                from xlarank.features.gru_train import train_gru_weights

                weights, history = train_gru_weights(
                    files, chosen, seed, epochs, configs_per_graph,
                    on_epoch=lambda epoch, loss: tick())
            else:
                from xlarank.features.gnn_train import train_gnn_weights

                weights, history = train_gnn_weights(
                    files, chosen, k, seed, epochs, configs_per_graph,
                    on_epoch=lambda epoch, loss: tick())
        save_weights(weights, out)
    loss = "pairwise loss" if embedding == "gnn" else "centred log-runtime mse"
    console.print(f"trained {embedding} weights on {len(files)} {chosen.id} graphs, {loss} "
                  f"{history[0]:.4f} -> {history[-1]:.4f} -> {out}")


@app.command()
def train(
    ctx: typer.Context,
    frame: Annotated[Path, typer.Argument(help="Training frame (parquet from featurize).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Model directory to write.")],
    spec: Annotated[list[str] | None, typer.Option(
        help="Booster or ensemble spec: a TOML file or a packaged spec's name (xlarank "
             "specs); repeat for an ensemble [the packaged default of the frame's "
             "collection].")] = None,
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds, e.g. 0,1,2: one "
                                              "member per spec and seed (an ensemble).")] = None,
    valid: Annotated[Path | None, typer.Option(help="Validation frame; its metrics go "
                                               "into the model card.")] = None,
    threads: Annotated[int, typer.Option(min=0, help="Booster threads; 0: the cores, shared "
                                         "among make's parallel jobs (with dask: per "
                                         "worker, default 1).")] = 0,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = 2,
) -> None:
    """Train a ranker on one collection's frame and save it with its card.

    More than one --spec, an ensemble spec (kind = "ensemble") or --seeds trains
    an ensemble: one booster per spec and seed, scores min-max normalized per
    graph and averaged. The local engine trains in this process, on --threads.
    """
    from xlarank.rank.ranker import CARD_FILE
    from xlarank.rank.train_specs import train_from_specs

    with _user_errors():
        check_outputs([Output(out_dir, "dir", CARD_FILE)],
                      [frame, valid, *_named_files(spec or [])])
        use_threads(threads)
        trained = train_from_specs(frame, spec or [], out_dir,
                                   _parse_seeds(seeds) if seeds else None, valid, threads,
                                   engine, scheduler, workers, status=err_console.status)
    card = trained.model.card
    console.print(f"trained {' + '.join(s.name for s in trained.specs)} on "
                  f"{trained.collection} ({card['training_data']['graphs']} graphs) -> {out_dir}")
    if ctx.obj["verbose"]:
        console.print_json(json.dumps({k: card[k] for k in
                                       ("training_data", "train_seconds", "versions")}))


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise XlarankError(f"--seeds {text!r}: expected comma-separated integers") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise XlarankError(f"--seeds {text!r}: give one or more distinct integers")
    return seeds


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
    threads: ThreadsOption = 0,
) -> None:
    """Per-graph and mean metrics: Kendall tau and OPA (layout), slowdown@K (tile)."""
    from xlarank.score import SUMMARY_SUFFIX, evaluate_model

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

    with _user_errors():
        check_outputs([out_csv] if out_csv else [], [Input(reports, "*" + SUMMARY_SUFFIX)])
        wide = compare_runs(reports, out_csv)
    _show_table("headline metric per collection (higher is better)",
                [("collection", "left"), ("metric", "left"),
                 *[(str(run), "right") for run in wide.columns]],
                [(coll, HEADLINE_LABELS.get(metric, metric), *[f"{v:.4f}" for v in row])
                 for (coll, metric), row in wide.iterrows()])


@app.command()
def tune(
    train_frame: Annotated[Path, typer.Argument(help="Training frame.")],
    valid_frame: Annotated[Path, typer.Argument(help="Validation frame the trials are "
                                                "scored on.")],
    spec: Annotated[str, typer.Option(help="Starting booster spec (trial 0): a TOML file or "
                                      "a packaged spec's name.")],
    out: Annotated[Path, typer.Option(help="Where to write the chosen spec TOML.")],
    trials: Annotated[int, typer.Option(min=1, help="Search budget: trials in all.")] = 20,
    max_minutes: Annotated[float | None, typer.Option(help="Stop after this long (the "
                                                      "running trial finishes).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the parameter draws.")] = 0,
    log: Annotated[Path | None, typer.Option(help="CSV of every trial.")] = None,
    threads: ThreadsOption = 0,
) -> None:
    """Random search over a booster spec's parameters (bounded by --trials / --max-minutes);
    writes the best spec on the validation frame."""
    from xlarank.rank.tune import tune_spec_file

    with _user_errors(), _progress("tune", trials) as tick:
        check_outputs([out, *([log] if log else [])],
                      [train_frame, valid_frame, *_named_files([spec])])
        use_threads(threads)
        tuned = tune_spec_file(train_frame, valid_frame, spec, out, trials, seed, max_minutes,
                               log, on_trial=lambda number, value: tick())
    metric = tuned.metric
    _show_table(f"best trials of {len(tuned.trials)} ({metric} on {valid_frame})",
                [("trial", "right"), (metric, "right"), ("seconds", "right"),
                 ("changes from the starting spec", "left")],
                [(str(t), f"{v:.4f}", f"{sec:.1f}", c or "(none)")
                 for t, v, sec, c in tuned.best_trials(5).itertuples(index=False)])
    console.print(f"chosen spec -> {out}")


@app.command()
def report(
    frame: Annotated[Path, typer.Argument(help="Labelled frame to report on (e.g. valid).")],
    model: Annotated[list[str], typer.Option(help="Model directory, or NAME=DIR; repeat to "
                                             "compare (the first is the main one).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder to write.")],
    train_frame: Annotated[Path | None, typer.Option("--train", help="Training frame, "
                                                     "for its learning curve.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random-order peer.")] = 0,
    threads: ThreadsOption = 0,
) -> None:
    """HTML page with PNG plots and a metrics CSV: per-graph metric, rank scatter, feature
    importance, learning curve, next to the peers."""
    from xlarank.report import REPORT_PAGE, report_from_paths

    with _user_errors():
        models = [(name, Path(path)) for name, _, path in (m.rpartition("=") for m in model)]
        check_outputs([Output(out_dir, "dir", REPORT_PAGE)],
                      [frame, train_frame, *(path for _, path in models)])
        use_threads(threads)
        meta = report_from_paths(frame, models, out_dir, train_frame, seed,
                                 status=err_console.status)
    console.print(f"report on {meta.collection} {meta.split} -> {out_dir / 'index.html'}")


@app.command()
def score(
    inputs: Annotated[list[Path], typer.Argument(help="npz files or folders of them.")],
    models: Annotated[Path, typer.Option(help="A model directory or a folder of them "
                                         "(one per collection).")],
    out_csv: Annotated[Path, typer.Option("--out", help="CSV to write.")],
    top: Annotated[int | None, typer.Option(min=1, help="Keep the K best configs per "
                                            "file.")] = None,
    collection: Annotated[str | None, typer.Option(help="Collection of files kept outside "
                                                   "the official layout.")] = None,
    skip_bad: Annotated[bool, typer.Option(help="Leave out bad files and list them.")] = False,
    workers: WorkersOption = 1,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
    threads: ThreadsOption = 0,
) -> None:
    """Rank every config of each file, best first: file, rank, config_index, score."""
    from xlarank.distributed import engine_client
    from xlarank.score import npz_inputs, score_files

    with _user_errors():
        check_outputs([out_csv], [models, *(Input(path, NPZ) for path in inputs)])
        use_threads(threads)
        files = npz_inputs(inputs)
        chosen = get_collection(collection) if collection else None
        with engine_client(engine, scheduler, workers) as client, \
                _progress("score", len(files)) as tick:
            rows, skipped = score_files(files, models, out_csv, chosen, top, skip_bad, tick,
                                        workers=workers, client=client)
    _show_skipped(skipped)
    console.print(f"scored {len(files) - len(skipped)} files, {rows} rows -> {out_csv}")


@app.command("rank-graph")
def rank_graph(
    graph: Annotated[Path, typer.Argument(help="One npz file, layout or tile (a test file "
                                          "with zero runtimes is fine).")],
    measured: Annotated[Path, typer.Option(help="CSV config_index,runtime (ns) of the "
                                           "configs you measured.")],
    out_csv: Annotated[Path, typer.Option("--out", help="CSV to write: every config, "
                                          "best first.")],
    prior: Annotated[Path | None, typer.Option(help="A cross-graph model directory of the "
                                               "graph's collection: its score becomes "
                                               "one more input.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the graph-local ranker.")] = 0,
    system: Annotated[str, typer.Option(
        help="Who ranks: xlarank (its graph-local booster), or a published system trained "
             "on the measured configs: tpugraphs-gnn, gru, hybrid (these need jax: "
             "pip install 'xlarank\\[gnn]').")] = "xlarank",
    threads: ThreadsOption = 0,
) -> None:
    """Rank all configs of one graph from the runtimes of some: rank, config_index, score,
    measured, runtime. Repeats of a config index are combined by their median."""
    from xlarank.atomic import atomic_path, output_lock
    from xlarank.rank.ingraph import read_measured
    from xlarank.systems import rank_graph_with

    with _user_errors():
        check_outputs([out_csv], [graph, measured, prior])
        use_threads(threads)
        with output_lock(out_csv):
            ranked = rank_graph_with(system, graph, read_measured(measured), seed=seed,
                                     prior=prior)
            with atomic_path(out_csv) as tmp:
                ranked.to_csv(tmp, index=False)
    console.print(f"ranked {len(ranked)} configs ({int(ranked['measured'].sum())} measured) "
                  f"-> {out_csv}")


@app.command()
def suggest(
    graph: Annotated[Path, typer.Argument(help="One npz file, layout or tile (its own "
                                          "runtimes are never read).")],
    out_csv: Annotated[Path, typer.Option("--out", help="CSV to write: config_index, "
                                          "score, uncertainty, reason.")],
    measured: Annotated[Path | None, typer.Option(
        help="CSV config_index,runtime (ns) of everything measured so far: the whole "
             "state, so a run resumes by reading it again (empty, header-only or absent: "
             "a cold start).")] = None,
    batch: Annotated[int, typer.Option(min=1, help="Configs to suggest.")] = 8,
    prior: Annotated[Path | None, typer.Option(help="A cross-graph model directory of the "
                                               "graph's collection: one more input, and "
                                               "the order of a cold start.")] = None,
    seed: Annotated[int, typer.Option(help="Same seed and measurements, same "
                                      "suggestions.")] = 0,
    threads: ThreadsOption = 0,
) -> None:
    """Which configs to measure next: distinct configs, none a duplicate of a measured
    one, each with its predicted score, uncertainty and why it was chosen (exploit,
    explore, cold-start)."""
    from xlarank.atomic import atomic_path, output_lock
    from xlarank.rank.tuner import suggest_next

    with _user_errors():
        use_threads(threads)
        # The measured CSV is the tuner's whole state: never an output.
        check_outputs([out_csv], [graph, measured, prior])
        with output_lock(out_csv):
            table = suggest_next(graph, measured, batch, prior=prior, seed=seed,
                                 threads=threads or None)
            with atomic_path(out_csv) as tmp:
                table.to_csv(tmp, index=False)
    reasons = ", ".join(f"{n} {r}" for r, n in table["reason"].value_counts().items())
    console.print(f"suggested {len(table)} configs ({reasons or 'none left'}) -> {out_csv}")


@app.command()
def submit(
    data: Annotated[Path, typer.Argument(help="Dataset root holding the five test folders.")],
    models: Annotated[Path, typer.Option(help="Folder of model directories, one per collection.")],
    out_csv: Annotated[Path, typer.Option("--out",
                                          help="Submission CSV.")] = Path("submission.csv"),
    threads: ThreadsOption = 0,
) -> None:
    """Write the competition CSV (ID,TopConfigs): top 5 for tile, full order for layout."""
    from xlarank.score import load_rankers, submission_files, write_submission

    with _user_errors():
        check_outputs([out_csv], [Input(data, NPZ), models])
        use_threads(threads)
        rankers = load_rankers(models)
        with _progress("submit", len(submission_files(data))) as tick:
            n = write_submission(data, rankers, out_csv, on_file=tick)
    console.print(f"wrote {n} IDs -> {out_csv}")
