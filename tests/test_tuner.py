"""The config tuner (xlarank.Tuner, xlarank suggest): what it may ask, resuming from the
measured CSV, cold starts, tile and layout, the CLI, and random search's exact
expectation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from xlarank import Tuner
from xlarank.cli import app
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import XlarankError
from xlarank.rank.ingraph import IN_GRAPH_SPEC
from xlarank.rank.measured import config_columns, distinct_configs, read_measured_state
from xlarank.rank.strategies import (
    COLD_START,
    EXPLOIT,
    EXPLORE,
    AutotvmStrategy,
    BoosterStrategy,
    GreedyStrategy,
    RandomStrategy,
    TpeStrategy,
    TunerStrategy,
    choice_options,
    make_strategy,
    max_min_hamming,
    parse_strategy_options,
    suggestions,
)
from xlarank.rank.tuner import expected_random_best, expected_random_draws
from xlarank.seeds import MAX_BOOSTER_SEED

UNET3D = "unet3d.npz"


def sample(samples, name: str):
    return next(p for p in samples if p.name == name)


@pytest.fixture(scope="module")
def unet3d(samples):
    return load_graph(sample(samples, UNET3D))


def groups_of(graph) -> np.ndarray:
    """int64 (n_configs,): the distinct config of each index."""
    return distinct_configs(graph).group


def tile_graph(tiny_data):
    """The first generated tile file with at least 12 distinct configs."""
    for path in split_files(tiny_data, COLLECTIONS[0], "train"):
        graph = load_graph(path)
        if len(distinct_configs(graph)) >= 12:
            return graph
    raise AssertionError("no tile file of the tiny set has 12 distinct configs")


def replay(tuner: Tuner, graph, batches: int, k: int) -> None:
    """Answer `batches` asks with the file's own runtimes."""
    for _ in range(batches):
        asked = tuner.ask(k)
        tuner.tell(asked, graph.config_runtime[asked].astype(np.float64))


def test_ask_never_repeats_a_measured_config_or_its_duplicates(unet3d):
    # unet3d: 1159 configs, 681 distinct. Measure configs that have duplicates under other
    # indices, then ask for many: no asked config may share a config row with them.
    group = groups_of(unet3d)
    counts = np.bincount(group)
    duplicated = np.flatnonzero(counts[group] > 1)[:20]
    tuner = Tuner(unet3d, seed=0, threads=1)
    tuner.tell(duplicated, unet3d.config_runtime[duplicated].astype(np.float64))
    for _ in range(3):
        asked = tuner.ask(32)
        assert len(asked) == 32
        assert len(set(group[asked])) == 32, "two suggestions are one config"
        measured_groups = set(group[tuner.measured["config_index"].to_numpy()])
        assert not measured_groups & set(group[asked].tolist())
        tuner.tell(asked, unet3d.config_runtime[asked].astype(np.float64))
    index, runtime = tuner.best()
    assert runtime == tuner.measured.groupby(group[tuner.measured["config_index"]])[
        "runtime"].median().min()
    assert index in set(tuner.measured["config_index"])


def test_the_pool_runs_dry_without_repeats(tiny_data):
    graph = tile_graph(tiny_data)
    group = groups_of(graph)
    tuner = Tuner(graph, seed=1, threads=1)
    seen = []
    while len(asked := tuner.ask(5)):
        seen += group[asked].tolist()
        tuner.tell(asked, graph.config_runtime[asked].astype(np.float64))
    assert sorted(seen) == list(range(group.max() + 1))


# slow: three tuners on the 1,159 configs of unet3d
@pytest.mark.slow
def test_resuming_from_the_csv_suggests_the_same(unet3d, tmp_path):
    tuner = Tuner(unet3d, seed=4, threads=1)
    replay(tuner, unet3d, batches=3, k=8)
    path = tmp_path / "measured.csv"
    tuner.measured.to_csv(path, index=False)
    again = Tuner(unet3d, seed=4, threads=1)
    again.tell_table(read_measured_state(path))
    pd.testing.assert_frame_equal(tuner.suggest(8), again.suggest(8))
    # The order of the rows is not state either.
    shuffled = Tuner(unet3d, seed=4, threads=1)
    shuffled.tell_table(tuner.measured.sample(frac=1, random_state=0))
    pd.testing.assert_frame_equal(tuner.suggest(8), shuffled.suggest(8))


