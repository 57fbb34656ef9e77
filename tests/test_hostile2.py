"""Hostile inputs, round two: compressed-looking CSVs, damaged frames and summaries, cyclic
graphs, API calls of the wrong types, silent drops from the means, and what a new user
meets first (help texts, the demo's output, the report). Each case is one clear error or
warning, or now works."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import small
from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import BadGraphError, MismatchError, XlarankError
from xlarank.frame import read_frame
from xlarank.kernels.graph import cycle_edge
from xlarank.rank.ingraph import rank_graph
from xlarank.rank.measured import read_measured
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import ranked_configs

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def run(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def one_error_line(result, *needles: str, warnings: bool = False) -> str:
    """Exit 2 and a single ``error:`` line on stderr holding every needle; with
    ``warnings``, ``warning:`` lines about the input may come before it."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    if warnings:
        lines = [line for line in lines if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def models(frames, spec_dir, tmp_path_factory):
    """Small saved models of the default spec: tile-xla, layout-xla-default."""
    folder = tmp_path_factory.mktemp("hostile2_models")
    out = {}
    for slug in ("tile-xla", "layout-xla-default"):
        table, meta = read_frame(frames["default", slug, "train"])
        spec = small(load_ranker_spec(spec_dir / "lgbm.toml"), rounds=5)
        out[slug] = train_ranker(table, meta, spec).save(folder / slug)
    return out


def first_file(tiny_data: Path, slug: str, split: str = "train", min_nodes: int = 0) -> Path:
    files = split_files(tiny_data, get_collection(slug), split)
    return next(f for f in files if len(np.load(f)["node_opcode"]) >= min_nodes)


# ---------------------------------------------------------------- measured CSVs

PLAIN_CSV = "config_index,runtime\n0,1000\n1,2000\n2,1500\n"


def _zip_of_two(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.csv", PLAIN_CSV)
        z.writestr("b.csv", PLAIN_CSV)


def _truncated_gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(PLAIN_CSV.encode() * 50)[:40])


MEASURED_FAULTS = {
    # name: (file name, writer, needle in the error)
    "plain text named .xz": ("m.xz", lambda p: p.write_text(PLAIN_CSV), "xz-compressed"),
    "plain text named .bz2": ("m.bz2", lambda p: p.write_text(PLAIN_CSV), "bz2-compressed"),
    "plain text named .gz": ("m.gz", lambda p: p.write_text(PLAIN_CSV), "gz-compressed"),
    "a zip of two files": ("m.zip", _zip_of_two, "zip-compressed"),
    "a truncated gzip": ("m.csv.gz", _truncated_gzip, "gz-compressed"),
    "garbage named .tar": ("m.tar", lambda p: p.write_text(PLAIN_CSV), "tar-compressed"),
    "an empty file": ("m.csv", lambda p: p.write_text(""), "empty"),
    "a header alone": ("m.csv", lambda p: p.write_text("config_index,runtime\n"),
                       "no measured rows"),
    "an extra field in the first row": (
        "m.csv", lambda p: p.write_text("config_index,runtime\n0,1000,extra\n1,2000\n"),
        "row 1 (line 2) has extra fields"),
    "an extra field in a later row": (
        "m.csv", lambda p: p.write_text("config_index,runtime\n0,1000\n1,2000,x\n"),
        "row 2 (line 3) has extra fields"),
    "binary bytes": ("m.csv", lambda p: p.write_bytes(b"\xff\xfe\x00\x81" * 20), "measured"),
}


@pytest.mark.parametrize("case", MEASURED_FAULTS)
def test_bad_measured_csv_is_one_error_naming_it(tiny_data, tmp_path, case):
    name, write, needle = MEASURED_FAULTS[case]
    measured = tmp_path / name
    write(measured)
    graph = first_file(tiny_data, "tile-xla")
    result = run("rank-graph", graph, "--measured", measured, "--out", tmp_path / "r.csv")
    line = one_error_line(result, str(measured), needle)
    assert str(graph) not in line, "the CSV is at fault, not the graph"


def test_a_real_gzip_csv_is_read(tmp_path):
    path = tmp_path / "m.csv.gz"
    path.write_bytes(gzip.compress(PLAIN_CSV.encode()))
    table = read_measured(path)
    assert table["config_index"].tolist() == [0, 1, 2]
    assert table["runtime"].tolist() == [1000.0, 2000.0, 1500.0]


def test_extra_columns_with_a_header_are_still_ignored(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("config_index,runtime,note\n0,1000,a\n1,2000,b\n")
    assert read_measured(path)["runtime"].tolist() == [1000.0, 2000.0]


def test_a_header_alone_is_no_error_for_read_measured(tmp_path):
    """A cold start (no runtimes yet) is legal for readers other than rank-graph."""
    path = tmp_path / "m.csv"
    path.write_text("config_index,runtime\n")
    assert read_measured(path).empty


# ---------------------------------------------------------------- damaged frames

def rewrite_frame(source: Path, target: Path, meta=None, table=None) -> Path:
    """A copy of a frame with its ``xlarank`` metadata record changed by ``meta`` (the
    record -> new bytes or record) and its table by ``table`` (pa.Table -> pa.Table)."""
    data = pq.read_table(source)
    record = json.loads(pq.read_metadata(source).metadata[b"xlarank"])
    if table is not None:
        data = table(data)
    raw = json.dumps(record).encode()
    if meta is not None:
        changed = meta(record)
        raw = changed if isinstance(changed, bytes) else json.dumps(changed).encode()
    pq.write_table(data.replace_schema_metadata({b"xlarank": raw}), target)
    return target


def _without(key):
    def change(record):
        del record[key]
        return record
    return change


def _set(key, value):
    def change(record):
        record[key] = value
        return record
    return change


def _set_column(name, values):
    def change(table):
        return table.set_column(table.schema.get_field_index(name), name, values(table))
    return change


def _with_runtime(fill):
    def values(table):
        runtime = table["runtime"].to_numpy().astype(np.float64)
        runtime[3] = fill
        return pa.array(runtime)
    return _set_column("runtime", values)


def _not_contiguous(table):
    order = np.r_[np.arange(1, table.num_rows), 0]
    return table.take(pa.array(order))


def _feature(table, k=0):
    return [n for n in table.column_names
            if n not in ("graph_id", "config_index", "runtime", "normalizer")][k]


FRAME_FAULTS = {
    "metadata not JSON": (dict(meta=lambda r: b"{not json"), "is not JSON"),
    "metadata a list": (dict(meta=lambda r: b"[1, 2]"), "is a JSON list"),
    "metadata a string": (dict(meta=lambda r: b'"frame"'), "is a JSON str"),
    "no feature_names": (dict(meta=_without("feature_names")), "lacks feature_names"),
    "no collection": (dict(meta=_without("collection")), "lacks collection"),
    "no spec": (dict(meta=_without("spec")), "lacks spec"),
    "feature_names a string": (dict(meta=_set("feature_names", "abc")),
                               "'feature_names' is a str"),
    "feature_names of numbers": (dict(meta=_set("feature_names", [1, 2])), "non-strings"),
    "spec a list": (dict(meta=_set("spec", [1])), "'spec' is a list"),
    "spec without a hash": (dict(meta=_set("spec", {"name": "default"})),
                            "lacks its name or hash"),
    "unknown collection": (dict(meta=_set("collection", "tile:gpu")), "unknown collection"),
    "split a number": (dict(meta=_set("split", 3)), "'split' is a int"),
    "a feature column renamed": (
        dict(table=lambda t: t.rename_columns(
            [c if c != _feature(t) else "renamed" for c in t.column_names])),
        "missing (renamed or dropped)"),
    "a feature column dropped": (dict(table=lambda t: t.drop_columns([_feature(t, 3)])),
                                 "missing (renamed or dropped)"),
    "runtime of strings": (dict(table=_set_column(
        "runtime", lambda t: pa.array([str(v) for v in t["runtime"].to_pylist()]))),
        "'runtime' holds string"),
    "a feature of strings": (dict(table=lambda t: _set_column(
        _feature(t), lambda t2: pa.array(["x"] * t2.num_rows))(t)), "holds string"),
    "no graph_id": (dict(table=lambda t: t.drop_columns(["graph_id"])), "graph_id"),
    "no runtime": (dict(table=lambda t: t.drop_columns(["runtime"])), "runtime"),
    "a NaN runtime": (dict(table=_with_runtime(np.nan)), "row 3 (graph "),
    "a negative runtime": (dict(table=_with_runtime(-5.0)), "row 3 (graph "),
    "a zero runtime in a labelled frame": (dict(table=_with_runtime(0.0)), "row 3 (graph "),
    "rows not contiguous per graph": (dict(table=_not_contiguous), "not contiguous"),
    "a column named twice": (dict(table=lambda t: t.rename_columns(
        [c if c != _feature(t, 1) else _feature(t) for c in t.column_names])),
        "more than one column named"),
    "no rows": (dict(table=lambda t: t.slice(0, 0)), "no rows"),
}
FRAME_COMMANDS = ("train", "evaluate", "tune", "report")


def frame_command(command: str, frame: Path, good: Path, model: Path, tmp_path: Path):
    out = tmp_path / "out"
    return {
        "train": ("train", frame, "--spec", "tile-xla", "--out", out),
        "evaluate": ("evaluate", frame, "--model", model),
        "tune": ("tune", frame, good, "--spec", "tile-xla", "--trials", 1,
                 "--out", tmp_path / "t.toml"),
        "report": ("report", frame, "--model", model, "--out", out),
    }[command]


@pytest.mark.parametrize("command", FRAME_COMMANDS)
@pytest.mark.parametrize("case", FRAME_FAULTS)
def test_a_damaged_frame_is_one_error_naming_it(frames, models, tmp_path, case, command):
    change, needle = FRAME_FAULTS[case]
    good = frames["default", "tile-xla", "valid"]
    frame = rewrite_frame(good, tmp_path / "bad.parquet", **change)
    result = run(*frame_command(command, frame, good, models["tile-xla"], tmp_path))
    one_error_line(result, str(frame), needle)


def test_frame_faults_are_xlarank_errors_from_read_frame(frames, tmp_path):
    good = frames["default", "tile-xla", "valid"]
    for case, (change, needle) in FRAME_FAULTS.items():
        frame = rewrite_frame(good, tmp_path / f"{len(case)}.parquet", **change)
        with pytest.raises(XlarankError, match=re.escape(needle)):
            read_frame(frame)


def test_a_test_frame_of_zero_runtimes_still_reads(frames):
    table, _ = read_frame(frames["default", "tile-xla", "test"])
    assert not table["runtime"].any()


def test_a_frame_of_all_nan_features_does_not_train(frames, tmp_path):
    good = frames["default", "tile-xla", "train"]

    def all_nan(table):
        for name in table.column_names[4:]:
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.array(np.full(table.num_rows, np.nan, np.float32)))
        return table

    frame = rewrite_frame(good, tmp_path / "nan.parquet", table=all_nan)
    result = run("train", frame, "--spec", "tile-xla", "--out", tmp_path / "m")
    # The tiny data's one-config kernel is warned about first.
    one_error_line(result, str(frame), "every feature value", "NaN", warnings=True)


def test_the_test_split_message_names_the_frame(frames, models):
    frame = frames["default", "tile-xla", "test"]
    one_error_line(run("evaluate", frame, "--model", models["tile-xla"]), str(frame),
                   "no runtimes")


@pytest.mark.parametrize("typed", ["tile-xla", "MODELS"])
def test_a_spec_of_another_collection_is_named_as_typed(frames, tmp_path, typed):
    frame = frames["default", "layout-xla-default", "train"]
    spec = str(ROOT / "models/tile-xla.toml") if typed == "MODELS" else typed
    result = run("train", frame, "--spec", spec, "--out", tmp_path / "m")
    line = one_error_line(result, str(frame), f"booster spec '{spec}' is made for tile:xla")
    assert "'xlarank'" not in line


def test_a_frame_without_the_models_features_is_a_mismatch(frames, models, tmp_path):
    """Metadata and columns agree, but a model column is gone: named, not a KeyError."""
    good = frames["default", "tile-xla", "valid"]

    def drop_first(record):
        record["feature_names"] = record["feature_names"][1:]
        return record

    frame = rewrite_frame(good, tmp_path / "f.parquet", meta=drop_first,
                          table=lambda t: t.drop_columns([_feature(t)]))
    for args in (("evaluate", frame, "--model", models["tile-xla"]),
                 ("report", frame, "--model", models["tile-xla"], "--out", tmp_path / "r")):
        one_error_line(run(*args), str(frame), "of the model's feature column(s)")


def test_tune_names_the_spec_as_typed(frames, tmp_path):
    train = frames["default", "layout-xla-default", "train"]
    valid = frames["default", "layout-xla-default", "valid"]
    result = run("tune", train, valid, "--spec", "tile-xla", "--trials", 1,
                 "--out", tmp_path / "t.toml")
    one_error_line(result, str(train), "booster spec 'tile-xla' is made for tile:xla")


# ---------------------------------------------------------------- compare's summaries

SUMMARY_FAULTS = {
    "a list": ("[1, 2]", "is a JSON list"),
    "a string": ('"tau"', "is a JSON str"),
    "a number": ("3", "is a JSON int"),
    "null": ("null", "is a JSON NoneType"),
    "no headline": ('{"run": "a", "collection": "tile:xla"}', "lacks headline"),
    "no run": ('{"collection": "tile:xla", "headline": "score", "score": 1}', "lacks run"),
    "headline not a number": (
        '{"run": "a", "collection": "tile:xla", "headline": "score", "score": "x"}',
        "is not a number"),
    "headline value missing": (
        '{"run": "a", "collection": "tile:xla", "headline": "score"}', "is not a number"),
    "headline a list": ('{"run": "a", "collection": "c", "headline": [1]}', "must be text"),
    "not JSON": ("{run:", "is not valid JSON"),
}


@pytest.mark.parametrize("case", SUMMARY_FAULTS)
def test_compare_refuses_a_bad_summary_naming_it(tmp_path, case):
    text, needle = SUMMARY_FAULTS[case]
    good = {"run": "r", "collection": "tile:xla", "headline": "score", "score": 0.5}
    (tmp_path / "a.summary.json").write_text(json.dumps(good))
    bad = tmp_path / "b.summary.json"
    bad.write_text(text)
    one_error_line(run("compare", tmp_path), str(bad), needle)


# ---------------------------------------------------------------- eval indices

def test_eval_indices_that_empty_a_graph_warn_naming_it(frames, models, tmp_path):
    frame = frames["default", "tile-xla", "valid"]
    table, _ = read_frame(frame)
    ids = list(pd.unique(table["graph_id"]))
    indices = {g: [0, 1] for g in ids}
    indices[ids[0]] = []
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(indices))
    result = run("evaluate", frame, "--model", models["tile-xla"], "--eval-indices", path)
    assert result.exit_code == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, result.stderr
    assert ids[0] in warning[0] and "left out of the means" in warning[0]
    assert f"({len(ids) - 1} graphs)" in result.stdout


