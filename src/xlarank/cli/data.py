"""Commands that make and inspect inputs: synth, specs, featurize."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    from xlarank.outputs import Input


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
    from xlarank.outputs import Output, check_outputs

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
    from xlarank.outputs import Input, Output, check_outputs

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
def measure(
    program: Annotated[str, typer.Argument(
        help="The JAX program: PATH.py:FUNCTION. Its file is run: name only programs you "
             "would run yourself.")],
    out: Annotated[Path, typer.Option(
        help="Record to write (ModuleTuningData, e.g. mine.pb); its manifest goes beside it "
             "(mine.json).")],
    inputs: Annotated[str | None, typer.Option(
        help="The function of the same file that returns the program's example inputs, as "
             "a tuple [FUNCTION_inputs].")] = None,
    configs: Annotated[int, typer.Option(
        help="Configs to measure, the default run included (2..100,000); with --remeasure, "
             "how many of the record's.")] = 150,
    seed: Annotated[int, typer.Option(help="Seed of the configs drawn and of the rounds' "
                                      "orders.")] = 0,
    rounds: Annotated[int, typer.Option(help="Rounds: every config is timed once a round, "
                                        "in a shuffled order (1..1000).")] = 4,
    repeats: Annotated[int, typer.Option(help="Timed calls per config and round; the "
                                         "least counts (1..1000).")] = 3,
    warmup: Annotated[int, typer.Option(help="Calls per config after compiling, before "
                                        "any timing (0..1000).")] = 2,
    tolerance: Annotated[float, typer.Option(
        help="How far a config's output may differ from the program's, as a share of its "
             "largest magnitude.")] = 1e-3,
    threads: Annotated[int, typer.Option(
        min=1, help="XLA's CPU threads; 1 is the least noisy.")] = 1,
    timing_cpu: Annotated[int | None, typer.Option(
        help="Pin the timing to this CPU (compiling uses every CPU) [not pinned].")] = None,
    compile_workers: Annotated[int | None, typer.Option(
        help="Configs compiled at once [the CPUs this process may use].")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Go on from the partial log a killed run left beside --out.")] = False,
    remeasure: Annotated[Path | None, typer.Option(
        help="Measure --configs of this record's configs again (the default run among "
             "them) and report how far the runtimes agree.")] = None,
    candidates: Annotated[int | None, typer.Option(
        help="Write this many candidate configs (2..100,000) to --out (an .npz for suggest "
             "and rank-graph) and time nothing.")] = None,
    configs_of: Annotated[Path | None, typer.Option(
        help="Measure configs of this candidates file (--candidates wrote it): those "
             "--indices lists, and its config 0, the compiler's own.")] = None,
    indices: Annotated[Path | None, typer.Option(
        help="With --configs-of: a CSV whose config_index column names the configs "
             "(xlarank suggest's output).")] = None,
    measured: Annotated[Path | None, typer.Option(
        help="With --configs-of: add the runtimes to this CSV of config_index,runtime, "
             "the state xlarank suggest and rank-graph read (made if absent).")] = None,
    timeout: Annotated[float, typer.Option(
        help="The most seconds the program may take, loaded, traced and measured (at most "
             "604800, 7 days); one still running then is ended with an error (the timings "
             "so far kept for --resume).")] = 600.0,
) -> None:
    """Measure a JAX program's layout configs on this machine's XLA backend and write the
    official tuning record (xlarank import reads it). See docs/xla.md."""
    from xlarank.measure import check_timeout, program_time_limit

    with _user_errors():
        check_timeout(timeout)
    program_file = program.rpartition(":")[0] or program
    if candidates is not None or configs_of is not None:
        with _user_errors(), program_time_limit(timeout, program_file):
            _measure_candidates(program, out, inputs, candidates, configs_of, indices,
                                measured, seed, rounds, repeats, warmup, tolerance, threads,
                                timing_cpu, compile_workers, resume)
        return
    from xlarank.compat import require_jax
    from xlarank.measure import Settings, load_program, measure_program
    from xlarank.measure import remeasure as again
    from xlarank.measure.record import sidecar_path
    from xlarank.outputs import Input, Output, check_outputs
    from xlarank.threads import use_threads

    with _user_errors():
        check_outputs([Output(out), Output(sidecar_path(out))],
                      _program_input(program) + ([Input(remeasure)] if remeasure else []))
        use_threads(threads)
        require_jax("measuring layout configs")
        settings = Settings(configs=configs, seed=seed, rounds=rounds, repeats=repeats,
                            warmup=warmup, tolerance=tolerance, timing_cpu=timing_cpu,
                            compile_workers=compile_workers)
        # The limit counts from loading the program's file, jax already started.
        with program_time_limit(timeout, program_file):
            fn, args, name = load_program(program, inputs)
            # One bar: compiling every config, then every round's timings.
            with _progress("measure", configs * (rounds + 1)) as tick:
                def step(_phase: str, _total: int) -> None:
                    tick()

                if remeasure is not None:
                    result = again(fn, args, remeasure, out, count=configs, seed=seed,
                                   name=name, source=program, settings=settings,
                                   resume=resume, on_step=step)
                else:
                    result = measure_program(fn, args, out, name=name, source=program,
                                             settings=settings, resume=resume,
                                             on_step=step)
    measured = [r for r in result.runtimes_ns if r is not None]
    noise = result.noise
    tau = noise["repeat_tau"]
    console.print(
        f"{out}: {len(measured)} of {len(result.configs)} configs measured "
        f"({len(result.errors)} failed), {min(measured) / 1e6:.3f}-{max(measured) / 1e6:.3f} "
        f"ms ({noise['spread']:.2f}x); repeat tau "
        f"{'n/a' if tau is None else f'{tau:.2f}'}"
        + ("" if noise["within_noise"] is None else
           f", {noise['within_noise']:.0%} within the noise of the best"), highlight=False)
    if remeasure is not None:
        agreed = result.manifest["remeasure"]["tau_with_stored"]
        console.print(f"tau with {remeasure}'s runtimes: "
                      f"{'n/a' if agreed is None else f'{agreed:.2f}'}", highlight=False)
    console.print(f"manifest: {sidecar_path(out)}", highlight=False)


def _program_input(program: str) -> list[Input]:
    """The program's file as an input no output may replace (none when not named)."""
    from xlarank.outputs import Input

    path = program.rpartition(":")[0]
    return [Input(Path(path))] if path else []


