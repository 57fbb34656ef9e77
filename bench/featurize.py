"""Featurize benchmark: time, peak memory and speed-up on one large layout graph per input.

For each file: the time to decompress it (np.load of every array), the time and peak RSS
of xlarank's featurization (read + validate + featurize, configs streamed), and the time of
the plain reference implementation (tests/naive.py, networkx k-hop), measured on a sample
of configs and of configurable nodes and scaled linearly to the whole graph (the reference
is per config and per node, so it scales linearly; running it whole would take hours).

Also the cost of the optional gnn and gru families: featurize time with and without each,
alternated.

Each measurement runs in its own process so peak RSS is its own. Peak RSS is reported as
the rise over the process's RSS after imports and a warm-up on a tiny graph (Numba compile
cache loaded), next to the decompressed size of node_config_feat.

    python bench/featurize.py FILE [FILE ...] --out bench/results/featurize.json
    python bench/featurize.py --make-graph PATH   # the real-scale synthetic layout graph
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from provenance import write_record

ROOT = Path(__file__).resolve().parents[1]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_decompress(path: str) -> dict:
    import numpy as np

    before = rss_mib()
    start = time.perf_counter()
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    seconds = time.perf_counter() - start
    shape = arrays["node_config_feat"].shape
    return {"seconds": seconds, "peak_rss_rise_mib": rss_mib() - before,
            "node_config_feat_shape": list(shape),
            "node_config_feat_mib": arrays["node_config_feat"].nbytes / 2**20}


def _config_member(path: str) -> tuple[bytes, int]:
    """The raw deflate stream of node_config_feat (or the largest member) and its CRC."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        name = "node_config_feat.npy" if "node_config_feat.npy" in names else max(
            names, key=lambda n: zf.getinfo(n).file_size)
        info = zf.getinfo(name)
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", handle.read(30)[26:30])
        handle.seek(info.header_offset + 30 + name_len + extra_len)
        return handle.read(info.compress_size), info.CRC


def measure_inflate(path: str) -> dict:
    """Seconds to inflate the file: zipfile's reader over every member, then the config
    member's raw stream in 16 MiB pieces (data dropped, CRC checked) with each inflate
    library installed, and the one xlarank's reader uses."""
    import zipfile
    import zlib

    from xlarank.data import npzstream

    out = {"chosen": npzstream.INFLATE}
    start = time.perf_counter()
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            with zf.open(name) as member:
                while member.read(16 << 20):
                    pass
    out["zipfile_all_members"] = time.perf_counter() - start
    stream, crc = _config_member(path)
    libraries = {"zlib": zlib}
    for name, module in (("zlib_ng", "zlib_ng.zlib_ng"), ("isal_zlib", "isal.isal_zlib")):
        try:
            libraries[name] = __import__(module, fromlist=["x"])
        except ImportError:
            out[f"{name}_missing"] = True
    for name, library in libraries.items():
        start = time.perf_counter()
        inflate = library.decompressobj(-zlib.MAX_WBITS)
        check = 0
        # Output in 16 MiB pieces, memory bounded as the reader's is (a 16 MiB piece of
        # compressed input can inflate to gigabytes).
        pending = stream
        while pending:
            check = library.crc32(inflate.decompress(pending, 16 << 20), check)
            pending = inflate.unconsumed_tail
        while not inflate.eof:
            piece = inflate.decompress(b"", 16 << 20)
            if not piece:
                break
            check = library.crc32(piece, check)
        out[f"{name}_stream"] = time.perf_counter() - start
        out[f"{name}_crc_ok"] = check == crc
    return out


def measure_startup(path: str) -> dict:
    """What every featurize command pays before its first file: importing the libraries it
    needs, then Numba's first call of a cached kernel (its target context is made then, and
    it imports scipy.linalg to look for a BLAS), in a fresh process."""
    start = time.perf_counter()
    import numba  # noqa: F401
    import numpy as np
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    imported = time.perf_counter()
    from xlarank.kernels.configs import config_to_int8

    config_to_int8(np.zeros((1, 1, 18), dtype=np.float32))
    return {"imports_seconds": imported - start,
            "first_kernel_seconds": time.perf_counter() - imported}