@pytest.mark.parametrize("value", ['"a"', "1.5", "-1", "true", "null", "[1]"])
def test_eval_indices_that_are_not_config_indices_are_refused(frames, models, tmp_path,
                                                              value):
    frame = frames["default", "tile-xla", "valid"]
    graph = str(read_frame(frame)[0]["graph_id"].iloc[0])
    path = tmp_path / "eval.json"
    path.write_text(f'{{"{graph}": [0, {value}]}}')
    result = run("evaluate", frame, "--model", models["tile-xla"], "--eval-indices", path)
    one_error_line(result, str(path), f"graph {graph}", "is not a config index")


# ---------------------------------------------------------------- cycles and self-loops

def graph_with_edges(tiny_data: Path, tmp_path: Path, change) -> Path:
    source = first_file(tiny_data, "tile-xla", min_nodes=6)
    arrays = dict(np.load(source))
    arrays["edge_index"] = change(arrays["edge_index"].copy(), len(arrays["node_opcode"]))
    path = tmp_path / "npz/tile/xla/train/g.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


EDGE_FAULTS = {
    "self-loop": (lambda e, n: np.r_[e, [[2, 2]]], "[2, 2] is a self-loop"),
    "two-cycle": (lambda e, n: np.r_[e, [[1, 3], [3, 1]]], "lies on a cycle"),
    "a cycle through every node": (
        lambda e, n: np.r_[[[i + 1, i] for i in range(n - 1)], [[0, n - 1]]],
        "lies on a cycle"),
    "cycle only": (lambda e, n: np.array([[1, 0], [2, 1], [0, 2]]), "lies on a cycle"),
}


