"""What a command writes, and nothing beside it: the frame's parts folder is xlarank's own
(never followed through a link, never a user's folder of that name), and an output that
is also an input, however the reader resolves its path, is refused."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from helpers import (
    TILE,
    contents,
    one_error_line,
    refuse_all_work,
    refuse_work,
    run,
)
from xlarank.atomic import (
    atomic_dir,
    atomic_path,
    check_output,
)
from xlarank.cli import app
from xlarank.data.collections import split_files
from xlarank.errors import (
    XlarankError,
)
from xlarank.features import load_feature_spec
from xlarank.featurize import PARTS_MARKER, featurize_files, parts_dir_for


@pytest.fixture()
def featurize(tiny_data, repo_specs):
    spec = load_feature_spec(repo_specs.features("default"))
    files = split_files(tiny_data, TILE, "train")[:2]
    return lambda out: featurize_files(files, out, TILE, "train", spec)


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}


# ---------------------------------------------------------------- the parts folder

def test_parts_folder_is_named_by_the_whole_file_name(tmp_path):
    assert parts_dir_for(tmp_path / "train.parquet") == tmp_path / ".train.parquet.parts"
    assert parts_dir_for(tmp_path / "train.pq") != parts_dir_for(tmp_path / "train.parquet")


def test_a_symlinked_parts_folder_is_refused_and_its_target_kept(featurize, tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "photo.parquet").write_bytes(b"precious")
    (target / ".notes.part").write_text("precious")
    out = tmp_path / "f.parquet"
    parts_dir_for(out).symlink_to(target)
    before = tree(target)
    with pytest.raises(XlarankError, match="symbolic link"):
        featurize(out)
    assert tree(target) == before
    assert not out.exists()


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_parts_path_that_is_no_folder_is_one_clear_error(featurize, tmp_path, kind):
    out = tmp_path / "f.parquet"
    parts = parts_dir_for(out)
    if kind == "file":
        parts.write_text("mine")
    else:
        parts.symlink_to(tmp_path / "nowhere")
    with pytest.raises(XlarankError, match="file, not a folder" if kind == "file"
                       else "symbolic link"):
        featurize(out)
    assert os.path.lexists(parts) and not out.exists()


def test_a_users_own_folder_of_that_name_is_not_emptied(featurize, tmp_path):
    out = tmp_path / "f.parquet"
    parts = parts_dir_for(out)
    parts.mkdir()
    (parts / "keep.parquet").write_bytes(b"mine")
    with pytest.raises(XlarankError, match="did not make it"):
        featurize(out)
    assert (parts / "keep.parquet").read_bytes() == b"mine"


def test_an_empty_folder_of_that_name_is_taken(featurize, tmp_path):
    out = tmp_path / "f.parquet"
    parts_dir_for(out).mkdir()
    featurize(out)
    assert (parts_dir_for(out) / PARTS_MARKER).is_file() and out.is_file()


def test_the_sweep_deletes_only_stale_parts_and_temporaries(featurize, tmp_path):
    out = tmp_path / "f.parquet"
    featurize(out)
    parts = parts_dir_for(out)
    (parts / "stale-0-0a.arrow").write_bytes(b"old")
    # An earlier version's parquet part is as stale.
    (parts / "older-0-0a.parquet").write_bytes(b"old")
    (parts / ".x.arrow.123-abc.part").write_bytes(b"half")
    (parts / "sub").mkdir()
    (parts / "sub" / "a.parquet").write_bytes(b"kept")
    (parts / "notes.txt").write_text("kept")
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"kept")
    (parts / "link.parquet").symlink_to(outside)
    featurize(out)
    names = sorted(p.name for p in parts.iterdir())
    assert not {"stale-0-0a.arrow", "older-0-0a.parquet", ".x.arrow.123-abc.part"} & set(names)
    assert "link.parquet" not in names and outside.read_bytes() == b"kept"
    assert (parts / "sub" / "a.parquet").read_bytes() == b"kept"
    assert (parts / "notes.txt").is_file()


def test_outputs_differing_in_suffix_keep_their_own_parts(featurize, tmp_path):
    one, two = tmp_path / "train.parquet", tmp_path / "train.pq"
    featurize(one)
    kept = sorted(p.name for p in parts_dir_for(one).iterdir())
    featurize(two)
    assert sorted(p.name for p in parts_dir_for(one).iterdir()) == kept
    assert one.is_file() and two.is_file()


def test_featurize_cli_refuses_a_symlinked_parts_folder(tiny_data, tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "a.parquet").write_bytes(b"precious")
    out = tmp_path / "f.parquet"
    parts_dir_for(out).symlink_to(target)
    result = run("featurize", tiny_data, "--collection", "tile-xla", "--split", "train",
                 "--out", out)
    one_error_line(result, "symbolic link")
    assert (target / "a.parquet").read_bytes() == b"precious"


# ---------------------------------------------------------------- inputs as readers open them

MEASURED = "config_index,runtime\n0,1000\n1,2000\n2,1500\n"


def tile_file(tiny_data: Path) -> Path:
    return split_files(tiny_data, TILE, "train")[0]


@pytest.mark.parametrize("command", ["rank-graph", "suggest"])
def test_an_output_that_is_the_measured_csv_by_tilde_is_refused(tiny_data, tmp_path,
                                                                  monkeypatch, command):
    """pandas expands ~: "~/m.csv" and $HOME/m.csv are one file."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    measured = home / "m.csv"
    measured.write_text(MEASURED)
    result = run(command, tile_file(tiny_data), "--measured", "~/m.csv", "--out", measured)
    one_error_line(result, "is the input")
    assert measured.read_text() == MEASURED


