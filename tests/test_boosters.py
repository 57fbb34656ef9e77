"""rank/boosters.py and rank/spec.py: every objective of every booster library, from its
spec file in models/objectives/ to a model that orders its training graphs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import REPO_SPECS, small
from xlarank.errors import SpecError
from xlarank.evaluate import per_graph_metrics, summarize
from xlarank.frame import read_frame
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker, training_arrays

OBJECTIVE_SPECS = REPO_SPECS.objectives()


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


def test_many_grades_train_with_lightgbm(frames, repo_specs):
    train, meta = read_frame(frames["default", "layout-nlp-default", "train"])
    spec = dataclasses.replace(small(load_ranker_spec(repo_specs.models(
        "objectives/lambdarank"))), grades=64)
    _, labels, _ = training_arrays(train, meta.feature_names, False, spec)
    assert labels.max() == 63
    train_ranker(train, meta, spec)  # LightGBM needs a label_gain of 64 entries


def test_toml_text_round_trips_a_spec(tmp_path):
    from xlarank.files import toml_text

    spec = load_ranker_spec(OBJECTIVE_SPECS[0])
    path = tmp_path / "again.toml"
    path.write_text(toml_text(dataclasses.asdict(spec), "a header\nsecond line"))
    assert load_ranker_spec(path) == spec
    assert path.read_text().startswith("# a header\n# second line\n")