# slow: two model batches on unet3d
@pytest.mark.slow
def test_model_batches_give_score_uncertainty_and_reason(unet3d):
    tuner = Tuner(unet3d, seed=0, threads=1)
    replay(tuner, unet3d, batches=2, k=8)
    table = tuner.suggest(8)
    assert list(table.columns) == ["config_index", "score", "uncertainty", "reason"]
    assert (table["reason"] == EXPLOIT).all()
    # score is minus a log runtime among the measured ones; the spread is a real number.
    measured_log = np.log(tuner.measured["runtime"])
    assert (-table["score"]).between(measured_log.min(), measured_log.max()).all()
    assert (table["uncertainty"] >= 0).all() and table["uncertainty"].notna().all()
    explore = Tuner(unet3d, seed=0, threads=1,
                    strategy=BoosterStrategy(kappa=2.0, diversity=0.5, random_share=0.5))
    explore.tell_table(tuner.measured)
    reasons = set(explore.suggest(8)["reason"])
    assert "explore" in reasons


def test_cold_start_without_prior_is_diverse(unet3d):
    tuner = Tuner(unet3d, seed=2, threads=1)
    table = tuner.suggest(8)
    assert (table["reason"] == COLD_START).all() and table["score"].isna().all()
    raw = config_columns(unet3d)[table["config_index"].to_numpy()]
    distance = (raw[:, None, :] != raw[None, :, :]).sum(axis=2)
    rng = np.random.default_rng(0)
    others = rng.choice(unet3d.n_configs, 8, replace=False)
    random_raw = config_columns(unet3d)[others]
    random_distance = (random_raw[:, None, :] != random_raw[None, :, :]).sum(axis=2)
    off = ~np.eye(8, dtype=bool)
    assert distance[off].min() > 0
    assert distance[off].mean() > random_distance[off].mean()
    # One measured config is still a cold start, and it is not asked again.
    tuner.tell([5], [1e6])
    again = tuner.suggest(8)
    assert (again["reason"] == COLD_START).all() and 5 not in set(again["config_index"])


def test_the_default_cold_start_is_diverse_on_layout_and_random_on_tile(unet3d, tiny_data):
    from dataclasses import replace

    for graph, kind in ((unet3d, "diverse"), (tile_graph(tiny_data), "random")):
        asked = Tuner(graph, seed=3, threads=1).ask(8)
        same = Tuner(graph, seed=3, threads=1,
                     strategy=replace(BoosterStrategy(), cold=kind)).ask(8)
        np.testing.assert_array_equal(asked, same)


def test_ties_in_the_diverse_cold_start_are_drawn_at_random():
    # Four configs all differing in every column: every pick after the first ties.
    raw = np.arange(16).reshape(4, 4)
    free, none = np.arange(4), np.array([], np.int64)
    batches = {tuple(max_min_hamming(raw, free, none, 2, np.random.default_rng(seed)))
               for seed in range(20)}
    firsts = {b[0] for b in batches}
    seconds_after_0 = {b[1] for b in batches if b[0] == 0}
    assert len(firsts) > 1 and len(seconds_after_0) > 1, "not the lowest id every time"


class ScorePrior:
    """A stand-in cross-graph model: its score is a fixed function of the config index."""

    card = {"collection": "layout:xla:default"}
    feature_spec = IN_GRAPH_SPEC

    def predict(self, frame):
        index = frame["config_index"].to_numpy()
        return np.cos(index * 0.37)


