"""Renderers of the measured corpus: noise and in-graph per program (corpus), a family never
seen (corpus_cross), the corpus measured again (corpus_remeasure) and tuning by live
measurements (corpus_autotune)."""

from __future__ import annotations

import statistics
from pathlib import Path

from render.format import (
    metric,
    num,
    pm,
    table,
)


def corpus(rec: dict) -> list[str]:
    """The measured corpus: noise per program, in-graph, leave-one-family-out, CPU to TPU."""
    noise = rec["noise"]
    out = [f"{len(noise)} programs in {len(rec['families'])} families "
           f"({', '.join(rec['families'])}); {len(rec['left_out'])} left out for noise. "
           f"xlarank's settings frozen at `{rec['freeze']}`; a first look. Every tau below is "
           "a Kendall tau; mean ± sd (worst) over every program and seed."]
    plot = Path(str(rec.get("noise_plot") or "")).name
    if plot:
        out.append(f"![each program's runtime spread and noise ceiling]"
                   f"(../bench/published/{plot})")
    out.append(table(["program", "family", "ms (fastest-slowest)", "spread", "repeat tau",
                      "within noise of the best"],
                     [[f"`{name}`", p["family"],
                       f"{p['runtime_ms'][0]:.2f}-{p['runtime_ms'][1]:.2f}",
                       f"{p['spread']:.2f}x", metric(p["repeat_tau"]),
                       f"{100 * p['within_noise']:.0f}%"] for name, p in noise.items()]))
    if rec["left_out"]:
        out.append("Left out for noise (repeat tau under the corpus's 0.4 after up to 8 "
                   "rounds):")
        out.append(table(["program", "family", "rounds", "spread", "repeat tau"],
                         [[f"`{p['name']}`", p["family"], str(p["rounds"]),
                           f"{p['spread']:.2f}x", metric(p["repeat_tau"])]
                          for p in rec["left_out"]]))
    if rec.get("not_measured"):
        out.append(f"Listed in corpus/programs.toml but not measured yet (`make corpus` "
                   f"measures them): {', '.join(f'`{n}`' for n in rec['not_measured'])}.")
    ingraph = rec.get("ingraph")
    if ingraph:
        shares = list(ingraph["overall"])
        systems = [s for s in next(iter(ingraph["overall"].values()))
                   if s != "peer_beats_pipeline_programs"]
        out.append("**In-graph**: a share of each program's distinct configs measured, the "
                   "rest ranked; over programs and seeds (the mean of program means beside "
                   "it).")
        out.append(table(["system", *[f"{float(h):.0%} measured" for h in shares],
                          *[f"program means, {float(h):.0%}" for h in shares]],
                         [[s, *[pm(ingraph["overall"][h][s], "worst") for h in shares],
                           *[pm(ingraph["overall"][h][s]["program_means"], "worst")
                             for h in shares]] for s in systems]))
        out.append("Programs where the raw-columns peer beats the default pipeline "
                   "in-graph: " + ", ".join(
                       f"{ingraph['overall'][h]['peer_beats_pipeline_programs']} of "
                       f"{len(ingraph['per_program'])} at {float(h):.0%}" for h in shares)
                   + ".")
        out.append(table(["program", *[f"{s.split(':')[0]} {float(h):.0%}"
                                       for s in systems[:3] for h in shares]],
                         [[f"`{name}`", *[metric(p["results"][h][s]["mean"])
                                          for s in systems[:3] for h in shares]]
                          for name, p in ingraph["per_program"].items()]))
    tpu = rec.get("tpu")
    if tpu:
        out.append(f"**CPU to TPU**: xlarank's default pipeline trained on the "
                   f"{tpu['trained_on']} corpus programs (imported as layout:xla:default), "
                   f"scored on the real TpuGraphs graph `{tpu['graph']}`: tau "
                   + ", ".join(metric(v) for v in tpu["unet3d"])
                   + f" on seeds {', '.join(map(str, tpu['seeds']))}; random order "
                   + ", ".join(metric(v) for v in tpu["random"]) + ".")
    return out


