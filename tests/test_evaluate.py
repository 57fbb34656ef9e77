"""evaluate.py: per-graph metrics and their summary, eval indices, the keep-default peer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlarank.errors import MismatchError, XlarankError, XlarankWarning
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