def test_cold_start_with_a_prior_follows_its_order(unet3d):
    tuner = Tuner(unet3d, prior=ScorePrior(), seed=0, threads=1)
    table = tuner.suggest(6)
    assert (table["reason"] == COLD_START).all()
    group = groups_of(unet3d)
    _, first = np.unique(group, return_index=True)
    score = np.cos(first * 0.37)
    expected = first[np.argsort(-score, kind="stable")[:6]]
    assert table["config_index"].tolist() == expected.tolist()
    np.testing.assert_allclose(table["score"], np.cos(expected * 0.37))


def test_tile_and_layout_files_alike(tiny_data):
    for collection in (COLLECTIONS[0], COLLECTIONS[1]):
        graph = (tile_graph(tiny_data) if collection.is_tile
                 else load_graph(split_files(tiny_data, collection, "train")[0]))
        tuner = Tuner(graph, seed=0, threads=1)
        replay(tuner, graph, batches=2, k=4)
        asked = tuner.ask(4)
        group = groups_of(graph)
        assert len(set(group[asked])) == len(asked) > 0
        assert not set(group[asked]) & set(group[tuner.measured["config_index"]])


# slow: suggest runs on unet3d (test_suggest_chooses_its_strategy_by_name stays fast)
@pytest.mark.slow
def test_suggest_command(unet3d, samples, tmp_path):
    runner = CliRunner()
    graph = sample(samples, UNET3D)
    out = tmp_path / "next.csv"
    # Cold start from an empty file, then from what it suggested, measured.
    measured = tmp_path / "measured.csv"
    measured.write_text("")
    result = runner.invoke(app, ["suggest", str(graph), "--measured", str(measured),
                                 "--batch", "8", "--out", str(out), "--threads", "1"])
    assert result.exit_code == 0, result.output
    first = pd.read_csv(out)
    assert list(first.columns) == ["config_index", "score", "uncertainty", "reason"]
    assert len(first) == 8 and (first["reason"] == COLD_START).all()
    rows = first["config_index"].to_numpy()
    pd.DataFrame({"config_index": rows, "runtime": unet3d.config_runtime[rows]}) \
        .to_csv(measured, index=False)
    result = runner.invoke(app, ["suggest", str(graph), "--measured", str(measured),
                                 "--batch", "5", "--out", str(out), "--seed", "3",
                                 "--threads", "1"])
    assert result.exit_code == 0, result.output
    second = pd.read_csv(out)
    assert len(second) == 5 and not set(second["config_index"]) & set(rows)
    # Header only is a cold start too; bad rows and an unknown index are one error line.
    measured.write_text("config_index,runtime\n")
    assert runner.invoke(app, ["suggest", str(graph), "--measured", str(measured),
                               "--out", str(out)]).exit_code == 0
    for text, message in (("config_index,runtime\n0,fast\n", "row 1: runtime"),
                          ("config_index,runtime\n99999,5\n", "not among the 1159")):
        measured.write_text(text)
        bad = tmp_path / "bad.csv"
        result = runner.invoke(app, ["suggest", str(graph), "--measured", str(measured),
                                     "--out", str(bad)])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error:") and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert not bad.exists()
    result = runner.invoke(app, ["suggest", str(graph), "--measured", str(measured),
                                 "--out", str(measured)])
    assert result.exit_code == 2 and "output is the input" in result.stderr


def test_random_search_expectation_is_exact_on_a_small_pool():
    runtime = np.array([7.0, 3.0, 3.0, 9.0, 4.5, 12.0, 5.0])
    for budget in range(1, len(runtime) + 1):
        draws = [min(c) for c in itertools.combinations(runtime.tolist(), budget)]
        assert expected_random_best(runtime, budget) == pytest.approx(np.mean(draws))
    # Draws until one of k given configs: every order of the pool, counted.
    n, k = 6, 2
    waits = [next(i + 1 for i, c in enumerate(order) if c < k)
             for order in itertools.permutations(range(n))]
    assert expected_random_draws(n, k) == pytest.approx(np.mean(waits))


