"""The real tile kernels' renderer (tile_kernels, tile_kernels_rule, tile_kernels_curves)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from render.format import (
    data,
    metric,
    num,
    pm,
    table,
)


def tile_kernels(rec: dict) -> list[str]:
    kernels = rec["kernels"]
    out = [f"Data: {data(rec['data'])}; {rec['seeds']} seeds, {rec['threads']} "
           f"thread{'s' if rec['threads'] != 1 else ''} per fit. "
           f"{len(kernels)} kernels, {sum(k['configs'] for k in kernels)} configs "
           f"({', '.join(str(k['configs']) for k in kernels)}); the slowest config is "
           f"{num(max(k['max_over_default'] for k in kernels), 3)}x its kernel's default. "
           "In-kernel cells: mean ± sd over seeds of the mean tau over kernels (worst seed); "
           "leave-one-kernel-out: 1 - slowdown@5 mean ± sd over seeds, over kernels with more "
           "than 5 configs and over all, the median and the share of (kernel, seed) within 5% "
           "of the best, over all kernels; then 1 - slowdown@1; then seconds for both "
           "protocols and peak RSS."]
    rows = []
    for name, r in rec["systems"].items():
        loko = r["loko"]
        rows.append([name, pm(r["in_kernel_tau"], "min"), pm(loko["kernels_over_5_configs"]),
                     pm(loko["all_kernels"]), metric(loko["median"]),
                     f"{100 * loko['share_within_5pct']:.0f}%", pm(loko["one_minus_slowdown_at_1"]),
                     num(r["in_kernel_s"] + r["loko_s"], 3), num(r["peak_rss_mb"])])
    out.append(table(["system", "in-kernel tau", "LOKO >5 configs", "LOKO all", "median",
                      "within 5%", "LOKO 1 - slowdown@1", "s", "peak RSS MB"], rows))
    settings = [f"{n} `{json.dumps(r['settings'], sort_keys=True)}`"
                for n, r in rec["systems"].items() if r.get("settings")]
    costs = {n: r["in_kernel_costs"] for n, r in rec["systems"].items()
             if "in_kernel_costs" in r}
    if settings and not costs:
        out.append("Settings (those of the systems bench's synthetic tile row): "
                   + "; ".join(settings) + ".")
    if costs:
        out.append("Leave-one-kernel-out trains each stepped system by the cross-graph rule "
                   "(bench/systems.py: 3 of the 14 other kernels held out as inner "
                   "validation, the epoch kept and the stop by the in-graph rule's patience "
                   "and min gain) within an epoch budget: "
                   + "; ".join(settings) + ".")
        ours = costs.get("xlarank", {}).get("cpu_s")
        out.append("In-kernel training cost, mean over seeds of the sum over kernels: CPU s "
                   "of the whole fits (xlarank's graph-local booster: fit and scoring), CPU s "
                   "until each kernel's held-out tau first came within 0.01 of its returned "
                   "model's (its own plateau), and that as a multiple of xlarank's whole "
                   "fits; leave-one-kernel-out: the epoch kept / stopped at, median over "
                   "(kernel, seed).")
        rows = []
        for name, c in costs.items():
            loko = [k for run in [rec["systems"][name]["loko_per_kernel_seed0"]]
                    for k in run.values() if "kept_epoch" in k]
            epochs = (f"{statistics.median(k['kept_epoch'] for k in loko):g} / "
                      f"{statistics.median(k['stopped_epoch'] for k in loko):g}"
                      if loko else "–")
            rows.append([name, num(c["cpu_s"], 3), num(c["plateau_cpu_s"], 3),
                         num(c["plateau_cpu_s"] / ours, 3) if ours else "–", epochs])
        out.append(table(["system", "in-kernel CPU s", "CPU s to plateau", "x xlarank's",
                          "LOKO kept / stopped epoch (seed 0, median)"], rows))
    figure = Path(str(rec.get("kernel_curve") or "")).name
    if figure:
        out.append(f"![held-out tau at each checkpoint against training seconds]"
                   f"(../bench/published/{figure})")
    return out
