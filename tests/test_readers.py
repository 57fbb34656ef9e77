"""What xlarank reads: only regular files (a FIFO or a device would hang it), npz members
checked against each other from their headers before any is inflated, structured files
(cards, specs, eval indices, frame metadata) whose depth or integers Python refuses, and
seeds, which are whole numbers >= 0 everywhere."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    TILE,
    dataset_copy,
    one_error_line,
    run,
)
from xlarank.data.collections import split_files
from xlarank.data.graph import load_graph
from xlarank.data.npzstream import NpzStream
from xlarank.errors import (
    BadGraphError,
    BadInputError,
    SpecError,
    XlarankError,
)
from xlarank.files import open_regular, read_structured, regular_file
from xlarank.frame import read_meta


@contextlib.contextmanager
def fifo(path: Path):
    """A FIFO at ``path``; should a reader block on it, a watchdog opens it for writing
    after a while and closes it, so a failing test fails instead of hanging."""
    os.mkfifo(path)
    stop = threading.Event()

    def unblock():
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        while not stop.is_set():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                time.sleep(0.05)

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        yield path
    finally:
        stop.set()
        watchdog.join()


# ---------------------------------------------------------------- regular files only

def test_regular_file_refuses_what_is_no_regular_file(tmp_path):
    with fifo(tmp_path / "f"):
        with pytest.raises(BadInputError, match="FIFO"):
            regular_file(tmp_path / "f", "model file")
        with pytest.raises(BadInputError, match="FIFO"):
            open_regular(tmp_path / "f")
    with pytest.raises(BadInputError, match="device node"):
        regular_file("/dev/zero")
    with pytest.raises(BadInputError, match="folder"):
        regular_file(tmp_path)
    with pytest.raises(BadInputError, match="not found"):
        regular_file(tmp_path / "missing")
    (tmp_path / "ok").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "ok")
    assert regular_file(tmp_path / "link") == tmp_path / "link"
    with open_regular(tmp_path / "link") as handle:
        assert handle.read() == b"x"


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_graph_that_is_no_regular_file_is_a_bad_graph(tmp_path, special):
    path = tmp_path / "g.npz"
    with fifo(path) if special == "fifo" else contextlib.nullcontext():
        if special != "fifo":
            path.symlink_to(special)
        with pytest.raises(BadGraphError, match="FIFO" if special == "fifo" else "device"):
            load_graph(path)


@pytest.mark.parametrize("what", ["feature spec", "model card", "eval indices file"])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_structured_file_that_is_no_regular_file_is_refused(tmp_path, what, special):
    path = tmp_path / "x.json"
    with fifo(path) if special == "fifo" else contextlib.nullcontext():
        if special != "fifo":
            path.symlink_to(special)
        with pytest.raises(SpecError, match="not a regular file"):
            read_structured(path, what, SpecError)


def test_rank_graph_refuses_a_fifo_as_measured_csv_and_graph(tiny_data, tmp_path):
    graph = split_files(tiny_data, TILE, "train")[0]
    with fifo(tmp_path / "m.csv") as measured:
        one_error_line(run("rank-graph", graph, "--measured", measured, "--out",
                           tmp_path / "r.csv"), "FIFO")
        one_error_line(run("suggest", graph, "--measured", measured, "--out",
                           tmp_path / "r.csv"), "FIFO")
    (tmp_path / "ok.csv").write_text("config_index,runtime\n0,1\n1,2\n")
    with fifo(tmp_path / "g.npz") as npz:
        one_error_line(run("rank-graph", npz, "--measured", tmp_path / "ok.csv", "--out",
                           tmp_path / "r.csv"), "FIFO")


def test_a_frame_that_is_a_fifo_is_refused(tmp_path):
    with fifo(tmp_path / "f.parquet") as frame:
        one_error_line(run("evaluate", frame, "--random"), "FIFO")


def test_gnn_weights_that_are_no_regular_file_or_empty_are_refused(tiny_data, tmp_path):
    graph = split_files(tiny_data, TILE, "train")[0]
    args = ["featurize", graph, "--collection", "tile-xla", "--split", "train", "--out",
            tmp_path / "f.parquet", "--embedding", "gnn", "--gnn-weights"]
    with fifo(tmp_path / "w.npz") as weights:
        one_error_line(run(*args, weights), "FIFO")
    (tmp_path / "empty.npz").write_bytes(b"")
    result = run(*args, tmp_path / "empty.npz")
    one_error_line(result, "empty")
    assert "Aborted" not in result.output
    (tmp_path / "cut.npz").write_bytes(b"\x93NUMPY\x01\x00")
    one_error_line(run(*args, tmp_path / "cut.npz"), "not a gnn weights .npz")


# ---------------------------------------------------------------- npz headers first

def _tile_arrays(n=5, c=4):
    return {"node_feat": np.zeros((n, 140), np.float32), "node_opcode": np.ones(n, np.uint8),
            "edge_index": np.array([[1, 0]], np.int64),
            "config_feat": np.zeros((c, 24), np.float32),
            "config_runtime": np.arange(1, c + 1, dtype=np.int64),
            "config_runtime_normalizers": np.ones(c, np.int64)}


@pytest.mark.parametrize("key, shape, needle", [
    ("node_feat", (200_000, 140), "node_opcode: shape (5,), expected (200000,)"),
    ("config_feat", (300_000, 24), "config_feat: shape (300000, 24), expected (4, 24)"),
    ("config_runtime_normalizers", (2_000_000,), "config_runtime_normalizers: shape"),
    ("edge_index", (1_000_000, 3), "edge_index: shape (1000000, 3)"),
])
def test_shapes_that_disagree_are_refused_from_the_headers(tmp_path, monkeypatch, key,
                                                           shape, needle):
    arrays = _tile_arrays()
    arrays[key] = np.zeros(shape, arrays[key].dtype)
    path = tmp_path / "g.npz"
    np.savez_compressed(path, **arrays)
    inflated = []
    read = NpzStream.read
    monkeypatch.setattr(NpzStream, "read", lambda self, k: inflated.append(k) or read(self, k))
    with pytest.raises(BadGraphError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_graph(path)
    assert inflated == [], "no member is inflated before the shapes agree"


def test_a_layout_config_tensor_of_another_shape_is_refused_from_its_header(tmp_path,
                                                                            monkeypatch):
    n, c = 4, 3
    arrays = {"node_feat": np.zeros((n, 140), np.float32),
              "node_opcode": np.ones(n, np.uint8), "edge_index": np.array([[1, 0]]),
              "node_config_ids": np.array([0, 1]),
              "node_config_feat": np.zeros((c, 3, 18), np.float32),
              "config_runtime": np.arange(1, c + 1), "node_splits": np.array([[0]])}
    np.savez_compressed(tmp_path / "g.npz", **arrays)
    inflated = []
    read = NpzStream.read
    monkeypatch.setattr(NpzStream, "read", lambda self, k: inflated.append(k) or read(self, k))
    with pytest.raises(BadGraphError, match="node_config_feat: shape"):
        load_graph(tmp_path / "g.npz")
    assert inflated == []


def test_well_formed_files_still_load(tiny_data):
    for path in split_files(tiny_data, TILE, "train")[:2]:
        assert load_graph(path).n_configs > 0


# ---------------------------------------------------------------- deep or huge structures

DEEP_JSON = "[" * 100_000 + "]" * 100_000
HUGE_INT_JSON = '{"a": ' + "9" * 5000 + "}"
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
HUGE_INT_TOML = "a = " + "9" * 5000 + "\n"


@pytest.mark.parametrize("name, text", [("x.json", DEEP_JSON), ("x.json", HUGE_INT_JSON),
                                        ("x.toml", DEEP_TOML), ("x.toml", HUGE_INT_TOML)])
def test_deep_nesting_or_huge_integers_are_one_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match=r"x\.(json|toml): feature spec is"):
        read_structured(path, "feature spec", SpecError)


@pytest.mark.parametrize("text", [DEEP_JSON, HUGE_INT_JSON])
def test_eval_indices_and_specs_nested_deep_are_one_error_line(frames, tmp_path, text):
    path = tmp_path / "idx.json"
    path.write_text(text)
    frame = frames["default", "tile-xla", "valid"]
    one_error_line(run("evaluate", frame, "--random", "--eval-indices", path), "idx.json")
    spec = tmp_path / "spec.toml"
    spec.write_text(DEEP_TOML if text == DEEP_JSON else HUGE_INT_TOML)
    one_error_line(run("featurize", frame.parent, "--spec", spec, "--collection", "tile-xla",
                       "--split", "train", "--out", tmp_path / "f.parquet"), "spec.toml")


@pytest.mark.parametrize("text", [DEEP_JSON, HUGE_INT_JSON])
def test_frame_metadata_nested_deep_is_one_error(frames, tmp_path, text):
    import pyarrow.parquet as pq

    table = pq.read_table(frames["default", "tile-xla", "valid"])
    pq.write_table(table.replace_schema_metadata({b"xlarank": text.encode()}),
                   tmp_path / "f.parquet")
    one_error_line(run("evaluate", tmp_path / "f.parquet", "--random"),
                   "frame metadata")


def test_a_card_nested_deep_is_a_bad_model(tmp_path):
    from xlarank.errors import BadModelError
    from xlarank.rank.model import load_model

    (tmp_path / "card.json").write_text(json.dumps({"a": 1})[:-1] + ', "b": ' + DEEP_JSON + "}")
    with pytest.raises(BadModelError, match="card"):
        load_model(tmp_path)


# ---------------------------------------------------------------- seeds

def test_check_seed():
    from xlarank.seeds import check_seed

    assert check_seed(0) == 0 and check_seed(np.int64(7)) == 7
    with pytest.raises(XlarankError, match="--seed -1: a seed is a whole number >= 0"):
        check_seed(-1, "--seed")
    with pytest.raises(TypeError):
        check_seed(1.5)
    with pytest.raises(TypeError):
        check_seed(True)


@pytest.mark.parametrize("weights", ["random:-1", "random:x", "random:"])
def test_random_weights_of_a_bad_seed_are_one_error_line(tiny_data, tmp_path, weights):
    graph = split_files(tiny_data, TILE, "train")[0]
    for family in ("gnn", "gru"):
        one_error_line(run("featurize", graph, "--collection", "tile-xla", "--split",
                           "train", "--out", tmp_path / "f.parquet", "--embedding", family,
                           f"--{family}-weights", weights), weights, ">= 0")


def _negative_seed_commands(tiny_data, frames, spec_dir, tmp_path):
    graph = split_files(tiny_data, TILE, "train")[0]
    measured = tmp_path / "m.csv"
    measured.write_text("config_index,runtime\n0,1000\n1,2000\n2,1500\n")
    frame = frames["default", "tile-xla", "valid"]
    return {
        "synth": ["synth", tmp_path / "synth", "--preset", "tiny"],
        "suggest": ["suggest", graph, "--out", tmp_path / "s.csv"],
        "evaluate --random": ["evaluate", frame, "--random"],
        "tune": ["tune", frames["default", "tile-xla", "train"], frame, "--spec",
                 spec_dir / "lgbm.toml", "--out", tmp_path / "t.toml", "--trials", "2"],
        "gnn-train": ["gnn-train", tiny_data, "--collection", "tile-xla", "--out",
                      tmp_path / "w.npz", "--epochs", "1"],
        "rank-graph": ["rank-graph", graph, "--measured", measured, "--out",
                       tmp_path / "r.csv"],
        "rank-graph --system": ["rank-graph", graph, "--measured", measured, "--out",
                                tmp_path / "r.csv", "--system", "gru"],
    }


@pytest.mark.parametrize("command", ["synth", "suggest", "evaluate --random", "tune",
                                     "gnn-train", "rank-graph", "rank-graph --system"])
def test_a_negative_seed_is_one_error_line(tiny_data, frames, spec_dir, tmp_path, command):
    args = _negative_seed_commands(tiny_data, frames, spec_dir, tmp_path)[command]
    result = run(*args, "--seed", "-1")
    one_error_line(result, "seed -1", ">= 0")
    assert not (tmp_path / "synth").exists()


def test_the_tuner_refuses_a_negative_seed(tiny_data):
    from xlarank.rank.tuner import Tuner

    with pytest.raises(XlarankError, match="seed -1"):
        Tuner(split_files(tiny_data, TILE, "train")[0], seed=-1)


def zero_config_tile(source: Path, target: Path) -> Path:
    arrays = dict(np.load(source).items())
    for key in ("config_feat", "config_runtime", "config_runtime_normalizers"):
        arrays[key] = arrays[key][:0]
    target.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(target, **arrays)
    return target


def huge_claim_tile(source: Path, target: Path) -> Path:
    """A tile file whose config_feat header and zip directory both claim 509 TiB."""
    arrays = dict(np.load(source).items())
    rows = (509 << 40) // 96
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (rows, 24)})
    body = header.getvalue() + bytes(4099)
    claimed = len(header.getvalue()) + rows * 96
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, value)
            archive.writestr(key + ".npy", body if key == "config_feat" else member.getvalue())
        # The zip directory, written on close, claims what the header claims.
        archive.getinfo("config_feat.npy").file_size = claimed
    return target


def non_utf8_name(source: Path, target_dir: Path) -> Path:
    target = target_dir / os.fsdecode(b"bad\xff.npz")
    shutil.copyfile(source, target)
    return target


BAD_INPUTS = {"zero configs": ("zero_config", "no configs"),
              "huge claim": ("huge", "config_feat: claims"),
              "non-UTF-8 name": ("name", "not valid UTF-8")}


def make_bad_input(kind: str, data: Path) -> Path:
    train = data / "npz/tile/xla/train"
    source = sorted(train.glob("*.npz"))[0]
    if kind == "zero_config":
        return zero_config_tile(source, train / "zero.npz")
    if kind == "huge":
        return huge_claim_tile(source, train / "huge.npz")
    return non_utf8_name(source, train)


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_file_is_refused_or_skipped_by_featurize(tiny_data, tmp_path, repo_specs,
                                                           case):
    kind, fault = BAD_INPUTS[case]
    data = dataset_copy(tiny_data, tmp_path)
    bad = make_bad_input(kind, data)
    args = ["featurize", data, "--spec", repo_specs.features("default"), "--collection",
            "tile-xla", "--split", "train", "--out", tmp_path / "f.parquet"]
    one_error_line(run(*args), fault)
    with pytest.raises(BadGraphError, match=fault) as caught:
        load_graph(bad)
    assert caught.value.path == bad
    result = run(*args, "--skip-bad")
    assert result.exit_code == 0, result.stderr
    assert "skipped" in result.stderr and fault in result.stderr
    assert len(read_meta(tmp_path / "f.parquet").skipped) == 1


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_file_is_listed_as_skipped_by_score(tiny_data, tmp_path, models, case):
    kind, fault = BAD_INPUTS[case]
    data = dataset_copy(tiny_data, tmp_path)
    make_bad_input(kind, data)
    files = sorted((data / "npz/tile/xla/train").iterdir())
    args = ["score", *files, "--models", models["lightgbm"], "--out", tmp_path / "s.csv"]
    # The small test model may give a good file's configs one score: a warning first.
    one_error_line(run(*args), fault, warnings=True)
    result = run(*args, "--skip-bad")
    assert result.exit_code == 0, result.stderr
    assert "skipped" in result.stderr and fault in result.stderr
    assert f"scored {len(files) - 1} files" in result.stdout
