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

from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.synth import synth_dataset
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files

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
def frames(tiny_data, repo_specs, tmp_path_factory):
    """Default and baseline frames of every collection's train and valid splits."""
    folder = tmp_path_factory.mktemp("frames")
    out = {}
    for collection in COLLECTIONS:
        for spec in (load_feature_spec(repo_specs.features("default")),
                     load_feature_spec(repo_specs.features("baseline"))):
            for split in ("train", "valid", "test"):
                path = folder / spec.name / collection.slug / f"{split}.parquet"
                featurize_files(split_files(tiny_data, collection, split), path, collection,
                                split, spec)
                out[spec.name, collection.slug, split] = path
    return out
