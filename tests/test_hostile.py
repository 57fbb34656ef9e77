"""Hostile inputs and odd environments (issue 13): each case gives one clear error (or a
warning where the result is legal but dubious), never a crash, a traceback, a silent wrong
answer or a clobbered file."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import stat
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import small
from xlarank.atomic import (
    _umask,
    atomic_dir,
    atomic_path,
    check_output,
    output_lock,
    write_text_atomic,
)
from xlarank.cli import app
from xlarank.data.collections import COLLECTIONS, get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import (
    BadGraphError,
    BadModelError,
    SpecError,
    XlarankError,
    XlarankWarning,
)
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.features.build import group_median_int
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame, read_meta
from xlarank.rank.ensemble import Ensemble, ensemble_card
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import score_files, write_submission

TILE = get_collection("tile-xla")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(result, *needles: str, warnings: bool = False) -> None:
    """Exit 2 and a single ``error:`` line on stderr holding every needle; with
    ``warnings``, ``warning:`` lines about the input may come before it."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    if warnings:
        lines = [line for line in lines if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---------------------------------------------------------------- model files and cards

@pytest.fixture(scope="module")
def tile_frames(tiny_data, repo_specs, tmp_path_factory):
    """Tile train frames of the default and baseline specs."""
    folder = tmp_path_factory.mktemp("hostile_frames")
    out = {}
    for name in ("default", "baseline"):
        path = folder / f"{name}.parquet"
        featurize_files(split_files(tiny_data, TILE, "train"), path, TILE, "train",
                        load_feature_spec(repo_specs.features(name)))
        out[name] = path
    return out


@pytest.fixture(scope="module")
def models(tile_frames, spec_dir, tmp_path_factory):
    """Saved LightGBM (seeds 3 and 4), XGBoost and ensemble models of the tile frames."""
    folder = tmp_path_factory.mktemp("hostile_models")
    out = {}
    for key, spec_file, frame, seed in (("lightgbm", "lgbm.toml", "default", 3),
                                        ("lightgbm-other", "lgbm.toml", "default", 4),
                                        ("xgboost", "xgb.toml", "baseline", 3)):
        table, meta = read_frame(tile_frames[frame])
        spec = small(load_ranker_spec(spec_dir / spec_file), rounds=5)
        spec = dataclasses.replace(spec, seed=seed)
        out[key] = train_ranker(table, meta, spec).save(folder / key)
    members = [load_model(out["lightgbm"]), load_model(out["lightgbm-other"])]
    out["ensemble"] = Ensemble(ensemble_card(members), members).save(folder / "ensemble")
    return out


def copy_model(models, kind: str, tmp_path: Path) -> Path:
    target = tmp_path / kind
    shutil.copytree(models[kind], target)
    return target


def booster_file(model: Path) -> Path:
    return model / json.loads((model / "card.json").read_text())["model_file"]


def edit_card(model: Path, change) -> None:
    card = model / "card.json"
    edited = change(json.loads(card.read_text()))
    card.write_text(edited if isinstance(edited, str) else json.dumps(edited))


BOOSTER_FILE_FAULTS = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "garbage": lambda raw: bytes(range(256)) * 8,
    "one byte changed": lambda raw: raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
}


