"""The measured corpus as real data: every quality figure on programs measured here.

The corpus (`make corpus`, corpus/manifest.json) holds real JAX programs whose layout
configs were compiled by XLA and timed on this machine. Its records are imported as
`xlarank import` does (collection layout:xla:random: the configs are random draws, not an
autotuner's search), then:

- ingraph: per program, a share (0.5, 0.2, 0.1) of its distinct configs measured, the rest
  ranked (bench/ingraph_protocol.py's `one_file`): rank-graph, the default train pipeline on the
  measured configs and the raw-config-columns peer, with random; Kendall tau on the held
  configs, over --seeds splits;
- cross: leave one family out: trained on the other families' programs, scored on the
  held family's: xlarank's default pipeline (one fit, all train files), the
  config-aggregates peer, random, and the published systems by the cross-graph rule
  (`xlarank.systems.cross`, through bench/crossgraph.py's `cross_fit`: inner validation on
  20% of the train files, early stopping, the kept epoch's scores);
- tpu: xlarank's default pipeline trained on the whole corpus, scored on the labelled real
  TpuGraphs layout graph (unet3d): CPU-measured programs against a TPU's runtimes;
- autotune: the tuner (`xlarank suggest`'s), random search and Optuna TPE (`--strategy
  tpe`) driving live measurements
  (`measure_program`) of one program per family for six families, the tuner's prior
  trained on the other families; measurements until a config within the record's noise
  of its best, and until one among its top 5% (`run_autotune`).

xlarank's settings (features/, models/, the in-graph ranker) are those of db209c0, frozen
before the corpus was first scored; nothing was chosen on it. The figures are a first look.

    python bench/corpus.py --corpus corpus --parts ingraph,tpu --seeds 3 \\
        --out bench/results/corpus.json
    python bench/corpus.py --corpus corpus --parts cross --seeds 3 --workers 2 \\
        --rows bench/results/corpus_cross.jsonl --out bench/results/corpus_cross.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from crossgraph import CROSS_EPOCHS, cross_fit
from harness import read_partial
from ingraph_protocol import PEER, PIPELINE, RANDOM, RANK_GRAPH, one_file
from provenance import provenance, write_record
from xlarank.evaluate import graph_headline

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = "layout:xla:random"
FRACTIONS = (0.5, 0.2, 0.1)
FREEZE = "db209c0"
STEPPED = ("tpugraphs-gnn", "gru", "hybrid", "competition-gnn")
CONFIG_AGGREGATES = "peer: config aggregates"
UNET3D = "npz/layout/xla/default/train/unet3d.npz"


def import_corpus(corpus: Path, work: Path, collection: str = COLLECTION) -> dict:
    """{program: (npz path, family)} of the corpus's kept programs, imported into ``work``."""
    from xlarank.data.xla import import_records

    manifest = json.loads((corpus / "manifest.json").read_text())
    records = [corpus / p["record"] for p in manifest["programs"]]
    graphs = import_records(records, work, collection=collection)
    family = {p["name"]: p["family"] for p in manifest["programs"]}
    return {g.name: (work / g.relative_path, family[g.name]) for g in graphs}


def summary(values: list[float]) -> dict:
    """mean, sd (over everything given), worst and count of per-program-and-seed taus."""
    array = np.asarray(values, np.float64)
    return {"mean": round(float(array.mean()), 4),
            "sd": round(float(array.std(ddof=1)) if len(array) > 1 else 0.0, 4),
            "worst": round(float(array.min()), 4), "n": len(array)}


