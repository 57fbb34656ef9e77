"""Publish the benches' JSON records as the page docs/benchmarks.md.

Every bench (declared once in bench/benches.py, run by bench/run.py) writes one JSON under
bench/results/, stamped by `provenance.write_record` with the date, commit, machine and
command of the run. This script copies the stamped ones to bench/published/ (a record
without provenance is skipped, and said so; over MAX_BYTES, per-epoch and per-step arrays
that no table shows are dropped and the copy names them under "dropped_by_publish"), then
renders the page from bench/published/ alone: a section per declared bench, in declaration
order, its blocks from the bench's renderer (bench/render/, by bench family).
Why: every figure on the page then comes from a record kept in the repository and is shown
beside the date, commit, machine and command that produced it, so the page never holds a
figure no command produced (none is typed in by hand); `--check`, or a test comparing
`render(ROOT / "bench/published")` with the page, tells when the two differ.

    python bench/publish.py [--results DIR] [--published DIR] [--out FILE] [--check]

Relative paths are taken from the repository root, so it runs from any folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benches import BENCHES
from provenance import write_text_atomic
from render import RENDERERS
from render.autotune import autotune
from render.engines import ENGINE_PARTS, _part_provenance
from render.format import num, provenance_lines
from render.ingraph import ingraph

# The declarations and the renderers, read through this module by tests/test_docs.py.
__all__ = ["BENCHES", "RENDERERS", "autotune", "ingraph", "main", "publish", "render"]

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 150_000
# Per-epoch / per-step arrays no table uses: dropped from a copy over MAX_BYTES.
BULKY_KEYS = ("curve", "history_seed0", "pairwise_loss_per_epoch", "centred_mse_per_epoch")


# ---------------------------------------------------------------- page

def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def render(published: Path) -> str:
    """The page docs/benchmarks.md from the JSON records under `published` alone."""
    published = Path(published)
    records = {name: _load(published / f"{name}.json") for name in BENCHES}
    made = [b for b in BENCHES.values() if b.target == "bench"]
    seconds = [r["provenance"]["seconds"] for name, r in records.items()
               if r and name != "full" and (r.get("provenance") or {}).get("seconds")]
    lines = [
        "# Benchmarks",
        "",
        "Every figure on this page comes from the JSON record of a bench run, kept in "
        "`bench/published/` (copied from `bench/results/` by `make bench-publish`, which runs "
        "`bench/publish.py` and renders this page from those copies alone). Each section names "
        "the date, commit, machine and command of its run. `make bench` reruns the "
        f"{len(made)} benches declared for it (bench/benches.py); `make bench-setup` and "
        "`make bench-full` run the set-up and the full-size one; the other "
        f"{len(BENCHES) - len(made) - 2} are earlier runs kept on the page, which "
        "`python bench/run.py --only NAME` reruns. Their records took "
        f"{num(sum(seconds) / 60, 2)} minutes in all ({len(seconds)} records with a wall "
        "time; a record assembled from kept rows counts its assembly only)"
        ". Wall times depend on the machine and on what else it was running (the load "
        "average at each run's end is given). Figures on synthetic `xlarank synth` data show "
        "learning under its own cost model and say nothing about TpuGraphs by themselves.",
        "",
        "This page is generated: change `bench/publish.py` or rerun a bench, never edit it.",
        "",
        "**Why one quantity has several figures.** \"xlarank on unet3d with half its configs "
        "measured\" is measured by several benches, each under its own protocol, and each "
        "figure is right for its protocol: In-graph ranking splits the distinct configs and "
        "runs `rank_graph` (its K-fold choice among the graph-local models); Quality trains "
        "the default cross-graph pipeline on half of all configs, copies included; the "
        "Published systems benches train every system by one in-graph rule on one thread, "
        "the same split for each; the corpus benches use programs timed here. They differ in "
        "which configs are held out, what is trained on them and over which seeds. The "
        "README quotes one figure per claim and links the section it comes from.",
    ]
    for bench in BENCHES.values():
        lines += ["", f"## {bench.title}", "", bench.description, ""]
        rec = records[bench.name]
        if rec is None:
            lines.append(f"Not published yet: run `{bench.command}` then `make bench-publish`.")
            continue
        problem = provenance_problem(bench.name, rec)
        if problem:
            lines.append(f"Not shown: `bench/published/{bench.name}.json` has {problem}.")
            continue
        lines += provenance_lines(rec.get("provenance") or {})
        dropped = rec.get("dropped_by_publish")
        if dropped:
            lines.append("- left out of the published copy: "
                         + ", ".join(f"`{k}`" for k in dropped)
                         + " (per-step arrays no table shows)")
        try:
            blocks = RENDERERS[bench.name](rec)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"{bench.name}.json: unexpected structure ({err!r})") from err
        for block in blocks:
            lines += ["", block]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- publishing

def provenance_problem(name: str, record) -> str | None:
    """Why a results record may not be published (None: it may)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if name != "engines":
        return None if record.get("provenance") else (
            "no provenance entry (written before bench/provenance.py, or not by write_record)")
    missing = [k for k in ENGINE_PARTS if k in record and _part_provenance(record, k) is None]
    if missing:
        return (f"no provenance for its part(s) {', '.join(missing)} (an --only run replaced "
                "the file's: rerun the whole bench)")
    return None if any(k in record for k in ENGINE_PARTS) else "none of its parts"


