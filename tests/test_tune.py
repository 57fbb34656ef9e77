"""rank/search.py: the bounded random search over a booster spec, and `xlarank tune`."""

from __future__ import annotations

import csv
import dataclasses

import pandas as pd
import pytest

from conftest import REPO_SPECS, small
from helpers import (
    one_error_line,
    run,
)
from xlarank.errors import (
    XlarankError,
)
from xlarank.evaluate import per_graph_metrics, summarize
from xlarank.frame import read_frame
from xlarank.rank.search import tune_spec_file
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

OBJECTIVE_SPECS = REPO_SPECS.objectives()


@pytest.mark.slow
def test_tune_starts_from_the_spec_and_keeps_the_best(frames, tmp_path):
    from xlarank.rank.search import tune_spec

    train, meta = read_frame(frames["default", "layout-xla-random", "train"])
    valid, _ = read_frame(frames["default", "layout-xla-random", "valid"])
    start = small(load_ranker_spec(OBJECTIVE_SPECS[0]), rounds=10)
    best, table = tune_spec(train, meta, valid, start, trials=4, seed=1)
    assert list(table["trial"]) == [0, 1, 2, 3]
    scores = []
    for trial in (start, best):
        ranker = train_ranker(train, meta, trial)
        scores.append(summarize(per_graph_metrics(valid, ranker.predict(valid), False))
                      ["kendall_tau"])
    assert scores[0] == pytest.approx(table["kendall_tau"].iloc[0])
    assert scores[1] == pytest.approx(table["kendall_tau"].max())
    # The draws are seeded: the same search gives the same trials.
    again = tune_spec(train, meta, valid, start, trials=4, seed=1)[1]
    pd.testing.assert_frame_equal(again.drop(columns="train_seconds"),
                                  table.drop(columns="train_seconds"))


def test_tune_cli_writes_a_loadable_spec(frames, tmp_path):
    from typer.testing import CliRunner

    from xlarank.cli import app

    start = tmp_path / "start.toml"
    from xlarank.files import toml_text

    start.write_text(toml_text(dataclasses.asdict(small(load_ranker_spec(OBJECTIVE_SPECS[0]),
                                                        rounds=8))))
    out = tmp_path / "chosen.toml"
    result = CliRunner().invoke(app, [
        "tune", str(frames["default", "tile-xla", "train"]),
        str(frames["default", "tile-xla", "valid"]), "--spec", str(start), "--out", str(out),
        "--trials", "3", "--log", str(tmp_path / "trials.csv")])
    assert result.exit_code == 0, result.output
    chosen = load_ranker_spec(out)
    assert chosen.features == "default" and "3 trials (budget 3" in out.read_text()
    assert len(pd.read_csv(tmp_path / "trials.csv")) == 3


def test_tune_spec_file_writes_the_spec_and_ranks_the_trials(frames, spec_dir, tmp_path):
    train, valid = frames["default", "tile-xla", "train"], frames["default", "tile-xla", "valid"]
    seen = []
    tuned = tune_spec_file(train, valid, spec_dir / "lgbm.toml", tmp_path / "best.toml", 2,
                           seed=1, log=tmp_path / "trials.csv",
                           on_trial=lambda number, value: seen.append(number))
    assert seen == [0, 1] and tuned.metric == "score"
    assert load_ranker_spec(tmp_path / "best.toml") == tuned.best
    assert "2 trials (budget 2, seed 1)" in (tmp_path / "best.toml").read_text()
    assert len(list(csv.DictReader(open(tmp_path / "trials.csv")))) == 2
    best = tuned.best_trials(5)
    assert list(best.columns) == ["trial", "score", "train_seconds", "changes"]
    assert best["score"].is_monotonic_decreasing
    assert best.set_index("trial").loc[0, "changes"] == ""
    assert "=" in best.set_index("trial").loc[1, "changes"]
    with pytest.raises(XlarankError, match="not the training frame's collection"):
        tune_spec_file(train, frames["default", "layout-xla-random", "valid"],
                       spec_dir / "lgbm.toml", tmp_path / "x.toml", 1)


def test_tune_names_the_spec_as_typed(frames, tmp_path):
    train = frames["default", "layout-xla-default", "train"]
    valid = frames["default", "layout-xla-default", "valid"]
    result = run("tune", train, valid, "--spec", "tile-xla", "--trials", 1,
                 "--out", tmp_path / "t.toml")
    one_error_line(result, str(train), "booster spec 'tile-xla' is made for tile:xla")
