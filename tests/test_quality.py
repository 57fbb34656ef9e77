"""Objectives, labels, ensembles, peers: ranking quality machinery."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from xlarank.errors import MismatchError, SpecError
from xlarank.evaluate import default_layout_scores, per_graph_metrics, summarize
from xlarank.frame import read_frame
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.ensemble import Ensemble, average_normalized, per_graph_minmax
from xlarank.rank.labels import log_slowdown, relevance_grades
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker, training_arrays

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVE_SPECS = sorted((ROOT / "models" / "objectives").glob("*.toml"))


def small(spec, rounds=15):
    """A spec cut down to test size."""
    return dataclasses.replace(spec, num_rounds=rounds, max_configs_per_graph=40,
                               params={**spec.params, "min_data_in_leaf": 5}
                               if spec.library == "lightgbm" else spec.params)


def test_log_slowdown_is_zero_for_each_graphs_fastest():
    target = np.array([4.0, 2.0, 8.0, 10.0, 10.0])
    np.testing.assert_allclose(log_slowdown(target, np.array([3, 2])),
                               np.log([2.0, 1.0, 4.0, 1.0, 1.0]))


@pytest.mark.parametrize("n_grades", [2, 31, 100])
def test_grades_follow_runtime_order_and_ties(n_grades):
    rng = np.random.default_rng(n_grades)
    target = rng.integers(1, 50, 300).astype(float)
    grades = relevance_grades(target, np.array([300]), n_grades)
    assert grades.min() == 0 and grades.max() <= n_grades - 1
    assert grades[np.argmin(target)] == grades.max()
    # Faster never gets a lower grade, equal runtimes share a grade.
    order = np.argsort(target, kind="stable")
    assert (np.diff(grades[order]) <= 0).all()
    for value in np.unique(target):
        assert len(set(grades[target == value])) == 1


def test_every_objective_spec_is_listed_and_loads():
    names = {load_ranker_spec(p).objective for p in OBJECTIVE_SPECS}
    assert names == {"lambdarank", "rank_xendcg", "regression", "rank:pairwise", "rank:ndcg"}
    assert all(o in sum((b.objectives for b in BOOSTERS.values()), ()) for o in names)


def test_bad_grades_are_refused(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('features = "default"\ngrades = 1\n')
    with pytest.raises(SpecError, match="grades"):
        load_ranker_spec(path)


@pytest.mark.parametrize("path", OBJECTIVE_SPECS, ids=lambda p: p.stem)
def test_each_objective_learns_on_synthetic_layout(frames, path, tmp_path):
    train, meta = read_frame(frames["default", "layout-xla-random", "train"])
    spec = small(load_ranker_spec(path), rounds=30)
    ranker = train_ranker(train, meta, spec)
    ranker.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    scores = again.predict(train)
    np.testing.assert_allclose(scores, ranker.predict(train))
    # Fitting the training graphs themselves must order them far better than chance.
    tau = summarize(per_graph_metrics(train, scores, False))["kendall_tau"]
    assert tau > 0.3, (path.stem, tau)


def test_pointwise_labels_are_negated_log_slowdown(frames):
    train, meta = read_frame(frames["default", "tile-xla", "train"])
    spec = load_ranker_spec(ROOT / "models" / "objectives" / "regression.toml")
    _, labels, sizes = training_arrays(train, meta.feature_names, True, spec)
    assert labels.dtype == np.float64 and (labels <= 0).all()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert np.allclose(np.maximum.reduceat(labels, starts), 0.0)


def test_many_grades_train_with_lightgbm(frames):
    train, meta = read_frame(frames["default", "layout-nlp-default", "train"])
    spec = dataclasses.replace(small(load_ranker_spec(ROOT / "models" / "objectives" /
                                                      "lambdarank.toml")), grades=64)
    _, labels, _ = training_arrays(train, meta.feature_names, False, spec)
    assert labels.max() == 63
    train_ranker(train, meta, spec)  # LightGBM needs a label_gain of 64 entries


def test_per_graph_minmax_by_hand():
    score = np.array([1.0, 3.0, 2.0, 5.0, 5.0, -1.0])
    ids = np.array(["a", "a", "a", "b", "b", "c"])
    np.testing.assert_allclose(per_graph_minmax(score, ids), [0, 1, 0.5, 0.5, 0.5, 0.5])
    mixed = average_normalized([score, -score], ids)
    np.testing.assert_allclose(mixed, 0.5)


def test_ensemble_keeps_each_members_order_per_graph_and_round_trips(frames, tmp_path):
    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    valid, valid_meta = read_frame(frames["default", "layout-xla-default", "valid"])
    from xlarank.rank.ensemble import train_ensemble

    specs = [small(load_ranker_spec(p)) for p in OBJECTIVE_SPECS[:2]]
    ensemble = train_ensemble(specs, [0, 1], lambda s: train_ranker(train, meta, s))
    assert [(m["name"], m["seed"]) for m in ensemble.card["members"]] == [
        (specs[0].name, 0), (specs[0].name, 1), (specs[1].name, 0), (specs[1].name, 1)]
    scores = ensemble.predict(valid)
    ids = valid["graph_id"].to_numpy()
    # Reference: pandas min-max per graph of each member, then the mean.
    expected = np.mean([valid.assign(s=m.predict(valid)).groupby("graph_id")["s"].transform(
        lambda s: (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else 0.5)
        for m in ensemble.members], axis=0)
    np.testing.assert_allclose(scores, expected)
    ensemble.save(tmp_path / "ens")
    again = load_model(tmp_path / "ens")
    assert isinstance(again, Ensemble) and len(again.members) == 4
    again.check_frame(valid_meta)
    np.testing.assert_allclose(again.predict(valid), scores)
    # A single member's ensemble orders each graph exactly as the member does.
    alone = Ensemble(card=ensemble.card, members=ensemble.members[:1])
    for graph in np.unique(ids):
        rows = ids == graph
        np.testing.assert_array_equal(rankdata(alone.predict(valid)[rows]),
                                      rankdata(ensemble.members[0].predict(valid)[rows]))


def test_ensemble_refuses_mixed_feature_specs(frames):
    from xlarank.rank.ensemble import ensemble_card

    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    base, base_meta = read_frame(frames["baseline", "layout-xla-default", "train"])
    a = train_ranker(train, meta, small(load_ranker_spec(OBJECTIVE_SPECS[0])))
    b = train_ranker(base, base_meta, dataclasses.replace(
        small(load_ranker_spec(ROOT / "models" / "baseline.toml"))))
    with pytest.raises(MismatchError, match="feature spec"):
        ensemble_card([a, b])


def test_default_layout_peer_prefers_configs_keeping_defaults():
    frame = pd.DataFrame({"graph_id": ["g"] * 3, "c_default_out_frac": [0.2, 1.0, 0.5]})
    assert list(np.argsort(-default_layout_scores(frame))) == [1, 2, 0]
    with pytest.raises(MismatchError, match="c_default_out_frac"):
        default_layout_scores(frame.drop(columns="c_default_out_frac"))


def test_toml_text_round_trips_a_spec(tmp_path):
    from xlarank.files import toml_text

    spec = load_ranker_spec(OBJECTIVE_SPECS[0])
    path = tmp_path / "again.toml"
    path.write_text(toml_text(dataclasses.asdict(spec), "a header\nsecond line"))
    assert load_ranker_spec(path) == spec
    assert path.read_text().startswith("# a header\n# second line\n")


def test_tune_starts_from_the_spec_and_keeps_the_best(frames, tmp_path):
    from xlarank.rank.tune import tune_spec

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


def test_every_ensemble_spec_loads_with_known_members():
    from xlarank.rank.ensemble import load_training_plan

    paths = sorted((ROOT / "models" / "ensembles").glob("*.toml"))
    assert {p.stem for p in paths} == {c.slug for c in __import__(
        "xlarank.data.collections", fromlist=["COLLECTIONS"]).COLLECTIONS}
    for path in paths:
        specs, seeds = load_training_plan(path)
        assert specs and all(s.features == "default" for s in specs)
        assert seeds is None or len(seeds) == len(set(seeds))
    assert load_training_plan(OBJECTIVE_SPECS[0]) == ([load_ranker_spec(OBJECTIVE_SPECS[0])],
                                                      None)


@pytest.mark.parametrize("text, fault", [
    ('kind = "ensemble"\nmembers = []\n', "members"),
    ('kind = "ensemble"\nmembers = ["a.toml"]\nseeds = [1, 1]\n', "distinct"),
    ('kind = "ensemble"\nmembers = ["a.toml"]\nweights = [1]\n', "unknown keys"),
])
def test_bad_ensemble_specs(tmp_path, text, fault):
    from xlarank.rank.ensemble import load_training_plan

    path = tmp_path / "e.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=fault):
        load_training_plan(path)


def test_train_cli_with_an_ensemble_spec(frames, tmp_path):
    from typer.testing import CliRunner

    from xlarank.cli import app
    from xlarank.files import toml_text

    member = tmp_path / "member.toml"
    member.write_text(toml_text(dataclasses.asdict(small(load_ranker_spec(OBJECTIVE_SPECS[0]),
                                                         rounds=5))))
    plan = tmp_path / "ens.toml"
    plan.write_text('kind = "ensemble"\nmembers = ["member.toml"]\nseeds = [4, 5]\n')
    result = CliRunner().invoke(app, [
        "train", str(frames["default", "layout-nlp-random", "train"]), "--spec", str(plan),
        "--out", str(tmp_path / "m"), "--valid", str(frames["default", "layout-nlp-random",
                                                              "valid"])])
    assert result.exit_code == 0, result.output
    model = load_model(tmp_path / "m")
    assert isinstance(model, Ensemble)
    assert [m["seed"] for m in model.card["members"]] == [4, 5]
    assert "kendall_tau" in model.card["validation"]
