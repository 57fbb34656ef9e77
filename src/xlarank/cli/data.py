"""Commands that make and inspect inputs: synth, specs, featurize."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from xlarank.cli.app import app
from xlarank.cli.common import (
    NPZ,
    EngineOption,
    SchedulerOption,
    ThreadsOption,
    WorkersOption,
    _named_files,
    _progress,
    _show_skipped,
    _show_table,
    _user_errors,
    console,
)
from xlarank.errors import XlarankError
from xlarank.outputs import Input, Output, check_outputs
from xlarank.threads import use_threads


@app.command()
def synth(
    out_dir: Annotated[Path, typer.Argument(
        help="Folder to create; gets npz/<collection>/<split>/*.npz.")],
    preset: Annotated[str, typer.Option(help="Size: tiny, demo, small, or real (the real "
                                        "dataset's file counts and size mix).")] = "demo",
    seed: Annotated[int, typer.Option(help="Same seed, same files.")] = 0,
    repeat_tau: Annotated[str | None, typer.Option(
        help="How far two measurements of one layout config agree, as a Kendall tau: LO,HI "
             "(each file draws one in it) or one value. Default 0.6,0.95, around real "
             "unet3d's 0.82; the real layout record agrees to 0.36 only.")] = None,
    tile_noise: Annotated[float | None, typer.Option(
        help="Lognormal sigma of each tile measurement (default 0.02).")] = None,
    workers: WorkersOption = 1,
) -> None:
    """Write a synthetic dataset in the official tree (all five collections).

    The files are the same for any --workers.
    """
    from xlarank.data.synth import PRESETS, SynthNoise, synth_dataset, synth_file_count

    with _user_errors():
        check_outputs([Output(out_dir, "dir")])
        if preset not in PRESETS:
            raise XlarankError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        noise = SynthNoise(**({} if repeat_tau is None
                              else {"layout_repeat_tau": _tau_range(repeat_tau)}),
                           **({} if tile_noise is None else {"tile_sigma": tile_noise}))
        with _progress("synth", synth_file_count(preset)) as tick:
            synth_dataset(out_dir, preset, seed, on_file=tick, workers=workers, noise=noise)
    console.print(f"wrote synthetic dataset ({preset}, seed {seed}) to {out_dir} "
              "[dim](synthetic data, not TpuGraphs)[/dim]")

def _tau_range(text: str) -> tuple[float, float]:
    """--repeat-tau's LO,HI (or one value for both) as floats."""
    parts = text.split(",")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(map(math.isfinite, values)):
        raise XlarankError(f"--repeat-tau {text!r}: give LO,HI or one value, each a Kendall "
                           "tau between 0 and 1")
    return values[0], values[-1]


@app.command("import")
def import_(
    sources: Annotated[list[Path], typer.Argument(
        help="TpuGraphs tuning records (TuningData for tile, ModuleTuningData for layout) "
             "or XLA HLO dumps (the *.hlo.pb files XLA dumps as protos, or an "
             "HloModuleProto).")],
    out_dir: Annotated[Path, typer.Option(
        "--out-dir", help="Folder to create; gets npz/<collection>/<split>/*.npz.")],
    collection: Annotated[str | None, typer.Option(
        help="What the record cannot tell: a layout record's collection "
             "[layout:xla:default]; tile records are tile:xla.")] = None,
    split: Annotated[str | None, typer.Option(
        help="train, valid or test [train for measured records, test for dumps].")] = None,
    name: Annotated[str | None, typer.Option(
        help="File name of a layout import [the module's name].")] = None,
    kind: Annotated[str, typer.Option(
        help="auto, tuning-data, module-tuning-data, hlo-proto or hlo-module.")] = "auto",
    drop_failed_runs: Annotated[bool, typer.Option(
        "--drop-failed-runs", help="Leave out runs that failed (ConfigProfile.error), as "
        "the official converter does, instead of stopping.")] = False,
    candidates: Annotated[int, typer.Option(
        help="Candidate layout configs to write for an HLO dump.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of a dump's candidate configs.")] = 0,
) -> None:
    """Write XLA tuning records or HLO dumps as TpuGraphs npz files, with the official
    converter's features (no XLA or TensorFlow needed).

    A dump gets the test split and candidate configs with runtimes 0: rank them with
    xlarank score. See docs/xla.md.
    """
    from xlarank.data.xla import MANIFEST, import_records

    with _user_errors():
        check_outputs([Output(out_dir, "dir", marker=MANIFEST)],
                      [Input(s) for s in sources])
        with _progress("import", len(sources)) as tick:
            graphs = import_records(sources, out_dir, collection=collection, split=split,
                                    name=name, kind=kind, drop_failed_runs=drop_failed_runs,
                                    candidates=candidates, seed=seed, on_file=tick)
    for graph in graphs:
        console.print(f"{out_dir / graph.relative_path}: {graph.note}", highlight=False)


@app.command()
def specs(
    kind: Annotated[str | None, typer.Option(help="feature or booster [both].")] = None,
) -> None:
    """List the packaged specs: their names work as --spec of featurize, train and tune
    from any folder."""
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
    weights: Annotated[list[str] | None, typer.Option(
        metavar="FAMILY=SOURCE",
        help="The weights of a family that has them, e.g. gnn=weights.npz, with "
             "--embedding FAMILY or a spec holding it: SOURCE is 'random:SEED' (no "
             "training) or a weights .npz [the spec's, else random:0]; repeatable.")] = None,
    # The spellings from before --weights, kept working for the two families that had
    # them; a family added later has --weights only.
    gnn_weights: Annotated[str | None, typer.Option(hidden=True)] = None,
    gru_weights: Annotated[str | None, typer.Option(hidden=True)] = None,
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
        given = _weights_given(weights, {"gnn": gnn_weights, "gru": gru_weights})
        feature_spec = resolve_feature_spec(spec, embedding, given)
        jobs = frame_jobs(data, feature_spec, collection, split, out, out_dir)
        check_outputs([job.out for job in jobs],
                      [Input(data, NPZ), *_named_files([spec, *given.values()])])
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


def _weights_given(options: list[str] | None, spelled: dict[str, str | None]
                   ) -> dict[str, str]:
    """--weights FAMILY=SOURCE options as {weights field: source}, with the ones given by
    their own spelling (``spelled``: --gnn-weights, --gru-weights); whether each field
    is a family's is `resolve_feature_spec`'s check."""
    given: dict[str, str] = {}
    pairs = [(f"--{field}-weights", field, source)
             for field, source in spelled.items() if source is not None]
    for option in options or ():
        field, sep, source = option.partition("=")
        if not sep or not field or not source:
            raise XlarankError(f"--weights {option!r}: expected FAMILY=SOURCE, e.g. "
                               "gnn=random:1 or gnn=weights.npz")
        pairs.append(("--weights", field, source))
    for flag, field, source in pairs:
        if field in given:
            raise XlarankError(f"{flag}: the {field} weights are given twice")
        given[field] = source
    return given
