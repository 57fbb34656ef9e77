"""evaluate.py: per-graph metrics and their summary, eval indices, the keep-default peer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import (
    one_error_line,
    run,
)
from xlarank.errors import (
    MismatchError,
    XlarankError,
    XlarankWarning,
)
from xlarank.evaluate import (
    default_layout_scores,
    headline,
    headline_label,
    headline_metric,
    mean_metrics,
    per_graph_metrics,
    random_scores,
    summarize,
)
from xlarank.frame import read_frame


def test_summary_skips_undefined_tau():
    per_graph = pd.DataFrame({"graph_id": ["a", "b"], "configs": [3, 3],
                              "kendall_tau": [0.5, np.nan], "opa": [0.75, np.nan]})
    summary = summarize(per_graph)
    assert summary["kendall_tau"] == 0.5 and summary["graphs_without_tau"] == 1


def test_eval_indices_restrict_configs(tmp_path, samples):
    from conftest import SAMPLES
    from xlarank.evaluate import load_eval_indices

    official = load_eval_indices(SAMPLES / "eval_indices" / "xla_default.json")
    assert all(len(v) == 1000 for v in official.values())
    frame = pd.DataFrame({"graph_id": pd.Series(["g"] * 6 + ["h"] * 3, dtype="string"),
                          "config_index": [0, 1, 2, 3, 4, 5, 0, 1, 2],
                          "runtime": [5, 4, 3, 2, 1, 9, 1, 2, 3], "normalizer": 1})
    score = np.array([1.0, 2, 3, 4, 5, 0, 3, 2, 1])
    (tmp_path / "idx.json").write_text('{"g": [0, 1, 4]}')
    with pytest.warns(XlarankWarning, match="no configs for 1 of the frame's 2 graphs"):
        metrics = per_graph_metrics(frame, score, False,
                                    load_eval_indices(tmp_path / "idx.json"))
    assert list(metrics["configs"]) == [3, 3]
    assert list(metrics["kendall_tau"]) == [1.0, 1.0]
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(XlarankError, match="JSON object"):
        load_eval_indices(tmp_path / "bad.json")
    with pytest.raises(XlarankError, match="not valid JSON"):
        (tmp_path / "broken.json").write_text("{")
        load_eval_indices(tmp_path / "broken.json")


def test_default_layout_peer_prefers_configs_keeping_defaults():
    frame = pd.DataFrame({"graph_id": ["g"] * 3, "c_default_out_frac": [0.2, 1.0, 0.5]})
    assert list(np.argsort(-default_layout_scores(frame))) == [1, 2, 0]
    with pytest.raises(MismatchError, match="c_default_out_frac"):
        default_layout_scores(frame.drop(columns="c_default_out_frac"))


def test_headline_is_the_collections_mean_metric(frames):
    assert (headline_metric(True), headline_label(True)) == ("score", "1 - slowdown@5")
    assert (headline_metric(False), headline_label(False)) == ("kendall_tau", "Kendall tau")
    for slug, is_tile in (("tile-xla", True), ("layout-xla-random", False)):
        valid, _ = read_frame(frames["default", slug, "valid"])
        scores = random_scores(valid, 5)
        expected = summarize(per_graph_metrics(valid, scores, is_tile))
        assert mean_metrics(valid, scores, is_tile) == expected
        assert headline(valid, scores, is_tile) == expected[headline_metric(is_tile)]


def test_eval_indices_that_miss_graphs_warn(tile_frames, tmp_path, models):
    table, meta = read_frame(tile_frames["default"])
    first = str(table["graph_id"].iloc[0])
    indices = tmp_path / "eval.json"
    indices.write_text(json.dumps({first: [0, 1]}))
    graphs = table["graph_id"].nunique()
    result = run("evaluate", tile_frames["default"], "--model", models["lightgbm"],
                 "--eval-indices", indices)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("warning: ")
    assert (f"the eval indices list no configs for {graphs - 1} of the frame's "
            f"{graphs} graphs") in result.stderr


SUMMARY_FAULTS = {
    "a list": ("[1, 2]", "is a JSON list"),
    "a string": ('"tau"', "is a JSON str"),
    "a number": ("3", "is a JSON int"),
    "null": ("null", "is a JSON NoneType"),
    "no headline": ('{"run": "a", "collection": "tile:xla"}', "lacks headline"),
    "no run": ('{"collection": "tile:xla", "headline": "score", "score": 1}', "lacks run"),
    "headline not a number": (
        '{"run": "a", "collection": "tile:xla", "headline": "score", "score": "x"}',
        "is not a number"),
    "headline value missing": (
        '{"run": "a", "collection": "tile:xla", "headline": "score"}', "is not a number"),
    "headline a list": ('{"run": "a", "collection": "c", "headline": [1]}', "must be text"),
    "not JSON": ("{run:", "is not valid JSON"),
}


@pytest.mark.parametrize("case", SUMMARY_FAULTS)
def test_compare_refuses_a_bad_summary_naming_it(tmp_path, case):
    text, needle = SUMMARY_FAULTS[case]
    good = {"run": "r", "collection": "tile:xla", "headline": "score", "score": 0.5}
    (tmp_path / "a.summary.json").write_text(json.dumps(good))
    bad = tmp_path / "b.summary.json"
    bad.write_text(text)
    one_error_line(run("compare", tmp_path), str(bad), needle)


def test_eval_indices_that_empty_a_graph_warn_naming_it(frames, models, tmp_path):
    frame = frames["default", "tile-xla", "valid"]
    table, _ = read_frame(frame)
    ids = list(pd.unique(table["graph_id"]))
    indices = {g: [0, 1] for g in ids}
    indices[ids[0]] = []
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(indices))
    result = run("evaluate", frame, "--model", models["tile-xla"], "--eval-indices", path)
    assert result.exit_code == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, result.stderr
    assert ids[0] in warning[0] and "left out of the means" in warning[0]
    assert f"({len(ids) - 1} graphs)" in result.stdout


@pytest.mark.parametrize("value", ['"a"', "1.5", "-1", "true", "null", "[1]"])
def test_eval_indices_that_are_not_config_indices_are_refused(frames, models, tmp_path,
                                                              value):
    frame = frames["default", "tile-xla", "valid"]
    graph = str(read_frame(frame)[0]["graph_id"].iloc[0])
    path = tmp_path / "eval.json"
    path.write_text(f'{{"{graph}": [0, {value}]}}')
    result = run("evaluate", frame, "--model", models["tile-xla"], "--eval-indices", path)
    one_error_line(result, str(path), f"graph {graph}", "is not a config index")


# ---------------------------------------------------------------- the in-graph split

def _layout_files(tiny_data):
    return sorted((tiny_data / "npz" / "layout").rglob("train/*.npz"))


@pytest.mark.parametrize("share", [0.5, 0.2, 0.1, 0.05])
def test_in_graph_split_keeps_every_run_of_a_config_on_one_side(tiny_data, share):
    from xlarank.data.distinct import distinct_configs
    from xlarank.data.graph import load_graph
    from xlarank.evaluate import in_graph_split

    for path in _layout_files(tiny_data):
        graph = load_graph(path)
        d = len(distinct_configs(graph))
        if d < 3:
            continue
        split = in_graph_split(graph, share, seed=4)
        assert len(split.measured) == min(d - 1, max(2, round(share * d)))
        assert np.array_equal(np.sort(np.r_[split.measured, split.held]), np.arange(d))
        # Configs equal in every config column are one config, numbered by first run.
        columns = graph.node_config_feat.reshape(graph.n_configs, -1)
        for index, group in enumerate(split.group):
            assert split.first[group] <= index
            assert np.array_equal(columns[index], columns[split.first[group]])
        assert np.all(np.diff(split.first) > 0)
        runs = split.measured_runs()
        assert set(np.unique(split.group[runs["config_index"]])) == set(split.measured)
        assert not np.isin(split.group[runs["config_index"]], split.held).any()
        expected = pd.Series(graph.config_runtime).groupby(split.group).median()
        assert np.allclose(split.held_median, expected.to_numpy()[split.held])
        assert np.array_equal(split.measured_medians().index, split.first[split.measured])


def test_in_graph_split_is_seeded_and_refuses_what_it_cannot_split(tiny_data):
    from xlarank.data.graph import load_graph
    from xlarank.evaluate import in_graph_split

    graph = load_graph(_layout_files(tiny_data)[0])
    one, again, other = (in_graph_split(graph, 0.5, seed) for seed in (1, 1, 2))
    assert np.array_equal(one.measured, again.measured)
    assert not np.array_equal(one.measured, other.measured)
    for share in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(XlarankError, match="share"):
            in_graph_split(graph, share, seed=0)


def test_in_graph_split_rows_are_the_deduplicated_frames_rows(samples, repo_specs):
    from xlarank.data.graph import load_graph
    from xlarank.evaluate import in_graph_split
    from xlarank.features import featurize_graph, load_feature_spec

    path = next((p for p in samples if p.name == "unet3d.npz"), None)
    if path is None:
        pytest.skip("real sample unet3d.npz missing")
    graph = load_graph(path)
    block = featurize_graph(graph, load_feature_spec(repo_specs.features("baseline")), dedup=True)
    split = in_graph_split(graph, 0.1, seed=0)
    assert np.array_equal(block["config_index"].to_numpy(), split.first)
    assert np.allclose(block["runtime"].to_numpy(), split.median)
    # unet3d: 681 distinct configs, 68 measured at 10%.
    assert (len(split.measured), len(split.held)) == (68, 613)
