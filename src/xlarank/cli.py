"""The ``xlarank`` command: parses, calls one library function, shows progress and errors.

Every `XlarankError` becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from xlarank import __version__
from xlarank.data.collections import COLLECTIONS, SPLITS, get_collection, split_files
from xlarank.errors import XlarankError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Rank XLA compiler configurations (TpuGraphs) by predicted runtime.")
console = Console()
err_console = Console(stderr=True)
STATE = {"verbose": False}


def _version(value: bool) -> None:
    if value:
        console.print(f"xlarank {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say more.")] = False,
) -> None:
    STATE["verbose"] = verbose


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except XlarankError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise typer.Exit(2) from None


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[[Path], None]]:
    """A progress bar on stderr that appears with the first finished item, so an error
    raised before any work leaves stderr holding only its one line."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=err_console, transient=True)
    task = bar.add_task(label, total=total)

    def tick(_path: Path) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.advance(task)

    try:
        yield tick
    finally:
        if bar.live.is_started:
            bar.stop()


@contextmanager
def _engine(engine: str, scheduler: str | None, workers: int) -> Iterator[object | None]:
    """None for the local engine, else a Dask client (existing cluster or a local one)."""
    if engine == "local":
        if scheduler:
            raise XlarankError("--scheduler needs --engine dask")
        yield None
    elif engine == "dask":
        from xlarank.distributed import dask_client

        with dask_client(scheduler, max(workers, 1)) as client:
            yield client
    else:
        raise XlarankError(f"unknown engine {engine!r}; known: local, dask")


EngineOption = Annotated[str, typer.Option(help="local, or dask: a Dask cluster (the one "
                                           "at --scheduler, else a local one of --workers "
                                           "processes).")]
SchedulerOption = Annotated[str | None, typer.Option(help="Address of a running Dask "
                                                     "scheduler, e.g. tcp://host:8786.")]


def _collections(name: str) -> list:
    return list(COLLECTIONS) if name == "all" else [get_collection(name)]


@app.command()
def synth(
    out_dir: Annotated[Path, typer.Argument(help="Folder to create; gets npz/<collection>/<split>/*.npz.")],
    preset: Annotated[str, typer.Option(help="Size: tiny, demo, small, or real (the real "
                                        "dataset's file counts and size mix).")] = "demo",
    seed: Annotated[int, typer.Option(help="Same seed, same files.")] = 0,
    workers: Annotated[int, typer.Option(help="Local processes; the files are the same "
                                         "for any number.")] = 1,
) -> None:
    """Write a synthetic dataset in the official tree (all five collections)."""
    from xlarank.data.synth import PRESETS, synth_dataset, synth_file_count

    with _user_errors():
        if preset not in PRESETS:
            raise XlarankError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        with _progress("synth", synth_file_count(preset)) as tick:
            synth_dataset(out_dir, preset, seed, on_file=tick, workers=workers)
    console.print(f"wrote synthetic dataset ({preset}, seed {seed}) to {out_dir} "
              "[dim](synthetic data, not TpuGraphs)[/dim]")


