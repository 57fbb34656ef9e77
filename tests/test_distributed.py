"""distributed.py and rank/dask.py: the Dask engine on a LocalCluster of 2 worker processes on
loopback: same answers as the local engine for featurize and score, training metrics within
the local run-to-run noise."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import REPO_SPECS
from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.distributed import dask_client, engine_client
from xlarank.errors import XlarankError
from xlarank.evaluate import headline_metric, per_graph_metrics, summarize
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame, read_meta
from xlarank.rank.dask import train_ranker_dask
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import score_files

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))
BASELINE = load_feature_spec(REPO_SPECS.features("baseline"))
LAYOUT = get_collection("layout-xla-random")

pytestmark = pytest.mark.dask


@pytest.fixture(scope="module")
def client():
    with dask_client(None, workers=2) as dask:
        assert len(dask.scheduler_info()["workers"]) == 2
        assert all(a.startswith("tcp://127.0.0.1:") for a in dask.scheduler_info()["workers"])
        yield dask


@pytest.fixture(scope="module")
def frames(tiny_data, tmp_path_factory, client):
    """Default and baseline frames made by both engines, in row groups of a few graphs, so
    training has several partitions (real frames hold many 65,536-row groups)."""
    import xlarank.frame as frame_module

    folder = tmp_path_factory.mktemp("dask-frames")
    out = {}
    # A module-scoped fixture cannot take monkeypatch; the context undoes the patch on leaving,
    # also when featurizing fails.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_module, "ROW_GROUP_ROWS", 20)
        for spec in (DEFAULT, BASELINE):
            for split in ("train", "valid"):
                files = split_files(tiny_data, LAYOUT, split)
                for engine, dask in (("local", None), ("dask", client)):
                    path = folder / engine / spec.name / f"{split}.parquet"
                    featurize_files(files, path, LAYOUT, split, spec, client=dask)
                    out[engine, spec.name, split] = path
    return out


@pytest.mark.slow
def test_featurize_output_identical(frames):
    for spec in ("default", "baseline"):
        for split in ("train", "valid"):
            local, dask = frames["local", spec, split], frames["dask", spec, split]
            pd.testing.assert_frame_equal(read_frame(local)[0], read_frame(dask)[0])
            assert read_meta(local) == read_meta(dask)
            assert local.read_bytes() == dask.read_bytes()


def valid_metric(ranker, frames, spec_name):
    valid, _ = read_frame(frames["local", spec_name, "valid"])
    metric = headline_metric(False)
    return summarize(per_graph_metrics(valid, ranker.predict(valid), False))[metric]


@pytest.mark.slow
@pytest.mark.parametrize("spec_file", ["lgbm.toml", "xgb.toml"])
def test_training_within_local_run_to_run_noise(frames, spec_dir, client, spec_file):
    """Tolerance: the Dask model's validation tau is no lower than the range of the local
    engine's over eight seeds, widened by that range. Data-parallel boosting builds
    histograms from per-worker shards, so its trees are not the local ones (nor the same
    from run to run); what must hold is that it does not lose more than the seed-to-seed
    difference. Only the low side is held: with config_nodes' 384 layout columns the tiny
    valid split's tau spread over -0.05..0.34 locally, and the Dask model landed on 0.24 in
    some runs and 0.56 in others, above every local seed, which says the split is small,
    not that the engine is wrong."""
    spec = load_ranker_spec(spec_dir / spec_file)
    name = spec.features
    train, meta = read_frame(frames["local", name, "train"])
    local_rankers = [train_ranker(train, meta, dataclasses.replace(spec, seed=s))
                     for s in range(8)]
    local = [valid_metric(r, frames, name) for r in local_rankers]
    ranker = train_ranker_dask(client, frames["dask", name, "train"], spec)
    # Both workers hold training partitions, so the booster really trains on two.
    assert ranker.card["engine"] == {"name": "dask", "workers": 2, "workers_with_data": 2}
    same_seed = next(r for r in local_rankers if r.card["seed"] == spec.seed)
    # Same graphs and the same sampled configs as the local engine (seeded per graph id).
    assert ranker.card["training_data"] == same_seed.card["training_data"]
    dask = valid_metric(ranker, frames, name)
    low, high = min(local), max(local)
    margin = max(high - low, 0.05)
    assert dask >= low - margin, (dask, local)


def test_dask_training_refuses_what_local_refuses(frames, spec_dir, client, tiny_data, tmp_path):
    from xlarank.errors import MismatchError

    with pytest.raises(MismatchError, match="wants 'baseline'"):
        train_ranker_dask(client, frames["dask", "default", "train"],
                          load_ranker_spec(spec_dir / "xgb.toml"))
    test = tmp_path / "test.parquet"
    featurize_files(split_files(tiny_data, LAYOUT, "test"), test, LAYOUT, "test", DEFAULT)
    with pytest.raises(MismatchError, match="no runtimes"):
        train_ranker_dask(client, test, load_ranker_spec(spec_dir / "lgbm.toml"))


def test_score_identical(frames, spec_dir, client, tiny_data, tmp_path):
    train, meta = read_frame(frames["local", "default", "train"])
    train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml")).save(tmp_path / "m")
    files = split_files(tiny_data, LAYOUT, "valid") + split_files(tiny_data, LAYOUT, "test")
    score_files(files, tmp_path / "m", tmp_path / "local.csv")
    score_files(files, tmp_path / "m", tmp_path / "dask.csv", client=client)
    assert (tmp_path / "local.csv").read_text() == (tmp_path / "dask.csv").read_text()
    rows = list(csv.DictReader(open(tmp_path / "dask.csv")))
    assert {r["file"] for r in rows} == {str(f) for f in files}


@pytest.mark.slow
def test_cli_dask_engine(tiny_data, spec_dir, tmp_path):
    """The CLI starts its own local cluster for --engine dask."""
    runner = CliRunner()
    result = runner.invoke(app, ["featurize", str(tiny_data), "--collection", LAYOUT.slug,
                                 "--split", "train", "--out", str(tmp_path / "f.parquet"),
                                 "--engine", "dask", "--workers", "2"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["train", str(tmp_path / "f.parquet"), "--spec",
                                 str(spec_dir / "lgbm.toml"), "--out", str(tmp_path / "m"),
                                 "--engine", "dask", "--workers", "2"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["score", str(tiny_data / "npz" / "layout" / "xla" / "random"),
                                 "--models", str(tmp_path / "m"), "--out", str(tmp_path / "s.csv"),
                                 "--engine", "dask", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert np.isfinite(pd.read_csv(tmp_path / "s.csv")["score"]).all()
    bad = runner.invoke(app, ["featurize", str(tiny_data), "--scheduler", "tcp://127.0.0.1:1"])
    assert bad.exit_code == 2 and "--engine dask" in bad.stderr


def test_engine_client_local_and_errors():
    with engine_client("local") as client:
        assert client is None
    for engine, scheduler, message in (("local", "tcp://h:1", "--scheduler needs"),
                                       ("spark", None, "unknown engine")):
        with pytest.raises(XlarankError, match=message), engine_client(engine, scheduler):
            raise AssertionError(f"engine {engine!r} with scheduler {scheduler!r} was accepted")
