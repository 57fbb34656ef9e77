"""The Python API as the README shows it: rank_graph and ranked_configs take a path, a loaded
graph, a CSV path or a dict; a call of the wrong type is a TypeError naming the argument; a model
of another collection is a MismatchError."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from helpers import (
    first_file,
)
from xlarank.data.collections import get_collection
from xlarank.data.graph import load_graph
from xlarank.errors import (
    MismatchError,
    XlarankError,
)
from xlarank.rank.ingraph import rank_graph
from xlarank.rank.model import load_model
from xlarank.score import ranked_configs


@pytest.fixture(scope="module")
def layout_case(tiny_data):
    path = first_file(tiny_data, "layout-xla-default")
    graph = load_graph(path)
    rows = np.arange(min(graph.n_configs, 30))
    measured = pd.DataFrame({"config_index": rows,
                             "runtime": graph.config_runtime[rows].astype(np.float64)})
    return path, measured, rank_graph(path, measured, threads=1)


def test_rank_graph_takes_a_graph_loaded_without_configs(layout_case):
    path, measured, expected = layout_case
    graph = load_graph(path, configs=False)
    pd.testing.assert_frame_equal(rank_graph(graph, measured, threads=1), expected)


@pytest.mark.parametrize("form", ["csv str", "csv Path", "dict"])
def test_rank_graph_takes_a_csv_path_or_a_dict(layout_case, tmp_path, form):
    path, measured, expected = layout_case
    csv = tmp_path / "m.csv"
    measured.to_csv(csv, index=False)
    given = {"csv str": str(csv), "csv Path": csv,
             "dict": {k: measured[k].tolist() for k in measured}}[form]
    pd.testing.assert_frame_equal(rank_graph(path, given, threads=1), expected)


@pytest.mark.parametrize("call, needle", [
    (lambda p, m: rank_graph(p, None), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(p, 5), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(p, [1, 2]), "measured: expected a DataFrame"),
    (lambda p, m: rank_graph(None, m), "graph: expected an npz path"),
    (lambda p, m: rank_graph(3, m), "graph: expected an npz path"),
    (lambda p, m: rank_graph(p, m, seed="x"), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, seed=1.5), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, seed=True), "seed: expected an int"),
    (lambda p, m: rank_graph(p, m, threads="2"), "threads: expected an int"),
    (lambda p, m: rank_graph(p, m, prior=5), "prior: expected a model directory"),
    (lambda p, m: load_graph(None), "load_graph: expected an npz path"),
    (lambda p, m: load_model(None), "load_model: expected a model directory"),
    (lambda p, m: ranked_configs(None, None), "graph: expected an npz path"),
    (lambda p, m: ranked_configs(p, 5), "ranker: expected a model"),
])
def test_api_calls_of_the_wrong_type_are_type_errors(layout_case, capfd, call, needle):
    path, measured, _ = layout_case
    with pytest.raises(TypeError, match=re.escape(needle)):
        call(path, measured)
    assert "[LightGBM]" not in capfd.readouterr().out


@pytest.mark.parametrize("threads", [-3, -1])
def test_rank_graph_refuses_negative_threads(layout_case, threads):
    path, measured, _ = layout_case
    with pytest.raises(XlarankError, match=f"threads={threads}"):
        rank_graph(path, measured, threads=threads)


@pytest.mark.parametrize("graph_slug, model_slug", [
    ("tile-xla", "layout-xla-default"),
    ("layout-xla-default", "tile-xla"),
    ("layout-nlp-default", "layout-xla-default"),
    ("layout-xla-random", "layout-xla-default"),
])
def test_ranked_configs_refuses_a_model_of_another_collection(tiny_data, models, graph_slug,
                                                              model_slug):
    graph = load_graph(first_file(tiny_data, graph_slug), configs=False)
    with pytest.raises(MismatchError, match=f"trained on {get_collection(model_slug).id}"):
        ranked_configs(graph, load_model(models[model_slug]))


def test_ranked_configs_of_a_loose_file_checks_tile_against_layout(tiny_data, models,
                                                                    tmp_path):
    loose = tmp_path / "g.npz"
    shutil.copy(first_file(tiny_data, "tile-xla"), loose)
    with pytest.raises(MismatchError, match="a tile graph"):
        ranked_configs(load_graph(loose), load_model(models["layout-xla-default"]))


def test_ranked_configs_takes_paths_as_the_readme_shows(tiny_data, models):
    path = first_file(tiny_data, "tile-xla")
    model = load_model(models["tile-xla"])
    order, score = ranked_configs(load_graph(path, configs=False), model)
    by_path, by_path_score = ranked_configs(path, models["tile-xla"])
    np.testing.assert_array_equal(order, by_path)
    np.testing.assert_array_equal(score, by_path_score)
