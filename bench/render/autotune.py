"""Renderers of the autotune replay (autotune, autotune_noisy): per file what makes it hard,
the tuner against random search, each strategy's measurements and regret."""

from __future__ import annotations

from pathlib import Path

from render.format import (
    data_kind,
    num,
    table,
    union,
    where,
)

AUTOTUNE_TUNER = "tuner"
AUTOTUNE_RANDOM = "random search (exact)"


def short_name(label: str) -> str:
    """A file's name alone (a graph imported from a record: the graph's)."""
    return Path(label.split(": ")[-1]).stem


def reach(row: dict | None, key: str, budget: int) -> str:
    """A count of measurements from row[key]: ">B" where most seeds did not get there
    within the budget B; "–" where the strategy has no row."""
    if row is None:
        return "–"
    return f">{budget}" if row.get(key) is None else num(row[key])


def noise_cell(f: dict) -> str:
    if f.get("noise_ns") is None:
        return "unknown (no config measured twice)"
    return f"{num(f['noise_ns'], 3)} ns ({num(f['noise_relative'], 2)})"


def top1_cell(f: dict) -> str:
    verdict = "clear of the noise" if f.get("top1_clear_of_noise") else "within noise"
    return f"{num(f['top1_spread_ns'], 3)} ns ({num(f['top1_spread_relative'], 2)}): {verdict}"


def autotune_file(f: dict, batches: list[str]) -> list[str]:
    """One replayed file of the autotune record: its line and its table, one row per strategy."""
    keep_top1 = bool(f.get("top1_clear_of_noise", True))
    head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
            f"{f['distinct_configs']} distinct configs, budget {f['budget']}, "
            f"{f.get('within_noise_configs', '–')} within the noise, top 1% = "
            f"{f['top1_configs']} configs"
            + ("" if keep_top1 else " (within noise: its column left out)")
            + "".join(f"; {n}" for n in f.get("notes", [])) + ".")
    tables = [f["results"][b] for b in batches if b in f["results"]]
    here = [b for b in batches if b in f["results"]]
    random_noise = [(t.get(AUTOTUNE_RANDOM) or {}).get("to_noise_median") for t in tables]
    shares = union([(t.get(AUTOTUNE_TUNER) or next(iter(t.values())))["regret"]
                    for t in tables], None)

    def cells(s, key, bold=False):
        values = []
        for t, expected in zip(tables, random_noise):
            text = reach(t.get(s), key, f["budget"])
            got = (t.get(s) or {}).get(key)
            if (bold and s != AUTOTUNE_RANDOM and got is not None and expected
                    and got <= expected / 3):
                text = f"**{text}**"
            values.append(text)
        return " / ".join(values)

    def regret(s, share):
        return " / ".join("–" if t.get(s) is None else num(t[s]["regret"].get(share), 2)
                          for t in tables)

    header = ["strategy", f"within noise ({' / '.join(here)})",
              *([f"top 1% ({' / '.join(here)})"] if keep_top1 else []),
              f"best ({' / '.join(here)})",
              *[f"regret @{num(100 * float(s))}%" for s in shares]]
    body = [[s, cells(s, "to_noise_median", bold=True),
             *([cells(s, "to_top1_median")] if keep_top1 else []),
             cells(s, "to_best_median"), *[regret(s, share) for share in shares]]
            for s in union(tables, None)]
    return [head, table(header, body)]