@pytest.mark.parametrize("case", EDGE_FAULTS)
def test_a_cyclic_edge_index_is_refused_naming_the_edge(tiny_data, tmp_path, case):
    change, needle = EDGE_FAULTS[case]
    path = graph_with_edges(tiny_data, tmp_path, change)
    with pytest.raises(BadGraphError, match=re.escape(needle)) as caught:
        load_graph(path)
    assert caught.value.path == path
    result = run("featurize", tmp_path, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet")
    one_error_line(result, str(path), "edge_index")


def test_a_dag_out_of_topological_order_is_accepted(tiny_data, tmp_path):
    def renumber(edges, n):
        return (n - 1) - edges  # every edge now points from a lower to a higher id

    path = graph_with_edges(tiny_data, tmp_path, renumber)
    assert not (np.load(path)["edge_index"][:, 0] > np.load(path)["edge_index"][:, 1]).all()
    assert load_graph(path).n_nodes >= 6


@pytest.mark.parametrize("seed", range(6))
def test_cycle_edge_agrees_with_networkx(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(1, 15))
        m = int(rng.integers(0, 30))
        src = rng.integers(0, n, m).astype(np.int64)
        dst = rng.integers(0, n, m).astype(np.int64)
        if rng.random() < 0.5:  # mostly acyclic: keep edges pointing down, add one back
            keep = src > dst
            src, dst = src[keep], dst[keep]
            if len(src) and rng.random() < 0.5:
                src, dst = np.r_[src, dst[0]], np.r_[dst, src[0]]
        graph = nx.MultiDiGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
        edge = cycle_edge(src, dst, n)
        assert (edge < 0) == nx.is_directed_acyclic_graph(graph)
        if edge >= 0:  # the edge named closes a cycle: its head reaches its tail
            assert src[edge] == dst[edge] or nx.has_path(graph, int(dst[edge]), int(src[edge]))


def test_every_real_sample_passes_the_acyclic_check(samples):
    for path in samples:
        edges = np.load(path)["edge_index"]
        assert cycle_edge(edges[:, 0].copy(), edges[:, 1].copy(), int(edges.max()) + 1) < 0
        load_graph(path, configs=False)


@pytest.mark.parametrize("value", [3e38, -3e38, 1e19])
def test_huge_node_features_are_refused_with_a_clear_message(tiny_data, tmp_path, value):
    source = first_file(tiny_data, "tile-xla")
    arrays = dict(np.load(source))
    arrays["node_feat"] = arrays["node_feat"].copy()
    arrays["node_feat"][:, 30] = value
    path = tmp_path / "npz/tile/xla/train/g.npz"
    path.parent.mkdir(parents=True)
    np.savez(path, **arrays)
    with pytest.raises(BadGraphError, match="node 0, column 30: .* is beyond 1e\\+18"):
        load_graph(path)
    result = run("featurize", tmp_path, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet")
    one_error_line(result, str(path), "beyond")
    assert "RuntimeWarning" not in result.output


# ---------------------------------------------------------------- the Python API

@pytest.fixture(scope="module")
def layout_case(tiny_data):
    path = first_file(tiny_data, "layout-xla-default")
    graph = load_graph(path)
    rows = np.arange(min(graph.n_configs, 30))
    measured = pd.DataFrame({"config_index": rows,
                             "runtime": graph.config_runtime[rows].astype(np.float64)})
    return path, measured, rank_graph(path, measured, threads=1)


def test_rank_graph_takes_a_graph_loaded_without_configs(layout_case):
    path, measured, expected = layout_case
    graph = load_graph(path, configs=False)
    pd.testing.assert_frame_equal(rank_graph(graph, measured, threads=1), expected)


@pytest.mark.parametrize("form", ["csv str", "csv Path", "dict"])
def test_rank_graph_takes_a_csv_path_or_a_dict(layout_case, tmp_path, form):
    path, measured, expected = layout_case
    csv = tmp_path / "m.csv"
    measured.to_csv(csv, index=False)
    given = {"csv str": str(csv), "csv Path": csv,
             "dict": {k: measured[k].tolist() for k in measured}}[form]
    pd.testing.assert_frame_equal(rank_graph(path, given, threads=1), expected)


@pytest.mark.parametrize("call, needle", [
    (lambda p, m: rank_graph(p, None), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(p, 5), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(p, [1, 2]), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(None, m), "graph: expected an npz path"),
    (lambda p, m: rank_graph(3, m), "graph: expected an npz path"),
    (lambda p, m: rank_graph(p, m, seed="x"), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, seed=1.5), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, seed=True), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, threads="2"), "threads: expected an int"),
    (lambda p, m: rank_graph(p, m, prior=5), "prior: expected a model directory"),
    (lambda p, m: load_graph(None), "load_graph: expected an npz path"),
    (lambda p, m: load_model(None), "load_model: expected a model directory"),
    (lambda p, m: ranked_configs(None, None), "graph: expected an npz path"),
    (lambda p, m: ranked_configs(p, 5), "ranker: expected a model"),
])
def test_api_calls_of_the_wrong_type_are_type_errors(layout_case, capfd, call, needle):
    path, measured, _ = layout_case
    with pytest.raises(TypeError, match=re.escape(needle)):
        call(path, measured)
    assert "[LightGBM]" not in capfd.readouterr().out