def run_ingraph(files: dict, seeds: list[int]) -> dict:
    from xlarank.threads import use_threads

    use_threads(1)
    per_program = {}
    for name, (path, family) in sorted(files.items()):
        started = time.perf_counter()
        record = one_file(path, seeds, None, FRACTIONS, embeddings=False)
        per_program[name] = {"family": family, "distinct_configs": record["distinct_configs"],
                             "runtime_spread": record.get("runtime_spread"),
                             "seconds": round(time.perf_counter() - started, 1),
                             "results": {
                                 share: {s: {"mean": round(v["mean"], 4),
                                             "per_seed": v["per_seed"]}
                                         for s, v in table.items()
                                         if s in (RANK_GRAPH, PIPELINE, PEER, RANDOM)}
                                 for share, table in record.get("results", {}).items()}}
        print(f"ingraph {name}: " + ", ".join(
            f"{share}: rank-graph {t[RANK_GRAPH]['mean']:.3f} pipeline "
            f"{t[PIPELINE]['mean']:.3f} peer {t[PEER]['mean']:.3f}"
            for share, t in per_program[name]["results"].items()), flush=True)
    overall = {}
    for share in map(str, FRACTIONS):
        overall[share] = {}
        for system in (RANK_GRAPH, PIPELINE, PEER, RANDOM):
            taus = [t for p in per_program.values() if share in p["results"]
                    for t in p["results"][share][system]["per_seed"]]
            means = [p["results"][share][system]["mean"] for p in per_program.values()
                     if share in p["results"]]
            wins = sum(p["results"][share][PEER]["mean"] > p["results"][share][PIPELINE]["mean"]
                       for p in per_program.values() if share in p["results"])
            overall[share][system] = {**summary(taus), "program_means": summary(means)}
        overall[share]["peer_beats_pipeline_programs"] = wins
    return {"per_program": per_program, "overall": overall}


def _fold_scores(system_name: str, train: list[Path], held: list, collection, seed: int,
                 threads: int) -> tuple[list[float], dict]:
    from xlarank.systems import get_system

    if system_name == "random":
        rng = np.random.default_rng(seed)
        return [graph_headline(g, rng.random(g.n_configs)) for g in held], {}
    if system_name in ("xlarank", CONFIG_AGGREGATES):
        settings = {"booster_spec": "baseline"} if system_name == CONFIG_AGGREGATES else {}
        system = get_system("xlarank")(seed=seed, threads=threads, **settings)
        started = time.process_time()
        system.fit(train, collection)
        return ([graph_headline(g, system.score(g)) for g in held],
                {"train_cpu_s": round(time.process_time() - started, 2)})
    budget = CROSS_EPOCHS["layout"]
    system = get_system(system_name)(
        seed=seed, threads=threads, **{get_system(system_name).epoch_setting: budget})
    got = cross_fit(system, train, collection, held, seed)
    return ([graph_headline(g, s) for g, s in zip(held, got["scores"])],
            {k: got[k] for k in ("kept_epoch", "stopped_epoch", "train_cpu_s",
                                 "best_held_in_budget", "last_held")})


def _cross_unit(unit: dict) -> dict:
    """One leave-one-family-out fold (one family, system and seed), in a worker process: its
    row, stamped with the commit, date and machine that made it."""
    from xlarank.data.collections import get_collection
    from xlarank.data.graph import load_graph
    from xlarank.threads import use_threads

    use_threads(unit["threads"])
    collection = get_collection(COLLECTION)
    held = [load_graph(Path(p), collection) for p in unit["held"]]
    started = time.perf_counter()
    taus, extra = _fold_scores(unit["system"], [Path(p) for p in unit["train"]], held,
                               collection, unit["seed"], unit["threads"])
    stamp = provenance()
    return {"family": unit["family"], "system": unit["system"], "seed": unit["seed"],
            "train_files": len(unit["train"]), "mean": round(float(np.mean(taus)), 4),
            "wall_s": round(time.perf_counter() - started, 1), **extra,
            "taus": {name: round(float(t), 4) for name, t in zip(unit["names"], taus)},
            "commit": stamp["commit"], "dirty": stamp["dirty"], "date": stamp["date"],
            "machine": stamp["machine"]}


