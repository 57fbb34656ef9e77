"""Hostile inputs and odd environments (issue 13): each case gives one clear error (or a
warning where the result is legal but dubious), never a crash, a traceback, a silent wrong
answer or a clobbered file."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import small
from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.errors import BadModelError
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import read_frame
from xlarank.rank.ensemble import Ensemble, ensemble_card
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

TILE = get_collection("tile-xla")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(result, *needles: str) -> None:
    """Exit 2 and a single ``error:`` line on stderr holding every needle."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    print("MSG", lines[0])
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
