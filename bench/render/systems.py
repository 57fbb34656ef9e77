"""Renderers of the published-systems family (systems*, every part: synthetic, in-graph,
cross-graph curves, counts, scale)."""

from __future__ import annotations

import json
from pathlib import Path

from render.format import (
    data,
    metric,
    num,
    pm,
    table,
    union,
)


def systems(rec: dict) -> list[str]:
    out = []
    syn = rec.get("synthetic")
    if syn:
        rows = syn["results"]
        colls, names = union(rows, "collection"), union(rows, "system")
        cell = {(r["system"], r["collection"]): r for r in rows}
        out.append(f"Cross-graph, data: {data(syn['data'])}; {syn['seeds']} seeds; mean ± sd "
                   "(layout Kendall tau, tile 1 - slowdown@5).")
        out.append(table(["system", *colls],
                         [[s, *[pm(cell[s, c]["metric"]) if (s, c) in cell else "–"
                                for c in colls]] for s in names]))
        tile = [c for c in colls if c.startswith("tile")
                and any("median" in cell[s, c] for s in names if (s, c) in cell)]
        if tile:
            out.append("Tile per kernel (a few very slow kernels decide the mean): the median "
                       "over kernels of 1 - slowdown@5 and the share of kernels with a config "
                       "within 5% of the best in the top five, mean ± sd over seeds.")
            out.append(table(["system", *[f"{c} median" for c in tile],
                              *[f"{c} within 5%" for c in tile]],
                             [[s, *[pm(cell[s, c]["median"]) if (s, c) in cell else "–"
                                    for c in tile],
                               *[pm(cell[s, c]["within_5pct"]) if (s, c) in cell else "–"
                                 for c in tile]] for s in names]))
        out.append("Costs per collection: train s (mean over seeds) / peak RSS MB of the "
                   "training process / ms to score 1,000 configs.")
        out.append(table(["system", *colls],
                         [[s, *["/".join(num(cell[s, c][k], 3) for k in
                                         ("train_s", "peak_rss_mb", "score_ms_per_1000"))
                                if (s, c) in cell else "–" for c in colls]] for s in names]))
        settings = []
        for s in names:
            by = {}
            for r in rows:
                if r["system"] == s and r.get("settings"):
                    by.setdefault(json.dumps(r["settings"], sort_keys=True), []).append(
                        r["collection"])
            settings += [f"{s}" + ("" if len(c) == len(colls) else f" on {', '.join(c)}")
                         + f" `{k}`" for k, c in by.items()]
        if settings:
            out.append("Settings: " + "; ".join(settings) + ".")
    ing = rec.get("ingraph")
    if ing:
        rows = ing["results"]
        shares, names = union(rows, "share"), union(rows, "system")
        cell = {(r["system"], r["share"]): r for r in rows}
        seeds = (f"seeds {', '.join(map(str, ing['seed_list']))}" if ing.get("seed_list")
                 else f"{ing['seeds']} seeds")
        out.append(f"In-graph, data: {data(ing['data'])}; {seeds}; Kendall tau on the "
                   "held-out distinct configs, mean ± sd (worst seed), and seconds per fit.")
        if any(r["system"] == "tpugraphs-gnn" and "chosen" not in r for r in rows):
            out.append("Here tpugraphs-gnn trained 20 in-graph steps at Adam 1e-3, the "
                       "default before its in-graph recipe; the recipe's figures are in "
                       "[their own section](#published-systems-in-graph-with-tpugraphs-gnns-"
                       "recipe-and-epoch-costs).")
        out.append(table(["system", *[f"{s:.0%} measured" for s in shares], "s at 50%"],
                         [[s, *[pm(cell[s, h]["tau"], "min") if (s, h) in cell else "–"
                                for h in shares],
                           num(cell[s, 0.5]["seconds"], 3) if (s, 0.5) in cell else "–"]
                          for s in names]))
        curve = Path(str(rec.get("ingraph_curve") or "")).name
        if curve:
            out.append(f"![held-out tau at each checkpoint against training seconds]"
                       f"(../bench/published/{curve})")
        if any("plateau_s" in r for r in rows):
            out.append("Training time per fit, mean over seeds: wall s / CPU s of the whole "
                       "fit / CPU s until the held-out tau first came within 0.01 of the "
                       "returned model's (its own plateau; the search included). One core "
                       "per fit; CPU seconds are what a busy machine does not stretch.")
            out.append(table(["system", *[f"{s:.0%} measured" for s in shares]],
                             [[s, *["/".join(num(cell[s, h].get(k), 3) for k in
                                             ("train_s", "train_cpu_s", "plateau_cpu_s"))
                                    if (s, h) in cell else "–" for h in shares]]
                              for s in names]))
    cross = rec.get("cross")
    if cross:
        out += cross_graph(cross, rec.get("cross_curve"))
    scale = rec.get("scale")
    if scale:
        marginal = any("marginal_epoch_s" in r for r in scale["results"])
        if marginal:
            out.append(f"Scale, data: {data(scale['data'])}; per GNN system one fit of a few "
                       "epochs timed epoch by epoch in CPU seconds: the sample's first epoch "
                       "(one-off costs included) and marginal epoch, the marginal scaled to "
                       "the whole train "
                       "split, and the system's own epochs at that cost (tpugraphs-gnn's "
                       "official versions; competition-gnn's training scripts, tile's "
                       "100,000 steps at one kernel a step; gru's and the hybrid's defaults; "
                       "the one-off costs aside: the sample's first epoch less its marginal "
                       "one; early stopping may end sooner).")
            out.append(table(["collection", "system", "sample / train files",
                              "sample first / marginal epoch CPU s", "train-split epoch s",
                              "projected h (the system's epochs)", "peak RSS MB"],
                             [[r["collection"], r["system"],
                               f"{r['sample_files']} / {r['train_files']}",
                               f"{num(r['cpu_first_epoch_s'])} / "
                               f"{num(r['cpu_marginal_epoch_s'], 3)}",
                               num(r["epoch_s"]),
                               ", ".join(f"{h} ({v}: {r['official_epochs'][v]})"
                                         for v, h in r["projected_h"].items()),
                               num(r["peak_rss_mb"])] for r in scale["results"]]))
        else:
            out.append(f"Scale, data: {data(scale['data'])}; one epoch per GNN system, and "
                       "the official epochs projected (an upper bound: early stopping may "
                       "end sooner). This one-epoch time is mostly one-off cost "
                       "(statistics, loading, compiling), so the projection overstates the "
                       "epochs' cost; the marginal epoch is measured in [its own section]"
                       "(#published-systems-every-gnn-systems-epoch-cost).")
            out.append(table(["collection", "system", "sample / train files", "epoch s",
                              "official epochs", "projected h", "peak RSS MB"],
                             [[r["collection"], r["system"],
                               f"{r['sample_files']} / {r['train_files']}",
                               num(r["epoch_s"]), num(r["official_epochs"]),
                               num(r["projected_h"]), num(r["peak_rss_mb"])]
                              for r in scale["results"]]))
    return out