def _measure_candidates(program: str, out: Path, inputs, candidates, configs_of, indices,
                        measured, seed, rounds, repeats, warmup, tolerance, threads,
                        timing_cpu, compile_workers, resume) -> None:
    """measure --candidates (write them) or --configs-of (measure some of them)."""
    from xlarank.compat import require_jax
    from xlarank.measure import (
        Settings,
        load_program,
        measure_candidates,
        write_candidates,
    )
    from xlarank.measure.record import sidecar_path
    from xlarank.outputs import Input, Output, check_outputs
    from xlarank.rank.measured import read_config_indices, read_measured_state
    from xlarank.threads import use_threads

    with _user_errors():
        if candidates is not None and configs_of is not None:
            raise XlarankError("--candidates writes candidates, --configs-of measures "
                               "some: give one")
        program_file = _program_input(program)
        if candidates is not None:
            check_outputs([Output(out)], program_file)
            use_threads(threads)
            require_jax("measuring layout configs")
            fn, args, name = load_program(program, inputs)
            written = write_candidates(fn, args, out, count=candidates, seed=seed, name=name)
            console.print(f"{out}: {written} candidate configs of {name} (config 0 the "
                          "compiler's own), unmeasured", highlight=False)
            return
        if indices is None:
            raise XlarankError("--configs-of needs --indices, a CSV of config_index")
        check_outputs([Output(out), Output(sidecar_path(out))]
                      + ([Output(measured)] if measured else []),
                      [*program_file, Input(configs_of), Input(indices)])
        wanted = read_config_indices(indices)
        # Read before measuring: a bad CSV is refused before anything is written.
        before = read_measured_state(measured if measured and measured.exists() else None)
        use_threads(threads)
        require_jax("measuring layout configs")
        fn, args, name = load_program(program, inputs)
        settings = Settings(configs=max(2, len(wanted) + 1), seed=seed, rounds=rounds,
                            repeats=repeats, warmup=warmup, tolerance=tolerance,
                            timing_cpu=timing_cpu, compile_workers=compile_workers)
        settings.check()
        with _progress("measure", (len(set(wanted) | {0})) * (rounds + 1)) as tick:
            result, rows = measure_candidates(
                fn, args, configs_of, wanted, out, name=name, source=program,
                settings=settings, resume=resume, on_step=lambda *_: tick())
        if measured is not None:
            _add_measured(measured, before, rows)
    failed = [i for i, r in rows if r is None]
    console.print(f"{out}: {len(rows) - len(failed)} configs of {configs_of} measured"
                  + (f" ({len(failed)} failed: {', '.join(map(str, failed))})" if failed
                     else "") + (f" -> {measured}" if measured else ""), highlight=False)


def _add_measured(path: Path, before, rows: list[tuple[int, int | None]]) -> None:
    """The measured CSV (``before``: its rows, read before measuring) with ``rows`` added
    (failed configs left out), written whole."""
    import pandas as pd

    from xlarank.atomic import atomic_path

    added = pd.DataFrame([(i, r) for i, r in rows if r is not None],
                         columns=["config_index", "runtime"])
    table = pd.concat([before[["config_index", "runtime"]], added], ignore_index=True)
    with atomic_path(path) as tmp:
        table.astype({"config_index": "int64", "runtime": "int64"}).to_csv(tmp, index=False)