@pytest.mark.parametrize("threads", [-3, -1])
def test_rank_graph_refuses_negative_threads(layout_case, threads):
    path, measured, _ = layout_case
    with pytest.raises(XlarankError, match=f"threads={threads}"):
        rank_graph(path, measured, threads=threads)


@pytest.mark.parametrize("graph_slug, model_slug", [
    ("tile-xla", "layout-xla-default"),
    ("layout-xla-default", "tile-xla"),
    ("layout-nlp-default", "layout-xla-default"),
    ("layout-xla-random", "layout-xla-default"),
])
def test_ranked_configs_refuses_a_model_of_another_collection(tiny_data, models, graph_slug,
                                                              model_slug):
    graph = load_graph(first_file(tiny_data, graph_slug), configs=False)
    with pytest.raises(MismatchError, match=f"trained on {get_collection(model_slug).id}"):
        ranked_configs(graph, load_model(models[model_slug]))


def test_ranked_configs_of_a_loose_file_checks_tile_against_layout(tiny_data, models,
                                                                    tmp_path):
    loose = tmp_path / "g.npz"
    shutil.copy(first_file(tiny_data, "tile-xla"), loose)
    with pytest.raises(MismatchError, match="a tile graph"):
        ranked_configs(load_graph(loose), load_model(models["layout-xla-default"]))