def measure_command(path: str) -> dict:
    """Wall seconds of `xlarank featurize` on a one-file tree, start-up included."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        parts = Path(path).parts
        tree = Path(tmp) / "data" / Path(*parts[parts.index("npz"):]) if "npz" in parts \
            else None
        if tree is None:
            return {"skipped": "not in an npz/ tree"}
        tree.parent.mkdir(parents=True)
        (tree).symlink_to(Path(path).resolve())
        collection = "-".join(parts[parts.index("npz") + 1:-2])
        split = parts[-2]
        command = [str(Path(sys.executable).parent / "xlarank"), "featurize",
                   str(Path(tmp) / "data"), "--collection", collection, "--split", split,
                   "--out", str(Path(tmp) / "frame.parquet")]
        start = time.perf_counter()
        with tempfile.TemporaryFile() as said:
            proc = subprocess.Popen(command, stdout=said, stderr=said)
            # wait4: the command's own peak RSS, libraries included.
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) != 0:
                said.seek(0)
                raise SystemExit(f"{' '.join(command)} failed:\n{said.read().decode()[-2000:]}")
        shutil.rmtree(Path(tmp) / "data")
    return {"seconds": seconds, "peak_rss_mib": usage.ru_maxrss / 1024}


def measure_featurize_gnn(path: str) -> dict:
    """As `measure_featurize`, with the gnn family (random weights) added to the spec."""
    return measure_featurize(path, "gnn")


def measure_featurize_gru(path: str) -> dict:
    """As `measure_featurize`, with the gru family (random weights) added to the spec."""
    return measure_featurize(path, "gru")


def measure_featurize(path: str, embedding: str | None = None) -> dict:
    from xlarank.data.graph import load_graph
    from xlarank.features import featurize_graph, load_feature_spec

    spec = load_feature_spec(ROOT / "features" / "default.toml")
    if embedding == "gnn":
        spec = spec.with_weights("gnn")
    elif embedding == "gru":
        spec = spec.with_weights("gru")
    warm = sorted((ROOT.parent / "shared" / "tpugraphs" / "npz" / "layout").rglob("*.npz"))
    if warm:
        featurize_graph(load_graph(min(warm, key=lambda p: p.stat().st_size), configs=False), spec)
    before = rss_mib()
    start = time.perf_counter()
    graph = load_graph(path, configs=False)
    block = featurize_graph(graph, spec)
    seconds = time.perf_counter() - start
    dedup_start = time.perf_counter()
    distinct = len(featurize_graph(graph, spec, dedup=True))
    return {"seconds": seconds, "peak_rss_rise_mib": rss_mib() - before,
            "rows": len(block), "features": block.shape[1] - 4, "distinct_configs": distinct,
            "dedup_frame_seconds": time.perf_counter() - dedup_start}


def measure_reference(path: str, sample_configs: int = 40, sample_nodes: int = 40) -> dict:
    """Reference time per config (joined + means + changed aggregates) and per k-hop seed."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    import naive
    from xlarank.data.graph import load_graph
    from xlarank.features import load_feature_spec
    from xlarank.features.families.khop import FAMILY as KHOP
    from xlarank.features.tables import GraphTables

    spec = load_feature_spec(ROOT / "features" / "default.toml")
    graph = load_graph(path)
    tables = GraphTables(graph)
    t = tables.configurable
    khop = KHOP.prepare(graph, tables, spec)
    configs = graph.node_config_feat[:sample_configs]
    start = time.perf_counter()
    naive.layout_config_means(configs)
    naive.layout_config_joined(configs, t.dims, t.nbytes, t.layouts, t.operand_pos,
                               t.operand_info, t.operand_dims)
    naive.layout_changed_aggregates(configs, khop.layouts, khop.weights)
    per_config = (time.perf_counter() - start) / len(configs)
    seeds = graph.node_config_ids[:sample_nodes]
    values = np.ones((graph.n_nodes, 7))
    start = time.perf_counter()
    naive.khop_sums(graph.edge_index, graph.n_nodes, seeds, spec.k, values)
    per_seed = (time.perf_counter() - start) / len(seeds)
    return {"seconds_per_config": per_config, "seconds_per_configurable_node": per_seed,
            "sampled_configs": len(configs), "sampled_nodes": len(seeds),
            "seconds": per_config * graph.n_configs + per_seed * graph.n_configurable,
            "note": "per-config and per-node times on samples, scaled to the whole graph"}