@pytest.mark.parametrize("kind", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("fault", [*BOOSTER_FILE_FAULTS, "missing", "a folder"])
def test_damaged_booster_file_is_refused_before_the_library_reads_it(models, tmp_path, kind,
                                                                      fault):
    model = copy_model(models, kind, tmp_path)
    path = booster_file(model)
    if fault == "missing":
        path.unlink()
    elif fault == "a folder":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(BOOSTER_FILE_FAULTS[fault](path.read_bytes()))
    with pytest.raises(BadModelError, match=path.name):
        load_model(model)


def test_booster_file_of_another_model_is_refused(models, tmp_path):
    model = copy_model(models, "lightgbm", tmp_path)
    shutil.copyfile(booster_file(models["lightgbm-other"]), booster_file(model))
    with pytest.raises(BadModelError, match="not the one saved with"):
        load_model(model)


def test_truncated_model_through_the_cli_is_one_error_line(models, tile_frames, tmp_path):
    """The issue's repro: this crashed the process with SIGSEGV (exit 139)."""
    model = copy_model(models, "lightgbm", tmp_path)
    path = booster_file(model)
    path.write_bytes(path.read_bytes()[:9000])
    one_error_line(run("evaluate", tile_frames["default"], "--model", model), "model.txt")


CARD_FAULTS = {
    "a list": lambda card: [1, 2, 3],
    "a number": lambda card: 7,
    "only format": lambda card: {"format": 1},
    "not JSON": lambda card: "{not json",
    "format a string": lambda card: {**card, "format": "1"},
    "features not a table": lambda card: {**card, "features": ["a"]},
    "names shortened": lambda card: {**card, "features": {
        **card["features"], "names": card["features"]["names"][:-3]}},
    "names reordered": lambda card: {**card, "features": {
        **card["features"], "names": card["features"]["names"][::-1]}},
    "names empty": lambda card: {**card, "features": {**card["features"], "names": []}},
    "no checksum (older xlarank)": lambda card: {k: v for k, v in card.items()
                                                 if k != "model_sha256"},
    "model_file leaves the folder": lambda card: {**card,
                                                  "model_file": "../../../../etc/passwd"},
    "model_file absolute": lambda card: {**card, "model_file": "/etc/passwd"},
    "model_file the folder itself": lambda card: {**card, "model_file": "."},
    "gnn weights leave the folder": lambda card: {**card, "features": {
        **card["features"], "families": [*card["features"]["families"], "gnn"],
        "gnn": "../../etc/passwd"}},
    "unknown library": lambda card: {**card, "library": "catboost"},
}


@pytest.mark.parametrize("fault", CARD_FAULTS)
def test_bad_card_is_one_clear_error(models, tile_frames, tmp_path, fault):
    model = copy_model(models, "lightgbm", tmp_path)
    edit_card(model, CARD_FAULTS[fault])
    result = run("evaluate", tile_frames["default"], "--model", model)
    one_error_line(result)


@pytest.mark.parametrize("member", ["../lightgbm", "/etc", "", None, ".", "members/../.."])
def test_ensemble_member_outside_the_ensemble_is_refused(models, tmp_path, member):
    model = copy_model(models, "ensemble", tmp_path)
    edit_card(model, lambda card: {**card, "members": [{"dir": member}]})
    with pytest.raises(BadModelError, match="inside the ensemble"):
        load_model(model)


def test_saved_models_still_load_and_score(models, tile_frames):
    table, _ = read_frame(tile_frames["default"])
    for kind in ("lightgbm", "ensemble"):
        assert len(load_model(models[kind]).predict(table)) == len(table)


# ---------------------------------------------------------------- output paths

def special(kind: str, path: Path) -> Path:
    """Make an output path of a kind that must not be written over."""
    if kind == "symlink to stdout":
        path.symlink_to("/proc/self/fd/1")
    elif kind == "symlink to a file":
        (path.parent / "target").write_text("keep me")
        path.symlink_to(path.parent / "target")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null twin
    elif kind == "folder":
        path.mkdir()
        (path / "inside").write_text("keep me")
    elif kind == "file":
        path.write_text("keep me")
    elif kind == "under a file":
        path.parent.mkdir(exist_ok=True)
        (path.parent / "plain").write_text("keep me")
        return path.parent / "plain" / "below"
    return path


def snapshot(path: Path):
    """What is at path, to show it was left alone: its lstat mode and any content."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISDIR(mode):
        return mode, sorted(p.name for p in path.iterdir())
    return mode, path.read_text() if stat.S_ISREG(mode) else None


FILE_REFUSED = ["symlink to stdout", "symlink to a file", "FIFO", "device", "folder",
                "under a file"]
DIR_REFUSED = ["symlink to stdout", "symlink to a file", "FIFO", "device", "file",
               "under a file"]


@pytest.mark.parametrize("kind", FILE_REFUSED)
def test_check_output_refuses_file_outputs(tmp_path, kind):
    path = special(kind, tmp_path / "out.csv")
    before = snapshot(path)
    with pytest.raises(XlarankError, match=re.escape(str(path))):
        check_output(path, "file")
    with pytest.raises(XlarankError), atomic_path(path) as tmp:
        tmp.write_text("new")
    assert snapshot(path) == before


@pytest.mark.parametrize("kind", DIR_REFUSED)
def test_check_output_refuses_dir_outputs(tmp_path, kind):
    path = special(kind, tmp_path / "model")
    before = snapshot(path)
    with pytest.raises(XlarankError):
        check_output(path, "dir")
    with pytest.raises(XlarankError), atomic_dir(path) as tmp:
        (tmp / "x").write_text("new")
    assert snapshot(path) == before


def test_check_output_accepts_new_and_existing_plain_outputs(tmp_path):
    (tmp_path / "old.csv").write_text("x")
    (tmp_path / "olddir").mkdir()
    for path, kind in ((tmp_path / "new.csv", "file"), (tmp_path / "old.csv", "file"),
                       (tmp_path / "a" / "b" / "new", "dir"), (tmp_path / "olddir", "dir")):
        assert check_output(path, kind) == path


@pytest.fixture
def cli_outputs(models, tile_frames, tiny_data, spec_dir, tmp_path):
    """Each writing command's arguments, with OUT where its output path goes."""
    tile_test = split_files(tiny_data, TILE, "test")
    measured = tmp_path / "measured.csv"
    measured.write_text("config_index,runtime\n0,5\n1,7\n")
    return {
        "score": (["score", *tile_test, "--models", models["lightgbm"], "--out"], "file"),
        "featurize": (["featurize", tiny_data, "--collection", "tile-xla", "--split",
                       "train", "--out"], "file"),
        "evaluate": (["evaluate", tile_frames["default"], "--model", models["lightgbm"],
                      "--out"], "file"),
        "rank-graph": (["rank-graph", tile_test[0], "--measured", measured, "--out"], "file"),
        "submit": (["submit", tiny_data, "--models", models["lightgbm"], "--out"], "file"),
        "train": (["train", tile_frames["default"], "--spec", spec_dir / "lgbm.toml",
                   "--out"], "dir"),
        "report": (["report", tile_frames["default"], "--model", models["lightgbm"],
                    "--out"], "dir"),
    }


@pytest.mark.parametrize("kind", ["symlink to stdout", "FIFO", "device", "folder/file",
                                  "under a file"])
@pytest.mark.parametrize("command", ["score", "featurize", "evaluate", "rank-graph", "submit",
                                     "train", "report"])
def test_commands_refuse_special_outputs_before_work(cli_outputs, tmp_path, monkeypatch,
                                                     command, kind):
    args, out_kind = cli_outputs[command]
    if kind == "folder/file":
        kind = "folder" if out_kind == "file" else "file"
    out = special(kind, tmp_path / "out")
    before = snapshot(out)
    # The check comes before the work: a command that trains or scores has failed it.
    refuse_all_work(monkeypatch)
    one_error_line(run(*args, out), str(out))
    assert snapshot(out) == before
    assert not list(tmp_path.glob(".out*")), "no temporary or parts folder left behind"


def refuse_work(*args, **kwargs):
    raise AssertionError("work started before the output was checked")


def refuse_all_work(monkeypatch) -> None:
    # Patched where each command calls it: train_specs binds train_ranker_from_file at import, so
    # patching xlarank.rank.train alone would leak into a train_specs first imported here.
    import xlarank.rank.train_specs  # noqa: F401 (imported before it is patched)

    for where in ("xlarank.rank.train.train_ranker", "xlarank.rank.train.train_ranker_from_file",
                  "xlarank.rank.train_specs.train_ranker_from_file",
                  "xlarank.score.featurize_graph"):
        monkeypatch.setattr(where, refuse_work)


@pytest.mark.parametrize("command", ["score", "featurize", "evaluate", "train", "report"])
def test_read_only_output_folder_fails_before_work(cli_outputs, tmp_path, monkeypatch,
                                                    command):
    """root writes anywhere, so the read-only folder is what access() says of it."""
    args, _ = cli_outputs[command]
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    real_access = os.access
    monkeypatch.setattr("xlarank.atomic.os.access",
                        lambda path, mode, **kw: False if Path(path) == folder
                        else real_access(path, mode, **kw))
    refuse_all_work(monkeypatch)
    one_error_line(run(*args, folder / "out"), "cannot write in", str(folder))


def test_umask_is_honoured(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "f.csv") as tmp:
            tmp.write_text("x")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("x")
        os.umask(0o002)
        write_text_atomic(tmp_path / "g.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.csv").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "g.txt").stat().st_mode) == 0o664