def _drop_bulky(value, dropped: set[str]):
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            if k in BULKY_KEYS:
                dropped.add(k)
            else:
                kept[k] = _drop_bulky(v, dropped)
        return kept
    if isinstance(value, list):
        return [_drop_bulky(v, dropped) for v in value]
    return value


def publish(results: Path, published: Path) -> list[str]:
    """Copy each stamped results record to `published` (trimmed when large); the messages."""
    said = []
    for name in BENCHES:
        source = results / f"{name}.json"
        if not source.exists():
            continue
        text = source.read_text()
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            said.append(f"skipped {_show(source)}: not valid JSON ({err})")
            continue
        problem = provenance_problem(name, record)
        if problem:
            said.append(f"skipped {_show(source)}: {problem}")
            continue
        note = ""
        if len(text.encode()) > MAX_BYTES:
            dropped: set[str] = set()
            record = _drop_bulky(record, dropped)
            if dropped:
                record["dropped_by_publish"] = sorted(dropped)
                text = json.dumps(record, indent=2) + "\n"
                note = f" (dropped {', '.join(sorted(dropped))}: {len(text.encode())} bytes)"
        write_text_atomic(published / source.name, text)
        said.append(f"published {_show(source)} -> {_show(published / source.name)}{note}")
        # The record's figure (a PNG the same run drew) goes beside it, for the page.
        for key in ("ingraph_curve", "cross_curve", "counts_curve", "kernel_curve",
                    "noise_plot"):
            drawn = results / Path(str(record.get(key) or "")).name
            if record.get(key) and drawn.is_file():
                (published / drawn.name).write_bytes(drawn.read_bytes())
                said.append(f"published {_show(drawn)} -> {_show(published / drawn.name)}")
    return said


def _show(path: Path) -> str:
    """`path` from the repository root when inside it, else whole."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _path(arg: str) -> Path:
    path = Path(arg).expanduser()
    return path if path.is_absolute() else ROOT / path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Relative paths are from the repository root.")
    parser.add_argument("--results", default="bench/results", help="the benches' records")
    parser.add_argument("--published", default="bench/published",
                        help="the published copies, which the page is rendered from")
    parser.add_argument("--out", default="docs/benchmarks.md", help="the page")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when "
                        "--out differs from the page rendered from --published")
    args = parser.parse_args(argv)
    published, out = _path(args.published), _path(args.out)
    if args.check:
        page = render(published)
        if not out.exists() or out.read_text() != page:
            print(f"{args.out} differs from the page rendered from {args.published}: "
                  "run `python bench/publish.py`")
            return 1
        print(f"{args.out} matches {args.published}")
        return 0
    for line in publish(_path(args.results), published):
        print(line)
    write_text_atomic(out, render(published))
    print(f"wrote {_show(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