@app.command()
def featurize(
    data: Annotated[Path, typer.Argument(help="Dataset root (holding npz/) or its npz folder.")],
    spec: Annotated[Path, typer.Option(help="Feature spec TOML.")] = Path("features/default.toml"),
    collection: Annotated[str, typer.Option(help="A collection (e.g. tile-xla) or all.")] = "all",
    split: Annotated[str, typer.Option(help="train, valid, test or all.")] = "all",
    out_dir: Annotated[Path | None, typer.Option(
        help="Frames go to OUT_DIR/<collection>/<split>.parquet [features/frames/<spec name>].")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Exact frame path, for one collection and one split.")] = None,
    skip_bad: Annotated[bool, typer.Option(help="Leave out bad files and list them, "
                                           "instead of stopping at the first.")] = False,
    workers: Annotated[int, typer.Option(help="Local processes; the output is the same "
                                         "for any number.")] = 1,
    dedup: Annotated[bool | None, typer.Option(
        "--dedup/--no-dedup", help="One row per distinct config, runtime the duplicates' "
        "median [default: only for the train split].")] = None,
    embedding: Annotated[str | None, typer.Option(
        help="'gnn' adds the gnn family (message-passing embedding columns) to the spec.")] = None,
    gnn_weights: Annotated[str | None, typer.Option(
        help="With --embedding gnn: 'random:SEED' (no training) or a weights .npz "
             "[the spec's, else random:0].")] = None,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
) -> None:
    """Featurize graph files into parquet frames, one per collection and split.

    Each file's features are kept as a part beside the frame, keyed by the file's checksum:
    a rerun (after a kill, or with files added) redoes only what is missing or changed.
    """
    from xlarank.features.spec import load_feature_spec
    from xlarank.featurize import featurize_files

    with _user_errors():
        feature_spec = load_feature_spec(spec)
        if embedding not in (None, "gnn"):
            raise XlarankError(f"--embedding {embedding!r}: the one embedding is 'gnn'")
        if gnn_weights is not None and embedding is None and "gnn" not in feature_spec.families:
            raise XlarankError("--gnn-weights needs --embedding gnn or a spec with the gnn family")
        if embedding == "gnn" or gnn_weights is not None:
            weights = gnn_weights or feature_spec.gnn
            if not weights.startswith("random:"):
                weights = str(Path(weights).resolve())
            feature_spec = feature_spec.with_gnn(weights)
            from xlarank.features.embedding import load_weights

            load_weights(feature_spec.gnn)  # a bad weights file stops here, before any work
        splits = list(SPLITS) if split == "all" else [split]
        jobs = [(c, s, split_files(data, c, s)) for c in _collections(collection) for s in splits]
        jobs = [j for j in jobs if j[2]]
        if not jobs:
            raise XlarankError(f"{data}: no npz files for collection {collection}, split {split}")
        if out is not None and len(jobs) != 1:
            raise XlarankError("--out names one frame: give one --collection and one --split")
        base = out_dir or Path("features/frames") / feature_spec.name
        with _engine(engine, scheduler, workers) as client:
            for c, s, files in jobs:
                target = out or base / c.slug / f"{s}.parquet"
                with _progress(f"{c.slug}/{s}", len(files)) as tick:
                    rows, skipped, reused = featurize_files(
                        files, target, c, s, feature_spec, skip_bad=skip_bad, on_file=tick,
                        workers=workers, dedup=dedup, client=client)
                again = f" ({reused} unchanged files reused)" if reused else ""
                console.print(f"{c.slug}/{s}: {len(files) - len(skipped)} graphs, {rows} configs"
                              f"{again} -> {target}")
                if STATE["verbose"]:
                    console.print(f"  feature spec {feature_spec.name} ({', '.join(feature_spec.families)}), "
                                  f"hash {feature_spec.hash}")
                for line in skipped:
                    err_console.print(f"[yellow]skipped[/yellow] {escape(line)}", highlight=False,
                              soft_wrap=True)


@app.command("gnn-train")
def gnn_train(
    data: Annotated[Path, typer.Argument(help="Dataset root (holding npz/).")],
    collection: Annotated[str, typer.Option(help="The collection whose train split is used.")],
    out: Annotated[Path, typer.Option(help="Weights .npz to write.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training graphs.")] = 5,
    configs_per_graph: Annotated[int, typer.Option(min=2, help="Configs sampled per graph.")] = 64,
    k: Annotated[int, typer.Option(min=0, max=8, help="Pruning radius (hops), as the "
                                   "feature spec's k.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the start weights and sampling.")] = 0,
) -> None:
    """Train the gnn family's weights with a pairwise ranking loss (needs torch:
    pip install 'xlarank[gnn]'); featurize with them by --gnn-weights, without torch."""
    from xlarank.features.embedding import save_weights
    from xlarank.features.gnn_train import train_gnn_weights

    with _user_errors():
        chosen = get_collection(collection)
        files = split_files(data, chosen, "train")
        if not files:
            raise XlarankError(f"{data}: no npz files for {chosen.id} train")
        with _progress("gnn epochs", epochs) as tick:
            weights, history = train_gnn_weights(
                files, chosen, k, seed, epochs, configs_per_graph,
                on_epoch=lambda epoch, loss: tick(Path(str(epoch))))
        save_weights(weights, out)
    console.print(f"trained gnn weights on {len(files)} {chosen.id} graphs, pairwise loss "
                  f"{history[0]:.4f} -> {history[-1]:.4f} -> {out}")


@app.command()
def train(
    frame: Annotated[Path, typer.Argument(help="Training frame (parquet from featurize).")],
    spec: Annotated[list[Path], typer.Option(help="Booster or ensemble spec TOML "
                                             "(models/*.toml); repeat for an ensemble.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Model directory to write.")],
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds, e.g. 0,1,2: one "
                                              "member per spec and seed (an ensemble).")] = None,
    valid: Annotated[Path | None, typer.Option(help="Validation frame; its metrics go "
                                               "into the model card.")] = None,
    threads: Annotated[int, typer.Option(help="Booster threads; 0 lets it choose "
                                         "(with dask: per worker, default 1).")] = 0,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
    workers: Annotated[int, typer.Option(help="Workers of the local Dask cluster.")] = 2,
) -> None:
    """Train a ranker on one collection's frame and save it with its card.

    More than one --spec, an ensemble spec (kind = "ensemble") or --seeds trains an
    ensemble: one booster per spec and seed,
    scores min-max normalized per graph and averaged.
    """
    from xlarank.evaluate import per_graph_metrics, summarize
    from xlarank.frame import read_frame, read_meta
    from xlarank.rank.ensemble import load_training_plan, train_ensemble
    from xlarank.rank.train import train_ranker

    with _user_errors():
        plans = [load_training_plan(s) for s in spec]
        specs = [member for members, _ in plans for member in members]
        plan_seeds = {tuple(seed_list) for _, seed_list in plans if seed_list}
        if len(plan_seeds) > 1 and not seeds:
            raise XlarankError("the ensemble specs ask for different seeds; give --seeds")
        seed_list = (_parse_seeds(seeds) if seeds
                     else list(plan_seeds.pop()) if plan_seeds else None)
        meta = read_meta(frame)
        what = (f"{specs[0].library} {specs[0].objective}" if len(specs) == 1 and not seed_list
                else f"an ensemble of {len(specs) * len(seed_list or [0])}")
        with err_console.status(f"training {what} on {frame} ({engine})"), \
                _engine(engine, scheduler, workers) as client:
            if client is None:
                table, meta = read_frame(frame)

                def train_one(s):
                    return train_ranker(table, meta, s, threads=threads)
            else:
                from xlarank.distributed import train_ranker_dask

                def train_one(s):
                    return train_ranker_dask(client, frame, s, threads or 1)
            if len(specs) == 1 and not seed_list:
                ranker = train_one(specs[0])
            else:
                ranker = train_ensemble(specs, seed_list, train_one)
        if valid is not None:
            valid_table, valid_meta = read_frame(valid)
            ranker.check_frame(valid_meta, str(valid))
            metrics = per_graph_metrics(valid_table, ranker.predict(valid_table),
                                        get_collection(meta.collection).is_tile)
            ranker.card["validation"] = {"frame": str(valid), **summarize(metrics)}
        ranker.save(out_dir)
    names = " + ".join(s.name for s in specs)
    console.print(f"trained {names} on {meta.collection} "
                  f"({ranker.card['training_data']['graphs']} graphs) -> {out_dir}")
    if STATE["verbose"]:
        console.print_json(json.dumps({k: ranker.card[k] for k in
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
) -> None:
    """Per-graph and mean metrics: Kendall tau and OPA (layout), slowdown@K (tile)."""
    from xlarank.atomic import atomic_path, write_text_atomic
    from xlarank.evaluate import (headline_metric, load_eval_indices, per_graph_metrics,
                                  random_scores, summarize)
    from xlarank.frame import read_frame
    from xlarank.rank.model import load_model

    with _user_errors():
        if (model is None) == (not random_order):
            raise XlarankError("give exactly one of --model DIR or --random")
        table, meta = read_frame(frame)
        is_tile = get_collection(meta.collection).is_tile
        if model is not None:
            ranker = load_model(model)
            ranker.check_frame(meta, str(frame))
            scores = ranker.predict(table)
        else:
            scores = random_scores(table, seed)
        indices = load_eval_indices(eval_indices) if eval_indices else None
        per_graph = per_graph_metrics(table, scores, is_tile, indices)
        summary = summarize(per_graph)
        run = name or (model.parent.name if model is not None else "random")
        record = {"run": run, "collection": meta.collection, "split": meta.split,
                  "frame": str(frame), "model": str(model) if model else None,
                  "headline": headline_metric(is_tile), **summary}
        if out_csv is not None:
            with atomic_path(out_csv) as tmp:
                per_graph.to_csv(tmp, index=False)
            write_text_atomic(out_csv.with_suffix(".summary.json"),
                              json.dumps(record, indent=2) + "\n")
    grid = Table(title=f"{run} on {meta.collection} {meta.split} ({int(summary['graphs'])} graphs)")
    grid.add_column("metric")
    grid.add_column("mean", justify="right")
    for key, value in summary.items():
        if key != "graphs":
            grid.add_row(key, f"{value:.4f}")
    console.print(grid)


@app.command()
def compare(
    reports: Annotated[Path, typer.Argument(help="Folder searched for *.summary.json.")] = Path("reports"),
    out_csv: Annotated[Path | None, typer.Option("--out", help="Table as CSV.")] = None,
) -> None:
    """Table of each collection's headline metric across runs (models, random, baseline)."""
    import pandas as pd

    from xlarank.atomic import atomic_path

    with _user_errors():
        records = [json.loads(p.read_text()) for p in sorted(reports.rglob("*.summary.json"))]
        if not records:
            raise XlarankError(f"{reports}: no *.summary.json (run 'xlarank evaluate --out')")
        table = pd.DataFrame(records)
        table["value"] = [r[r["headline"]] for r in records]
        wide = table.pivot_table(index=["collection", "headline"], columns="run",
                                 values="value", aggfunc="first")
        order = [c.id for c in COLLECTIONS if c.id in wide.index.get_level_values(0)]
        wide = wide.reindex(order, level=0)
        if out_csv is not None:
            with atomic_path(out_csv) as tmp:
                wide.to_csv(tmp)
    grid = Table(title="headline metric per collection (higher is better)")
    grid.add_column("collection")
    grid.add_column("metric")
    for run in wide.columns:
        grid.add_column(str(run), justify="right")
    for (coll, metric), row in wide.iterrows():
        grid.add_row(coll, "1 - slowdown@5" if metric == "score" else "Kendall tau",
                     *[f"{v:.4f}" for v in row])
    console.print(grid)


@app.command()
def tune(
    train_frame: Annotated[Path, typer.Argument(help="Training frame.")],
    valid_frame: Annotated[Path, typer.Argument(help="Validation frame the trials are "
                                                "scored on.")],
    spec: Annotated[Path, typer.Option(help="Starting booster spec (trial 0).")],
    out: Annotated[Path, typer.Option(help="Where to write the chosen spec TOML.")],
    trials: Annotated[int, typer.Option(min=1, help="Search budget: trials in all.")] = 20,
    max_minutes: Annotated[float | None, typer.Option(help="Stop after this long (the "
                                                      "running trial finishes).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the parameter draws.")] = 0,
    log: Annotated[Path | None, typer.Option(help="CSV of every trial.")] = None,
) -> None:
    """Random search over a booster spec's parameters (bounded by --trials / --max-minutes);
    writes the best spec on the validation frame."""
    import dataclasses
    import datetime

    import pandas as pd

    from xlarank.atomic import atomic_path, write_text_atomic
    from xlarank.evaluate import headline_metric
    from xlarank.files import toml_text
    from xlarank.frame import read_frame
    from xlarank.rank.spec import load_ranker_spec
    from xlarank.rank.train import check_trainable
    from xlarank.rank.tune import tune_spec

    with _user_errors():
        start_spec = load_ranker_spec(spec)
        train_table, meta = read_frame(train_frame)
        valid_table, valid_meta = read_frame(valid_frame)
        check_trainable(meta, start_spec)
        if valid_meta.spec_hash != meta.spec_hash or valid_meta.collection != meta.collection:
            raise XlarankError(f"{valid_frame}: not the training frame's collection and "
                               "feature spec")
        metric = headline_metric(get_collection(meta.collection).is_tile)
        with _progress("tune", trials) as tick:
            best, table = tune_spec(train_table, meta, valid_table, start_spec, trials, seed,
                                    None if max_minutes is None else 60 * max_minutes,
                                    on_trial=lambda number, value: tick(Path(str(number))))
        header = (f"{best.name} for {meta.collection}, chosen by xlarank tune on "
                  f"{datetime.date.today()}:\n"
                  f"{len(table)} trials (budget {trials}"
                  f"{f', {max_minutes} min' if max_minutes else ''}, seed {seed}), "
                  f"trained on {train_frame}, scored on {valid_frame}.\n"
                  f"{metric}: best {table[metric].max():.4f}, starting spec "
                  f"{table[metric].iloc[0]:.4f} (optimistic: chosen on that frame).")
        write_text_atomic(out, toml_text(dataclasses.asdict(best), header))
        if log is not None:
            with atomic_path(log) as tmp:
                table.to_csv(tmp, index=False)
    grid = Table(title=f"best trials of {len(table)} ({metric} on {valid_frame})")
    for column in ("trial", metric, "seconds", "changes from the starting spec"):
        grid.add_column(column, justify="left" if column.startswith("changes") else "right")
    drawn = [c for c in table.columns if c not in ("trial", metric, "train_seconds")]
    for _, row in table.sort_values(metric, ascending=False).head(5).iterrows():
        changes = " ".join(f"{k}={row[k]:g}" if isinstance(row[k], float) else f"{k}={row[k]}"
                           for k in drawn if not pd.isna(row[k]))
        grid.add_row(str(row["trial"]), f"{row[metric]:.4f}", f"{row['train_seconds']:.1f}",
                     changes or "(none)")
    console.print(grid)
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
) -> None:
    """HTML page with PNG plots and a metrics CSV: per-graph metric, rank scatter, feature
    importance, learning curve, next to the peers."""
    from xlarank.frame import read_frame
    from xlarank.rank.model import load_model
    from xlarank.report import ReportInputs, write_report

    with _user_errors():
        table, meta = read_frame(frame)
        models = {}
        for entry in model:
            name, _, path = entry.rpartition("=")
            directory = Path(path)
            ranker = load_model(directory)
            ranker.check_frame(meta, str(frame))
            models[name or directory.name] = ranker
        train_table = read_frame(train_frame)[0] if train_frame is not None else None
        with err_console.status(f"writing the report on {frame}"):
            write_report(ReportInputs(models, table, meta, str(frame), train_table, seed),
                         out_dir)
    console.print(f"report on {meta.collection} {meta.split} -> {out_dir / 'index.html'}")


@app.command()
def score(
    inputs: Annotated[list[Path], typer.Argument(help="npz files or folders of them.")],
    models: Annotated[Path, typer.Option(help="A model directory or a folder of them "
                                         "(one per collection).")],
    out_csv: Annotated[Path, typer.Option("--out", help="CSV to write.")],
    top: Annotated[int | None, typer.Option(help="Keep the K best configs per file.")] = None,
    collection: Annotated[str | None, typer.Option(help="Collection of files kept outside "
                                                   "the official layout.")] = None,
    skip_bad: Annotated[bool, typer.Option(help="Leave out bad files and list them.")] = False,
    workers: Annotated[int, typer.Option(help="Local processes, or local Dask workers.")] = 1,
    engine: EngineOption = "local",
    scheduler: SchedulerOption = None,
) -> None:
    """Rank every config of each file, best first: file, rank, config_index, score."""
    from xlarank.score import score_files

    with _user_errors():
        files = [p for i in inputs for p in (sorted(i.rglob("*.npz")) if i.is_dir() else [i])]
        if not files:
            raise XlarankError("no npz files among the inputs")
        chosen = get_collection(collection) if collection else None
        with _engine(engine, scheduler, workers) as client, _progress("score", len(files)) as tick:
            rows, skipped = score_files(files, models, out_csv, chosen, top, skip_bad, tick,
                                        workers=workers, client=client)
    for line in skipped:
        err_console.print(f"[yellow]skipped[/yellow] {escape(line)}", highlight=False,
                              soft_wrap=True)
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
    seed: Annotated[int, typer.Option(help="Seed of the graph-local booster.")] = 0,
    threads: Annotated[int, typer.Option(help="Booster threads.")] = 1,
) -> None:
    """Rank all configs of one graph from the runtimes of some: rank, config_index, score,
    measured, runtime. Repeats of a config index are combined by their median."""
    from xlarank.atomic import atomic_path
    from xlarank.rank.ingraph import rank_graph as rank_one_graph
    from xlarank.rank.ingraph import read_measured

    with _user_errors():
        ranked = rank_one_graph(graph, read_measured(measured), prior=prior, seed=seed,
                                threads=threads)
        with atomic_path(out_csv) as tmp:
            ranked.to_csv(tmp, index=False)
    console.print(f"ranked {len(ranked)} configs ({int(ranked['measured'].sum())} measured) "
                  f"-> {out_csv}")


@app.command()
def submit(
    data: Annotated[Path, typer.Argument(help="Dataset root holding the five test folders.")],
    models: Annotated[Path, typer.Option(help="Folder of model directories, one per collection.")],
    out_csv: Annotated[Path, typer.Option("--out", help="Submission CSV.")] = Path("submission.csv"),
) -> None:
    """Write the competition CSV (ID,TopConfigs): top 5 for tile, full order for layout."""
    from xlarank.score import load_rankers, submission_files, write_submission

    with _user_errors():
        rankers = load_rankers(models)
        with _progress("submit", len(submission_files(data))) as tick:
            n = write_submission(data, rankers, out_csv, on_file=tick)
    console.print(f"wrote {n} IDs -> {out_csv}")