def in_subprocess(kind: str, path: str) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
            f"import featurize as b; print(json.dumps(b.measure_{kind}({path!r})))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--make-graph", help="write the real-scale synthetic graph here")
    parser.add_argument("--out", default="bench/results/featurize.json")
    parser.add_argument("--repeat", type=int, default=7,
                        help="timed (decompress, featurize) pairs; the best of each is kept")
    args = parser.parse_args()
    if args.make_graph:
        from xlarank.data.collections import get_collection
        from xlarank.data.synth import BENCH_GRAPH, make_layout_file

        make_layout_file(Path(args.make_graph), get_collection("layout-xla-random"), 0, "test",
                         0, BENCH_GRAPH)
        return
    results = []
    for path in args.files:
        # Alternated, so a slow spell of a shared machine hits both sides alike.
        pairs = [(in_subprocess("decompress", path), in_subprocess("featurize", path))
                 for _ in range(args.repeat)]
        decompress = min((d for d, _ in pairs), key=lambda r: r["seconds"])
        featurize = min((f for _, f in pairs), key=lambda r: r["seconds"])
        pair_ratios = sorted(f["seconds"] / d["seconds"] for d, f in pairs)
        # Each embedding family's cost: pairs of runs with and without it, alternated.
        embeddings = {}
        for family in ("gnn", "gru"):
            family_pairs = [(in_subprocess("featurize", path),
                             in_subprocess(f"featurize_{family}", path))
                            for _ in range(max(3, args.repeat // 2))]
            plain = min(p["seconds"] for p, _ in family_pairs)
            with_family = min(g["seconds"] for _, g in family_pairs)
            embeddings[family] = {
                "featurize_seconds": plain, f"featurize_with_{family}_seconds": with_family,
                "overhead": with_family / plain - 1.0,
                "overhead_per_pair": sorted(g["seconds"] / p["seconds"] - 1.0
                                            for p, g in family_pairs)}
        reference = in_subprocess("reference", path)
        inflate = {}
        for _ in range(3):
            for key, value in in_subprocess("inflate", path).items():
                inflate[key] = min(inflate.get(key, value), value) if isinstance(
                    value, float) else value
        command = min((in_subprocess("command", path) for _ in range(3)),
                      key=lambda r: r.get("seconds", 0))
        startup = {}
        for _ in range(3):
            for key, value in in_subprocess("startup", path).items():
                startup[key] = min(startup.get(key, value), value)
        record = {
            "file": path,
            "data": "synthetic (xlarank synth)" if "bench" in path or "synth" in path
                    else "real TpuGraphs sample",
            "decompress": decompress, "featurize": featurize, "reference": reference,
            "featurize_over_decompress": featurize["seconds"] / decompress["seconds"],
            "featurize_over_decompress_per_pair": pair_ratios,
            "peak_rss_rise_over_config_mib": featurize["peak_rss_rise_mib"]
                                             / decompress["node_config_feat_mib"],
            "speedup_over_reference": reference["seconds"] / featurize["seconds"],
            "inflate": inflate, "command": command, "startup": startup,
            **embeddings,
        }
        results.append(record)
        print(f"{path}: featurize {featurize['seconds']:.2f}s = "
              f"{record['featurize_over_decompress']:.2f}x decompress "
              f"({decompress['seconds']:.2f}s; per pair {pair_ratios[0]:.2f}-"
              f"{pair_ratios[-1]:.2f}x, median {pair_ratios[len(pair_ratios) // 2]:.2f}x); "
              f"peak RSS rise {featurize['peak_rss_rise_mib']:.0f} MiB"
              f" = {record['peak_rss_rise_over_config_mib']:.2f}x node_config_feat "
              f"({decompress['node_config_feat_mib']:.0f} MiB); "
              f"{record['speedup_over_reference']:.0f}x faster than the reference; "
              f"gnn family adds {record['gnn']['overhead']:+.0%}, "
              f"gru family {record['gru']['overhead']:+.0%}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_record(out, {"results": results})


if __name__ == "__main__":
    main()