def corpus_cross(rec: dict) -> list[str]:
    """The measured corpus, one family left out: per system over programs and seeds, per
    family."""
    cross = rec["cross"]
    systems = list(cross["overall"])
    seeds = cross["seeds"]
    families = sorted({f["family"] for f in cross["folds"]})
    fold: dict = {}
    for f in cross["folds"]:
        fold.setdefault((f["family"], f["system"]), []).append(f["mean"])
    made = "; ".join(f"`{m['commit']}` on {m['date']} ({m['cores']}-core {m['cpu']})"
                     for m in cross["rows_made"])
    out = [f"Kendall tau on the held family's programs, mean ± sd (worst) over "
           f"{len(cross['per_program'])} programs × {len(seeds)} seeds "
           f"({', '.join(map(str, seeds))}); the mean over seeds of each program beside it; "
           f"then each seed's mean over programs, and per family the mean over seeds. Rows "
           f"made at {made}.",
           table(["system", "over programs and seeds", "program means", "per seed",
                  *families],
                 [[s, pm(cross["overall"][s], "worst"),
                   pm(cross["overall"][s]["program_means"], "worst"),
                   " / ".join(metric(v) for v in cross["overall"][s]["seed_means"]),
                   *[metric(statistics.fmean(fold[f, s])) if (f, s) in fold else "–"
                     for f in families]] for s in systems])]
    stepped = [f for f in cross["folds"] if f.get("kept_epoch") is not None]

    def of(system: str) -> list[dict]:
        return [f for f in stepped if f["system"] == system]

    if stepped:
        out.append("The stepped systems' epochs (kept / stopped by the rule, of a 30-epoch "
                   "budget) and training CPU seconds, median over folds:")
        out.append(table(["system", "kept epoch", "stopped epoch", "train CPU s"],
                         [[s, *[f"{statistics.median(row[k] for row in of(s)):.0f}"
                                for k in ("kept_epoch", "stopped_epoch", "train_cpu_s")]]
                          for s in systems if of(s)]))
    return out


def corpus_remeasure(rec: dict) -> list[str]:
    """The corpus measured again: per program, the tau with the stored runtimes beside the
    record's own repeat tau."""
    summary = rec["summary"]
    rows = rec["programs"]
    failed = [n for n, r in rows.items() if "error" in r]
    out = [f"{summary['programs']} programs, {rec['configs']} configs each, "
           f"{', '.join(map(str, summary['days_apart']))} calendar day(s) after their "
           f"records. Median tau with the stored runtimes "
           f"{metric(summary['tau_with_stored_median'])}, against a median repeat tau of "
           f"{metric(summary['stored_repeat_tau_same_configs_median'])} on the same configs "
           f"(median gap {metric(summary['gap_median'])}); "
           f"{summary['below_by_more_than_0.1']} program(s) agree worse than their record's "
           "repeat tau by more than 0.1."
           + (f" Failed: {', '.join(f'`{n}`' for n in failed)}." if failed else ""),
           table(["program", "family", "hours apart", "tau with stored",
                  "repeat tau, same configs", "repeat tau, all configs",
                  "repeat tau, new run", "load before"],
                 [[f"`{n}`", r["family"], f"{r['hours_apart']:.1f}",
                   metric(r["tau_with_stored"]), metric(r["stored_repeat_tau_same_configs"]),
                   metric(r["stored_repeat_tau"]), metric(r["repeat_tau"]),
                   f"{r['load_average']['before'][0]:.2f}"]
                  for n, r in rows.items() if "error" not in r])]
    return out


def corpus_autotune(rec: dict) -> list[str]:
    tune = rec["autotune"]
    budget = tune["budget"]
    # Records before the TPE peer and the top-5% target hold the tuner and random alone.
    names = [s for s in ("tuner", "random", "tpe") if s in tune]
    top5 = all(f"{s}_top5" in tune for s in names)

    def counts(values) -> str:
        return ", ".join(str(v) if v is not None else f">{budget}" for v in values)

    within, programs = tune["default_within_noise_programs"]
    out = [f"The compiler's own layouts (config 0, no constraint) lie within the noise of the "
           f"best in {within} of the corpus's {programs} programs: a strategy that measures "
           "them first is done at once, so the noise counts mostly say whether it does: in "
           f"those {within}, no drawn layout beats XLA:CPU's own choice by more than the "
           "noise. The tuner's counts repeat over seeds: its cold start follows its prior's "
           "order." + (" The top 5% of the stored runtimes is the stricter target."
                       if top5 else ""),
           table(["program", "family", "configs", "within noise", "default's rank"]
                 + [f"{s} (per seed)" for s in names]
                 + ([f"{s}, top 5%" for s in names] if top5 else []),
                 [[f"`{name}`", p["family"], str(p["configs"]), str(p["within_noise"]),
                   str(p["default_rank"] + 1) + (" (within noise)"
                                                 if p["default_within_noise"] else "")]
                  + [counts(p[s]) for s in names]
                  + ([counts(p[f"{s}_top5"]) for s in names] if top5 else [])
                  for name, p in tune["programs"].items()])]
    rows = [[s, "within noise", num(tune[s]["median"]),
             f"{tune[s]['reached']} of {tune[s]['runs']}"] for s in names]
    if top5:
        rows += [[s, "top 5%", num(tune[f"{s}_top5"]["median"]),
                  f"{tune[f'{s}_top5']['reached']} of {tune[f'{s}_top5']['runs']}"]
                 for s in names]
    out.append(table(["strategy", "target", f"median measurements (>{budget} as {budget + 1})",
                      "runs that reached it"], rows))
    return out
