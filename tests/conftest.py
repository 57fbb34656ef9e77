from __future__ import annotations

import os
from pathlib import Path

import pytest

from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.synth import synth_dataset
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path(os.environ.get("XLARANK_SAMPLES", ROOT.parent / "shared" / "tpugraphs"))


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
def frames(tiny_data, tmp_path_factory):
    """Default and baseline frames of every collection's train and valid splits."""
    folder = tmp_path_factory.mktemp("frames")
    out = {}
    for collection in COLLECTIONS:
        for spec in (load_feature_spec(ROOT / "features" / "default.toml"),
                     load_feature_spec(ROOT / "features" / "baseline.toml")):
            for split in ("train", "valid", "test"):
                path = folder / spec.name / collection.slug / f"{split}.parquet"
                featurize_files(split_files(tiny_data, collection, split), path, collection,
                                split, spec)
                out[spec.name, collection.slug, split] = path
    return out