def run_cross(files: dict, systems: list[str], seeds: list[int], threads: int,
              rows_path: Path | None = None, workers: int = 1) -> dict:
    """Leave one family out, every family x system x seed, ``workers`` folds at a time.
    Each fold's row is appended to ``rows_path`` (JSON lines) as it comes; a fold already
    there (by family, system and seed) is read, not run, so a cut-short run goes on where
    it stopped and the record is rebuilt from its rows."""
    families = sorted({family for _, family in files.values()})
    done = read_partial(rows_path, ("family", "system", "seed"))
    units = []
    for seed in seeds:   # seed-major: a run cut short holds whole seeds first
        for family in families:
            names = sorted(n for n, (_, f) in files.items() if f == family)
            for system in systems:
                if (family, system, seed) not in done:
                    units.append({"family": family, "system": system, "seed": seed,
                                  "names": names, "threads": threads,
                                  "held": [str(files[n][0]) for n in names],
                                  "train": [str(p) for p, f in sorted(files.values())
                                            if f != family]})
    if units:
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
            for row in pool.map(_cross_unit, units):
                done[row["family"], row["system"], row["seed"]] = row
                if rows_path is not None:
                    with open(rows_path, "a") as handle:
                        handle.write(json.dumps(row) + "\n")
                print(f"cross seed {row['seed']} {row['family']:12} {row['system']:16} "
                      f"{row['mean']:.3f} ({row['wall_s']} s)", flush=True)
    rows = [done[f, s, seed] for seed in seeds for f in families for s in systems]
    per_program: dict = {}
    for row in rows:
        for name, tau in row["taus"].items():
            per_program.setdefault(name, {"family": row["family"]}).setdefault(
                row["system"], []).append(tau)
    overall = {system: {**summary([t for p in per_program.values() for t in p[system]]),
                        "program_means": summary([float(np.mean(p[system]))
                                                  for p in per_program.values()]),
                        "seed_means": [round(float(np.mean(
                            [r["mean"] for r in rows if r["system"] == system
                             and r["seed"] == seed])), 4) for seed in seeds]}
               for system in systems}
    made = sorted({(r["commit"], r["date"][:10], r["machine"]["cpu"],
                    r["machine"]["cores"]) for r in rows})
    return {"seeds": seeds, "per_program": per_program,
            "folds": [{k: v for k, v in r.items() if k not in ("taus", "machine")}
                      for r in rows], "overall": overall,
            "rows_made": [{"commit": c, "date": d, "cpu": cpu, "cores": n}
                          for c, d, cpu, n in made]}


def run_tpu(corpus: Path, samples: Path, threads: int) -> dict:
    """The corpus-trained default pipeline on the real labelled TpuGraphs layout graph."""
    from xlarank.data.collections import get_collection
    from xlarank.data.graph import load_graph
    from xlarank.systems import get_system

    out = {}
    with tempfile.TemporaryDirectory() as work:
        files = import_corpus(corpus, Path(work) / "c", collection="layout:xla:default")
        collection = get_collection("layout:xla:default")
        graph = load_graph(samples / UNET3D, collection)
        for seed in (0, 1, 2):
            system = get_system("xlarank")(seed=seed, threads=threads)
            system.fit(sorted(p for p, _ in files.values()), collection)
            out.setdefault("unet3d", []).append(
                round(graph_headline(graph, system.score(graph)), 4))
            rng = np.random.default_rng(seed)
            out.setdefault("random", []).append(round(graph_headline(
                graph, rng.random(graph.n_configs)), 4))
    return {"graph": UNET3D, "trained_on": len(files), "seeds": [0, 1, 2], **out}


