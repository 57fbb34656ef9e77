from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

# LightGBM's OpenMP threads spin while they wait. On a busy machine with few cores (CI, or a
# laptop running two things) the spinning threads starve the working one and a 0.2 s
# training takes 5 s. Passive waiting changes no result, only how idle threads wait. Set
# before anything loads libgomp (the xlarank imports below); a value already set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import shutil

from helpers import TILE, Lazy, copy_model, dataset_copy
from xlarank.data.collections import get_collection, split_files
from xlarank.data.synth import synth_dataset
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame
from xlarank.rank.ensemble import Ensemble, ensemble_card
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path(os.environ.get("XLARANK_SAMPLES", ROOT.parent / "shared" / "tpugraphs"))


class RepoSpecs:
    """The repository's own spec files (features/*.toml, models/**/*.toml), all found from
    ROOT, so tests do not depend on the working directory."""

    def __init__(self, root: Path):
        self.root = root

    def features(self, name: str = "default") -> Path:
        """features/<name>.toml, e.g. features("baseline")."""
        return self.root / "features" / f"{name}.toml"

    def models(self, name: str) -> Path:
        """models/<name>.toml; name may hold a folder: models("objectives/lambdarank")."""
        return self.root / "models" / f"{name}.toml"

    def objectives(self) -> list[Path]:
        """models/objectives/*.toml, sorted."""
        return sorted((self.root / "models" / "objectives").glob("*.toml"))

    def ensembles(self) -> list[Path]:
        """models/ensembles/*.toml, sorted."""
        return sorted((self.root / "models" / "ensembles").glob("*.toml"))


# The one instance: test modules that need spec files at import time (module constants,
# parametrize lists) take it as `from conftest import REPO_SPECS`; tests take the fixture.
REPO_SPECS = RepoSpecs(ROOT)


@pytest.fixture(scope="session")
def repo_specs() -> RepoSpecs:
    """The repository's spec files: repo_specs.features("default"), .models("tile-xla")."""
    return REPO_SPECS


def small(spec, rounds=15):
    """A ranker spec cut down to test size."""
    return dataclasses.replace(spec, num_rounds=rounds, max_configs_per_graph=40,
                               params={**spec.params, "min_data_in_leaf": 5}
                               if spec.library == "lightgbm" else spec.params)


def sample_files() -> list[Path]:
    """The real TpuGraphs sample files. In CI their absence is a failure, not a skip."""
    files = sorted((SAMPLES / "npz").rglob("*.npz"))
    if not files:
        if os.environ.get("CI") == "true":
            pytest.fail(f"real TpuGraphs samples missing at {SAMPLES} (required in CI)")
        pytest.skip(f"real TpuGraphs samples not found at {SAMPLES}")
    return files


@pytest.fixture(scope="session")
def samples() -> list[Path]:
    return sample_files()


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """A tiny synthetic dataset in the official tree (all five collections)."""
    return synth_dataset(tmp_path_factory.mktemp("synth") / "tiny", "tiny", seed=7)


@pytest.fixture(scope="session")
def spec_dir(tmp_path_factory) -> Path:
    """Small booster specs, fast enough for tests."""
    folder = tmp_path_factory.mktemp("specs")
    (folder / "lgbm.toml").write_text(
        'name = "xlarank"\nfeatures = "default"\nlibrary = "lightgbm"\n'
        'objective = "lambdarank"\nnum_rounds = 20\nmax_configs_per_graph = 25\nseed = 3\n'
        "[params]\nmin_data_in_leaf = 5\nnum_leaves = 7\n")
    (folder / "xgb.toml").write_text(
        'name = "baseline"\nfeatures = "baseline"\nlibrary = "xgboost"\n'
        'objective = "rank:pairwise"\nnum_rounds = 20\nseed = 3\n')
    return folder


@pytest.fixture(scope="session")
def frames(tiny_data, repo_specs, tmp_path_factory) -> Lazy:
    """Default and baseline frames of every collection's train, valid and test splits:
    frames["default", "tile-xla", "train"] is a parquet path, featurized when first asked
    for."""
    specs = {name: load_feature_spec(repo_specs.features(name))
             for name in ("default", "baseline")}
    folder = tmp_path_factory.mktemp("frames")

    def make(key: tuple[str, str, str]) -> Path:
        spec_name, slug, split = key
        if spec_name not in specs or split not in ("train", "valid", "test"):
            raise KeyError(key)
        collection = get_collection(slug)
        path = folder / spec_name / slug / f"{split}.parquet"
        featurize_files(split_files(tiny_data, collection, split), path, collection, split,
                        specs[spec_name])
        return path

    return Lazy(make)


@pytest.fixture(scope="session")
def tile_frames(tiny_data, repo_specs, tmp_path_factory):
    """Tile train frames of the default and baseline specs."""
    folder = tmp_path_factory.mktemp("tile_frames")
    out = {}
    for name in ("default", "baseline"):
        path = folder / f"{name}.parquet"
        featurize_files(split_files(tiny_data, TILE, "train"), path, TILE, "train",
                        load_feature_spec(repo_specs.features(name)))
        out[name] = path
    return out


@pytest.fixture(scope="session")
def models(tile_frames, frames, spec_dir, tmp_path_factory):
    """Small saved models, never changed by a test (copy_model gives one to change). Of the
    tile frames: "lightgbm" (seeds 3 and "lightgbm-other" 4), "xgboost" and "ensemble" (the
    two LightGBM ones); of the default spec's train frames: "tile-xla" and
    "layout-xla-default"."""
    folder = tmp_path_factory.mktemp("models")
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
    for slug in ("tile-xla", "layout-xla-default"):
        table, meta = read_frame(frames["default", slug, "train"])
        spec = small(load_ranker_spec(spec_dir / "lgbm.toml"), rounds=5)
        out[slug] = train_ranker(table, meta, spec).save(folder / slug)
    return out


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


# A test that runs for minutes (a whole pipeline, a jax training) would leave `make test`
# silent for that long: every HEARTBEAT_S seconds a line names it and its time so far.
HEARTBEAT_S = 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    import threading
    import time

    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    done = threading.Event()
    started = time.monotonic()

    capture = item.config.pluginmanager.get_plugin("capturemanager")

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            # As pytest's live logging writes past the capture of a running test.
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"  ... {item.nodeid} still running "
                                    f"({time.monotonic() - started:.0f} s)")

    thread = None
    if (reporter is not None and capture is not None
            and not hasattr(item.config, "workerinput")):
        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
    try:
        yield
    finally:
        done.set()
        if thread is not None:
            thread.join()


@pytest.fixture(scope="session")
def layout_file(tiny_data) -> Path:
    """The tiny dataset's first layout:xla:random train file."""
    return split_files(tiny_data, get_collection("layout-xla-random"), "train")[0]


@pytest.fixture(scope="session")
def tile_file(tiny_data) -> Path:
    """The tiny dataset's first tile train file."""
    return split_files(tiny_data, TILE, "train")[0]
