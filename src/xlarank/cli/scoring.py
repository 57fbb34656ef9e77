"""Commands that rank configs: score (files), rank-graph (one graph from some measured
configs), suggest (which configs of one graph to measure next), submit (the competition
CSV)."""

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
    ThreadsOption,
    WorkersOption,
    _progress,
    _show_skipped,
    _user_errors,
    console,
    err_console,
)


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
    from xlarank.data.collections import get_collection
    from xlarank.distributed import engine_client
    from xlarank.outputs import Input, check_outputs
    from xlarank.score import npz_inputs, score_files
    from xlarank.threads import use_threads

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
    ctx: typer.Context,
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
             "on the measured configs: tpugraphs-gnn, gru, hybrid, competition-gnn (need jax: "
             "pip install 'xlarank[gnn]').")] = "xlarank",
    threads: OwnThreadsOption = 0,
) -> None:
    """Rank all configs of one graph from the runtimes of some: rank, config_index, score,
    measured, runtime, copy_of. Repeats of a config index, and of its exact copies, are
    combined by their median; each copy sits with the config it copies. xlarank chooses
    its graph-local model on the measured configs (--verbose says which)."""
    from xlarank.atomic import atomic_path, output_lock
    from xlarank.outputs import check_outputs
    from xlarank.rank.ingraph import InGraphChoice, rank_graph
    from xlarank.rank.measured import read_measured_rows
    from xlarank.systems import rank_graph_with
    from xlarank.threads import use_threads

    with _user_errors():
        check_outputs([out_csv], [graph, measured, prior])
        use_threads(threads)
        with output_lock(out_csv):
            rows = read_measured_rows(measured)
            # xlarank is the in-graph ranker itself; the dispatcher serves the peers.
            ranked = (rank_graph(graph, rows, prior=prior, seed=seed) if system == "xlarank"
                      else rank_graph_with(system, graph, rows, seed=seed, prior=prior))
            with atomic_path(out_csv) as tmp:
                ranked.to_csv(tmp, index=False)
    if ctx.obj["verbose"] and "in_graph_model" in ranked.attrs:
        err_console.print(InGraphChoice(**ranked.attrs["in_graph_model"]).describe(),
                          highlight=False)
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
    batch: Annotated[int, typer.Option(min=1, max=1_000_000, help="Configs to suggest "
                                       "(1..1,000,000, the most configs a graph has).")] = 8,
    prior: Annotated[Path | None, typer.Option(help="A cross-graph model directory of the "
                                               "graph's collection: one more input, and "
                                               "the order of a cold start.")] = None,
    seed: Annotated[int, typer.Option(help="Same seed and measurements, same "
                                      "suggestions.")] = 0,
    strategy: Annotated[str, typer.Option(
        help="How configs are picked: booster (the in-graph booster after a diverse cold "
             "start, random on tile graphs), random (random search), or a peer: greedy "
             "(rank-graph's top), autotvm (XGBoost pairwise on the raw config columns), "
             "tpe (Optuna's TPE; pip install 'xlarank[tpe]').")] = "booster",
    strategy_option: Annotated[list[str] | None, typer.Option(
        "--strategy-option", metavar="KEY=VALUE",
        help="A setting of the strategy, repeatable: booster takes bootstraps, kappa, "
             "random_share, diversity, important, cold (auto, diverse or random); autotvm "
             "epsilon, rounds, depth, learning_rate; tpe startup.")] = None,
    threads: OwnThreadsOption = 0,
) -> None:
    """Which configs to measure next: distinct configs, none a duplicate of a measured
    one, each with its predicted score, uncertainty and why it was chosen (exploit,
    explore, cold-start)."""
    from xlarank.atomic import atomic_path, output_lock
    from xlarank.outputs import check_outputs
    from xlarank.rank.strategies import make_strategy, parse_strategy_options
    from xlarank.rank.tuner import suggest_next
    from xlarank.threads import use_threads

    with _user_errors():
        chosen = make_strategy(strategy, parse_strategy_options(strategy_option))
        # The measured CSV is the tuner's whole state: never an output.
        check_outputs([out_csv], [graph, measured, prior])
        use_threads(threads)
        with output_lock(out_csv):
            table = suggest_next(graph, measured, batch, prior=prior, seed=seed,
                                 threads=threads or None, strategy=chosen)
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
    threads: OwnThreadsOption = 0,
) -> None:
    """Write the competition CSV (ID,TopConfigs): top 5 for tile, full order for layout."""
    from xlarank.outputs import Input, check_outputs
    from xlarank.score import load_rankers, submission_files, write_submission
    from xlarank.threads import use_threads

    with _user_errors():
        check_outputs([out_csv], [Input(data, NPZ), models])
        use_threads(threads)
        rankers = load_rankers(models)
        with _progress("submit", len(submission_files(data))) as tick:
            n = write_submission(data, rankers, out_csv, on_file=tick)
    console.print(f"wrote {n} IDs -> {out_csv}")
