"""atomic.py: outputs written whole or not at all (the umask honoured, a full disk one error line
and nothing half-written), leftovers of killed runs removed and a live writer's kept, and the
lock that makes a second run on one output fail at once."""

from __future__ import annotations

import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from helpers import (
    TILE,
    contents,
    copy_model,
    one_error_line,
    refuse_all_work,
    refuse_work,
    run,
)
from xlarank.atomic import (
    atomic_dir,
    atomic_path,
    output_lock,
    write_text_atomic,
)
from xlarank.data.collections import split_files
from xlarank.errors import (
    XlarankError,
)
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame
from xlarank.rank.model import load_model
from xlarank.score import score_files


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
    monkeypatch.setattr("xlarank.rank.ingraph.rank_graph", refuse_work)
    monkeypatch.setattr("xlarank.rank.search.tune_spec", refuse_work)
    started = time.perf_counter()
    with output_lock(out):
        one_error_line(run(*args), str(out), "another xlarank run")
    assert time.perf_counter() - started < 20
    assert not out.exists() and not list(tmp_path.glob(".racing-out.*"))


@pytest.mark.parametrize("command", ["train", "score"])
def test_two_runs_racing_on_one_output_never_crash(inputs_of, tmp_path, command):
    """Two trainings or scorings on one output used to fail with FileNotFoundError; here in
    threads: each run writes the output whole or says another run holds it; none dies on
    the other's cleanup."""
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


# The writer each command ends in, where a full disk's OSError is raised.
DISK_WRITERS = {
    "featurize": "pyarrow.OSFile",
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
    # featurize's parts folder, made by this run and holding no part, goes with it.
    assert sorted(p.name for p in folder.iterdir()) == [out.name]


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
