"""Renderers of the in-graph family: in-graph ranking (ingraph, ingraph_noisy) and
rank-graph as a command (ingraph_timing)."""

from __future__ import annotations

from render.format import (
    data_kind,
    metric,
    num,
    pm,
    table,
    union,
    where,
)


def peer_cell(check: dict | None) -> str:
    if not check:
        return "–"
    return (f"{check['mean_minus_peer']:+.3f} (mean {'ok' if check['mean_ok'] else 'BELOW'}, "
            f"worst {'ok' if check['worst_ok'] else 'BELOW'})")


def ingraph(rec: dict) -> list[str]:
    out = [f"{rec['seeds']} seeds, {rec['threads']} threads; cells: Kendall tau on the held-out "
           "distinct configs, mean ± sd over seeds (worst seed)."]
    kinds = [data_kind(f.get("data", "–")) for f in rec["files"]]
    out[0] += (" Files in this record: "
               + "; ".join(f"{k} ({kinds.count(k)})" for k in dict.fromkeys(kinds)) + ".")
    if any("runtime_spread" in f for f in rec["files"]):
        out[0] += (" Per file, what makes it hard: the runtime spread (slowest / fastest "
                   "distinct median), the repeat noise (median |first - second| of configs "
                   "measured twice or more, over the fastest) and the plateau (distinct "
                   "configs within 0.5% of the fastest). Per share: the graph-local model "
                   "rank-graph chose (K-fold on the measured configs; seeds per choice), and "
                   "the check against the peer: rank-graph's mean minus the peer's, the mean "
                   "ok at or above the peer's less 0.005, the worst seed ok at or above the "
                   "peer's mean less its sd.")
    for f in rec["files"]:
        head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
                f"{f['distinct_configs']} distinct of {f['configs']} configs")
        if "runtime_spread" in f:
            noise = f.get("repeat_noise")
            head += (f"; spread {num(f['runtime_spread'], 4)}x, repeat noise "
                     f"{'unknown' if noise is None else num(noise, 2)} of the fastest, "
                     f"plateau {100 * f['plateau_0.5%']:.1f}% within 0.5%")
        if "results" not in f:
            out.append(f"{head}; left out: {f.get('left_out', '–')}.")
            continue
        shares = list(f["results"])
        tables = list(f["results"].values())
        systems = [s for s in union(tables, None) if all("worst" in t.get(s, {"worst": 0})
                                                         for t in tables)]
        rows = [[s, *[pm(t.get(s), "worst") for t in tables]] for s in systems]
        chosen = [(t.get("rank-graph") or {}).get("chosen") for t in tables]
        if any(chosen):
            rows.append(["rank-graph's model (seeds)",
                         *[", ".join(f"{k} {v}" for k, v in c.items()) if c else "–"
                           for c in chosen]])
        checks = [(t.get("rank-graph") or {}).get("peer_check") for t in tables]
        if any(checks):
            rows.append(["rank-graph - peer", *map(peer_cell, checks)])
        out.append(head + ":")
        out.append(table(["system", *[f"{float(s):.0%} measured" for s in shares]], rows))
        for s in union(tables, None):
            if s not in systems:
                out.append(f"{s}: {metric(tables[0][s]['mean'])} (one figure per file).")
    out += rank_graph_command(rec)
    return out


def rank_graph_command(rec: dict) -> list[str]:
    out = []
    if "rank_graph_command" in rec:
        timed = rec["rank_graph_command"]
        if not timed:
            out.append("`xlarank rank-graph` as a command: not timed in this run (see "
                       "[rank-graph as a command](#rank-graph-as-a-command)).")
        else:
            budget = timed.get("budget")
            verdict = ("" if budget is None else f" (budget {num(budget)} s: "
                       + ("within" if timed["best"] <= budget else "NOT within") + ")")
            out.append(f"`xlarank rank-graph` as a command, {timed['measured']} configs "
                       f"measured, on `{where(timed['file'])}`: best {num(timed['best'], 3)} s "
                       f"of {len(timed['seconds'])} fresh processes"
                       f" ({', '.join(num(x, 3) for x in timed['seconds'])} s){verdict}; "
                       f"load average {num(timed.get('load_average'), 3)} at the time.")
            if "before_best" in timed:
                out.append(f"The same command from the sources of `{timed['before']}` "
                           f"(commit {timed['before_commit'][:12]}), alternated run by run: "
                           f"best {num(timed['before_best'], 3)} s "
                           f"({', '.join(num(x, 3) for x in timed['before_seconds'])} s), so "
                           f"this commit takes {num(timed['after_over_before'], 3)}x as long "
                           "on this machine.")
    return out