def test_saved_model_is_readable_by_others(models):
    """Models used to be 0700 folders of 0600 files whatever the umask."""
    assert stat.S_IMODE(models["lightgbm"].stat().st_mode) & 0o055 == 0o055 & ~_umask()


def test_leftovers_of_killed_runs_are_removed_by_the_next(models, tmp_path):
    model = copy_model(models, "lightgbm", tmp_path)
    leftovers = [tmp_path / ".lightgbm.k1l2.part", tmp_path / ".lightgbm.x9y8.old"]
    for folder in leftovers:
        (folder / "lightgbm").mkdir(parents=True)
        (folder / "lightgbm" / "model.txt").write_text("half")
    (tmp_path / ".lightgbm.file.part").write_text("half")
    other = tmp_path / ".other.abc.part"
    other.mkdir()
    load_model(model).save(model)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.abc.part", "lightgbm"]
    frame = tmp_path / "f.csv"
    (tmp_path / ".f.csv.zz.part").write_text("half")
    write_text_atomic(frame, "x")
    assert not list(tmp_path.glob(".f.csv*"))


def test_second_featurize_on_one_frame_fails_cleanly(tiny_data, repo_specs, tmp_path):
    out = tmp_path / "f.parquet"
    spec = load_feature_spec(repo_specs.features("default"))
    files = split_files(tiny_data, TILE, "train")
    with output_lock(out), pytest.raises(XlarankError, match="another xlarank run"):
        featurize_files(files, out, TILE, "train", spec)
    assert not out.exists()
    # The lock goes with its run; one left by a killed run holds nothing.
    assert not list(tmp_path.glob(".f.parquet.lock"))
    (tmp_path / ".f.parquet.lock").write_text("")
    featurize_files(files, out, TILE, "train", spec)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".f.parquet.parts", "f.parquet"]


def test_concurrent_featurize_runs_never_crash(tiny_data, repo_specs, tmp_path):
    out = tmp_path / "f.parquet"
    spec = load_feature_spec(repo_specs.features("default"))
    files = split_files(tiny_data, TILE, "train")

    def one_run():
        try:
            return featurize_files(files, out, TILE, "train", spec)[0]
        except XlarankError as exc:
            assert "another xlarank run" in str(exc)
            return None

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: one_run(), range(3)))
    assert any(r is not None for r in results)
    assert read_frame(out)[0].shape[0] == next(r for r in results if r is not None)


@pytest.mark.parametrize("name", ["../../evil", "/tmp/evil", "..", ".hidden", "a/b", "a\\\\b",
                                  "", 5, "x" * 101])
def test_feature_spec_name_must_be_plain(tmp_path, name):
    spec = tmp_path / "s.toml"
    spec.write_text(f"name = {json.dumps(name)}\nfamilies = [\"graph\"]\n")
    with pytest.raises(SpecError, match="plain name"):
        load_feature_spec(spec)