def test_ranked_configs_takes_paths_as_the_readme_shows(tiny_data, models):
    path = first_file(tiny_data, "tile-xla")
    model = load_model(models["tile-xla"])
    order, score = ranked_configs(load_graph(path, configs=False), model)
    by_path, by_path_score = ranked_configs(path, models["tile-xla"])
    np.testing.assert_array_equal(order, by_path)
    np.testing.assert_array_equal(score, by_path_score)


# ---------------------------------------------------------------- what a new user sees

def command_names() -> list[str]:
    import typer.main

    return sorted(typer.main.get_command(app).commands)


WIDE = {"COLUMNS": "400", "TERMINAL_WIDTH": "400"}


@pytest.mark.parametrize("command", ["", *command_names()])
def test_help_shows_plain_metavars_and_only_options_that_exist(command):
    import typer.main

    group = typer.main.get_command(app)
    result = run(*([command] if command else []), "--help", env=WIDE)
    assert result.exit_code == 0, result.output
    text = result.output
    assert not re.search(r"<(path|str|int|bool|float|list\[)", text), text
    assert not re.search(r"\{[a-z_]+\}", text.splitlines()[1] if text else ""), text
    target = group.commands[command] if command else group

    def options(of) -> set[str]:
        return {o for p in of.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}

    known = {"--help", "--version", "--verbose", *options(target)}
    # An option of another command is fine where that command is named beside it
    # ("featurize with them by --gnn-weights"); the root lists every command.
    for name, other in group.commands.items():
        if not command or re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            known |= options(other)
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))
    assert mentioned <= known, sorted(mentioned - known)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    for param in target.params:
        if param.param_type_name == "argument":
            assert param.name.upper() in usage, usage


