"""Renderers of the featurize family: featurize speed and memory, the real preset's mix
before and after (featurize_full) and the full dataset end to end (full)."""

from __future__ import annotations

from pathlib import Path

from render.format import (
    num,
    overhead,
    table,
    where,
)


def featurize(rec: dict) -> list[str]:
    files = rec["results"]
    rows = {
        "data": [r["data"] for r in files],
        "configs x features featurized": [f"{r['featurize']['rows']} x "
                                          f"{r['featurize']['features']}" for r in files],
        "node_config_feat MiB": [num(r["decompress"]["node_config_feat_mib"]) for r in files],
        "decompress s": [num(r["decompress"]["seconds"]) for r in files],
        "featurize s": [num(r["featurize"]["seconds"]) for r in files],
        "featurize / decompress (range over pairs)": [
            f"{num(r['featurize_over_decompress'])} ({num(min(p), 3)}–{num(max(p), 3)})"
            if (p := r.get("featurize_over_decompress_per_pair"))
            else num(r["featurize_over_decompress"]) for r in files],
        "peak RSS rise MiB": [num(r["featurize"]["peak_rss_rise_mib"]) for r in files],
        "peak RSS rise / node_config_feat": [num(r["peak_rss_rise_over_config_mib"])
                                             for r in files],
        "reference s (scaled from samples)": [num(r["reference"]["seconds"]) for r in files],
        "speed-up over the reference": [f"{num(r['speedup_over_reference'], 3)}x"
                                        for r in files],
        **{f"{family} family overhead (range over pairs)": [
            overhead(r.get(family)) for r in files] for family in ("gnn", "gru")},
        "`xlarank featurize` as a command s": [
            num((r.get("command") or {}).get("seconds")) for r in files],
        "the command's peak RSS MiB (libraries included)": [
            num((r.get("command") or {}).get("peak_rss_mib")) for r in files],
        "start-up: importing numpy, pandas, pyarrow, numba s": [
            num((r.get("startup") or {}).get("imports_seconds")) for r in files],
        "start-up: Numba's first cached kernel s": [
            num((r.get("startup") or {}).get("first_kernel_seconds")) for r in files],
        "zipfile's inflate of every member s": [
            num((r.get("inflate") or {}).get("zipfile_all_members")) for r in files],
        **{f"config member's stream with {label} s": [
            num((r.get("inflate") or {}).get(f"{key}_stream")) for r in files]
           for key, label in (("zlib", "zlib"), ("zlib_ng", "zlib-ng"),
                              ("isal_zlib", "ISA-L"))},
        "inflate xlarank reads with": [(r.get("inflate") or {}).get("chosen", "zlib")
                                       for r in files],
    }
    out = [table(["", *[f"`{Path(r['file']).name}`" for r in files]],
                 [[k, *v] for k, v in rows.items()])]
    pairs = sorted({len(r.get("featurize_over_decompress_per_pair", [])) for r in files})
    out.append("Files: " + "; ".join(f"`{where(r['file'])}`" for r in files) + ". Times are "
               f"the best of {'/'.join(map(str, pairs))} alternated (decompress, featurize) "
               "pairs, each run in its own process; peak RSS is the rise over the process "
               "after imports and a warm-up; a family's overhead is its best time over the best "
               "without it. The command, the start-up and the inflate rows are the best of 3 "
               "fresh processes; the inflate rows stream the config member with 16 MiB of "
               "output per call, CRC-32 included, data dropped.")
    return out


def featurize_full(rec: dict) -> list[str]:
    runs, best = rec["runs"], rec["best_seconds"]
    rows = [["this commit", ", ".join(num(r["seconds"]) for r in runs["after"]),
             num(best["after"]), num(rec["peak_rss_gb"]["after"])],
            [f"`{rec['before']}` (`{rec['before_commit'][:12]}`)",
             ", ".join(num(r["seconds"]) for r in runs["before"]), num(best["before"]),
             num(rec["peak_rss_gb"]["before"])]]
    return [f"Data: `{rec['data']}`, one file in {rec['share']} of each collection and split "
            f"of the `{rec['preset']}` preset: {rec['files']} files, {num(rec['npz_gb'])} GB "
            f"of npz; {rec.get('workers', '–')} workers, {rec.get('cores', '–')} cores.",
            table(["sources", "seconds per run", "best s", "peak RSS GB"], rows),
            f"This commit over the earlier one: {num(rec['after_over_before'])}x "
            f"(target: at most 0.5). Frames byte-identical between the two: "
            f"{'yes' if rec['frames_identical'] else 'no'} ({rec['frames']} frames; the "
            "earlier commit's feature spec and frame metadata differ where they changed "
            "since)."]


def full(rec: dict) -> list[str]:
    steps = rec["steps"]
    out = [f"Data: `{rec['data']}`, preset `{rec['preset']}` "
           f"({'synthetic' if rec.get('synthetic') else 'real'}), {rec.get('cores', '–')} "
           "cores.",
           table(["step", "seconds", "peak RSS GB"],
                 [[k, num(v["seconds"]), num(v["peak_rss_gb"])] for k, v in steps.items()]),
           table(["", "measured", "target"],
                 [["total minutes (synth not counted)", num(rec["total_minutes"]),
                   f"< {num(rec['total_target_minutes'])}"],
                  ["peak RSS GB", num(rec["peak_rss_gb"]), f"< {num(rec['rss_target_gb'])}"]]),
           f"Within both targets: {num(rec.get('within_targets'))}."]
    return out
