"""Packaged specs: the top-level features/ and models/ specs ship in the package, commands
take their names from any folder, and train without --spec uses the collection's default.
The wheel test builds and installs the package in a fresh venv and runs it from a
temporary folder (slow: CI runs it with the whole suite)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import COLLECTIONS
from xlarank.errors import SpecError
from xlarank.features import load_feature_spec
from xlarank.rank.ensemble import load_training_plan
from xlarank.specs import PACKAGED, default_booster_spec, packaged_specs, spec_path

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_the_package_holds_the_repository_specs_not_copies():
    # One copy of each spec: the package's folders are the top-level ones.
    assert (PACKAGED / "features").resolve() == (ROOT / "features").resolve()
    assert (PACKAGED / "models").resolve() == (ROOT / "models").resolve()


def test_every_packaged_spec_loads(repo_specs):
    found = packaged_specs()
    names = {(s.kind, s.name) for s in found}
    assert {("feature", "default"), ("feature", "baseline"), ("booster", "baseline")} <= names
    assert {("booster", c.slug) for c in COLLECTIONS} <= names
    assert {("booster", f"ensembles/{c.slug}") for c in COLLECTIONS} <= names
    assert not any(s.name.startswith(("trained", "tuned")) for s in found)
    for spec in found:
        assert spec.summary, spec.path
        if spec.kind == "feature":
            load_feature_spec(spec.path)
        else:
            load_training_plan(spec.path)
    tracked = {p.relative_to(ROOT).as_posix() for p in
               [*ROOT.glob("features/*.toml"), *ROOT.glob("models/*.toml"),
                *ROOT.glob("models/ensembles/*.toml"), *ROOT.glob("models/objectives/*.toml")]}
    packaged = {s.path.resolve().relative_to(ROOT.resolve()).as_posix() for s in found}
    assert packaged == tracked


@pytest.mark.parametrize("given, kind, expected", [
    ("default", "feature", "features/default.toml"),
    ("default.toml", "feature", "features/default.toml"),
    ("tile-xla", "booster", "models/tile-xla.toml"),
    ("ensembles/layout-xla-random", "booster", "models/ensembles/layout-xla-random.toml"),
    ("objectives/xendcg.toml", "booster", "models/objectives/xendcg.toml"),
])
def test_spec_names_find_packaged_files(given, kind, expected):
    assert spec_path(given, kind).resolve() == (ROOT / expected).resolve()


def test_an_existing_file_wins_over_a_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("default").write_text('name = "mine"\nfamilies = ["graph"]\n')
    assert spec_path("default", "feature") == Path("default")


@pytest.mark.parametrize("given, kind", [
    ("nope", "feature"), ("tile-xla", "feature"), ("default", "booster"), ("../features/default",
                                                                          "booster"),
])
def test_unknown_specs_list_the_packaged_ones(given, kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=rf"{kind} spec not found .*packaged: .*"):
        spec_path(given, kind)


def test_default_booster_spec_of_each_collection():
    for collection in COLLECTIONS:
        assert default_booster_spec(collection.slug).name == f"{collection.slug}.toml"


def test_commands_work_from_another_folder_without_spec_files(tiny_data, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["featurize", str(tiny_data), "--collection", "tile-xla",
                                 "--split", "train", "--out", "train.parquet"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["train", "train.parquet", "--out", "model"])
    assert result.exit_code == 0, result.output
    import json

    card = json.loads(Path("model/card.json").read_text())
    assert card["spec"]["name"] == "xlarank" and card["collection"] == "tile:xla"
    assert card["spec"]["objective"] == "lambdarank"
    result = runner.invoke(app, ["train", "train.parquet", "--out", "m2", "--spec",
                                 "objectives/xendcg"])
    assert result.exit_code == 0, result.output
    assert json.loads(Path("m2/card.json").read_text())["spec"]["objective"] == "rank_xendcg"


def test_specs_command_lists_names():
    result = runner.invoke(app, ["specs", "--kind", "booster"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "tile-xla" in result.output and "ensembles/tile-xla" in result.output
    assert "│ feature" not in result.output and "│ booster" in result.output
    result = runner.invoke(app, ["specs", "--kind", "model"])
    assert result.exit_code == 2 and "known kinds are feature, booster" in result.output


@pytest.mark.slow
def test_the_wheel_works_from_a_temporary_folder(tmp_path):
    """Build the wheel, install it alone in a fresh venv (its dependencies come from this
    environment's site-packages, so no network is needed), and run featurize, train
    (packaged default spec) and score from an empty folder."""
    # Built from a copy of the sources: a build writes build/ and egg-info beside them.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for spec in [*ROOT.glob("features/*.toml"), *ROOT.glob("models/**/*.toml")]:
        relative = spec.relative_to(ROOT)
        if relative.parts[1] not in ("trained", "tuned"):
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(spec, source / relative)
    wheels = tmp_path / "wheels"
    # Built as pip builds it, in an isolated environment with the build-system's
    # setuptools (the test environment's own may be older than pyproject asks).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(wheels), str(source)], check=True, cwd=tmp_path)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    here = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig."
                           "get_paths()['purelib'])"], check=True, capture_output=True,
                          text=True)
    # The dependencies, after the venv's own packages; this environment's editable
    # xlarank is not seen (a path line in a .pth file does not run that folder's .pth).
    Path(site.stdout.strip(), "dependencies.pth").write_text(here.stdout.strip() + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    *map(str, wheels.glob("xlarank-*.whl"))], check=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": ""}
    xlarank = str(env_dir / "bin" / "xlarank")

    def run(*args: str) -> str:
        done = subprocess.run([xlarank, *args], cwd=work, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = subprocess.run([str(python), "-c", "import xlarank.specs as s; print(s.PACKAGED)"],
                           cwd=work, env=env, check=True, capture_output=True, text=True)
    assert str(env_dir) in where.stdout and str(ROOT) not in where.stdout
    run("synth", "data", "--preset", "tiny", "--seed", "1")
    run("featurize", "data", "--collection", "layout-xla-random", "--split", "train")
    run("train", "features/frames/default/layout-xla-random/train.parquet", "--out", "model")
    run("score", "data/npz/layout/xla/random/test", "--models", "model", "--out", "s.csv")
    assert (work / "s.csv").read_text().startswith("file,collection,graph_id,rank")
    assert "tile-xla" in run("specs")
