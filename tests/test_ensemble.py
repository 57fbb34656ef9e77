"""rank/ensemble.py: per-graph min-max averaging, saved ensembles, ensemble spec files."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import rankdata

from conftest import REPO_SPECS, small
from xlarank.errors import MismatchError, SpecError
from xlarank.frame import read_frame
from xlarank.rank.ensemble import Ensemble, average_normalized, per_graph_minmax
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

OBJECTIVE_SPECS = REPO_SPECS.objectives()


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


def test_ensemble_refuses_mixed_feature_specs(frames, repo_specs):
    from xlarank.rank.ensemble import ensemble_card

    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    base, base_meta = read_frame(frames["baseline", "layout-xla-default", "train"])
    a = train_ranker(train, meta, small(load_ranker_spec(OBJECTIVE_SPECS[0])))
    b = train_ranker(base, base_meta, dataclasses.replace(
        small(load_ranker_spec(repo_specs.models("baseline")))))
    with pytest.raises(MismatchError, match="feature spec"):
        ensemble_card([a, b])


def test_every_ensemble_spec_loads_with_known_members(repo_specs):
    from xlarank.rank.ensemble import load_training_plan

    paths = repo_specs.ensembles()
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