def cross_graph(cross: dict, figure: str | None) -> list[str]:
    """The curves part of the systems bench: the cross-graph rule's figures and times."""
    rows = cross["results"]
    colls, names = union(rows, "collection"), union(rows, "system")
    cell = {(r["system"], r["collection"]): r for r in rows}
    seeds = ", ".join(map(str, cross["seed_list"]))
    budget = ", ".join(f"{k} {v}" for k, v in cross["epochs"].items())
    out = [f"Cross-graph by the rule, data: {data(cross['data'])}; seeds {seeds}; every "
           f"stepped system trains on the train split less a seeded {cross['inner_share']:.0%}"
           f" of its files (at most {cross['most_graphs']}), held out as inner validation, "
           f"for an epoch budget ({budget}); after each epoch the headline (layout Kendall "
           "tau, tile 1 - slowdown@5) on the inner files decides, by the in-graph rule's "
           "patience and min gain, where it stops and which epoch it keeps; the held-out "
           f"valid files (at most {cross['most_graphs']}, the same for every system) are "
           "scored at each epoch for the report only. xlarank and random train once on the "
           "whole train split. Held-out headline of the kept epoch, mean ± sd over seeds "
           "(worst seed):"]
    out.append(table(["system", *colls],
                     [[s, *[pm(cell[s, c]["metric"], "min") if (s, c) in cell else "–"
                            for c in colls]] for s in names]))
    missing = {}
    for collection, system, seed in cross.get("not_run", []):
        missing.setdefault((system, collection), []).append(str(seed))
    if missing:
        out.append("Not run (a dash above, or fewer seeds): " + "; ".join(
            f"{s} on {c}, seed {', '.join(lacking)}" for (s, c), lacking in missing.items())
            + ".")
    if figure:
        out.append(f"![held-out headline at each epoch against training seconds]"
                   f"(../bench/published/{Path(str(figure)).name})")
    out.append("Per stepped system: the epoch kept / stopped at (seed by seed), the best "
               "held-out headline of any epoch in the budget and of the last one (a curve "
               "still rising at its end says the budget cut it), CPU s to the stop, CPU s "
               "until the held-out headline first came within 0.01 of the kept epoch's (its "
               "own plateau), and how many times xlarank's one fit that is, where xlarank's "
               "figure reaches that plateau (less 0.01; – where it does not), and the peak "
               "RSS of the process that trained it (MB, the largest over seeds). One core per "
               "fit.")
    stepped = [r for r in rows if r.get("curves")]
    out.append(table(["collection", "system", "kept / stopped epoch", "best / last in budget",
                      "CPU s to stop", "CPU s to plateau", "x xlarank's fit",
                      "peak RSS MB"],
                     [[r["collection"], r["system"],
                       ", ".join(f"{p['kept_epoch']}/{p['stopped_epoch']}"
                                 for p in r["per_seed"]),
                       ", ".join(f"{metric(p['best_held_in_budget'])}/"
                                 f"{metric(p['last_held'])}" for p in r["per_seed"]),
                       num(r["train_cpu_s"], 3), num(r["plateau_cpu_s"], 3),
                       num(r.get("plateau_ratio"), 3), num(r["peak_rss_mb"], 3)]
                      for r in stepped]))
    ours = [r for r in rows if r["system"] == "xlarank"]
    if ours:
        out.append("xlarank's one fit, CPU s / peak RSS MB: " + "; ".join(
            f"{r['collection']} {num(r['train_cpu_s'], 3)} / {num(r['peak_rss_mb'], 3)}"
            for r in ours) + ".")
    return out