def test_plain_feature_spec_names_pass(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "my-spec_2.1"\nfamilies = ["graph"]\n')
    assert load_feature_spec(spec).name == "my-spec_2.1"


@pytest.mark.parametrize("command", ["train", "report"])
def test_folder_xlarank_did_not_write_is_not_replaced(cli_outputs, tmp_path, monkeypatch,
                                                      command):
    """train --out ~/Documents used to replace the folder whole."""
    args, _ = cli_outputs[command]
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    monkeypatch.setattr("xlarank.rank.train.train_ranker", refuse_work)
    one_error_line(run(*args, folder), "xlarank did not write it")
    assert (folder / "thesis.tex").read_text() == "years of work"


# ---------------------------------------------------------------- input files

def dataset_copy(tiny_data: Path, tmp_path: Path) -> Path:
    """A copy of the tiny dataset's tile train and test files, to add bad files to."""
    root = tmp_path / "data"
    for split in ("train", "test"):
        shutil.copytree(tiny_data / "npz/tile/xla" / split, root / "npz/tile/xla" / split)
    return root


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
    one_error_line(run(*args), fault)
    result = run(*args, "--skip-bad")
    assert result.exit_code == 0, result.stderr
    assert "skipped" in result.stderr and fault in result.stderr
    assert f"scored {len(files) - 1} files" in result.stdout


# ---------------------------------------------------------------- numbers

def tile_arrays(tiny_data: Path) -> dict[str, np.ndarray]:
    source = sorted((tiny_data / "npz/tile/xla/train").glob("*.npz"))[0]
    return {k: v.copy() for k, v in np.load(source).items()}


def write_tile(arrays: dict, tmp_path: Path, name: str = "g") -> Path:
    path = tmp_path / "npz/tile/xla/train" / f"{name}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("runtimes, median", [
    ([2**63 - 1, 2**63 - 1], 2**63 - 1),
    ([2**63 - 1, 2**63 - 4], 2**63 - 2),  # halfway: to even, as np.round
    ([2**63 - 1, 5, 2**63 - 3], 2**63 - 3),
    ([2**53 + 1, 2**53 + 1], 2**53 + 1),  # past float64's exact integers
    ([7, 8], 8),
    ([9, 10], 10),
    ([3, 3, 4, 4], 4),
])
def test_dedup_median_of_huge_runtimes_is_exact(tiny_data, tmp_path, repo_specs, runtimes,
                                                median):
    arrays = tile_arrays(tiny_data)
    n = len(runtimes)
    # Only the n repeats of config 0: a generated kernel may repeat it further on.
    for key in ("config_feat", "config_runtime", "config_runtime_normalizers"):
        arrays[key] = arrays[key][:n].copy()
    arrays["config_feat"][:n] = arrays["config_feat"][0]
    arrays["config_runtime"][:n] = runtimes
    arrays["config_runtime_normalizers"][:] = 1
    spec = load_feature_spec(repo_specs.features("default"))
    block = featurize_graph(load_graph(write_tile(arrays, tmp_path)), spec, dedup=True)
    first = block[block["config_index"] == 0]
    assert first["runtime"].tolist() == [median]
    assert (block["runtime"] >= 0).all()


def test_group_median_int_matches_pandas_on_small_numbers():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        values, groups = rng.integers(0, 50, n), rng.integers(0, 6, n)
        expected = np.round(pd.Series(values).groupby(groups).median().to_numpy())
        assert (group_median_int(values, groups) == expected).all()


@pytest.mark.parametrize("key, column", [("config_feat", c) for c in (0, 6, 7, 8, 15, 23)]
                         + [("node_feat", c) for c in (0, 13, 27, 60, 100, 139)])
