"""Frames, eval indices, summaries and graphs a hostile probe crafted for evaluate, compare
and score: a frame of one row per row group (whose read took 35 times its size and then
aborted), zero normalizers, runtimes past 2^53, negative config indices and empty graph
ids; eval indices out of range, listed twice or one per graph; a summary of a NaN score
or an unknown collection; a layout graph of no configurable nodes or of equal configs;
and the Python API's graph_headline and in_graph_split given text and bad seeds. Each is
refused (or warned about) with one line naming the file, never a traceback, a NaN metric
or a run dropped without a word."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import xlarank
import xlarank.frame as frame_module
from helpers import npz_arrays, one_error_line, run
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import ArgumentTypeError, XlarankError, XlarankWarning
from xlarank.evaluate import compare_runs, load_eval_indices
from xlarank.frame import read_frame
from xlarank.score import evaluate_model, ranked_configs
from xlarank.target import ranking_target

LAYOUT = get_collection("layout-xla-default")


@pytest.fixture(scope="module")
def tile_valid(frames) -> Path:
    return frames["default", "tile-xla", "valid"]


def _rewrite(source: Path, out: Path, row_group_size: int | None = None, **columns) -> Path:
    """``source`` with ``columns`` replaced (name -> numpy array), its xlarank metadata
    kept."""
    meta = {k: v for k, v in pq.read_metadata(source).metadata.items()
            if k != b"ARROW:schema"}
    table = pq.read_table(source).replace_schema_metadata(meta)
    for name, values in columns.items():
        i = table.column_names.index(name)
        array = pa.array(values, type=table.schema.field(name).type)
        table = table.set_column(i, table.schema.field(name), array)
    pq.write_table(table, out, row_group_size=row_group_size)
    return out


def _graph_ids(path: Path) -> np.ndarray:
    return pq.read_table(path, columns=["graph_id"])["graph_id"].to_numpy()


def _evaluate(frame: Path, tmp_path: Path, *more):
    return run("evaluate", frame, "--random", "--out", tmp_path / "o.csv", *more)


# 1. A frame of one row per row group: refused before its rows are read.
def test_a_frame_of_one_row_per_row_group_is_refused(tile_valid, tmp_path, monkeypatch):
    bad = _rewrite(tile_valid, tmp_path / "groups.parquet", row_group_size=1)
    graphs = len(set(_graph_ids(bad)))
    assert pq.ParquetFile(bad).metadata.num_row_groups > graphs
    full_reads = []
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: full_reads.append(a))
    result = _evaluate(bad, tmp_path)
    one_error_line(result, str(bad), "row groups", f"{graphs} graph")
    assert full_reads == [] and not (tmp_path / "o.csv").exists()
    with pytest.raises(XlarankError, match="row groups"):
        read_frame(bad)


def test_a_footer_of_thousands_of_row_groups_is_refused_before_parsing(tile_valid, tmp_path,
                                                                      monkeypatch):
    # The probe's 133 MB file had a 74 MB footer; a small file and a lower floor stand in.
    bad = _rewrite(tile_valid, tmp_path / "groups.parquet", row_group_size=1)
    monkeypatch.setattr(frame_module, "FOOTER_BYTES_FLOOR", 1024)
    parsed = []
    monkeypatch.setattr(pq, "read_metadata", lambda *a, **k: parsed.append(a))
    one_error_line(_evaluate(bad, tmp_path), str(bad), "parquet footer")
    assert parsed == [] and not (tmp_path / "o.csv").exists()


def test_a_frame_of_a_row_group_per_graph_still_reads(tile_valid, tmp_path):
    meta = {k: v for k, v in pq.read_metadata(tile_valid).metadata.items()
            if k != b"ARROW:schema"}
    table = pq.read_table(tile_valid).replace_schema_metadata(meta)
    ids = _graph_ids(tile_valid)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    path = tmp_path / "per_graph.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for begin, end in zip(starts, np.r_[starts[1:], len(ids)], strict=True):
            writer.write_table(table.slice(begin, end - begin))
    assert pq.ParquetFile(path).metadata.num_row_groups == len(starts) > 1
    frame, _ = read_frame(path)
    assert len(frame) == table.num_rows


# 2. Zero normalizers: refused at read, never a NaN metric.
@pytest.mark.parametrize("which", ["all", "one graph"])
def test_a_zero_normalizer_is_refused_naming_the_frame_and_graph(tile_valid, tmp_path,
                                                                 which):
    normalizer = pq.read_table(tile_valid)["normalizer"].to_numpy().copy()
    ids = _graph_ids(tile_valid)
    graph = ids[-1] if which == "one graph" else ids[0]
    normalizer[ids == graph] = 0
    bad = _rewrite(tile_valid, tmp_path / "norm.parquet", normalizer=normalizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no divide-by-zero on the way
        result = _evaluate(bad, tmp_path)
    one_error_line(result, str(bad), "normalizer", f"graph {graph}")
    assert not (tmp_path / "o.csv").exists()


def test_the_tile_target_refuses_a_zero_normalizer(tile_valid):
    frame, _ = read_frame(tile_valid)
    frame.loc[frame.index[3], "normalizer"] = 0
    with pytest.raises(XlarankError, match=f"graph {frame['graph_id'].iloc[3]}: normalizer"):
        ranking_target(frame, is_tile=True)


# 3. Eval indices out of range, listed twice, or one per graph.
def _indices(tmp_path: Path, mapping: dict, name: str = "ei.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(mapping))
    return path


def test_eval_indices_out_of_range_are_refused(tile_valid, tmp_path):
    graph = str(_graph_ids(tile_valid)[0])
    indices = _indices(tmp_path, {graph: [0, 1, 10**9]})
    result = _evaluate(tile_valid, tmp_path, "--eval-indices", indices)
    one_error_line(result, str(indices), f"graph {graph}", "1000000000", "out of range")
    past = _indices(tmp_path, {graph: [0, 1, 2**40]}, "past.json")
    with pytest.raises(XlarankError, match="out of range"):
        load_eval_indices(past)


def test_eval_indices_listed_twice_are_refused(tile_valid, tmp_path):
    graph = str(_graph_ids(tile_valid)[0])
    indices = _indices(tmp_path, {graph: [1, 1, 1, 2]})
    result = _evaluate(tile_valid, tmp_path, "--eval-indices", indices)
    one_error_line(result, str(indices), f"graph {graph}", "more than once")


def test_eval_indices_of_one_config_leave_the_graph_out_with_a_warning(tile_valid,
                                                                        tmp_path):
    ids = list(dict.fromkeys(map(str, _graph_ids(tile_valid))))
    indices = _indices(tmp_path, {ids[0]: [0], **{g: [0, 1, 2] for g in ids[1:]}})
    with pytest.warns(XlarankWarning, match=f"fewer than 2 configs.*{ids[0]}"):
        result = evaluate_model(tile_valid, None, eval_indices=indices)
    assert ids[0] not in set(result.per_graph["graph_id"])
    assert len(result.per_graph) == len(ids) - 1
    cli = _evaluate(tile_valid, tmp_path, "--eval-indices", indices)
    assert cli.exit_code == 0, cli.output
    assert [line for line in cli.stderr.splitlines() if line.startswith("warning:")]
    every = _indices(tmp_path, {g: [0] for g in ids}, "every.json")
    one_error_line(_evaluate(tile_valid, tmp_path, "--eval-indices", every, "--out",
                             tmp_path / "every.csv"), str(tile_valid), "fewer than 2")


# 4. compare: a summary of a NaN score or an unknown collection.
@pytest.mark.parametrize("field, value, needle", [
    ("score", float("nan"), "not a finite number"),
    ("collection", "tile:nope", "unknown collection")])
def test_compare_refuses_a_summary_it_would_drop(tmp_path, field, value, needle):
    folder = tmp_path / "reports"
    folder.mkdir()
    record = {"run": "r", "collection": "tile:xla", "headline": "score", "score": 0.5}
    (folder / "good.summary.json").write_text(json.dumps(record))
    bad = folder / "bad.summary.json"
    bad.write_text(json.dumps({**record, "run": "s", field: value}))
    one_error_line(run("compare", folder), str(bad), needle)
    with pytest.raises(XlarankError, match=needle):
        compare_runs(folder)


def test_compare_takes_a_collection_slug(tmp_path):
    record = {"run": "r", "collection": "tile-xla", "headline": "score", "score": 0.5}
    (tmp_path / "a.summary.json").write_text(json.dumps(record))
    assert list(compare_runs(tmp_path).index) == [("tile:xla", "score")]


# 5. score: a layout graph of no configurable nodes, or of configs all equal.
@pytest.fixture(scope="module")
def default_valid_file(tiny_data) -> Path:
    return split_files(tiny_data, LAYOUT, "valid")[0]


def test_score_refuses_a_graph_of_no_configurable_nodes(models, default_valid_file, tmp_path):
    arrays = npz_arrays(default_valid_file)
    arrays["node_config_ids"] = arrays["node_config_ids"][:0]
    arrays["node_config_feat"] = arrays["node_config_feat"][:, :0]
    graph = tmp_path / "none.npz"
    np.savez(graph, **arrays)
    result = run("score", graph, "--models", models["layout-xla-default"], "--collection",
                 LAYOUT.id, "--out", tmp_path / "o.csv")
    one_error_line(result, str(graph), "no configurable nodes", "nothing to rank")
    assert not (tmp_path / "o.csv").exists()
    with pytest.raises(XlarankError, match="no configurable nodes"):
        ranked_configs(load_graph(graph, collection=LAYOUT),
                       xlarank.load_model(models["layout-xla-default"]))


def test_score_warns_of_configs_all_equal(models, default_valid_file, tmp_path):
    arrays = npz_arrays(default_valid_file)
    arrays["node_config_feat"] = np.broadcast_to(arrays["node_config_feat"][:1],
                                                 arrays["node_config_feat"].shape).copy()
    graph = tmp_path / "same.npz"
    np.savez(graph, **arrays)
    ranker = xlarank.load_model(models["layout-xla-default"])
    with pytest.warns(XlarankWarning, match="all equal.*arbitrary"):
        order, _ = ranked_configs(load_graph(graph, collection=LAYOUT), ranker)
    assert len(order) == len(arrays["config_runtime"])
    result = run("score", graph, "--models", models["layout-xla-default"], "--collection",
                 LAYOUT.id, "--out", tmp_path / "o.csv")
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert any(line.startswith("warning:") and "all equal" in line for line in lines)


# 6. Runtimes past 2^53, which float64 ties.
def test_runtimes_past_2_53_are_refused(tile_valid, tmp_path):
    n = pq.read_metadata(tile_valid).num_rows
    runtime = np.full(n, 2**63 - 1, np.int64) - np.arange(n)
    bad = _rewrite(tile_valid, tmp_path / "big.parquet", runtime=runtime)
    one_error_line(_evaluate(bad, tmp_path), str(bad), "runtime", "2^53")


# 7. Negative config indices and empty graph ids.
def test_negative_config_indices_are_refused(tile_valid, tmp_path):
    n = pq.read_metadata(tile_valid).num_rows
    bad = _rewrite(tile_valid, tmp_path / "neg.parquet",
                   config_index=-np.arange(n, dtype=np.int32) - 1)
    one_error_line(_evaluate(bad, tmp_path), str(bad), "config_index -1")


def test_empty_graph_ids_are_refused(tile_valid, tmp_path):
    n = pq.read_metadata(tile_valid).num_rows
    bad = _rewrite(tile_valid, tmp_path / "gid.parquet", graph_id=np.array([""] * n))
    one_error_line(_evaluate(bad, tmp_path), str(bad), "graph_id is empty")


# 8. The Python API.
@pytest.fixture(scope="module")
def tile_graph(tiny_data):
    return load_graph(split_files(tiny_data, get_collection("tile-xla"), "valid")[0])


def test_graph_headline_refuses_text_scores(tile_graph):
    n = tile_graph.n_configs
    with pytest.raises(ArgumentTypeError, match="graph_headline: score"):
        xlarank.graph_headline(tile_graph, np.array(["a"] * n))
    with pytest.raises(ArgumentTypeError, match="graph_headline: score"):
        xlarank.graph_headline(tile_graph, [10**400] * n)
    with pytest.raises(ArgumentTypeError, match="graph_headline: runtime"):
        xlarank.graph_headline(tile_graph, np.zeros(n), np.array(["a"] * n))
    assert np.isfinite(xlarank.graph_headline(tile_graph, np.arange(n, dtype=float)))


@pytest.mark.parametrize("seed", [-1, 2**64, 2**31])
def test_in_graph_split_refuses_seeds_the_other_apis_refuse(tile_graph, seed):
    with pytest.raises(XlarankError, match="in_graph_split: seed"):
        xlarank.in_graph_split(tile_graph, 0.5, seed=seed)
    with pytest.raises(ArgumentTypeError):
        xlarank.in_graph_split(tile_graph, 0.5, seed=1.5)


def test_evaluate_warns_of_a_nan_headline_that_compare_would_refuse(frames, tmp_path):
    source = frames["default", "layout-xla-default", "valid"]
    n = pq.read_metadata(source).num_rows
    flat = _rewrite(source, tmp_path / "flat.parquet", runtime=np.full(n, 1000, np.int64))
    with pytest.warns(XlarankWarning, match="no graph has a defined kendall_tau"):
        evaluate_model(flat, None, out=tmp_path / "r" / "o.csv")
    one_error_line(run("compare", tmp_path / "r"), "o.summary.json", "not a finite number")