def seeds_named(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def cross_counts(rec: dict) -> list[str]:
    """The counts part: each system's held-out headline at the demo's train-file count and
    at the larger one, then the larger run's curves and times as `cross_graph` gives them."""
    counts = rec["counts"]
    rows, demo = counts["results"], counts.get("demo_results") or []
    colls, names = union(rows, "collection"), union(rows, "system")
    ours = {(r["system"], r["collection"]): r for r in rows}
    theirs = {(r["system"], r["collection"]): r for r in demo}

    def moved(key) -> str:
        if key not in ours:
            return "–"
        now = ours[key]["metric"]["mean"]
        fewer = ("" if ours[key]["seeds"] == counts["seed_list"] else
                 f" ({seeds_named(ours[key]['seeds'])})")
        if key not in theirs:
            return metric(now) + fewer
        was = theirs[key]["metric"]["mean"]
        if theirs[key]["seeds"] != ours[key]["seeds"]:
            fewer += f" (demo: {seeds_named(theirs[key]['seeds'])})"
        # Rounded first, so a change under 0.0005 reads +0.000, not -0.000.
        return f"{metric(was)} → {metric(now)} ({round(now - was, 3) + 0.0:+.3f}){fewer}"

    out = [f"Held-out headline of the kept epoch (mean over seeds "
           f"{', '.join(map(str, counts['seed_list']))}), at the demo's train files → at the "
           "larger count (change):",
           table(["system", *[f"{c} ({counts['demo_train_files'][c]} → "
                              f"{counts['train_files'][c]} files)" for c in colls]],
                 [[s, *[moved((s, c)) for c in colls]] for s in names])]
    return out + cross_graph(counts, rec.get("counts_curve"))