@pytest.mark.parametrize("value", [3e38, -3e38])
def test_extreme_feature_values_give_finite_features_and_no_warnings(
        tiny_data, tmp_path, repo_specs, key, column, value):
    arrays = tile_arrays(tiny_data)
    arrays[key][:2, column] = value
    path = write_tile(arrays, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            graph = load_graph(path)
        except BadGraphError:
            return  # refused as out of range: also fine
        for name in ("default", "baseline"):
            block = featurize_graph(graph, load_feature_spec(repo_specs.features(name)))
            assert np.isfinite(block.iloc[:, 4:].to_numpy(dtype=np.float64)).all()


def flat_frame(tiny_data, tmp_path, repo_specs, flat_graphs: int) -> Path:
    """A tile train frame of 3 graphs; ``flat_graphs`` of them have all-equal runtimes."""
    arrays = tile_arrays(tiny_data)
    for i in range(3):
        graph = {k: v.copy() for k, v in arrays.items()}
        if i < flat_graphs:
            graph["config_runtime"][:] = 1000
            graph["config_runtime_normalizers"][:] = 1000
        write_tile(graph, tmp_path, f"g{i}")
    out = tmp_path / "flat.parquet"
    featurize_files(sorted((tmp_path / "npz/tile/xla/train").glob("*.npz")), out, TILE,
                    "train", load_feature_spec(repo_specs.features("default")))
    return out


def test_frame_with_no_ranking_to_learn_is_refused(tiny_data, tmp_path, repo_specs,
                                                   spec_dir):
    """LightGBM failed 'Check failed: (num_data) > (0)' on such a frame (the real tile
    train sample is one)."""
    frame = flat_frame(tiny_data, tmp_path, repo_specs, 3)
    one_error_line(run("train", frame, "--spec", spec_dir / "lgbm.toml", "--out",
                       tmp_path / "m"), "no ranking to learn")
    assert not (tmp_path / "m").exists()


def test_frame_with_some_flat_graphs_trains_with_a_warning(tiny_data, tmp_path, repo_specs,
                                                           spec_dir):
    frame = flat_frame(tiny_data, tmp_path, repo_specs, 2)
    result = run("train", frame, "--spec", spec_dir / "lgbm.toml", "--out", tmp_path / "m")
    assert result.exit_code == 0, result.stderr
    assert ("warning: 2 of 3 training graphs have one distinct config or all-equal "
            "runtimes") in result.stderr
    assert "Traceback" not in result.stderr and "UserWarning" not in result.stderr


# ---------------------------------------------------------------- options and folders

@pytest.mark.parametrize("top", ["0", "-3"])
def test_score_top_must_be_at_least_one(tiny_data, models, tmp_path, top):
    files = split_files(tiny_data, TILE, "test")
    result = run("score", *files, "--models", models["lightgbm"], "--out", tmp_path / "s.csv",
                 "--top", top)
    assert result.exit_code == 2 and "--top" in result.stderr
    with pytest.raises(XlarankError, match="at least 1"):
        score_files(files, models["lightgbm"], tmp_path / "s.csv", top=int(top))
    assert not (tmp_path / "s.csv").exists()


def test_partial_submission_warns_how_many_ids_are_missing(tiny_data, tmp_path, monkeypatch):
    # The ranking itself is not under test: every config in file order.
    monkeypatch.setattr("xlarank.score.ranked_configs",
                        lambda graph, model: (np.arange(graph.n_configs), None))
    found = sum(len(split_files(tiny_data, c, "test")) for c in COLLECTIONS)
    # The same test files without synth.json: no longer marked as generated data.
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data, ignore=shutil.ignore_patterns("synth.json"))
    with pytest.warns(XlarankWarning, match=f"{894 - found} of the 894 official test IDs"):
        write_submission(data, dict.fromkeys(c.id for c in COLLECTIONS), tmp_path / "sub.csv")
    lines = (tmp_path / "sub.csv").read_text().splitlines()
    assert len(lines) == found + 1 and all(line.split(",")[1] for line in lines[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # generated data: nothing to warn about
        write_submission(tiny_data, dict.fromkeys(c.id for c in COLLECTIONS),
                         tmp_path / "sub2.csv")


def test_eval_indices_that_miss_graphs_warn(tile_frames, tmp_path, models):
    table, meta = read_frame(tile_frames["default"])
    first = str(table["graph_id"].iloc[0])
    indices = tmp_path / "eval.json"
    indices.write_text(json.dumps({first: [0, 1]}))
    graphs = table["graph_id"].nunique()
    result = run("evaluate", tile_frames["default"], "--model", models["lightgbm"],
                 "--eval-indices", indices)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("warning: ")
    assert (f"the eval indices list no configs for {graphs - 1} of the frame's "
            f"{graphs} graphs") in result.stderr


# ---------------------------------------------------------------- specs of another collection

@pytest.mark.parametrize("slug", [c.slug for c in COLLECTIONS])
def test_a_collections_spec_refuses_a_frame_of_another(frames, repo_specs, slug):
    from xlarank.errors import MismatchError

    other = "layout-xla-random" if slug == "tile-xla" else "tile-xla"
    table, meta = read_frame(frames["default", other, "train"])
    spec = small(load_ranker_spec(repo_specs.models(slug)))
    assert spec.collections == [get_collection(slug).id]
    with pytest.raises(MismatchError, match=rf"frame is of {re.escape(get_collection(other).id)}"
                       rf", booster spec 'xlarank' is made for"):
        train_ranker(table, meta, spec)


@pytest.mark.parametrize("value", ['"tile:xla"', '["tile-xla"]', "[1]", '["layout:xla"]'])
def test_spec_collections_must_be_collection_ids(tmp_path, value):
    path = tmp_path / "spec.toml"
    path.write_text(f'features = "default"\ncollections = {value}\n')
    with pytest.raises(SpecError, match=r"collections must be a list of collection ids"):
        load_ranker_spec(path)


# ---------------------------------------------------------------- no input is overwritten

@pytest.fixture
def inputs_of(models, tile_frames, tiny_data, spec_dir, repo_specs, tmp_path):
    """Copies of every kind of input a command reads, in this test's folder."""
    data = dataset_copy(tiny_data, tmp_path)
    npz = sorted((data / "npz/tile/xla/test").glob("*.npz"))[0]
    frame = tmp_path / "frame.parquet"
    shutil.copyfile(tile_frames["default"], frame)
    valid = tmp_path / "valid.parquet"
    shutil.copyfile(tile_frames["default"], valid)
    model = copy_model(models, "lightgbm", tmp_path)
    measured = tmp_path / "measured.csv"
    # Enough configs for the graph-local booster to split (2 would be warned about).
    measured.write_text("config_index,runtime\n0,5\n1,7\n2,6\n3,9\n4,8\n5,4\n")
    spec = tmp_path / "spec.toml"
    shutil.copyfile(spec_dir / "lgbm.toml", spec)
    features = tmp_path / "features.toml"
    shutil.copyfile(repo_specs.features("default"), features)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "run.summary.json").write_text('{"run": "x"}\n')
    return {"data": data, "npz": npz, "frame": frame, "valid": valid, "model": model,
            "measured": measured, "spec": spec, "features": features, "reports": reports,
            "summary": reports / "run.summary.json"}


# Each writing command: its arguments with OUT for the output, the output's kind, the
# file input the file-level aliases point at, and the folder input "inside" writes into.
WRITERS = {
    "score": (lambda i: ["score", i["npz"], "--models", i["model"], "--out", "OUT"],
              "file", "npz", ("model", "card.json")),
    "rank-graph": (lambda i: ["rank-graph", i["npz"], "--measured", i["measured"], "--prior",
                              i["model"], "--out", "OUT"], "file", "measured",
                   ("model", "card.json")),
    "suggest": (lambda i: ["suggest", i["npz"], "--measured", i["measured"], "--prior",
                           i["model"], "--out", "OUT"], "file", "measured",
                ("model", "card.json")),
    "evaluate": (lambda i: ["evaluate", i["frame"], "--model", i["model"], "--out", "OUT"],
                 "file", "frame", ("model", "card.json")),
    "featurize": (lambda i: ["featurize", i["data"], "--spec", i["features"], "--collection",
                             "tile-xla", "--split", "test", "--out", "OUT"], "file", "npz",
                  ("data", "npz/tile/xla/test/new.npz")),
    "gnn-train": (lambda i: ["gnn-train", i["data"], "--collection", "tile-xla", "--out",
                             "OUT"], "file", "npz", ("data", "npz/tile/xla/train/w.npz")),
    "submit": (lambda i: ["submit", i["data"], "--models", i["model"], "--out", "OUT"],
               "file", "npz", ("model", "card.json")),
    "compare": (lambda i: ["compare", i["reports"], "--out", "OUT"], "file", "summary",
                ("reports", "new.summary.json")),
    "tune": (lambda i: ["tune", i["frame"], i["valid"], "--spec", i["spec"], "--trials", "1",
                        "--out", "OUT"], "file", "spec", None),
    "tune --log": (lambda i: ["tune", i["frame"], i["valid"], "--spec", i["spec"],
                              "--trials", "1", "--out", i["frame"].parent / "new.toml",
                              "--log", "OUT"], "file", "valid", None),
    "train": (lambda i: ["train", i["frame"], "--spec", i["spec"], "--valid", i["valid"],
                         "--out", "OUT"], "dir", "valid", None),
    "report": (lambda i: ["report", i["frame"], "--model", i["model"], "--out", "OUT"],
               "dir", "frame", ("model", "report")),
}
ALIASES = ["same path", "through ..", "symlink", "hard link", "inside a folder input",
           "folder holding an input"]


def alias_cases():
    for command, (_, kind, _, inside) in WRITERS.items():
        for alias in ALIASES:
            if alias == "inside a folder input" and inside is None:
                continue
            if alias == "folder holding an input" and kind != "dir":
                continue
            yield command, alias


def contents(path: Path) -> dict:
    """Every file's bytes under path (or path's own), to show nothing was changed."""
    if path.is_dir():
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
                if p.is_file()}
    return {"": path.read_bytes()}


