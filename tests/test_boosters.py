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
    assert names == {"lambdarank", "rank_xendcg", "regression", "rank:pairwise", "rank:ndcg",
                     "squared_error"}
    assert all(o in sum((b.objectives for b in BOOSTERS.values()), ()) for o in names)


def test_bad_grades_are_refused(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('features = "default"\ngrades = 1\n')
    with pytest.raises(SpecError, match="grades"):
        load_ranker_spec(path)


# scikit-learn's booster takes seconds here, the others a fraction of one.
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.slow) if p.stem == "sklearn-hgb" else p
    for p in OBJECTIVE_SPECS], ids=lambda p: p.stem)
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


LGBM = 'features = "default"\nlibrary = "lightgbm"\n'
XGB = 'features = "default"\nlibrary = "xgboost"\nobjective = "rank:ndcg"\n'


BAD_SPECS = [
    (LGBM + "num_rounds = 0\n", r"num_rounds must be an integer in 1\.\.100000, not 0"),
    (LGBM + "num_rounds = -5\n", r"num_rounds must be .*, not -5"),
    (LGBM + 'num_rounds = "many"\n', r"num_rounds must be .*, not 'many'"),
    (LGBM + "num_rounds = 2.5\n", r"num_rounds must be .*, not 2\.5"),
    (LGBM + "num_rounds = 1e11\n", r"num_rounds must be .*, not 1\d*\.0"),
    (LGBM + "num_rounds = 100000000000\n", r"num_rounds must be .*, not 100000000000"),
    (LGBM + "num_rounds = true\n", r"num_rounds must be .*, not True"),
    (LGBM + 'seed = "zero"\n', r"seed must be an integer in .*, not 'zero'"),
    (LGBM + 'max_configs_per_graph = "lots"\n', r"max_configs_per_graph must be .*'lots'"),
    (LGBM + 'grades = "x"\n', r"grades must be an integer in 2\.\.1000, not 'x'"),
    (LGBM + 'name = 3\n', r"name must be a string"),
    (LGBM + 'label = "percentile"\n',
     r"label 'percentile' does not suit objective 'lambdarank'; one of grades"),
    (LGBM + 'objective = "regression"\nlabel = "grades"\n',
     r"label 'grades' does not suit objective 'regression'; one of percentile, log_slowdown"),
    (LGBM + 'label = 1\n', r"label must be a string"),
    (LGBM + 'params = 3\n', r"params must be a table"),
    (LGBM + '[params]\nlearning_rate = "fast"\n',
     r"\[params\] learning_rate must be a number > 0, not 'fast'"),
    (LGBM + "[params]\nlearning_rate = -1\n", r"\[params\] learning_rate must be .*, not -1"),
    (LGBM + "[params]\nlearning_rate = nan\n", r"\[params\] learning_rate must be"),
    (LGBM + "[params]\nnum_leaves = 0\n",
     r"\[params\] num_leaves must be an integer in 2\.\.131072, not 0"),
    (LGBM + "[params]\nnum_leaves = 131073\n", r"\[params\] num_leaves must be"),
    (LGBM + "[params]\nfeature_fraction = 1.5\n", r"\[params\] feature_fraction must be"),
    (LGBM + "[params]\nlabel_gain = [0, 1]\n", r"label_gain needs at least one gain"),
    (LGBM + '[params]\nobjective = "regression"\n',
     r"\[params\] may not set objective; use the spec's own field objective"),
    (LGBM + "[params]\nnum_iterations = 3\n",
     r"\[params\] may not set num_iterations; use the spec's own field num_rounds"),
    *[(LGBM + f"[params]\n{alias} = 3\n", rf"\[params\] may not set {alias}; .* field {field}")
      for alias, field in [("objective_type", "objective"), ("app", "objective"),
                           ("application", "objective"), ("num_boost_round", "num_rounds"),
                           ("n_estimators", "num_rounds"), ("num_rounds", "num_rounds"),
                           ("num_trees", "num_rounds"), ("num_round", "num_rounds"),
                           ("seed", "seed"), ("random_state", "seed"),
                           ("random_seed", "seed")]],
    (LGBM + "[params]\nlearning_rat = 0.1\n",
     r"\[params\] learning_rat is not a known lightgbm parameter; known: .*learning_rate"),
    (LGBM + "[params]\neta = 0.1\n", r"\[params\] eta is another name of learning_rate"),
    (XGB + '[params]\neta = "fast"\n', r"\[params\] eta must be a number > 0, not 'fast'"),
    (XGB + "[params]\neta = -1\n", r"\[params\] eta must be .*, not -1"),
    (XGB + "[params]\nmax_depth = 40\n", r"\[params\] max_depth must be an integer in 0\.\.17"),
    (XGB + '[params]\nlambdarank_pair_method = "all"\n',
     r"lambdarank_pair_method must be one of 'topk', 'mean'"),
    (XGB + '[params]\nobjective = "rank:map"\n', r"\[params\] may not set objective"),
    (XGB + "[params]\nseed = 1\n", r"\[params\] may not set seed; .* field seed"),
    (XGB + "[params]\nnum_boost_round = 3\n",
     r"\[params\] may not set num_boost_round; .* field num_rounds"),
    (XGB + "[params]\nnum_leaves = 31\n",
     r"\[params\] num_leaves is not a known xgboost parameter; known: .*colsample_bytree"),
]


def _case_id(text: str) -> str:
    library = "lgbm" if text.startswith(LGBM) else "xgb"
    return f"{library}:{text.removeprefix(LGBM).removeprefix(XGB).strip()}".replace("\n", ";")


@pytest.mark.parametrize("text, fault", BAD_SPECS, ids=[_case_id(t) for t, _ in BAD_SPECS])
def test_bad_spec_values_are_refused(tmp_path, text, fault):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=fault) as caught:
        load_ranker_spec(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message


def test_repo_and_tuned_params_pass_the_checks():
    """Every spec file in the repo loads, and so do the params `xlarank tune` draws."""
    from sklearn.model_selection import ParameterSampler

    from xlarank.rank.search import apply_draw

    specs = [load_ranker_spec(p) for p in sorted(REPO_SPECS.root.glob("models/**/*.toml"))
             if "ensembles" not in p.parts]
    for spec in specs:
        space = BOOSTERS[spec.library].search_space()
        for draw in ParameterSampler(space, n_iter=20, random_state=0):
            tried = apply_draw(spec, draw)
            BOOSTERS[spec.library].check_params(tried.params, "drawn", tried.grades)
