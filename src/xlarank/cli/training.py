"""Commands that train: gnn-train (embedding weights), train (rankers), tune (a booster
spec's parameters)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xlarank.cli.app import app
from xlarank.cli.common import (
    NPZ,
    EngineOption,
    OwnThreadsOption,
    SchedulerOption,
    WorkersOption,
    _checked_seed,
    _named_files,
    _parse_seeds,
    _progress,
    _show_table,
    _user_errors,
    console,
    err_console,
)
from xlarank.errors import XlarankError

# gnn-train's bounds: the repo's weights train in 5 epochs of 64 configs a graph; 1,000
# epochs of 10,000 configs is far past any use, and a larger number a typo that would
# train until killed.
MAX_EPOCHS = 1000
MAX_CONFIGS_PER_GRAPH = 10_000


@app.command("gnn-train")
def gnn_train(
    data: Annotated[Path, typer.Argument(help="Dataset root (holding npz/).")],
    collection: Annotated[str, typer.Option(help="The collection whose train split is used.")],
    out: Annotated[Path, typer.Option(help="Weights .npz to write.")],
    epochs: Annotated[int, typer.Option(min=1, max=MAX_EPOCHS, help="Passes over the "
                                        "training graphs (1..1000).")] = 5,
    configs_per_graph: Annotated[int, typer.Option(
        min=2, max=MAX_CONFIGS_PER_GRAPH, help="Configs sampled per graph "
                                               "(2..10,000).")] = 64,
    k: Annotated[int, typer.Option(min=0, max=8, help="Pruning radius (hops), as the "
                                   "feature spec's k (gnn only: gru prunes to one hop).")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the start weights and sampling.")] = 0,
    embedding: Annotated[str, typer.Option(
        help="'gnn' (pairwise ranking loss) or 'gru' (mean squared error of log runtime, "
             "centred per graph).")] = "gnn",
) -> None:
    """Train the gnn or gru family's weights (needs jax: pip install 'xlarank[gnn]');
    featurize with them by --weights gnn=FILE (or gru=FILE), without jax."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.features.embedding import save_weights
    from xlarank.features.families import weighted_families
    from xlarank.outputs import Input, check_outputs

    with _user_errors():
        check_outputs([out], [Input(data, NPZ)])
        trainable = {f.name: f for f in weighted_families().values()}
        if embedding not in trainable:
            raise XlarankError(f"--embedding {embedding!r}: the embeddings are "
                               f"{', '.join(map(repr, trainable))}")
        family = trainable[embedding]
        chosen = get_collection(collection)
        files = split_files(data, chosen, "train")
        if not files:
            raise XlarankError(f"{data}: no npz files for {chosen.id} train")
        with _progress(f"{embedding} epochs", epochs) as tick:
            weights, history = family.train_weights(
                files, chosen, k, seed, epochs, configs_per_graph,
                on_epoch=lambda epoch, loss: tick())
        save_weights(weights, out)
    console.print(f"trained {embedding} weights on {len(files)} {chosen.id} graphs, "
                  f"{family.loss} {history[0]:.4f} -> {history[-1]:.4f} -> {out}")

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
    from xlarank.outputs import Output, check_outputs
    from xlarank.rank.ranker import CARD_FILE
    from xlarank.rank.train_specs import train_from_specs
    from xlarank.threads import use_threads

    with _user_errors():
        # `--seeds ''` is refused, not taken for no --seeds.
        seed_list = _parse_seeds(seeds) if seeds is not None else None
        check_outputs([Output(out_dir, "dir", CARD_FILE)],
                      [frame, valid, *_named_files(spec or [])])
        use_threads(threads)
        trained = train_from_specs(frame, spec or [], out_dir, seed_list, valid, threads,
                                   engine, scheduler, workers, status=err_console.status)
    card = trained.model.card
    console.print(f"trained {' + '.join(s.name for s in trained.specs)} on "
                  f"{trained.collection} ({card['training_data']['graphs']} graphs) -> {out_dir}")
    if ctx.obj["verbose"]:
        console.print_json(data={k: card[k] for k in
                                 ("training_data", "train_seconds", "versions")})

@app.command()
def tune(
    train_frame: Annotated[Path, typer.Argument(help="Training frame.")],
    valid_frame: Annotated[Path, typer.Argument(help="Validation frame the trials are "
                                                "scored on.")],
    spec: Annotated[str, typer.Option(help="Starting booster spec (trial 0): a TOML file or "
                                      "a packaged spec's name.")],
    out: Annotated[Path, typer.Option(help="Where to write the chosen spec TOML.")],
    trials: Annotated[int, typer.Option(min=1, help="Search budget: trials in all "
                                        "(1..100,000).")] = 20,
    max_minutes: Annotated[float | None, typer.Option(help="Stop after this long (the "
                                                      "running trial finishes).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the parameter draws.")] = 0,
    log: Annotated[Path | None, typer.Option(help="CSV of every trial.")] = None,
    threads: OwnThreadsOption = 0,
) -> None:
    """Random search over a booster spec's parameters (bounded by --trials / --max-minutes);
    writes the best spec on the validation frame."""
    from xlarank.outputs import check_outputs
    from xlarank.rank.search import tune_spec_file
    from xlarank.threads import use_threads

    with _user_errors(), _progress("tune", trials) as tick:
        # The parameter draws' seed reaches scikit-learn's ParameterSampler (numpy's
        # legacy generator), which takes none past 2**32 - 1.
        seed = _checked_seed(seed)
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