def aliased_output(alias: str, command: str, inputs: dict, tmp_path: Path):
    """The output path for ``alias`` and the input it must leave alone."""
    _, kind, target_key, inside = WRITERS[command]
    target = inputs[target_key]
    if alias == "same path":
        return target, target
    if alias == "through ..":
        (target.parent / "sub").mkdir(exist_ok=True)
        return target.parent / "sub" / ".." / target.name, target
    if alias == "symlink":
        link = tmp_path / "link"
        link.symlink_to(target)
        return link, target
    if alias == "hard link":
        link = tmp_path / "hardlink"
        os.link(target, link)
        return link, target
    if alias == "inside a folder input":
        folder, name = inside
        return inputs[folder] / name, inputs[folder]
    # A folder xlarank wrote before (its marker is there), now holding an input.
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / ("card.json" if command == "train" else "index.html")).write_text("{}")
    moved = holder / target.name
    target.rename(moved)
    inputs[target_key] = moved
    return holder, holder


@pytest.mark.parametrize("command, alias", list(alias_cases()))
def test_no_command_overwrites_its_input(inputs_of, tmp_path, monkeypatch, command, alias):
    out, protected = aliased_output(alias, command, inputs_of, tmp_path)
    args = [out if a == "OUT" else a for a in WRITERS[command][0](inputs_of)]
    before = contents(protected)
    refuse_all_work(monkeypatch)
    result = run(*args)
    one_error_line(result, str(out))
    assert contents(protected) == before
    assert not list(protected.parent.glob(f".{protected.name}.*")), "no temporary left"


def test_every_writing_command_is_checked_against_its_inputs():
    """A command added later with an output option must join WRITERS (or this list)."""
    import typer.main

    group = typer.main.get_command(app)
    writing = {name for name, command in group.commands.items()
               if any(p.name.startswith("out") for p in command.params)}
    # import's input checks are tests/test_xla_import.py's.
    assert writing == {c.split()[0] for c in WRITERS} | {"synth", "import"}


