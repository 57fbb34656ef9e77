"""A hostile probe's finds in the library's own entry points: outputs over inputs from
Python, ensembles holding ensembles, thread counts past any machine, and scores that
rank nothing."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import TILE
from xlarank.data.collections import split_files
from xlarank.data.graph import load_graph
from xlarank.errors import BadModelError, XlarankError, XlarankWarning
from xlarank.evaluate import graph_headline
from xlarank.features import load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.rank.model import load_model
from xlarank.score import ranked_configs, score_files
from xlarank.threads import use_threads

ROOT = Path(__file__).resolve().parents[1]


def _copy_tile_file(tiny_data, tmp_path) -> Path:
    source = split_files(tiny_data, TILE, "valid")[0]
    copy = tmp_path / "npz" / "tile" / "xla" / "valid" / source.name
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    return copy


def test_score_files_refuses_to_write_over_its_input(tiny_data, models, tmp_path):
    graph = _copy_tile_file(tiny_data, tmp_path)
    before = graph.read_bytes()
    with pytest.raises(XlarankError, match="input"):
        score_files([graph], models["lightgbm"], graph)
    assert graph.read_bytes() == before


def test_featurize_files_refuses_to_write_over_its_input(tiny_data, tmp_path):
    graph = _copy_tile_file(tiny_data, tmp_path)
    before = graph.read_bytes()
    spec = load_feature_spec(ROOT / "features" / "baseline.toml")
    with pytest.raises(XlarankError, match="input"):
        featurize_files([graph], graph, TILE, "valid", spec)
    assert graph.read_bytes() == before


@pytest.mark.parametrize("neighbour", ["the record", "a file of the user's"])
def test_import_records_never_replaces_a_folder_it_did_not_make(tmp_path, neighbour):
    from xlarank.data.xla import import_records

    record = min((ROOT / "corpus" / "records").glob("*.pb"), key=lambda p: p.stat().st_size)
    folder = tmp_path / "mine"
    folder.mkdir()
    source = folder / record.name
    shutil.copy(record, source)
    notes = folder / "notes.txt"
    notes.write_text("mine\n")
    given = source if neighbour == "the record" else record
    with pytest.raises(XlarankError):
        import_records([given], folder)
    assert source.read_bytes() == record.read_bytes() and notes.read_text() == "mine\n"


@pytest.mark.parametrize("member", ["a copy of the ensemble", "a link to the ensemble"])
def test_an_ensemble_member_that_is_an_ensemble_is_refused(models, tmp_path, member):
    ensemble = tmp_path / "ensemble"
    shutil.copytree(models["ensemble"], ensemble)
    card = json.loads((ensemble / "card.json").read_text())
    first = ensemble / card["members"][0]["dir"]
    shutil.rmtree(first)
    if member == "a copy of the ensemble":
        shutil.copytree(models["ensemble"], first)
    else:
        first.symlink_to(ensemble.resolve(), target_is_directory=True)
    with pytest.raises(BadModelError, match="ensemble where a ranker belongs"):
        load_model(ensemble)


def test_a_thread_count_past_any_machine_is_refused():
    with pytest.raises(XlarankError, match="at most"):
        use_threads(10**9)


class _Constant:
    def __init__(self, value: float):
        self.value = value

    def score(self, graph):
        return np.full(graph.n_configs, self.value)


def test_scores_that_rank_nothing_warn_and_non_finite_ones_are_refused(tiny_data, samples):
    from xlarank.data.distinct import distinct_configs

    graph = next(g for g in map(load_graph, split_files(tiny_data, TILE, "valid"))
                 if len(distinct_configs(g)) > 1)
    with pytest.warns(XlarankWarning, match="one score"):
        ranked_configs(graph, _Constant(0.0))
    # A graph whose configs are all alike can only get one score: no warning there.
    alike = next((p for p in samples if p.name.startswith("0a1c5dcfa9f1")), None)
    if alike is not None:
        same = load_graph(alike)
        assert same.n_configs > 1 and len(distinct_configs(same)) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error", XlarankWarning)
            ranked_configs(same, _Constant(0.0))
    for bad in (np.nan, np.inf):
        with pytest.raises(BadModelError, match="NaN or infinite"):
            ranked_configs(graph, _Constant(bad))
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlarankWarning)
        with pytest.raises(XlarankError, match="finite"):
            graph_headline(graph, np.full(graph.n_configs, np.nan))
        with pytest.raises(XlarankError, match="one per config"):
            graph_headline(graph, np.zeros(3))