@pytest.mark.parametrize("command, literal", [
    ("gnn-train", "pip install 'xlarank[gnn]'"),
    ("rank-graph", "pip install 'xlarank[gnn]'"),
    ("specs", "feature or booster [both]"),
    ("featurize", "[features/frames/<spec name>]"),
    ("train", "[the packaged default of the frame's collection]"),
])
def test_brackets_in_help_are_shown_literally(command, literal):
    result = run(command, "--help", env=WIDE)
    flat = " ".join(result.output.split())
    assert " ".join(literal.split()) in flat, result.output


def test_submit_help_does_not_mention_workers():
    assert "--workers" not in run("submit", "--help", env=WIDE).output


def test_output_off_a_terminal_is_not_wrapped(tmp_path):
    long_dir = tmp_path / ("a-rather-long-folder-name-" * 4) / "synth"
    result = subprocess.run([sys.executable, "-m", "xlarank", "synth", str(long_dir),
                             "--preset", "tiny"], capture_output=True, text=True, check=True,
                            env={**_env(), "COLUMNS": ""})
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80, result.stdout
    assert result.stderr == "", "no progress bar off a terminal"


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_the_demo_prints_the_table_and_names_its_log():
    text = (ROOT / "Makefile").read_text()
    demo = text[text.index("\ndemo:"):text.index("\n# A scheduler")]
    assert "DEMO_LOG" in demo and "tee $(DEMO_LOG)" in demo
    assert "compare" in demo