@pytest.mark.parametrize("reads, name, refused", [
    (None, "anything.csv", True), ("*.summary.json", "summary.csv", False),
    ("*.summary.json", "x.summary.json", True), ("*.npz", "deep/er/w.npz", True),
])
def test_check_outputs_inside_folder_inputs(tmp_path, reads, name, refused):
    from xlarank.atomic import Input, check_outputs

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "kept.summary.json").write_text("{}")
    out = folder / name
    if refused:
        with pytest.raises(XlarankError, match=re.escape(str(out))):
            check_outputs([out], [Input(folder, reads)])
    else:
        assert check_outputs([out], [Input(folder, reads)]) == [out]


def test_check_outputs_finds_a_hard_link_inside_a_folder_input(tmp_path):
    from xlarank.atomic import Input, check_outputs

    (tmp_path / "data" / "a").mkdir(parents=True)
    (tmp_path / "data" / "a" / "g.npz").write_bytes(b"graph")
    os.link(tmp_path / "data" / "a" / "g.npz", tmp_path / "out.npz")
    with pytest.raises(XlarankError, match="g.npz by a hard link"):
        check_outputs([tmp_path / "out.npz"], [Input(tmp_path / "data", "*.npz")])


def test_check_outputs_refuses_two_outputs_on_one_file_and_passes_plain_ones(tmp_path):
    from xlarank.atomic import Output, check_outputs

    (tmp_path / "in.csv").write_text("x")
    with pytest.raises(XlarankError, match="given for two outputs"):
        check_outputs([tmp_path / "a.csv", tmp_path / "sub" / ".." / "a.csv"])
    assert check_outputs([tmp_path / "a.csv", Output(tmp_path / "m", "dir")],
                         [tmp_path / "in.csv", None, tmp_path / "missing"]) == [
        tmp_path / "a.csv", tmp_path / "m"]


# ---------------------------------------------------------------- concurrent runs on one output

@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_live_writers_temporary_survives_another_runs_cleanup(tmp_path, kind):
    """The cause of train's and score's FileNotFoundError: the first run to finish deleted
    the other's temporary as a killed run's leftover."""
    import threading

    out = tmp_path / "out"
    writing, finished = threading.Event(), threading.Event()
    errors = []

    def slow_writer():
        try:
            with (atomic_path(out) if kind == "file" else atomic_dir(out)) as tmp:
                target = tmp if kind == "file" else tmp / "card.json"
                target.write_text("first")
                writing.set()
                assert finished.wait(10)
            # leaving renames the temporary: FileNotFoundError before the fix
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert writing.wait(10)
    if kind == "file":
        write_text_atomic(out, "second")
    else:
        with atomic_dir(out) as tmp:
            (tmp / "card.json").write_text("second")
    finished.set()
    thread.join(10)
    assert errors == []
    written = out if kind == "file" else out / "card.json"
    assert written.read_text() == "first"
    assert not list(tmp_path.glob(".out.*"))


