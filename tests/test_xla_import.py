"""xlarank import: XLA tuning records and HLO dumps to the dataset's npz files.

The real records in ../shared/tpugraphs/raw/ hold it to the official converter: the layout
record's module must give the official file's node_feat, node_opcode, edge_index and
node_config_ids, column by column.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import protowrite as pw
from conftest import SAMPLES
from xlarank.cli import app
from xlarank.data.graph import load_graph
from xlarank.data.xla import import_records, read_records
from xlarank.data.xla.encode import N_NODE_FEATURES
from xlarank.data.xla.opcodes import OPCODE_IDS
from xlarank.errors import XlarankError, XlarankWarning

RAW = SAMPLES / "raw"
LAYOUT_RECORD = RAW / "module_tuning_data_layout.pb"
TILE_RECORD = RAW / "op_tuning_data.pb"
OFFICIAL = RAW / "unet_3d.4x4.bf16.graph.npz"
# Runs per kernel as the raw README lists them; kernel 1 has 2 failed runs of its 581.
TILE_RUNS = [61, 581, 16, 16, 16, 23, 10, 11, 5, 3, 3, 2, 3, 2, 2]
runner = CliRunner()


def _raw(path: Path) -> Path:
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} missing (required in CI)")
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="module")
def layout_import():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_records(_raw(LAYOUT_RECORD), drop_failed_runs=True)[0]


# Columns the import cannot match, with the reason. None today: every column matches.
UNMATCHED_COLUMNS: dict[int, str] = {}


def test_layout_record_reproduces_the_official_node_features_column_by_column(layout_import):
    official = np.load(_raw(OFFICIAL))
    ours = layout_import.arrays["node_feat"]
    assert ours.dtype == np.float32 and ours.shape == official["node_feat"].shape == (3163, 140)
    for column in range(N_NODE_FEATURES):
        if column in UNMATCHED_COLUMNS:
            continue
        differ = np.flatnonzero(ours[:, column] != official["node_feat"][:, column])
        assert not len(differ), (f"node_feat column {column} differs at nodes {differ[:5]}: "
                                 f"{ours[differ[:5], column]} vs "
                                 f"{official['node_feat'][differ[:5], column]}")


@pytest.mark.parametrize("key", ["node_opcode", "edge_index", "node_config_ids"])
def test_layout_record_reproduces_the_official_graph(layout_import, key):
    official = np.load(_raw(OFFICIAL))[key]
    ours = layout_import.arrays[key]
    assert ours.dtype == official.dtype
    np.testing.assert_array_equal(ours, official)


def test_layout_record_configs_and_runtimes(layout_import):
    arrays = layout_import.arrays
    # 122 runs, 10 failed: the 112 measured configs the raw README names.
    assert arrays["node_config_feat"].shape == (112, 62, 18)
    assert arrays["node_config_feat"].dtype == np.float32
    assert arrays["config_runtime"].dtype == np.int64 and (arrays["config_runtime"] > 0).all()
    values = np.unique(arrays["node_config_feat"])
    assert values.min() == -1 and values.max() <= 5
    # Convolutions configure output, input and kernel; reshapes leave the kernel open.
    opcodes = arrays["node_opcode"][arrays["node_config_ids"]]
    kernel = arrays["node_config_feat"][:, :, 12:]
    assert (kernel[:, opcodes == OPCODE_IDS["reshape"]] == -1).all()
    assert (kernel[:, opcodes == OPCODE_IDS["convolution"]] != -1).any()
    assert arrays["node_splits"].shape[0] == 1 and arrays["node_splits"][0, 0] == 0
    assert arrays["node_splits"][0, -1] == len(arrays["node_opcode"])


def test_failed_runs_stop_the_import_unless_dropped():
    with pytest.raises(XlarankError, match=r"10 of 122 runs failed.*--drop-failed-runs"):
        read_records(_raw(LAYOUT_RECORD))


def test_tile_record_gives_fifteen_readable_kernels(tmp_path):
    graphs = import_records([_raw(TILE_RECORD)], tmp_path / "out", drop_failed_runs=True)
    assert [g.arrays["config_runtime"].size for g in graphs] == \
        [n - 2 if i == 1 else n for i, n in enumerate(TILE_RUNS)]
    for graph in graphs:
        arrays = graph.arrays
        assert arrays["config_feat"].shape[1] == 24 and arrays["config_feat"].dtype == np.float32
        normalizer = np.unique(arrays["config_runtime_normalizers"])
        assert len(normalizer) == 1 and normalizer[0] in arrays["config_runtime"]
        # The dataset's names: the kernel's name, then its fingerprint in hex.
        assert re.fullmatch(r"[a-z]+\.\d+_-?[0-9a-f]+", graph.name)
        loaded = load_graph(tmp_path / "out" / graph.relative_path)
        assert loaded.n_configs == arrays["config_runtime"].size
        np.testing.assert_array_equal(loaded.node_feat, arrays["node_feat"])
    ratios = [g.arrays["config_runtime"].max() / g.arrays["config_runtime_normalizers"][0]
              for g in graphs]
    assert 25 < max(ratios) < 27  # the record's slowest config: 26x its kernel's default


def test_tile_config_features_follow_the_converter():
    graphs = read_records(_raw(TILE_RECORD), drop_failed_runs=True)
    feat = graphs[0].arrays["config_feat"][0]
    # Kernel 0's first run sets output bounds [2, 26, 4, 2] only: kernel and input bounds
    # are empty lists, whose sum and product are 0.
    np.testing.assert_array_equal(feat[:8], 0)
    np.testing.assert_array_equal(feat[8:16], [2, 26, 4, 2, 0, 0, 34, 2 * 26 * 4 * 2])
    np.testing.assert_array_equal(feat[16:], 0)


def test_opcode_table_is_format_md_s():
    text = (SAMPLES.parent / "FORMAT.md").read_text()
    section = text.split("## Opcode ids", 1)[1]
    listed = {name: int(i) for i, name in re.findall(r"(\d+)\s+([a-z][a-z0-9-]*)", section)
              if name != "means"}  # "0 means unknown"
    assert listed == OPCODE_IDS


# ---------------------------------------------------------------- made-up modules
def _module(instructions_by_comp, entry_id=1, name="m"):
    comps = [pw.computation(cid, cname, insts, root) for cid, cname, insts, root in
             instructions_by_comp]
    return pw.module(name, comps, entry_id)


def _chain_module():
    fused = (2, "fused_computation", [pw.instruction(10, "parameter", f9=0),
                                      pw.instruction(11, "tanh", [10])], 11)
    entry = (1, "main", [pw.instruction(1, "parameter", f9=0),
                         pw.instruction(2, "parameter", f9=1),
                         pw.instruction(3, "dot", [1, 2]),
                         pw.instruction(4, "fusion", [3], called=[2]),
                         pw.instruction(5, "add", [4, 4, 3])], 5)
    return _module([fused, entry])


def test_nested_computations_are_flattened_in_module_order(tmp_path):
    path = tmp_path / "m.hlo.pb"
    path.write_bytes(pw.message([(1, _chain_module())]))
    graph = read_records(path, candidates=4)[0]
    arrays = graph.arrays
    # Fused computation first (module order), then the entry computation.
    assert arrays["node_opcode"].tolist() == [OPCODE_IDS[o] for o in
                                              ("parameter", "tanh", "parameter", "parameter",
                                               "dot", "fusion", "add")]
    # Users before operands; repeats of an operand once; the fusion to its fused root.
    assert arrays["edge_index"].tolist() == [[1, 0], [4, 2], [4, 3], [5, 1], [5, 4], [6, 4],
                                             [6, 5]]
    assert arrays["node_feat"][[1, 6], 0].tolist() == [1, 1]  # roots of their computations
    assert arrays["node_feat"][3, 30] == 1  # parameter_number
    # The dot is the one configurable node outside a fusion; the test split, unmeasured.
    assert arrays["node_config_ids"].tolist() == [4]
    assert graph.split == "test" and not arrays["config_runtime"].any()
    configs = arrays["node_config_feat"]
    assert configs.shape == (4, 1, 18)
    assert len(np.unique(configs.reshape(4, -1), axis=0)) == 4  # distinct candidates


def _write(tmp_path, payload: bytes, name="r.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(payload)
    return path


def _layout_record(runs, nodes=(4,)):
    return pw.message([(1, _chain_module())] + [(3, r) for r in runs] +
                      [(4, n) for n in nodes])


GOOD_RUNS = [pw.layout_run([[[1, 0], [1, 0], [0, 1]]], 100, default=True),
             pw.layout_run([[[0, 1], [1, 0], [0, 1]]], 90)]


def test_a_made_up_layout_record_round_trips(tmp_path):
    graph = read_records(_write(tmp_path, _layout_record(GOOD_RUNS)))[0]
    assert graph.arrays["config_runtime"].tolist() == [100, 90]
    assert graph.arrays["node_config_feat"][1, 0, :8].tolist() == [0, 1, -1, -1, -1, -1, 1, 0]


BAD_RECORDS = {
    "truncated": (lambda: _layout_record(GOOD_RUNS)[:-7], "truncated"),
    "another message": (lambda: pw.message([(1, 5), (2, "text"), (7, [(1, 2)])]),
                        "not a TpuGraphs tuning record"),
    "not protobuf": (lambda: b"PK\x03\x04 an npz, say", "not a"),
    "no entry computation": (
        lambda: pw.message([(1, pw.module("m", [pw.computation(
            1, "main", [pw.instruction(1, "parameter")], 1)], None))] + [(3, GOOD_RUNS[0])] +
            [(4, 0)]),
        "names no entry computation"),
    "missing operand": (
        lambda: pw.message([(1, _module([(1, "main", [pw.instruction(1, "parameter"),
                                                      pw.instruction(2, "dot", [1, 99])],
                                          2)]))]),
        "refers to operand 99"),
    "failed runs": (lambda: _layout_record([GOOD_RUNS[0], pw.layout_run(
        [[[1, 0]]], 5, error=True)]), "1 of 2 runs failed"),
    "no default run": (lambda: _layout_record([GOOD_RUNS[1]]), "no default run"),
    "node count": (lambda: _layout_record(GOOD_RUNS, nodes=(4, 5)), "configures 1 nodes"),
    "node past the module": (lambda: _layout_record(GOOD_RUNS, nodes=(70,)), "past the"),
    "a huge length claimed": (lambda: pw.varint(1 << 3 | 2) + pw.varint(1 << 40) + b"x",
                              "claims"),
    "nesting": (lambda: pw.message([(1, _nested(200))]), "nested"),
    "operand cycle": (
        lambda: pw.message([(1, _module([(1, "main", [pw.instruction(1, "dot", [2]),
                                                      pw.instruction(2, "dot", [1])], 2)]))]),
        "depend on each other"),
    "a computation calling itself": (
        lambda: pw.message([(1, _module([(1, "main", [pw.instruction(1, "parameter"),
                                                      pw.instruction(2, "call", [1],
                                                                     called=[1])], 2)]))]),
        "calls itself"),
    "an instruction using itself": (
        lambda: pw.message([(1, _module([(1, "main", [pw.instruction(1, "parameter"),
                                                      pw.instruction(2, "dot", [1, 2])],
                                          2)]))]),
        "uses itself"),
    "recursion through another computation": (
        lambda: pw.message([(1, _module([
            (2, "body", [pw.instruction(10, "parameter"),
                         pw.instruction(11, "call", [10], called=[1])], 11),
            (1, "main", [pw.instruction(1, "parameter"),
                         pw.instruction(2, "call", [1], called=[2]),
                         pw.instruction(3, "dot", [2, 1])], 3)]))]),
        "calls itself"),
    "two computations with one id": (
        lambda: pw.message([(1, _module([
            (1, "a", [pw.instruction(1, "parameter"), pw.instruction(2, "dot", [1])], 2),
            (1, "b", [pw.instruction(3, "parameter"), pw.instruction(4, "dot", [3])], 4)]))]),
        "computation id 1 is used twice"),
    "a root outside its computation": (
        lambda: pw.message([(1, _module([(1, "main", [pw.instruction(1, "parameter"),
                                                      pw.instruction(2, "dot", [1])],
                                          99)]))]),
        "is no instruction of it"),
    "a call to an empty computation": (
        lambda: pw.message([(1, _module([
            (2, "empty", [], 0),
            (1, "main", [pw.instruction(5, "parameter"), pw.instruction(0, "add", [5]),
                         pw.instruction(1, "call", [5], called=[2]),
                         pw.instruction(3, "dot", [1, 5])], 3)]))]),
        "has no root"),
    "a node configured twice": (lambda: _layout_record(GOOD_RUNS, nodes=(4, 4)),
                                "names a node twice"),
    "layout dims out of range": (lambda: _layout_record(
        [pw.layout_run([[[7, 0]]], 100, default=True)]), "not dimension numbers"),
}


def _nested(depth):
    shape = pw.shape(13, [])
    for _ in range(depth):
        shape = [(2, 13), (4, shape)]
    return pw.module("m", [pw.computation(1, "main", [
        [(2, "tuple"), (3, shape), (35, 1)]], 1)], 1)


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_records_are_one_error_naming_the_file(tmp_path, case):
    make, message = BAD_RECORDS[case]
    path = _write(tmp_path, make())
    out = tmp_path / "out"
    result = runner.invoke(app, ["import", str(path), "--out-dir", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0]
    assert message in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_too_many_candidates_are_refused_before_any_work(tmp_path):
    path = tmp_path / "m.hlo.pb"
    path.write_bytes(pw.message([(1, _chain_module())]))
    with pytest.raises(XlarankError, match="--candidates must lie in 1..100,000"):
        read_records(path, candidates=10**9)


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "record.pb"
    os.mkfifo(fifo)
    with pytest.raises(XlarankError, match="FIFO|not a regular"):
        read_records(fifo)


# slow: writes and reads a module of 60,000 instructions in a child process
@pytest.mark.slow
def test_a_huge_module_reads_with_bounded_memory(tmp_path):
    # 60,000 instructions (a large real program) in a 4 MB record: memory follows the
    # output arrays (60,000 x 140 float32 is 34 MB), checked in a fresh process.
    insts = [pw.message(pw.instruction(1, "parameter", dims=(8, 8)))]
    insts += [pw.message(pw.instruction(i, "dot", [i - 1, 1], dims=(8, 8)))
              for i in range(2, 60_001)]
    comp = b"".join(pw.varint(2 << 3 | 2) + pw.varint(len(i)) + i for i in insts)
    comp = pw.message([(1, "main")]) + comp + pw.message([(5, 1), (6, 60_000)])
    module = pw.message([(1, "big"), (3, comp), (6, 1)])
    path = _write(tmp_path, pw.message([(1, module)]), "big.hlo.pb")
    code = ("import resource; from xlarank.data.xla import read_records; "
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            f"g = read_records({str(path)!r}, candidates=2)[0]; "
            "print(g.arrays['node_feat'].shape[0], "
            "(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    nodes, rise_mb = map(int, done.stdout.split())
    assert nodes == 60_000
    assert rise_mb < 600, f"peak RSS rose {rise_mb} MB reading a 4 MB record"


def test_unknown_opcode_gets_id_zero_and_a_warning(tmp_path):
    module = _module([(1, "main", [pw.instruction(1, "parameter"),
                                   pw.instruction(2, "ragged-all-to-all", [1]),
                                   pw.instruction(3, "dot", [2, 1])], 3)])
    path = _write(tmp_path, pw.message([(1, module)]), "m.hlo.pb")
    with pytest.warns(XlarankWarning, match="ragged-all-to-all"):
        graph = read_records(path)[0]
    assert graph.arrays["node_opcode"].tolist() == [63, 0, 34]


def test_cli_import_writes_the_tree_and_refuses_a_foreign_folder(tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["import", str(_write(tmp_path, _layout_record(GOOD_RUNS))),
                                 "--out-dir", str(out), "--collection", "layout:nlp:random",
                                 "--split", "valid", "--name", "mine"])
    assert result.exit_code == 0, result.output
    assert (out / "npz/layout/nlp/random/valid/mine.npz").is_file()
    assert (out / "xlarank-import.json").is_file()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["import", str(tmp_path / "r.pb"), "--out-dir", str(foreign)])
    assert result.exit_code == 2 and (foreign / "keep.txt").is_file()


# ---------------------------------------------------------------- docs/xla.md, run as written
DOCS = Path(__file__).resolve().parents[1] / "docs" / "xla.md"


@pytest.mark.gnn
@pytest.mark.slow
def test_the_jax_walk_through_runs_as_written(tmp_path):
    pytest.importorskip("jax")
    _raw(LAYOUT_RECORD)
    text = DOCS.read_text()
    python_block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shell_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    (tmp_path / "model.py").write_text(python_block)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "TPUGRAPHS": str(SAMPLES),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", shell_block], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ranked = (tmp_path / "ranked.csv").read_text().splitlines()
    assert ranked[0].split(",")[3:5] == ["rank", "config_index"]
    rows = [line.split(",") for line in ranked[1:]]
    assert sorted(int(r[4]) for r in rows) == list(range(32))
    assert [int(r[3]) for r in rows] == list(range(1, 33))
    test_file = np.load(tmp_path / "mine/npz/layout/xla/default/test/block.npz")
    opcodes = test_file["node_opcode"][test_file["node_config_ids"]]
    assert sorted(opcodes.tolist()) == sorted(OPCODE_IDS[o] for o in
                                              ("convolution", "reshape", "dot"))


def test_import_never_writes_over_or_around_its_inputs(tmp_path):
    record = _write(tmp_path, _layout_record(GOOD_RUNS))
    for out in (record, tmp_path):
        result = runner.invoke(app, ["import", str(record), "--out-dir", str(out)])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ")
    assert record.read_bytes() == _layout_record(GOOD_RUNS)


def test_a_rank_seven_tensor_imports_with_its_layout_left_open(tmp_path):
    dims = (2,) * 7
    module = _module([(1, "main", [pw.instruction(1, "parameter", dims=dims),
                                   pw.instruction(2, "reshape", [1], dims=dims),
                                   pw.instruction(3, "dot", [1, 1])], 3)])
    path = _write(tmp_path, pw.message([(1, module)]), "rank7.hlo.pb")
    graphs = import_records([path], tmp_path / "out", candidates=4)
    configs = graphs[0].arrays["node_config_feat"]
    assert configs.min() >= -1 and configs.max() <= 5
    assert (configs[:, list(graphs[0].arrays["node_config_ids"]).index(1)] == -1).all()


def test_dump_limits_and_the_splits_a_dump_may_take(tmp_path):
    insts = [pw.instruction(1, "parameter")] + [pw.instruction(i, "dot", [i - 1, i - 1])
                                                for i in range(2, 402)]
    path = _write(tmp_path, pw.message([(1, _module([(1, "main", insts, 401)]))]), "m.hlo.pb")
    with pytest.raises(XlarankError, match="would take 2.7 GiB; give at most"):
        read_records(path, candidates=100_000)
    with pytest.raises(XlarankError, match="belongs to the test split, not train"):
        read_records(path, split="train")


def test_tile_bounds_and_collection_errors_name_the_file(tmp_path):
    kernel = [(1, pw.module("k", [pw.computation(1, "main", [
        pw.instruction(1, "parameter"), pw.instruction(2, "dot", [1, 1])], 2)], 1)),
        (2, 7), (3, pw.tile_run([-7], 100, default=True)), (3, pw.tile_run([2], 50))]
    path = _write(tmp_path, pw.message([(1, kernel)]), "tile.pb")
    with pytest.raises(XlarankError, match=r"run 0 has tile bounds \[-7\]"):
        read_records(path)
    with pytest.raises(XlarankError, match=re.escape(str(path))):
        read_records(path, collection="layout:xla:default")
    # A TuningData whose first kernel has no module is still told from the other kinds.
    good = [(1, pw.module("k", [pw.computation(1, "main", [
        pw.instruction(1, "parameter"), pw.instruction(2, "dot", [1, 1])], 2)], 1)),
        (2, 7), (3, pw.tile_run([1], 100, default=True)), (3, pw.tile_run([2], 50))]
    path = _write(tmp_path, pw.message([(1, [(2, 1)]), (1, good)]), "tile2.pb")
    with pytest.warns(XlarankWarning, match="kernel 0"):
        assert len(read_records(path)) == 1


def test_warnings_are_one_line_and_wait_for_a_whole_import(tmp_path):
    module = _module([(1, "main", [pw.instruction(1, "parameter"),
                                   pw.instruction(2, "x\nerror: injected", [1]),
                                   pw.instruction(3, "dot", [2, 1])], 3)])
    good = _write(tmp_path, pw.message([(1, module)]), "nl.hlo.pb")
    result = runner.invoke(app, ["import", str(good), "--out-dir", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert [line[:8] for line in result.stderr.splitlines()] == ["warning:"]
    bad = _write(tmp_path, b"\x00\x01", "bad.pb")
    result = runner.invoke(app, ["import", str(good), str(bad), "--out-dir",
                                 str(tmp_path / "o2")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.splitlines()[0]]
    assert result.stderr.startswith("error: ") and str(bad) in result.stderr
