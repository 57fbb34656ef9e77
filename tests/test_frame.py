"""frame.py (the parquet frame format) and featurize.py (files into frames: dedup, bad
files, row groups, reused parts)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import REPO_SPECS
from helpers import (
    TILE,
    first_file,
    one_error_line,
    run,
)
from xlarank.data.collections import get_collection, split_files
from xlarank.data.distinct import distinct_configs
from xlarank.data.graph import load_graph
from xlarank.errors import (
    XlarankError,
)
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files, parts_dir_for
from xlarank.frame import group_sizes, read_frame, read_meta

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))


def test_frame_round_trip(frames, tiny_data):
    path = frames["default", "layout-xla-default", "train"]
    table, meta = read_frame(path)
    assert meta.collection == "layout:xla:default" and meta.split == "train"
    assert meta.spec_hash == DEFAULT.hash and meta.feature_names == list(table.columns[4:])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "train")
    distinct = [len(distinct_configs(load_graph(f))) for f in files]
    # Train frames keep one row per distinct config; valid frames keep every config.
    assert meta.dedup and list(group_sizes(table)) == distinct
    assert table["config_index"].dtype == np.int32
    valid, valid_meta = read_frame(frames["default", "layout-xla-default", "valid"])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "valid")
    assert not valid_meta.dedup
    assert list(group_sizes(valid)) == [load_graph(f).n_configs for f in files]


def test_skip_bad_records_file(tiny_data, tmp_path):
    collection = get_collection("tile-xla")
    files = split_files(tiny_data, collection, "train")
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"not a zip")
    out = tmp_path / "f.parquet"
    with pytest.raises(XlarankError, match="broken.npz"):
        featurize_files(files + [bad], out, collection, "train", DEFAULT)
    assert not out.exists()
    rows, skipped, _ = featurize_files(files + [bad], out, collection, "train", DEFAULT,
                                       skip_bad=True)
    assert len(skipped) == 1 and "broken.npz" in skipped[0]
    assert read_meta(out).skipped == skipped


def test_row_groups_hold_whole_graphs(tiny_data, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import xlarank.frame as frame_module
    from xlarank.frame import row_group_graph_sizes

    monkeypatch.setattr(frame_module, "ROW_GROUP_ROWS", 40)
    collection = get_collection("tile-xla")
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, collection, "train"), out, collection, "train",
                    DEFAULT, dedup=False)
    table, _ = read_frame(out)
    per_group = row_group_graph_sizes(out)
    assert 1 < len(per_group) < len(group_sizes(table))
    assert list(np.concatenate(per_group)) == list(group_sizes(table))
    parquet = pq.ParquetFile(out)
    ids = [set(parquet.read_row_group(g, columns=["graph_id"])["graph_id"].to_pylist())
           for g in range(parquet.metadata.num_row_groups)]
    assert sum(len(s) for s in ids) == len(set().union(*ids))  # no graph in two groups


def test_rerun_reuses_parts_and_redoes_changed_files(tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    files = split_files(data, TILE, "train")
    out = tmp_path / "f.parquet"
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == 0
    manifest = json.loads((parts_dir_for(out) / "manifest.json").read_text())
    assert set(manifest) == {str(f) for f in files}
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == len(files)
    # Replace one file by another graph: only it is redone, and its old part goes.
    old_part = parts_dir_for(out) / manifest[str(files[0])]["part"]
    shutil.copy(files[1], files[0])
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert reused == len(files) - 1
    assert not old_part.exists()
    assert len(list(parts_dir_for(out).glob("*.arrow"))) == len(files)


def test_a_damaged_or_edited_part_is_made_again(tiny_data, tmp_path):
    """Parts are a cache: one cut short and one whose columns were edited are redone from
    their files, and the frame is the clean run's, byte for byte."""
    import pyarrow.feather as feather

    files = split_files(tiny_data, TILE, "train")[:4]
    clean, out = tmp_path / "clean.parquet", tmp_path / "f.parquet"
    featurize_files(files, clean, TILE, "train", DEFAULT)
    featurize_files(files, out, TILE, "train", DEFAULT)
    manifest = json.loads((parts_dir_for(out) / "manifest.json").read_text())
    cut, edited = (parts_dir_for(out) / manifest[str(f)]["part"] for f in files[:2])
    cut.write_bytes(cut.read_bytes()[:100])
    table = feather.read_table(edited)
    feather.write_feather(table.drop_columns([table.column_names[-1]]), edited)
    _, _, reused = featurize_files(files, out, TILE, "train", DEFAULT)
    assert out.read_bytes() == clean.read_bytes()
    assert feather.read_table(cut).num_rows > 0
    assert reused == len(files) - 2


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


# Every fault through evaluate in make test-fast; through the other commands in make test.
@pytest.mark.parametrize("command", [c if c == "evaluate" else pytest.param(
    c, marks=pytest.mark.slow) for c in FRAME_COMMANDS])
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


def test_block_table_is_the_frames_pandas_conversion(tiny_data):
    """Parts are written from the feature arrays (`block_table`); they must hold what the
    DataFrame of the same graph converts to, on synthetic and real graphs, all configs and
    distinct ones."""
    from conftest import SAMPLES
    from xlarank.features.build import feature_block
    from xlarank.frame import block_table, frame_schema

    files = [first_file(tiny_data, c) for c in ("tile-xla", "layout-xla-random",
                                                 "layout-nlp-default")]
    files += sorted((SAMPLES / "npz").rglob("*.npz"))[:6]
    assert len(files) > 3
    for path in files:
        graph = load_graph(path, configs=False)
        for dedup in (False, True):
            block = feature_block(graph, DEFAULT, dedup)
            table = block_table(block)
            reference = pa.Table.from_pandas(block.to_frame(), preserve_index=False,
                                             schema=frame_schema(block.names))
            assert table.num_rows == len(block) > 0
            assert table.equals(reference), (path, dedup)


def test_a_featurize_command_never_imports_pandas(tiny_data, tmp_path):
    """pandas' import is a tenth of a one-file featurize; nothing on that path needs it
    (pyarrow's pa.array and feather import it, so parts are built from buffers)."""
    import subprocess
    import sys

    code = ("import runpy, sys; sys.argv = ['xlarank', 'featurize', sys.argv[1], '--out-dir', "
            "sys.argv[2]]; import atexit; atexit.register(lambda: print('pandas' in "
            "sys.modules)); runpy.run_module('xlarank', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code, str(tiny_data), str(tmp_path / "f")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert len(list((tmp_path / "f").rglob("*.parquet"))) == 15