def test_leftovers_of_dead_writers_go_and_of_live_ones_stay(tmp_path):
    from xlarank.atomic import remove_leftovers

    out = tmp_path / "s.csv"
    live = tmp_path / f".s.csv.{os.getpid()}-abc.part"
    dead = tmp_path / f".s.csv.{_dead_child_pid()}-abc.part"
    legacy = tmp_path / ".s.csv.k1l2m3.part"
    huge = tmp_path / ".s.csv.99999999999-x.part"
    for path in (live, dead, legacy, huge):
        path.write_text("half")
    remove_leftovers(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def _dead_child_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def racing_outputs(inputs_of):
    """Each locking command's arguments, with OUT where its output goes."""
    i = inputs_of
    return {
        "train": ["train", i["frame"], "--spec", i["spec"], "--out", "OUT"],
        "score": ["score", i["npz"], "--models", i["model"], "--out", "OUT"],
        "evaluate": ["evaluate", i["frame"], "--model", i["model"], "--out", "OUT"],
        "rank-graph": ["rank-graph", i["npz"], "--measured", i["measured"], "--out", "OUT"],
        "tune": ["tune", i["frame"], i["valid"], "--spec", i["spec"], "--trials", "1",
                 "--out", "OUT"],
        "report": ["report", i["frame"], "--model", i["model"], "--out", "OUT"],
        "submit": ["submit", i["data"], "--models", i["model"], "--out", "OUT"],
    }


@pytest.mark.parametrize("command", ["train", "score", "evaluate", "rank-graph", "tune",
                                     "report", "submit"])
def test_a_second_run_on_one_output_fails_at_once(racing_outputs, tmp_path, monkeypatch,
                                                  command):
    import time

    out = tmp_path / "racing-out"
    args = [out if a == "OUT" else a for a in racing_outputs[command]]
    refuse_all_work(monkeypatch)
    monkeypatch.setattr("xlarank.systems.rank_graph_with", refuse_work)
    monkeypatch.setattr("xlarank.rank.search.tune_spec", refuse_work)
    started = time.perf_counter()
    with output_lock(out):
        one_error_line(run(*args), str(out), "another xlarank run")
    assert time.perf_counter() - started < 20
    assert not out.exists() and not list(tmp_path.glob(".racing-out.*"))


@pytest.mark.parametrize("command", ["train", "score"])
def test_two_runs_racing_on_one_output_never_crash(inputs_of, tmp_path, command):
    """The issue's repro, in threads: each run writes the output whole or says another
    run holds it; none dies on the other's cleanup."""
    from xlarank.rank.train_specs import train_from_specs

    out = tmp_path / ("model" if command == "train" else "scores.csv")

    def one_run(_):
        try:
            if command == "train":
                train_from_specs(inputs_of["frame"], [inputs_of["spec"]], out)
            else:
                score_files([inputs_of["npz"]], inputs_of["model"], out)
            return "wrote"
        except XlarankError as exc:
            assert "another xlarank run" in str(exc)
            return "refused"

    for _ in range(3):
        with ThreadPoolExecutor(2) as pool:
            outcomes = list(pool.map(one_run, range(2)))
        assert "wrote" in outcomes
        if command == "train":
            assert len(load_model(out).predict(read_frame(inputs_of["frame"])[0])) > 0
        else:
            assert list(pd.read_csv(out).columns)[:2] == ["file", "collection"]
        assert not [p for p in tmp_path.glob(f".{out.name}*")], "nothing half-written left"


# ---------------------------------------------------------------- a full disk

def full_disk(monkeypatch, where: str, code: int = 28):
    """Make ``where`` (a writer) write half its file, then fail as a full disk does."""
    import errno as errnos

    def write_half_then_fail(*args, **kwargs):
        target = next((a for a in (*args, *kwargs.values())
                       if isinstance(a, (str, Path)) and ".part" in str(a)), None)
        if target is not None:
            target = Path(target) / "card.json" if Path(target).is_dir() else Path(target)
            target.write_text("half")
        raise OSError(code, os.strerror(code) if code != 28 else "No space left on device",
                      *([str(target)] if target is not None else []))

    assert code in (errnos.ENOSPC, errnos.EDQUOT, errnos.EROFS, errnos.EACCES)
    monkeypatch.setattr(where, write_half_then_fail)


# The writer each command ends in, as the issue's tracebacks show.
DISK_WRITERS = {
    "featurize": "pyarrow.parquet.write_table",
    "train": "xlarank.rank.ranker.write_card",
    "score": "pandas.DataFrame.to_csv",
    "rank-graph": "pandas.DataFrame.to_csv",
    "evaluate": "pandas.DataFrame.to_csv",
}


@pytest.mark.parametrize("code", [28, 122, 30, 13])  # ENOSPC EDQUOT EROFS EACCES
@pytest.mark.parametrize("command", list(DISK_WRITERS))
def test_a_full_disk_is_one_error_line_and_nothing_half_written(inputs_of, tmp_path,
                                                                 monkeypatch, command, code):
    args_of = {
        "featurize": ["featurize", inputs_of["data"], "--spec", inputs_of["features"],
                      "--collection", "tile-xla", "--split", "test", "--out", "OUT"],
        "train": ["train", inputs_of["frame"], "--spec", inputs_of["spec"], "--out", "OUT"],
        "score": ["score", inputs_of["npz"], "--models", inputs_of["model"], "--out", "OUT"],
        "rank-graph": ["rank-graph", inputs_of["npz"], "--measured", inputs_of["measured"],
                       "--out", "OUT"],
        "evaluate": ["evaluate", inputs_of["frame"], "--model", inputs_of["model"], "--out",
                     "OUT"],
    }
    folder = tmp_path / "outputs"
    folder.mkdir()
    out = folder / ("model" if command == "train" else "out")
    if command == "train":  # an older model, which must survive
        shutil.copytree(inputs_of["model"], out)
    else:
        out.write_text("older output")
    before = contents(out)
    full_disk(monkeypatch, DISK_WRITERS[command], code)
    result = run(*[out if a == "OUT" else a for a in args_of[command]])
    # featurize fails writing a part of the frame, beside it, and names that file
    named = str(folder / ".out.parts") if command == "featurize" else str(out)
    # train may first warn about the tiny data's kernels (some have one distinct config,
    # as a fifth of the real tuning record's do).
    one_error_line(result, named, os.strerror(code).lower() if code != 28
                   else "no space left on device", errno_name(code), warnings=True)
    assert "Traceback" not in result.output
    assert contents(out) == before
    left = sorted(p.name for p in folder.iterdir())
    assert left == sorted([out.name, *([".out.parts"] if command == "featurize" else [])])
    if command == "featurize":
        assert not list((folder / ".out.parts").glob("*.parquet"))


def errno_name(code: int) -> str:
    import errno as errnos

    return errnos.errorcode[code]


def test_write_faults_without_an_errno_are_read_from_the_message(tmp_path):
    """pyarrow raises OSError('... No space left on device') with no errno."""
    out = tmp_path / "f.csv"
    with pytest.raises(XlarankError, match=r"f\.csv: cannot write the output: no space left "
                       r"on device \(ENOSPC\)"), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise OSError("IOError: failed writing: No space left on device")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="Connection reset"), atomic_path(out):
        raise OSError(104, "Connection reset by peer")