@app.command()
def corpus(
    programs: Annotated[Path, typer.Argument(
        help="Programs list (TOML [[program]] tables: name, family, function as "
             "PATH.py:FUNCTION relative to the list). Their files are run.")],
    out_dir: Annotated[Path, typer.Option(
        "--out-dir", help="Corpus folder: records/<name>.pb, left_out/, manifest.json.")],
    configs: Annotated[int, typer.Option(help="Configs per program (2..100,000).")] = 150,
    seed: Annotated[int, typer.Option(help="Seed of the configs drawn.")] = 0,
    rounds: Annotated[int, typer.Option(help="Rounds per program (1..1000).")] = 4,
    repeats: Annotated[int, typer.Option(help="Timed calls per config and round "
                                         "(1..1000).")] = 3,
    min_repeat_tau: Annotated[float, typer.Option(
        help="A program whose repeat tau stays under this is left out.")] = 0.4,
    retry_rounds: Annotated[int, typer.Option(
        help="Rounds of the second measurement of a program under --min-repeat-tau "
             "(1..1000).")] = 8,
    threads: Annotated[int, typer.Option(min=1, help="XLA's CPU threads.")] = 1,
    timing_cpu: Annotated[int | None, typer.Option(
        help="Pin the timing to this CPU (compiling uses every CPU) [not pinned].")] = None,
    measure: Annotated[bool, typer.Option(
        "--measure/--no-measure", help="With --no-measure, write the manifest of the "
        "records there and measure nothing.")] = True,
    timeout: Annotated[float, typer.Option(
        help="The most seconds one program may take, loaded, traced and measured (at most "
             "604800, 7 days); one still running then ends the build with an error (its "
             "timings kept for the next run).")] = 600.0,
) -> None:
    """Measure every program of a programs list that has no record yet (xlarank measure)
    and write the corpus manifest. Rerun it to go on after a kill."""
    from xlarank.compat import require_jax
    from xlarank.measure import Settings, check_timeout
    from xlarank.measure.corpus import (
        build_corpus,
        check_min_repeat_tau,
        check_retry_rounds,
        read_programs,
    )
    from xlarank.outputs import Input, Output, check_outputs
    from xlarank.threads import use_threads

    with _user_errors():
        check_timeout(timeout)
        # The library also takes a bar beyond 1 (every program left out); the option, a
        # Kendall tau's range only.
        check_min_repeat_tau(min_repeat_tau)
        check_retry_rounds(retry_rounds)
        listed = read_programs(programs)
        # The folder holds records added one by one, not replaced whole: it may be a
        # link, but to a folder that is there.
        if out_dir.is_symlink() and not out_dir.is_dir():
            raise XlarankError(f"{out_dir}: --out-dir is a link to no folder; give a "
                               "folder, or a path where one can be made")
        check_outputs([Output(out_dir / "manifest.json")], [Input(programs)])
        use_threads(threads)
        require_jax("measuring layout configs")
        settings = Settings(configs=configs, seed=seed, rounds=rounds, repeats=repeats,
                            timing_cpu=timing_cpu)
        settings.check()
        with _progress("corpus", len(listed)) as tick:
            manifest = build_corpus(listed, out_dir, settings=settings,
                                    min_repeat_tau=min_repeat_tau,
                                    retry_rounds=retry_rounds, on_program=tick,
                                    measure=measure, timeout=timeout)
    _show_table("corpus", [("program", "left"), ("family", "left"), ("configs", "right"),
                           ("ms", "right"), ("spread", "right"), ("repeat tau", "right")],
                [(p["name"], p["family"], str(p["configs"]),
                  f"{p['runtime_ms'][0]:.2f}-{p['runtime_ms'][1]:.2f}",
                  f"{p['spread']:.2f}x", f"{p['repeat_tau']:.2f}")
                 for p in manifest["programs"]])
    for p in manifest["left_out"]:
        tau = p["repeat_tau"]
        console.print(f"left out for noise: {p['name']} (repeat tau "
                      f"{'n/a' if tau is None else f'{tau:.2f}'}, spread {p['spread']:.2f}x)",
                      highlight=False)
    if manifest["not_measured"]:
        console.print(f"not measured: {', '.join(manifest['not_measured'])}",
                      highlight=False)
    console.print(f"{len(manifest['programs'])} programs in "
                  f"{len(manifest['families'])} families -> {out_dir / 'manifest.json'}",
                  highlight=False)


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
    from xlarank.outputs import Input, check_outputs
    from xlarank.threads import use_threads

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