@pytest.mark.parametrize("settings", [
    {"kappa": float("nan")}, {"random_share": float("nan")}, {"diversity": float("nan")},
    {"important": float("nan")}, {"kappa": float("inf")}, {"bootstraps": 1.5},
    {"bootstraps": float("nan")}, {"diversity": -1.0}, {"important": 2.0},
    {"kappa": "0.5"},
])
def test_strategy_settings_that_are_no_usable_numbers_are_refused(settings):
    from xlarank.errors import XlarankError

    with pytest.raises(XlarankError, match="strategy booster: "):
        BoosterStrategy(**settings)


def test_distinct_configs_number_configs_as_their_sorted_rows(unet3d):
    """The one function against an independent reference: np.unique over the raw rows."""
    raw = unet3d.node_config_feat.reshape(unet3d.n_configs, -1)
    _, first, inverse = np.unique(raw, axis=0, return_index=True, return_inverse=True)
    distinct = distinct_configs(unet3d)
    np.testing.assert_array_equal(distinct.first, first)
    np.testing.assert_array_equal(distinct.group, inverse.ravel())
    np.testing.assert_array_equal(distinct.lowest, first[inverse.ravel()])
    for g in (0, len(first) // 2, len(first) - 1):
        assert distinct.median[g] == np.median(unet3d.config_runtime[inverse.ravel() == g])


def test_strategies_by_name_with_settings_from_text():
    assert make_strategy() == BoosterStrategy()
    assert make_strategy("booster", parse_strategy_options(
        ["kappa=0.5", "bootstraps=2", "cold=random"])) == BoosterStrategy(
        kappa=0.5, bootstraps=2, cold="random")
    assert make_strategy("random") == RandomStrategy()
    from xlarank.errors import XlarankError

    for name, options, message in [
            ("nope", [], "unknown strategy 'nope'; known: booster, random, greedy, autotvm, tpe"),
            ("booster", ["kapa=1"], "unknown setting 'kapa'; known: bootstraps, kappa"),
            ("booster", ["kappa=nan"], "kappa must be finite"),
            ("booster", ["kappa=inf"], "kappa must be finite"),
            ("booster", ["kappa=fast"], "kappa='fast' is not a number"),
            ("booster", ["bootstraps=1.5"], "bootstraps='1.5' is not a whole number"),
            ("booster", ["cold=warm"], "cold start 'warm'"),
            ("random", ["kappa=1"], "unknown setting 'kappa'; known: none")]:
        with pytest.raises(XlarankError, match=message.replace("(", "\\(")):
            make_strategy(name, parse_strategy_options(options))
    for bad in (["kappa"], ["=1"], ["kappa=1", "kappa=2"]):
        with pytest.raises(XlarankError, match="strategy option"):
            parse_strategy_options(bad)


def test_a_strategy_of_ones_own_plugs_into_the_tuner(unet3d):
    """The interface is two methods: a cold start, then batches once a model can be
    fitted; the tuner keeps the loop, the measured table and the distinct configs."""

    class Slowest(TunerStrategy):
        name = "slowest-index"
        calls: list = []

        def cold_start(self, tuner, free, measured, k, rng):
            self.calls.append("cold")
            return suggestions(tuner.distinct.first[free[:k]], [np.nan] * k, [np.nan] * k,
                               [COLD_START] * k)

        def batch(self, tuner, free, medians, k, rng):
            self.calls.append("batch")
            prediction, gain = tuner.fit_predict(
                medians.index.to_numpy(), np.linspace(0, 1, len(medians)), free)
            assert prediction.shape == free.shape and gain.shape == (len(tuner.input_names),)
            picks = free[np.argsort(-prediction, kind="stable")[:k]]
            return suggestions(tuner.distinct.first[picks], [np.nan] * k, [np.nan] * k,
                               [EXPLORE] * k)

    tuner = Tuner(unet3d, seed=0, strategy=Slowest())
    replay(tuner, unet3d, 2, 4)
    assert Slowest.calls == ["cold", "batch"]
    assert len(set(distinct_configs(unet3d).group[tuner.measured["config_index"]])) == 8
    with pytest.raises(TypeError, match="TunerStrategy"):
        Tuner(unet3d, strategy="booster")


def test_random_search_asks_unmeasured_distinct_configs_only(unet3d):
    tuner = Tuner(unet3d, seed=3, strategy=RandomStrategy())
    replay(tuner, unet3d, 3, 8)
    group = distinct_configs(unet3d).group[tuner.measured["config_index"]]
    assert len(set(group)) == 24
    assert set(tuner.suggest(4)["reason"]) == {EXPLORE}


def test_suggest_chooses_its_strategy_by_name(unet3d, samples, tmp_path):
    """--strategy NAME with --strategy-option key=value is the Python strategy's table;
    the default is BoosterStrategy(); bad settings are the CLI's error, nothing written."""
    from xlarank.rank.tuner import suggest_next

    runner = CliRunner()
    path = sample(samples, UNET3D)
    measured = tmp_path / "m.csv"
    rows = np.arange(0, 60, 3)
    pd.DataFrame({"config_index": rows, "runtime": unet3d.config_runtime[rows]}).to_csv(
        measured, index=False)
    out = tmp_path / "next.csv"
    result = runner.invoke(app, ["suggest", str(path), "--measured", str(measured),
                                 "--batch", "4", "--out", str(out), "--strategy", "booster",
                                 "--strategy-option", "kappa=0.5",
                                 "--strategy-option", "bootstraps=3"])
    assert result.exit_code == 0, result.output
    expected = suggest_next(path, measured, 4, strategy=BoosterStrategy(kappa=0.5,
                                                                        bootstraps=3))
    pd.testing.assert_frame_equal(pd.read_csv(out), expected, check_dtype=False)
    result = runner.invoke(app, ["suggest", str(path), "--measured", str(measured),
                                 "--out", str(tmp_path / "bad.csv"),
                                 "--strategy-option", "kappa=nan"])
    assert result.exit_code != 0 and "kappa must be finite" in result.output
    assert not (tmp_path / "bad.csv").exists()


PEERS = [GreedyStrategy(), AutotvmStrategy(), TpeStrategy()]


@pytest.mark.parametrize("strategy", PEERS, ids=lambda s: s.name)
def test_each_peer_asks_unmeasured_distinct_configs_and_repeats_itself(unet3d, strategy):
    """The peers are tuner strategies: the tuner's promise (distinct, none a copy of a
    measured config) holds for them, and one seed and one measured table give one
    answer."""
    group = distinct_configs(unet3d).group
    tuner = Tuner(unet3d, seed=2, threads=1, strategy=strategy)
    first = tuner.suggest(8)
    assert set(first["reason"]) == {COLD_START}
    replay(tuner, unet3d, 3, 8)
    measured = group[tuner.measured["config_index"].to_numpy()]
    assert len(set(measured.tolist())) == 24
    again = Tuner(unet3d, seed=2, threads=1, strategy=strategy)
    again.tell_table(tuner.measured)
    table = tuner.suggest(8)
    pd.testing.assert_frame_equal(table, again.suggest(8))
    assert len(set(group[table["config_index"]])) == 8
    assert not set(group[table["config_index"]]) & set(measured.tolist())
    assert set(table["reason"]) <= {EXPLOIT, EXPLORE}


def test_greedy_takes_rank_graphs_best_unmeasured_configs(unet3d):
    from xlarank import rank_graph

    tuner = Tuner(unet3d, seed=4, threads=1, strategy=GreedyStrategy())
    replay(tuner, unet3d, 2, 8)
    ranked = rank_graph(unet3d, tuner.measured, seed=4, threads=1)
    group = distinct_configs(unet3d).group
    measured = set(group[tuner.measured["config_index"]].tolist())
    expected = []
    for index in ranked["config_index"].tolist():  # the plain walk down rank-graph's list
        if group[index] not in measured and group[index] not in {group[e] for e in expected}:
            expected.append(index)
    picks = tuner.suggest(6)["config_index"].tolist()
    assert [group[p] for p in picks] == [group[e] for e in expected[:6]]


def test_autotvm_exploits_its_ranker_or_draws_at_random_by_epsilon(unet3d):
    greedy = Tuner(unet3d, seed=5, threads=1, strategy=AutotvmStrategy(epsilon=0.0))
    replay(greedy, unet3d, 2, 8)
    table = greedy.suggest(8)
    assert set(table["reason"]) == {EXPLOIT}
    assert table["score"].is_monotonic_decreasing
    explorer = greedy.with_seed(5, AutotvmStrategy(epsilon=1.0))
    explorer.tell_table(greedy.measured)
    assert set(explorer.suggest(8)["reason"]) == {EXPLORE}
    from xlarank.errors import XlarankError

    for bad in ({"epsilon": 1.5}, {"rounds": 0}, {"depth": 2.5}, {"learning_rate": -1.0}):
        with pytest.raises(XlarankError, match="strategy autotvm: "):
            AutotvmStrategy(**bad)


def test_tpe_choices_are_each_nodes_distinct_layouts(unet3d, tiny_data):
    """The TPE space against a plain reference: per configurable node, the distinct
    18-column rows among the distinct configs, numbered in sorted order."""
    tuner = Tuner(unet3d, seed=0, threads=1, strategy=TpeStrategy())
    options = choice_options(tuner)
    rows = unet3d.node_config_feat[tuner.distinct.first]
    expected = []
    for node in range(rows.shape[1]):
        seen = sorted({tuple(r) for r in rows[:, node, :].tolist()})
        if len(seen) > 1:
            expected.append([seen.index(tuple(r)) for r in rows[:, node, :].tolist()])
    np.testing.assert_array_equal(options, np.array(expected).T)
    graph = tile_graph(tiny_data)
    tile = Tuner(graph, seed=0, threads=1, strategy=TpeStrategy())
    values = tile.raw[tile.distinct.first]
    for j in range(choice_options(tile).shape[1]):
        assert len(np.unique(choice_options(tile)[:, j])) > 1
    assert choice_options(tile).shape[1] == int((np.ptp(values, axis=0) > 0).sum())


def test_tpe_without_optuna_is_refused_naming_the_extra(unet3d, monkeypatch):
    import sys

    from xlarank.errors import XlarankError

    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna fails
    tuner = Tuner(unet3d, seed=0, threads=1, strategy=TpeStrategy())
    with pytest.raises(XlarankError, match=r"tpe strategy needs optuna: .*xlarank\[tpe\]"):
        tuner.suggest(4)


def test_suggest_runs_each_peer_by_name(unet3d, samples, tmp_path):
    runner = CliRunner()
    path = sample(samples, UNET3D)
    measured = tmp_path / "m.csv"
    rows = np.arange(0, 60, 3)
    pd.DataFrame({"config_index": rows, "runtime": unet3d.config_runtime[rows]}).to_csv(
        measured, index=False)
    for name in ("greedy", "autotvm", "tpe"):
        out = tmp_path / f"{name}.csv"
        result = runner.invoke(app, ["suggest", str(path), "--measured", str(measured),
                                     "--batch", "4", "--out", str(out), "--strategy", name,
                                     "--threads", "1"])
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out)
        assert len(table) == 4 and not set(table["config_index"]) & set(rows.tolist())


def test_the_largest_booster_seed_seeds_the_autotvm_peer(unet3d):
    # XGBoost takes a 31-bit random_state; each step's seed stays within it.
    big = Tuner(unet3d, seed=MAX_BOOSTER_SEED, threads=1, strategy=AutotvmStrategy())
    replay(big, unet3d, 2, 4)
    assert len(big.suggest(4)) == 4


def test_a_seed_past_the_boosters_range_is_refused(unet3d):
    with pytest.raises(XlarankError, match=str(2**64)):
        Tuner(unet3d, seed=2**64, threads=1, strategy=AutotvmStrategy())
