"""Hostile probes of the measured runtimes, the tuner, the systems' settings and scores,
and tile config values: every fault of the input an XlarankError (a MeasuredError for
measured runtimes), never a raw OverflowError, ValueError or TypeError, never NaN scores."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import xlarank
from helpers import TILE, tile_arrays, write_tile
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import TILE_CONFIG_RANGE, load_graph
from xlarank.errors import ArgumentTypeError, BadGraphError, BadModelError, XlarankError
from xlarank.rank.measured import MeasuredError
from xlarank.systems import SYSTEMS, get_system, load_system

LAYOUT = get_collection("layout-nlp-default")


@pytest.fixture(scope="module")
def layout_graph(tiny_data):
    return load_graph(split_files(tiny_data, LAYOUT, "train")[0])


# -- measured runtimes (rank_graph, Tuner.tell) ----------------------------------------

@pytest.mark.parametrize("runtime", [10**400, -(10**400)])
def test_rank_graph_refuses_runtimes_past_float64(layout_graph, runtime):
    with pytest.raises(MeasuredError, match=r"row 3: runtime is not a positive number"):
        xlarank.rank_graph(layout_graph, {"config_index": [0, 1, 2],
                                          "runtime": [1, 2, runtime]})


def test_rank_graph_refuses_an_index_past_float64(layout_graph):
    with pytest.raises(MeasuredError, match=r"row 2: config_index is not a whole number"):
        xlarank.rank_graph(layout_graph, {"config_index": [0, 10**400, 2],
                                          "runtime": [1.0, 2.0, 3.0]})


@pytest.mark.parametrize("runtime", [[1 + 1j, 2, 3], np.array([1, 2 + 0.5j, 3]),
                                     [1, 2, complex(3, -1)]])
def test_rank_graph_refuses_complex_runtimes(layout_graph, runtime):
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        with pytest.raises(MeasuredError, match="runtime is not a positive number"):
            xlarank.rank_graph(layout_graph, {"config_index": [0, 1, 2], "runtime": runtime})


@pytest.mark.parametrize("indices, runtimes, needle", [
    ([0, 1], [1.0], "same length"),
    (np.array([[4, 5]]), np.array([[1.0, 2.0]]), "1-dimensional"),
    ([[0], [1, 2]], [1.0, 2.0], "flat sequence"),
    ([0, 1], [1.0, 10**400], "row 2: runtime is not a positive number"),
    ([0, 1], [1.0, 2 + 1j], "row 2: runtime is not a positive number"),
])
def test_tuner_tell_refuses_bad_columns(layout_graph, indices, runtimes, needle):
    tuner = xlarank.Tuner(layout_graph, seed=0)
    with pytest.raises(MeasuredError, match=needle):
        tuner.tell(indices, runtimes)
    # Nothing was recorded: the tuner goes on as before.
    tuner.tell([0, 1], [1.0, 2.0])
    assert tuner.best() == (0, 1.0)


# -- system settings ---------------------------------------------------------------------

BAD_SETTINGS = [
    ("gru", {"learning_rate": float("nan")}, "learning_rate must be finite"),
    ("gru", {"epochs": -1}, "epochs=-1 is outside its range"),
    ("gru", {"epochs": 10**12}, "epochs=1000000000000 is outside its range"),
    ("gru", {"epochs": 2.5}, "epochs=2.5 is outside its range"),
    ("gru", {"in_graph_inner_share": 5.0}, "in_graph_inner_share=5 is outside its range"),
    ("gru", {"configs_per_graph": 0}, "configs_per_graph=0 is outside its range"),
    ("gru", {"in_graph_learning_rates": [1e-3, -1.0]}, r"in_graph_learning_rates\[1\]"),
    ("gru", {"in_graph_learning_rates": []}, "holds 0 learning rates"),
    ("hybrid", {"k": 100}, "k=100 is outside its range"),
    ("hybrid", {"gnn_in_graph_patience": 0}, "gnn_in_graph_patience=0 is outside"),
    ("tpugraphs-gnn", {"hidden": 10**9}, "hidden=1000000000 is outside its range"),
    ("tpugraphs-gnn", {"infer_budget_mb": -1}, "infer_budget_mb=-1 is outside its range"),
    ("tpugraphs-gnn", {"temperature": 0.0}, "temperature=0 is outside its range"),
    ("competition-gnn", {"dropout": 2.0}, "dropout=2 is outside its range"),
    ("competition-gnn", {"hidden": -3}, "hidden=-3 is outside its range"),
    ("competition-gnn", {"epochs": float("inf")}, "epochs must be finite"),
]


@pytest.mark.parametrize("name, settings, needle", BAD_SETTINGS)
def test_system_settings_outside_their_range_are_refused(name, settings, needle):
    with pytest.raises(XlarankError, match=needle):
        get_system(name)(seed=0, **settings)


@pytest.mark.parametrize("name, settings", [
    ("gru", {"in_graph_refit": 1}), ("gru", {"epochs": "20"}),
    ("competition-gnn", {"cross_attention": "yes"}), ("hybrid", {"k": True}),
    ("tpugraphs-gnn", {"in_graph_learning_rates": 0.01}),
])
def test_system_settings_of_the_wrong_type_are_refused(name, settings):
    with pytest.raises(ArgumentTypeError):
        get_system(name)(seed=0, **settings)


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_every_system_takes_its_defaults(name):
    system = get_system(name)(seed=0, **get_system(name).defaults())
    assert system.settings() == get_system(name).defaults()


def test_whole_number_settings_read_as_ints():
    system = get_system("gru")(seed=0, epochs=3.0, in_graph_learning_rates=[np.float32(0.5)])
    assert system.settings()["epochs"] == 3 and type(system.settings()["epochs"]) is int
    assert system.settings()["in_graph_learning_rates"] == [0.5]


@pytest.mark.parametrize("spec", [5, [1], {"a": 1}, "/etc/passwd", "no-such-spec"])
def test_booster_spec_is_checked_when_made(spec):
    with pytest.raises(XlarankError, match="booster_spec|spec"):
        get_system("xlarank")(seed=0, booster_spec=spec)


def test_booster_spec_names_a_packaged_spec():
    assert get_system("xlarank")(seed=0, booster_spec="baseline").settings() == {
        "booster_spec": "baseline"}


def _card(tmp_path: Path, system: str, settings: dict) -> Path:
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "system.json").write_text(json.dumps(
        {"format": 1, "system": system, "seed": 0, "settings": settings, "history": []}))
    return folder


@pytest.mark.parametrize("system, settings", [
    ("xlarank", {"booster_spec": 5}), ("xlarank", {"booster_spec": [1]}),
    ("xlarank", {"booster_spec": {"a": 1}}), ("xlarank", {"booster_spec": "/etc/passwd"}),
    ("gru", {"epochs": -1}), ("competition-gnn", {"dropout": 2.0}),
    ("tpugraphs-gnn", {"hidden": 10**9}), ("hybrid", {"k": 100}),
])
def test_load_system_refuses_settings_out_of_kind_or_range(tmp_path, system, settings):
    folder = _card(tmp_path, system, settings)
    with pytest.raises(XlarankError, match=r"system\.json: system "):
        load_system(folder)


@pytest.mark.gnn  # fits a GNN system
def test_a_system_that_scores_nan_is_refused(tiny_data):
    files = split_files(tiny_data, LAYOUT, "train")[:2]
    graph = load_graph(split_files(tiny_data, LAYOUT, "valid")[0])
    system = get_system("gru")(seed=0, epochs=1).fit(files, LAYOUT)
    assert np.isfinite(system.score(graph)).all()
    system.readout_ = system.readout_ * np.nan
    with pytest.raises(BadModelError, match="NaN or infinite"):
        system.score(graph)


# -- tile config values ------------------------------------------------------------------

@pytest.mark.parametrize("value", [-5.0, 3.3e38, -1e30, -0.5, float(2**41)])
def test_tile_config_values_outside_their_range_are_refused(tiny_data, tmp_path, value):
    arrays = tile_arrays(tiny_data)
    arrays["config_feat"] = arrays["config_feat"].copy()
    arrays["config_feat"][1, 9] = value
    path = write_tile(arrays, tmp_path)
    with pytest.raises(BadGraphError, match=r"config_feat: column 9 \(output bounds, "
                                            r"dimension 1\) of config 1 is"):
        load_graph(path)


def test_tile_config_values_at_the_ends_of_their_range_load(tiny_data, tmp_path):
    arrays = tile_arrays(tiny_data)
    arrays["config_feat"] = arrays["config_feat"].copy()
    arrays["config_feat"][0, 7] = TILE_CONFIG_RANGE[1]
    arrays["config_feat"][1, 7] = TILE_CONFIG_RANGE[0]
    assert load_graph(write_tile(arrays, tmp_path)).n_configs == len(arrays["config_feat"])


def test_every_real_and_synthetic_tile_file_loads(samples, tiny_data):
    real = [f for f in samples if "/tile/" in f.as_posix()]
    synthetic = [f for split in ("train", "valid", "test")
                 for f in split_files(tiny_data, TILE, split)]
    assert real and synthetic
    files = real + synthetic
    for path in files:
        graph = load_graph(path)
        assert (graph.config_feat >= TILE_CONFIG_RANGE[0]).all()
        assert (graph.config_feat <= TILE_CONFIG_RANGE[1]).all()