def test_a_tilde_measured_csv_is_read_from_home(tiny_data, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "m.csv").write_text(MEASURED)
    out = tmp_path / "r.csv"
    result = run("rank-graph", tile_file(tiny_data), "--measured", "~/m.csv", "--out", out)
    assert result.exit_code == 0, result.output
    assert out.is_file()


def test_a_measured_csv_named_like_a_url_is_read_as_a_file_name(tiny_data, tmp_path,
                                                                  monkeypatch):
    """pandas opens file:/... as a URL; xlarank reads the name as given."""
    measured = tmp_path / "m.csv"
    measured.write_text(MEASURED)
    monkeypatch.chdir(tmp_path)
    result = run("rank-graph", tile_file(tiny_data), "--measured", f"file:{measured}",
                 "--out", measured)
    one_error_line(result, "not found")
    assert measured.read_text() == MEASURED


@pytest.mark.parametrize("how", ["symlink", "hard link", "dotdot"])
def test_an_output_that_is_the_measured_csv_another_way_is_refused(tiny_data, tmp_path,
                                                                    how):
    measured = tmp_path / "m.csv"
    measured.write_text(MEASURED)
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        given = tmp_path / "link.csv"
        given.symlink_to(measured)
    elif how == "hard link":
        given = tmp_path / "hard.csv"
        os.link(measured, given)
    else:
        given = tmp_path / "sub" / ".." / "m.csv"
    result = run("suggest", tile_file(tiny_data), "--measured", given, "--out", measured)
    one_error_line(result, "is the input")
    assert measured.read_text() == MEASURED


def test_a_frame_given_by_tilde_is_an_input_of_evaluate(frames, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    frame = home / "f.parquet"
    frame.write_bytes(frames["default", "tile-xla", "valid"].read_bytes())
    before = frame.read_bytes()
    result = run("evaluate", "~/f.parquet", "--random", "--out", frame)
    one_error_line(result, "is the input")
    assert frame.read_bytes() == before


# ---------------------------------------------------------------- systems

def test_saving_a_system_never_fitted_is_an_error_and_writes_nothing(tmp_path):
    from xlarank.systems import get_system

    system = get_system("xlarank")(seed=0)
    out = tmp_path / "system"
    out.mkdir()
    with pytest.raises(XlarankError, match="not fitted"):
        system.save(out)
    assert list(out.iterdir()) == []


def test_a_failed_save_leaves_no_half_written_system(tiny_data, tmp_path, monkeypatch):
    import pandas as pd

    from xlarank.data.graph import load_graph
    from xlarank.systems import get_system

    graph = load_graph(split_files(tiny_data, TILE, "train")[0])
    runtime = pd.Series(graph.config_runtime[:6].astype(float), index=range(6))
    system = get_system("xlarank")(seed=0).fit_graph(graph, runtime)
    out = tmp_path / "system"
    out.mkdir()

    def half(self, out_dir):
        (out_dir / "part.bin").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(system), "_save", half)
    with pytest.raises(OSError):
        system.save(out)
    assert list(out.iterdir()) == []


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
    # import's input checks are tests/test_xla_import.py's; measure's and corpus's are
    # tests/test_measure.py's.
    assert writing == {c.split()[0] for c in WRITERS} | {"synth", "import", "measure",
                                                          "corpus"}


@pytest.mark.parametrize("reads, name, refused", [
    (None, "anything.csv", True), ("*.summary.json", "summary.csv", False),
    ("*.summary.json", "x.summary.json", True), ("*.npz", "deep/er/w.npz", True),
])
def test_check_outputs_inside_folder_inputs(tmp_path, reads, name, refused):
    from xlarank.outputs import Input, check_outputs

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
    from xlarank.outputs import Input, check_outputs

    (tmp_path / "data" / "a").mkdir(parents=True)
    (tmp_path / "data" / "a" / "g.npz").write_bytes(b"graph")
    os.link(tmp_path / "data" / "a" / "g.npz", tmp_path / "out.npz")
    with pytest.raises(XlarankError, match="g.npz by a hard link"):
        check_outputs([tmp_path / "out.npz"], [Input(tmp_path / "data", "*.npz")])


def test_check_outputs_refuses_two_outputs_on_one_file_and_passes_plain_ones(tmp_path):
    from xlarank.outputs import Output, check_outputs

    (tmp_path / "in.csv").write_text("x")
    with pytest.raises(XlarankError, match="given for two outputs"):
        check_outputs([tmp_path / "a.csv", tmp_path / "sub" / ".." / "a.csv"])
    assert check_outputs([tmp_path / "a.csv", Output(tmp_path / "m", "dir")],
                         [tmp_path / "in.csv", None, tmp_path / "missing"]) == [
        tmp_path / "a.csv", tmp_path / "m"]
