"""Inputs a hostile probe crafted for rank-graph and suggest: measured CSVs with a repeated
column or a megabyte value, unknown config indices (the CSV is named), a graph of no
configurable nodes, npz archives with two members of one name or bad node_splits, every
config measured already, and seeds past the boosters' 31 bits. Each is refused (or
warned about) with one line naming the file, never a traceback or a silent wrap."""

from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import npz_arrays, one_error_line, run
from xlarank.data.collections import get_collection
from xlarank.data.graph import load_graph
from xlarank.errors import BadGraphError, XlarankError, XlarankWarning
from xlarank.rank.ingraph import rank_graph
from xlarank.rank.measured import MeasuredError, check_measured, read_measured
from xlarank.rank.tuner import suggest_next
from xlarank.seeds import MAX_BOOSTER_SEED, check_booster_seed

LAYOUT = get_collection("layout-xla-random")


def _write(tmp_path: Path, arrays: dict, name: str = "g") -> Path:
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return path


# 1. A repeated column name.
@pytest.mark.parametrize("header, column", [("config_index,runtime,runtime", "runtime"),
                                            ("config_index,config_index,runtime",
                                             "config_index")])
def test_a_measured_csv_with_a_repeated_column_is_refused(tmp_path, layout_file, header,
                                                          column):
    csv = tmp_path / "m.csv"
    csv.write_text(header + "\n0,1,5\n1,2,6\n")
    with pytest.raises(MeasuredError, match=f"m.csv: column '{column}' appears more"):
        read_measured(csv)
    for command in ("rank-graph", "suggest"):
        result = run(command, layout_file, "--measured", csv, "--out", tmp_path / "o.csv")
        one_error_line(result, str(csv), repr(column))
    table = pd.DataFrame([[0, 5, 6]], columns=["config_index", "runtime", "runtime"])
    with pytest.raises(MeasuredError, match="'runtime' appears more than once"):
        check_measured(table, "t")


# 2. An echoed value is cut short.
def test_an_error_echoes_a_short_prefix_of_a_huge_value(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,5\n10," + "9" * 100_000 + "x\n")
    with pytest.raises(MeasuredError) as caught:
        read_measured(csv)
    message = str(caught.value)
    assert len(message) < 300 and "..." in message and "row 2" in message


# 3. The CSV is named; a graph of no configurable nodes says so.
def test_an_unknown_config_index_names_the_measured_csv_and_the_graph(tmp_path, layout_file):
    n = load_graph(layout_file).n_configs
    csv = tmp_path / "m.csv"
    csv.write_text(f"config_index,runtime\n0,5\n{n + 3},6\n")
    result = run("rank-graph", layout_file, "--measured", csv, "--out", tmp_path / "o.csv")
    one_error_line(result, str(csv), str(layout_file), f"config_index {n + 3}")
    with pytest.raises(MeasuredError, match=f"^{csv}: config_index"):
        rank_graph(layout_file, read_measured(csv))
    with pytest.raises(MeasuredError, match=f"^{csv}: config_index"):
        rank_graph(layout_file, csv)


def test_a_graph_of_no_configurable_nodes_says_so(tmp_path, layout_file):
    arrays = npz_arrays(layout_file)
    arrays["node_config_ids"] = arrays["node_config_ids"][:0]
    arrays["node_config_feat"] = arrays["node_config_feat"][:, :0]
    graph = _write(tmp_path, arrays)
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,5\n1,6\n")
    result = run("rank-graph", graph, "--measured", csv, "--out", tmp_path / "o.csv")
    one_error_line(result, str(graph), "no configurable nodes")


# 4. Two members of one name.
def test_an_npz_with_two_members_of_one_name_is_refused(tmp_path, layout_file):
    arrays = npz_arrays(layout_file)
    path = tmp_path / "dup.npz"
    with zipfile.ZipFile(path, "w") as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
        for key, value in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, value)
            archive.writestr(f"{key}.npy", buffer.getvalue())
        buffer = io.BytesIO()
        np.save(buffer, np.zeros_like(arrays["config_runtime"]))
        archive.writestr("config_runtime.npy", buffer.getvalue())
    with pytest.raises(BadGraphError, match="two members named 'config_runtime.npy'"):
        load_graph(path)
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,5\n1,6\n")
    result = run("rank-graph", path, "--measured", csv, "--out", tmp_path / "o.csv")
    one_error_line(result, str(path), "config_runtime.npy")


# 5. node_splits.
@pytest.mark.parametrize("make, needle", [
    (lambda n: np.array([[0, n + 100]]), "0.."),
    (lambda n: np.array([[-5, 1]]), "0.."),
    (lambda n: np.array([[0, n, 1]]), "strictly increasing"),
    (lambda n: np.array([[0, 1, 1]]), "strictly increasing"),
    (lambda n: np.zeros((1, 0), np.int64), "shape (1, 0)"),
    (lambda n: np.zeros((1, 1, 2), np.int64), "shape (1, 1, 2)"),
    (lambda n: np.array([0, 1]), "shape (2,)"),
    (lambda n: np.array([[0, 1], [2, 3]]), "shape (2, 2)"),
    (lambda n: np.array([[0.0, 1.5]]), "expected integers"),
])
def test_bad_node_splits_are_refused(tmp_path, layout_file, make, needle):
    arrays = npz_arrays(layout_file)
    arrays["node_splits"] = make(arrays["node_feat"].shape[0])
    path = _write(tmp_path, arrays)
    with pytest.raises(BadGraphError) as caught:
        load_graph(path)
    assert str(path) in str(caught.value) and "node_splits" in str(caught.value)
    assert needle in str(caught.value)


def test_node_splits_may_end_at_the_node_count(tmp_path, layout_file):
    arrays = npz_arrays(layout_file)
    n = arrays["node_feat"].shape[0]
    arrays["node_splits"] = np.array([[0, n]])
    assert load_graph(_write(tmp_path, arrays)).node_splits.tolist() == [0, n]


# 6. Every config measured.
def test_suggest_warns_when_every_config_is_measured(tmp_path, tile_file):
    n = load_graph(tile_file).n_configs
    csv = tmp_path / "all.csv"
    csv.write_text("config_index,runtime\n"
                   + "".join(f"{i},{1000 + i}\n" for i in range(n)))
    with pytest.warns(XlarankWarning, match="every config .* is measured"):
        table = suggest_next(tile_file, csv, 4)
    assert table.empty
    result = run("suggest", tile_file, "--measured", csv, "--out", tmp_path / "o.csv")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "nothing is left to suggest" in result.stderr


# 7. Seeds past 31 bits.
@pytest.mark.parametrize("seed", [2**32, MAX_BOOSTER_SEED + 1, -1])
def test_rank_graph_and_suggest_refuse_a_seed_that_would_wrap(tmp_path, tile_file, seed):
    csv = tmp_path / "m.csv"
    csv.write_text("config_index,runtime\n0,100\n1,300\n2,200\n")
    for command in ("rank-graph", "suggest"):
        result = run(command, tile_file, "--measured", csv, "--out", tmp_path / "o.csv",
                     "--seed", seed)
        one_error_line(result, f"seed {seed}")
    with pytest.raises(XlarankError, match=f"seed {seed}"):
        rank_graph(tile_file, csv, seed=seed)
    with pytest.raises(XlarankError, match=f"seed {seed}"):
        suggest_next(tile_file, csv, 2, seed=seed)


def test_the_largest_booster_seed_is_taken():
    assert check_booster_seed(MAX_BOOSTER_SEED) == MAX_BOOSTER_SEED
    with pytest.raises(TypeError):
        check_booster_seed(1.5)
