"""What a command writes, and nothing beside it: the frame's parts folder is xlarank's own
(never followed through a link, never a user's folder of that name), and an output that
is also an input, however the reader resolves its path, is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.errors import XlarankError
from xlarank.features import load_feature_spec
from xlarank.featurize import PARTS_MARKER, featurize_files, parts_dir_for

TILE = get_collection("tile-xla")
runner = CliRunner()


def run(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def one_error_line(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


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
    (parts / "stale-0-0a.parquet").write_bytes(b"old")
    (parts / ".x.parquet.123-abc.part").write_bytes(b"half")
    (parts / "sub").mkdir()
    (parts / "sub" / "a.parquet").write_bytes(b"kept")
    (parts / "notes.txt").write_text("kept")
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"kept")
    (parts / "link.parquet").symlink_to(outside)
    featurize(out)
    names = sorted(p.name for p in parts.iterdir())
    assert "stale-0-0a.parquet" not in names and ".x.parquet.123-abc.part" not in names
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