def draw_noise(record: dict, out: Path) -> str:
    """<out stem>-noise.png beside the record: per program, its runtime spread (slowest over
    fastest config) and its noise ceiling (repeat tau), coloured by family; the programs
    left out for noise in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(name, p["family"], p["spread"], p["repeat_tau"], True)
            for name, p in record["noise"].items()]
    rows += [(p["name"], p["family"], p["spread"], p["repeat_tau"] or 0.0, False)
             for p in record["left_out"]]
    families = sorted({r[1] for r in rows})
    colours = {f: plt.get_cmap("tab10")(i % 10) for i, f in enumerate(families)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 0.22 * len(rows) + 1.6),
                                      sharey=True)
    y = np.arange(len(rows))[::-1]
    for axis, k, label in ((left, 2, "runtime spread (slowest / fastest config)"),
                           (right, 3, "repeat tau (noise ceiling)")):
        axis.barh(y, [r[k] - (1 if k == 2 else 0) for r in rows],
                  left=1 if k == 2 else 0,
                  color=[colours[r[1]] if r[4] else "0.75" for r in rows])
        axis.set_xlabel(label)
        axis.grid(axis="x", alpha=0.3)
    right.axvline(0.4, color="k", lw=0.8, ls="--")
    left.set_yticks(y, [r[0] for r in rows], fontsize=7)
    left.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families],
                labels=families, fontsize=7, loc="lower right")
    fig.suptitle("The measured corpus: how much layouts move each program, and how far two "
                 "measurements agree", fontsize=9)
    fig.tight_layout()
    path = out.with_name(f"{out.stem}-noise.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


AUTOTUNE_FAMILIES = ("attention", "cnn", "gcn", "mlp", "rnn", "transformer")
AUTOTUNE_STRATEGIES = ("tuner", "random", "tpe")
# The stricter target: the top 5% of a record's stored runtimes.
TOP_SHARE = 0.05


def _live(program, configs: list, indices, work: Path) -> dict[int, float]:
    """Runtimes (ns) of configs ``indices`` of a record, measured now by `measure_program`
    (with config 0, the compiler's own, as every record needs its default run)."""
    from xlarank.measure import Settings, measure_program

    fn, args, name = program
    chosen = [0] + [int(i) for i in indices if int(i) != 0]
    result = measure_program(fn, args, work / f"{name}.pb", name=name,
                             configs=[configs[i] for i in chosen],
                             settings=Settings(configs=len(chosen), rounds=2, repeats=2,
                                               warmup=1, timing_cpu=None))
    return {i: r for i, r in zip(chosen, result.runtimes_ns) if r is not None}


def run_autotune(files: dict, corpus: Path, seeds: list[int], batch: int, budget: int,
                 threads: int) -> dict:
    """The tuner, random search and Optuna TPE (`AUTOTUNE_STRATEGIES`), each driving live
    measurements (`measure_program`) of one program per family in AUTOTUNE_FAMILIES, its
    configs the record's; the tuner's prior is xlarank trained on the other families'
    programs. Counted, by the stored runtimes (the record's): configs measured (the
    default run each batch adds is not counted) until one lies within the record's noise
    of its best (``to_noise``), and until one is among the top 5% (``to_top5``: a target
    the compiler's own layouts rarely meet, where the noise target often takes them); a
    run that never gets there counts as ``>budget``."""
    from xlarank.data.collections import get_collection
    from xlarank.data.graph import load_graph
    from xlarank.measure import load_program
    from xlarank.measure.corpus import read_programs
    from xlarank.measure.record import read_record_configs, sidecar_path
    from xlarank.rank.strategies import RandomStrategy, TpeStrategy
    from xlarank.rank.tuner import Tuner
    from xlarank.systems import get_system

    collection = get_collection(COLLECTION)
    listed = {p.name: p for p in read_programs(corpus / "programs.toml")}
    out: dict = {"batch": batch, "budget": budget, "seeds": seeds, "programs": {}}
    default_within = []
    for name in sorted(files):
        _, _, runtimes, _ = read_record_configs(corpus / "records" / f"{name}.pb")
        runtimes = np.array(runtimes, np.float64)
        manifest = json.loads(sidecar_path(corpus / "records" / f"{name}.pb").read_text())
        default_within.append(bool(runtimes[0] <= runtimes.min()
                                   + manifest["noise"]["noise_ns"]))
    out["default_within_noise_programs"] = [sum(default_within), len(default_within)]
    for family in AUTOTUNE_FAMILIES:
        name = sorted(n for n, (_, f) in files.items() if f == family)[0]
        path = files[name][0]
        graph = load_graph(path, collection)
        _, configs, stored, _ = read_record_configs(corpus / "records" / f"{name}.pb")
        noise = json.loads(sidecar_path(corpus / "records" / f"{name}.pb").read_text())
        stored = np.array([np.nan if r is None else r for r in stored], np.float64)
        target = np.nanmin(stored) + noise["noise"]["noise_ns"]
        top5 = np.nanquantile(stored, TOP_SHARE)
        prior = get_system("xlarank")(seed=0, threads=threads).fit(
            sorted(p for p, f in files.values() if f != family), collection).ranker_
        program = load_program(listed[name].function)
        tuner = Tuner(graph, prior=prior, threads=threads)
        strategies = dict(zip(AUTOTUNE_STRATEGIES, (None, RandomStrategy(), TpeStrategy())))
        rows: dict = {}
        for strategy, chosen in strategies.items():
            rows[strategy], rows[f"{strategy}_top5"] = [], []
            for seed in seeds:
                run = tuner.with_seed(seed, chosen)
                measured, found, found_top5 = 0, None, None
                with tempfile.TemporaryDirectory() as work:
                    while measured < budget and (found is None or found_top5 is None):
                        asked = run.ask(min(batch, budget - measured))
                        if not len(asked):
                            break
                        live = _live(program, configs, asked, Path(work))
                        run.tell(list(live), list(live.values()))
                        for k, index in enumerate(asked):
                            if found is None and stored[index] <= target:
                                found = measured + k + 1
                            if found_top5 is None and stored[index] <= top5:
                                found_top5 = measured + k + 1
                        measured += len(asked)
                rows[strategy].append(found)
                rows[f"{strategy}_top5"].append(found_top5)
                print(f"autotune {name} {strategy} seed {seed}: "
                      f"{found if found else f'>{budget}'} to noise, "
                      f"{found_top5 if found_top5 else f'>{budget}'} to top 5%", flush=True)
        # The compiler's own layouts (config 0) are often within the noise of the best: a
        # strategy that measures them first is done at once.
        out["programs"][name] = {"family": family, "configs": graph.n_configs,
                                 "within_noise": int((stored <= target).sum()),
                                 "top5": int((stored <= top5).sum()),
                                 "default_rank": int((stored < stored[0]).sum()),
                                 "default_within_noise": bool(stored[0] <= target),
                                 "default_top5": bool(stored[0] <= top5), **rows}
    for strategy in AUTOTUNE_STRATEGIES:
        for key in (strategy, f"{strategy}_top5"):
            values = [c if c is not None else budget + 1 for p in out["programs"].values()
                      for c in p[key]]
            out[key] = {"median": float(np.median(values)),
                        "reached": sum(c is not None for p in out["programs"].values()
                                       for c in p[key]), "runs": len(values)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    parser.add_argument("--parts", default="ingraph,cross,tpu")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--systems", default="xlarank,config-aggregates,random,"
                        + ",".join(STEPPED))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1,
                        help="cross folds run at a time, one process each")
    parser.add_argument("--rows", type=Path, default=None,
                        help="the cross part's rows (JSON lines): appended as folds end, "
                        "read instead of rerunning a fold already there")
    parser.add_argument("--out", type=Path, default=Path("bench/results/corpus.json"))
    args = parser.parse_args()
    parts = args.parts.split(",")
    seeds = list(range(args.seeds))
    systems = [CONFIG_AGGREGATES if s == "config-aggregates" else s
               for s in args.systems.split(",")]
    manifest = json.loads((args.corpus / "manifest.json").read_text())
    record: dict = {"freeze": FREEZE, "collection": COLLECTION, "seeds": seeds,
                    "fractions": list(FRACTIONS), "programs": len(manifest["programs"]),
                    "families": manifest["families"],
                    "noise": {p["name"]: {k: p[k] for k in ("family", "repeat_tau", "spread",
                                                             "within_noise", "runtime_ms")}
                              for p in manifest["programs"]},
                    "left_out": manifest["left_out"],
                    "not_measured": manifest.get("not_measured", [])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if "ingraph" in parts:
        record["noise_plot"] = draw_noise(record, args.out)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        files = import_corpus(args.corpus, Path(work))
        if "ingraph" in parts:
            record["ingraph"] = run_ingraph(files, seeds)
        if "cross" in parts:
            record["cross"] = run_cross(files, systems, seeds, args.threads, args.rows,
                                        args.workers)
    if "tpu" in parts:
        record["tpu"] = run_tpu(args.corpus, args.samples, args.threads)
    if "autotune" in parts:
        with tempfile.TemporaryDirectory() as work:
            files = import_corpus(args.corpus, Path(work))
            record["autotune"] = run_autotune(files, args.corpus, seeds, batch=8, budget=48,
                                              threads=args.threads)
    record["seconds"] = round(time.perf_counter() - started, 1)
    write_record(args.out, record)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