# ---------------------------------------------------------------- the report

def test_report_counts_are_ints_and_worst_is_on_top(frames, models, tmp_path):
    out = tmp_path / "report"
    result = run("report", frames["default", "tile-xla", "valid"], "--model",
                 models["tile-xla"], "--out", out)
    assert result.exit_code == 0, result.stderr
    metrics = pd.read_csv(out / "metrics.csv")
    assert pd.api.types.is_integer_dtype(metrics["graphs"])
    page = (out / "index.html").read_text()
    graphs = int(metrics["graphs"].iloc[0])
    assert f"<td>{graphs}</td>" in page and f"<td>{graphs}.0</td>" not in page


def test_per_graph_plot_draws_the_worst_graph_at_the_top():
    from xlarank.report import _per_graph_plot

    table = pd.DataFrame({"graph_id": ["a", "b", "c"], "score": [0.9, 0.1, 0.5]})
    fig = _per_graph_plot({"m": table}, "m", "score", "1 - slowdown@5")
    ax = fig.axes[0]
    assert ax.yaxis_inverted()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "b"  # y = 0, the worst, drawn topmost on an inverted axis


def test_tile_scatter_keeps_the_top_region_only():
    from xlarank.report import TILE_SCATTER_TOP, tile_scatter_points

    rng = np.random.default_rng(0)
    measured = rng.permutation(7000) + 1.0
    predicted = rng.permutation(7000) + 1.0
    x, y = tile_scatter_points(measured, predicted)
    expected = ((measured <= TILE_SCATTER_TOP) | (predicted <= TILE_SCATTER_TOP)).sum()
    assert len(x) == expected < 60
    assert x.max() <= TILE_SCATTER_TOP + 0.5 and y.max() <= TILE_SCATTER_TOP + 0.5


# ---------------------------------------------------------------- featurize's inputs

@pytest.mark.parametrize("form", ["folder", "nested folder", "file"])
def test_featurize_takes_a_plain_folder_with_collection_and_split(tiny_data, tmp_path, form):
    files = split_files(tiny_data, get_collection("tile-xla"), "train")
    loose = tmp_path / "loose" / ("deeper" if form == "nested folder" else "")
    loose.mkdir(parents=True)
    for f in files:
        shutil.copy(f, loose / f.name)
    given = loose / files[0].name if form == "file" else tmp_path / "loose"
    out = tmp_path / "f.parquet"
    result = run("featurize", given, "--collection", "tile-xla", "--split", "train",
                 "--out", out)
    assert result.exit_code == 0, result.stderr
    table, meta = read_frame(out)
    assert meta.collection == "tile:xla" and meta.split == "train"
    assert table["graph_id"].nunique() == (1 if form == "file" else len(files))


def test_featurize_of_a_plain_folder_without_collection_says_what_to_give(tiny_data, tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(first_file(tiny_data, "tile-xla"), loose / "g.npz")
    one_error_line(run("featurize", loose, "--out", tmp_path / "f.parquet"), str(loose),
                   "give one --collection and one --split")
