"""The engines bench's renderer: featurize throughput per engine, concurrent trainings and
the busy machine, each part under its own provenance when rerun alone."""

from __future__ import annotations

from render.format import (
    data,
    limit,
    num,
    provenance_lines,
    table,
)

ENGINE_PARTS = ("results", "trainings", "busy machine")


def _part_provenance(rec: dict, key: str) -> dict | None:
    """The provenance of one part of engines.json: its own (an --only run), else the file's
    unless an --only run wrote the file's, then the full run's that it kept."""
    part, top = rec.get(key), rec.get("provenance")
    if isinstance(part, dict) and part.get("provenance"):
        return part["provenance"]
    if top and "--only" not in top.get("command", ""):
        return top
    return rec.get("full_run_provenance")


def engines(rec: dict) -> list[str]:
    out = []
    top = rec.get("provenance")

    def own(key: str) -> list[str] | None:
        prov = _part_provenance(rec, key)
        if prov is None:
            out.append("Not shown: this part has no provenance of its own.")
            return None
        return [] if prov == top else ["This part was rerun on its own:\n\n"
                                       + "\n".join(provenance_lines(prov))]

    if "results" in rec:
        out.append("### Featurize throughput")
        if (lines := own("results")) is not None:
            out.extend(lines)
            out.append(f"Data: {data(rec.get('data', '–'))}.")
            out.append(table(["engine", "files", "seconds", "files/s"],
                             [[k, num(v["files"]), num(v["seconds"]), num(v["files_per_second"])]
                              for k, v in rec["results"].items()]))
            out.append(f"Frames byte-identical across engines: "
                       f"{num(rec.get('frames_identical'))}.")
    if "trainings" in rec:
        out.append("### Concurrent trainings")
        t = rec["trainings"]
        if (lines := own("trainings")) is not None:
            out.extend(lines)
            rows = [["one alone (median)", num(t["alone_seconds"]), "", ""]]
            rows += [[f"slower of two {k} (median)", num(t[k]["seconds"]), num(t[k]["ratio"]),
                      limit(t[k].get("limit", t.get("limit")), t[k].get("within_limit"))]
                     for k in ("side by side", "side by side under make -j2") if k in t]
            out.append(f"`xlarank train` on `{t['frame']}`, {t.get('cores', '–')} cores.")
            out.append(table(["run", "seconds", "ratio to alone", "target"], rows))
    if "busy machine" in rec:
        out.append("### Busy machine")
        b = rec["busy machine"]
        if (lines := own("busy machine")) is not None:
            out.extend(lines)
            load = b.get("background_load_cores_before_after") or []
            out.append(f"`xlarank train` on `{b['frame']}` beside {b['neighbour']}; "
                       f"{len(b['beside_seconds'])} runs beside, {len(b['alone_seconds'])} "
                       "alone; other programs' load before and after: "
                       f"{', '.join(num(x, 3) for x in load) or '–'} cores.")
            rows = [["median alone, with the back-off", num(b["alone_median"]), ""],
                    ["median alone, without the back-off (XLARANK_LOAD_BACKOFF=0)",
                     num(b.get("alone_without_backoff_median")), ""],
                    ["median beside, with the back-off", num(b["beside_median"]), ""],
                    ["slowest beside, with the back-off", num(max(b["beside_seconds"])),
                     f"{num(b['slowest_over_alone_median'])}x the median alone; "
                     + limit(b.get("limit"), b.get("within_limit"))]]
            out.append(table(["run", "seconds", "target"], rows))
            out.append(f"Cost of the back-off alone: {num(b.get('backoff_cost_alone'))}x "
                       "(median with / without).")
    return out
