"""The page's shared formatting: figures, mean ± sd cells, verdicts, Markdown tables, data
paths as a reader knows them, and each run's provenance as list items. Every renderer
(bench/render/<family>.py) writes its cells through these, so one figure reads the same
wherever it appears."""

from __future__ import annotations

import math
from pathlib import Path


def num(x, sig: int = 4) -> str:
    """A figure with `sig` significant digits (whole numbers past that), "–" for none."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if not isinstance(x, float) or not math.isfinite(x):
        return str(x)
    return f"{x:.0f}" if abs(x) >= 10**sig else f"{x:.{sig}g}"


def metric(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def pm(entry: dict | None, worst: str | None = None) -> str:
    """ "mean ± sd", and " (worst)" from entry[worst] when asked and present."""
    if not entry:
        return "–"
    text = f"{entry['mean']:.3f} ± {entry.get('sd', 0.0):.3f}"
    if worst is not None and entry.get(worst) is not None:
        text += f" ({entry[worst]:.3f})"
    return text


def percent(x) -> str:
    return "–" if x is None else f"{100 * x:+.1f}%"


def overhead(family: dict | None) -> str:
    if not family:
        return "–"
    pairs = family.get("overhead_per_pair")
    return percent(family["overhead"]) + (f" ({percent(min(pairs))} to {percent(max(pairs))})"
                                          if pairs else "")


def limit(value, within) -> str:
    """A limit and whether it held; the record may keep only the verdict."""
    if value is None:
        return f"{yes_no(within)} (the record keeps no limit)"
    return f"≤ {num(value)}: {yes_no(within)}"


def yes_no(x) -> str:
    return "–" if x is None else ("met" if x else "NOT met")


def table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def where(path: str) -> str:
    """A data file as `<dataset folder>/npz/...` (a tuning record as
    `<dataset folder>/raw/...`), whatever machine folder held the dataset; a graph imported
    from a record, "<record>: <path inside>", as the record's place then the path inside."""
    if ": " in path:
        record, inside = path.split(": ", 1)
        return f"{where(record)}: {inside}"
    parts = Path(path).parts
    for anchor in ("npz", "raw"):
        if anchor in parts[1:]:
            at = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[at - 1:])
    return path


def data(text: str) -> str:
    """A record's own words on its data, "synthetic: X" read as "synthetic, X"."""
    return text.replace("synthetic: ", "synthetic, ", 1)


def data_kind(source: str) -> str:
    return {"real": "real TpuGraphs sample",
            "synthetic": "synthetic (`xlarank synth`)"}.get(source, source)


def union(rows, key) -> list:
    """Distinct values in order of first appearance: the keys of each row (key None), or
    each row's row[key]."""
    return list(dict.fromkeys(k for r in rows for k in (r if key is None else [r[key]])))


def provenance_lines(prov: dict) -> list[str]:
    """The run's date, commit, machine, command, wall time and load, as list items."""
    m = prov.get("machine") or {}
    machine = ", ".join(x for x in (
        f"{m['cores']} cores" if m.get("cores") else "",
        f"{num(m['memory_gb'])} GB" if m.get("memory_gb") else "",
        m.get("cpu") or "", f"Python {m['python']}" if m.get("python") else "") if x)
    seconds = prov.get("seconds")
    wall = "–" if seconds is None else f"{num(seconds)} s" + (
        f" ({num(seconds / 60, 3)} min)" if seconds >= 120 else "")
    load = prov.get("load_average_at_end")
    commit = f"`{prov['commit']}`" if prov.get("commit") else "unknown"
    return [f"- date: {prov.get('date', '–')}",
            f"- commit: {commit}" + (" (with uncommitted edits)" if prov.get("dirty") else ""),
            f"- machine: {machine or '–'}",
            f"- command: `{prov.get('command', '–')}`",
            f"- wall time: {wall}",
            "- load average at the end: "
            + (", ".join(num(x, 3) for x in load) + " (1, 5, 15 min)" if load else "–")]
