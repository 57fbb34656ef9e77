"""Renderers of the quality family: feature ablation (ablation) and each objective, the
ensemble, the default and the peers over seeds (quality)."""

from __future__ import annotations

from render.format import (
    data,
    metric,
    num,
    pm,
    table,
    union,
    where,
    yes_no,
)

# The config-aggregates peer has one name on the page, whatever an older bench called it.
PEER = "peer: config aggregates (XGBoost pairwise)"
PEER_ALIASES = {"peer: config aggregates, XGBoost pairwise": PEER}


def ablation(rec: dict) -> list[str]:
    rows = rec["results"]
    columns = ["random", *[k for k in union(rows, None)
                           if k == "all features" or k.startswith("without ")]]
    out = [f"Cross-graph, data: {data(rec['data'])}, validation split, one fit per cell (the "
           "record has no spread over seeds); the collection's headline metric.",
           table(["collection", "metric", *columns],
                 [[r["collection"], r["metric"], *[metric(r.get(c)) for c in columns]]
                  for r in rows])]
    real = rec.get("real")
    if real:
        out.append(f"In-graph, `{where(real['file'])}`: {real['data']}; {real['metric']}, "
                   "mean ± sd over seeds.")
        out.append(table(["system", real["metric"]],
                         [[k, pm(v)] for k, v in real["systems"].items()]))
    return out


def peer_name(name: str) -> str:
    return PEER_ALIASES.get(name, name)


def quality(rec: dict) -> list[str]:
    syn = rec["synthetic"]
    gen = syn.get("generator") or {}
    rows = syn["results"]
    systems = union([r["systems"] for r in rows], None)
    made = f" (preset `{gen['preset']}`, seed {gen['seed']})" if "preset" in gen else ""
    out = [f"Cross-graph, data: {data(syn['data'])}{made}"
           + f"; {syn['seeds']} seeds; mean ± sd (layout Kendall tau, tile 1 - slowdown@5).",
           table(["system", *[f"{r['collection']} ({r['metric']})" for r in rows]],
                 [[peer_name(s), *[pm(r["systems"].get(s)) for r in rows]]
                  for s in systems])]
    u = rec.get("unet3d")
    if u:
        n_seeds = len(next(iter(u["systems"].values())).get("per_seed", []))
        out.append(f"In-graph, `{where(u['file'])}`: {u['data']}, trained on "
                   f"{u['train_configs']} of its {u['distinct_configs']} distinct configs, "
                   f"scored on the other {u['eval_configs']}; {u['metric']}, {n_seeds} seeds.")
        out.append(table(["system", "mean ± sd (worst)", "train s"],
                         [[peer_name(k), pm(v, "min"), num(v.get("train_seconds"))]
                          for k, v in u["systems"].items()]))
    targets = syn.get("targets") or []
    if targets:
        out.append("Targets (synthetic, on the means): the default beats the config-aggregates "
                   "peer by the margin needed, and the ensemble is not worse than the best "
                   "single ranker.")
        out.append(table(["collection", "default - peer", "needed", "target",
                          "best single (mean)", "ensemble", "target"],
                         [[t["collection"], metric(t["default_minus_peer"]), num(t["needed"]),
                           yes_no(t["default_beats_peer"]),
                           f"{t['best_single']} ({metric(t['best_single_mean'])})",
                           metric(t["ensemble_mean"]), yes_no(t["ensemble_not_worse"])]
                          for t in targets]))
    return out