def autotune(rec: dict) -> list[str]:
    if not any("noise_ns" in f for f in rec["files"]):
        return _autotune_before_noise(rec)
    batches = [str(b) for b in rec["batches"]]
    per = " / ".join(batches)
    out = [f"Batches {', '.join(batches)}; budget {num(100 * rec['budget_share'])}% of the "
           f"distinct configs; {rec['seeds']} seeds; {rec.get('threads', '–')} thread(s). The "
           "target is a config within the repeat noise of the best (its median runtime at "
           "most the best's plus the noise); the noise: "
           f"{rec.get('noise_rule', '–')}. Plateau: the share of distinct configs within "
           f"{num(100 * rec.get('plateau_share', 0.005))}% of the best."]
    rows = []
    for f in rec["files"]:
        rows.append([f"`{short_name(f['file'])}`", f.get("data", "–"), f["collection"],
                     f"{f['distinct_configs']} of {f['configs']}",
                     f"{f['budget']}" if "budget" in f else f"left out: {f.get('left_out', '–')}",
                     f"{num(f['runtime_spread'], 3)}x", f"{100 * f['plateau']:.1f}%",
                     noise_cell(f), num(f.get("repeated_configs")),
                     num(f.get("repeat_tau"), 2), num(f.get("within_noise_configs")),
                     top1_cell(f)])
    out.append("What makes each file hard: distinct configs (of all measured), budget, "
               "runtime spread (slowest / fastest distinct median), plateau, repeat noise (ns, "
               "and relative to the best), configs measured twice or more, the Kendall tau "
               "between their two measurements, distinct configs within the noise of the "
               "best, and the top 1%'s spread (its threshold minus the best).")
    out.append(table(["file", "data", "collection", "distinct configs", "budget", "spread",
                      "plateau", "repeat noise", "repeated", "repeat tau", "within noise",
                      "top-1% spread"], rows))
    replayed = [f for f in rec["files"] if "results" in f]
    verdicts = []
    for f in replayed:
        for b in batches:
            t = f["results"].get(b)
            if t is None:
                continue
            v = (f.get("tuner_to_noise_vs_random") or {}).get(b) or {}
            tuner, random = t.get(AUTOTUNE_TUNER), t.get(AUTOTUNE_RANDOM)
            expected = v.get("random_expected", (random or {}).get("to_noise_median"))
            got = v.get("tuner", (tuner or {}).get("to_noise_median"))
            ranked = sorted(((r["to_noise_median"], s) for s, r in t.items()
                             if s != AUTOTUNE_RANDOM and r.get("to_noise_median") is not None))
            lead = ", ".join(s for c, s in ranked if c == ranked[0][0]) if ranked else None
            verdicts.append([
                f"`{short_name(f['file'])}`", f["collection"], b,
                reach(tuner, "to_noise_median", f["budget"]), num(expected),
                "–" if got is None or not expected else f"{got / expected:.2f}",
                "yes" if v.get("within_a_third_of_random") else "**no**",
                f"{lead} ({num(ranked[0][0])})" if lead else f"none within {f['budget']}"])
    out.append("The tuner against random search: measurements until a config within the "
               "noise (the tuner: median over seeds; random: the exact expectation "
               "(N + 1) / (k + 1) for the k configs within the noise of N), and whether the "
               "tuner needs at most a third of random's; the fewest of any strategy beside.")
    out.append(table(["file", "collection", "batch", "tuner", "random (exact)",
                      "tuner / random", "within a third of random", "fewest (strategy)"],
                     verdicts))
    for f in replayed:
        out += autotune_file(f, batches)
    out.append(f"Cells are per batch size ({per}): median measurements over seeds (\">B\": "
               "most seeds did not get there within the budget B; random search: the exact "
               "expectation); bold: at most a third of random search's expectation. Regret: "
               "best runtime measured so far / the pool's best - 1 at that share of the "
               "distinct configs, mean over seeds (random: exact).")
    within = rec.get("top1_within_noise")
    if within is not None:
        out.append("Files whose top 1% is within the noise (the top-1% column not kept): "
                   + (", ".join(f"`{where(w)}`" for w in within) or "none") + ".")
    if rec.get("synthetic_noise"):
        out.append(f"Synthetic noise: {rec['synthetic_noise']}.")
    return out


def _autotune_before_noise(rec: dict) -> list[str]:
    out = [f"Batches {', '.join(map(str, rec['batches']))}; budget "
           f"{num(100 * rec['budget_share'])}% of the distinct configs; {rec['seeds']} seeds; "
           "cells: median measurements until one of the top 1% (\">B\": most seeds did not "
           "get there within the budget B); random search: the exact expectation."]
    for f in rec["files"]:
        head = (f"`{where(f['file'])}`: {data_kind(f.get('data', ''))}, {f['collection']}, "
                f"{f['distinct_configs']} distinct configs")
        if "results" not in f:
            out.append(f"{head}; left out: {f.get('left_out', '–')}.")
            continue
        out.append(f"{head}, budget {f['budget']}, top 1% = {f['top1_configs']} configs"
                   + "".join(f"; {n}" for n in f.get("notes", [])) + ":")
        batches = list(f["results"])
        tables = list(f["results"].values())

        def reach(row, key, budget=f["budget"]):
            if row is None:
                return "–"
            return f">{budget}" if row.get(key) is None else num(row[key])

        out.append(table(["strategy", *[f"top 1%, batch {b}" for b in batches],
                          *[f"best, batch {b}" for b in batches]],
                         [[s, *[reach(t.get(s), "to_top1_median") for t in tables],
                           *[reach(t.get(s), "to_best_median") for t in tables]]
                          for s in union(tables, None)]))
    return out
