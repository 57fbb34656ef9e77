"""rank-graph's table: exact copies of a config share its place (all their measurements
pooled, an unmeasured copy of a measured config placed with it, each copy marked), and a
model that gives every unmeasured config one score is caught: warned about and replaced,
never passed off as an order."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import XlarankWarning
from xlarank.rank.ingraph import rank_graph
from xlarank.rank.measured import config_groups
from xlarank.systems import RankingSystem, rank_graph_with

TILE = get_collection("tile-xla")


@pytest.fixture(scope="module")
def copied(tiny_data):
    """A tile graph whose configs 1 and 5 are exact copies of config 0, 7 of 3."""
    graph = load_graph(split_files(tiny_data, TILE, "train")[0])
    feat = graph.config_feat.copy()
    feat[:, 0] = np.arange(graph.n_configs)  # no copies but those made here
    feat[[1, 5]] = feat[0]
    feat[7] = feat[3]
    assert graph.n_configs > 12 and len(np.unique(feat, axis=0)) == graph.n_configs - 3
    return dataclasses.replace(graph, config_feat=feat)


def measured(rows, runtimes):
    return pd.DataFrame({"config_index": rows, "runtime": np.asarray(runtimes, float)})


def test_config_groups_name_the_lowest_copy(copied):
    groups = config_groups(copied)
    assert groups[[0, 1, 5, 3, 7]].tolist() == [0, 0, 0, 3, 3]
    assert (groups[[2, 4, 6]] == [2, 4, 6]).all()


def test_copies_with_conflicting_measurements_share_one_place(copied):
    rows = [0, 1, 2, 3, 4, 6, 8, 9, 10]
    table = rank_graph(copied, measured(rows, [100, 900, 200, 300, 400, 500, 600, 700,
                                               800]))
    at = {c: i for i, c in enumerate(table["config_index"])}
    # one median of both measurements (500), one score, next to each other
    assert table.loc[at[0], "runtime"] == table.loc[at[1], "runtime"] == 500
    assert table.loc[at[0], "score"] == table.loc[at[1], "score"]
    assert abs(at[0] - at[1]) == 1
    assert table.loc[at[1], "copy_of"] == 0 and table.loc[at[0], "copy_of"] == -1


def test_an_unmeasured_copy_of_a_measured_config_takes_its_place(copied):
    rows = [0, 2, 3, 4, 6, 8, 9, 10]
    table = rank_graph(copied, measured(rows, [100, 200, 300, 400, 500, 600, 700, 800]))
    at = {c: i for i, c in enumerate(table["config_index"])}
    for copy, original in ((1, 0), (5, 0), (7, 3)):
        assert table.loc[at[copy], "score"] == table.loc[at[original], "score"]
        assert table.loc[at[copy], "runtime"] == table.loc[at[original], "runtime"]
        assert not table.loc[at[copy], "measured"]
        assert table.loc[at[copy], "copy_of"] == original
    assert [table["config_index"][i] for i in range(3)] == [0, 1, 5]
    assert (table["copy_of"] >= 0).sum() == 3


def test_the_table_has_a_copy_of_column(copied):
    table = rank_graph(copied, measured([0, 2, 3], [100, 200, 300]))
    assert list(table.columns) == ["rank", "config_index", "score", "measured", "runtime",
                                   "copy_of"]


def test_one_score_for_every_unmeasured_config_is_warned_and_replaced(copied):
    with pytest.warns(XlarankWarning, match="one score from 2 measured configs"):
        table = rank_graph(copied, measured([2, 4], [100, 300]))
    free = table[~table["measured"] & (table["copy_of"] < 0)]["config_index"].to_numpy()
    assert not (np.diff(free) > 0).all(), "not the index order"
    # The config measured fastest comes first, then the configs nearest it.
    assert table["config_index"].iloc[0] == 2


class _Flat(RankingSystem):
    """A system whose scores are all one."""

    name = "flat"

    def fit(self, files, collection, valid_files=(), on_epoch=None):
        raise NotImplementedError

    def fit_graph(self, graph, runtime, on_epoch=None):
        return self

    def score(self, graph):
        return np.zeros(graph.n_configs)


def test_a_system_of_one_score_falls_back_to_the_booster(copied, monkeypatch):
    import xlarank.systems as systems

    monkeypatch.setattr(systems, "get_system", lambda name: _Flat)
    rows = [0, 2, 3, 4, 6, 8, 9, 10, 11, 12]
    with pytest.warns(XlarankWarning, match="system flat gave every unmeasured config one "
                                            "score"):
        table = rank_graph_with("flat", copied, measured(rows, np.arange(1, 11) * 100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = rank_graph(copied, measured(rows, np.arange(1, 11) * 100))
    pd.testing.assert_frame_equal(table, expected)


def test_rank_graph_cli_shows_the_warning(tiny_data, tmp_path):
    graph = split_files(tiny_data, TILE, "train")[0]
    (tmp_path / "m.csv").write_text("config_index,runtime\n0,100\n1,300\n")
    result = CliRunner().invoke(app, ["rank-graph", str(graph), "--measured",
                                      str(tmp_path / "m.csv"), "--out",
                                      str(tmp_path / "r.csv")])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "one score" in result.stderr
    assert "copy_of" in (tmp_path / "r.csv").read_text().splitlines()[0]
