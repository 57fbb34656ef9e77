"""Frames, labels, training, saved models and scoring through the library."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlarank.data.collections import COLLECTIONS, get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import MismatchError, XlarankError
from xlarank.evaluate import per_graph_metrics, random_scores, summarize
from xlarank.features import feature_names, featurize_graph, load_feature_spec
from xlarank.featurize import featurize_files
from xlarank.frame import group_sizes, read_frame, read_meta
from xlarank.rank.labels import relevance_grades
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import ranked_configs

DEFAULT = load_feature_spec("features/default.toml")
BASELINE = load_feature_spec("features/baseline.toml")


def test_relevance_grades_hand_worked():
    target = np.array([5.0, 1.0, 3.0, 3.0, 2.0, 9.0])
    grades = relevance_grades(target, np.array([4, 2]), n_grades=4)
    # Group 1: 1 is fastest (3 slower -> 3), 3s tie (1 slower -> share 1/3 -> 1), 5 -> 0.
    np.testing.assert_array_equal(grades, [0, 3, 1, 1, 3, 0])


def test_spec_hash_changes_with_families():
    assert DEFAULT.hash != BASELINE.hash
    assert len(DEFAULT.hash) == 16


def test_featurize_every_real_sample(samples):
    for path in samples:
        graph = load_graph(path)
        for spec in (DEFAULT, BASELINE):
            block = featurize_graph(graph, spec)
            names = feature_names(spec, graph.collection.is_tile)
            assert list(block.columns[4:]) == names
            assert len(block) == graph.n_configs
            assert np.isfinite(block[names].to_numpy()).all()
            np.testing.assert_array_equal(block["runtime"], graph.config_runtime)


def test_frame_round_trip(frames, tiny_data):
    path = frames["default", "layout-xla-default", "train"]
    table, meta = read_frame(path)
    assert meta.collection == "layout:xla:default" and meta.split == "train"
    assert meta.spec_hash == DEFAULT.hash and meta.feature_names == list(table.columns[4:])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "train")
    distinct = [len(np.unique(load_graph(f).node_config_feat.reshape(load_graph(f).n_configs, -1),
                              axis=0)) for f in files]
    # Train frames keep one row per distinct config; valid frames keep every config.
    assert meta.dedup and list(group_sizes(table)) == distinct
    assert table["config_index"].dtype == np.int32
    valid, valid_meta = read_frame(frames["default", "layout-xla-default", "valid"])
    files = split_files(tiny_data, get_collection("layout-xla-default"), "valid")
    assert not valid_meta.dedup
    assert list(group_sizes(valid)) == [load_graph(f).n_configs for f in files]


def test_skip_bad_records_file(tiny_data, tmp_path):
    collection = get_collection("tile-xla")
    files = split_files(tiny_data, collection, "train")
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"not a zip")
    out = tmp_path / "f.parquet"
    with pytest.raises(XlarankError, match="broken.npz"):
        featurize_files(files + [bad], out, collection, "train", DEFAULT)
    assert not out.exists()
    rows, skipped, _ = featurize_files(files + [bad], out, collection, "train", DEFAULT,
                                       skip_bad=True)
    assert len(skipped) == 1 and "broken.npz" in skipped[0]
    assert read_meta(out).skipped == skipped


@pytest.mark.parametrize("slug", [c.slug for c in COLLECTIONS])
def test_train_save_load_predict(frames, spec_dir, tmp_path, slug):
    train, meta = read_frame(frames["default", slug, "train"])
    valid, valid_meta = read_frame(frames["default", slug, "valid"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    ranker.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    again.check_frame(valid_meta)
    np.testing.assert_array_equal(ranker.predict(valid), again.predict(valid))
    assert again.card["features"]["hash"] == DEFAULT.hash
    assert again.card["training_data"]["graphs"] == len(group_sizes(train))
    metrics = per_graph_metrics(valid, again.predict(valid), get_collection(slug).is_tile)
    assert len(metrics) == len(group_sizes(valid))


def test_xgboost_baseline_and_mismatches(frames, spec_dir, tmp_path):
    train, meta = read_frame(frames["baseline", "layout-nlp-random", "train"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "xgb.toml"))
    ranker.save(tmp_path / "xgb")
    loaded = load_model(tmp_path / "xgb")
    np.testing.assert_allclose(loaded.predict(train), ranker.predict(train))
    with pytest.raises(MismatchError, match="feature spec"):
        loaded.check_frame(read_meta(frames["default", "layout-nlp-random", "valid"]))
    with pytest.raises(MismatchError, match="collection"):
        loaded.check_frame(read_meta(frames["baseline", "layout-xla-random", "valid"]))
    with pytest.raises(MismatchError, match="wants 'default'"):
        train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))


def test_test_split_is_refused_for_training_and_evaluation(frames, spec_dir):
    test, meta = read_frame(frames["default", "tile-xla", "test"])
    with pytest.raises(MismatchError, match="no runtimes"):
        train_ranker(test, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    with pytest.raises(XlarankError, match="no runtimes"):
        per_graph_metrics(test, random_scores(test, 0), True)


def test_training_is_reproducible(frames, spec_dir):
    train, meta = read_frame(frames["default", "tile-xla", "train"])
    spec = load_ranker_spec(spec_dir / "lgbm.toml")
    a, b = train_ranker(train, meta, spec), train_ranker(train, meta, spec)
    np.testing.assert_array_equal(a.predict(train), b.predict(train))


def test_ranked_configs_keep_every_index(samples, frames, spec_dir):
    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    unet = load_graph(next(p for p in samples if p.stem == "unet3d"))
    order, score = ranked_configs(unet, ranker)
    assert sorted(order) == list(range(unet.n_configs))
    assert (np.diff(score) <= 0).all()


def test_summary_skips_undefined_tau():
    per_graph = pd.DataFrame({"graph_id": ["a", "b"], "configs": [3, 3],
                              "kendall_tau": [0.5, np.nan], "opa": [0.75, np.nan]})
    summary = summarize(per_graph)
    assert summary["kendall_tau"] == 0.5 and summary["graphs_without_tau"] == 1


def test_eval_indices_restrict_configs(tmp_path, samples):
    from xlarank.evaluate import load_eval_indices

    from conftest import SAMPLES

    official = load_eval_indices(SAMPLES / "eval_indices" / "xla_default.json")
    assert all(len(v) == 1000 for v in official.values())
    frame = pd.DataFrame({"graph_id": pd.Series(["g"] * 6 + ["h"] * 3, dtype="string"),
                          "config_index": [0, 1, 2, 3, 4, 5, 0, 1, 2],
                          "runtime": [5, 4, 3, 2, 1, 9, 1, 2, 3], "normalizer": 1})
    score = np.array([1.0, 2, 3, 4, 5, 0, 3, 2, 1])
    (tmp_path / "idx.json").write_text('{"g": [0, 1, 4]}')
    metrics = per_graph_metrics(frame, score, False, load_eval_indices(tmp_path / "idx.json"))
    assert list(metrics["configs"]) == [3, 3]
    assert list(metrics["kendall_tau"]) == [1.0, 1.0]
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(XlarankError, match="JSON object"):
        load_eval_indices(tmp_path / "bad.json")
    with pytest.raises(XlarankError, match="not valid JSON"):
        (tmp_path / "broken.json").write_text("{")
        load_eval_indices(tmp_path / "broken.json")


def test_feature_spec_k_and_bad_specs(tmp_path):
    from xlarank.errors import SpecError

    base = 'name = "x"\nfamilies = ["graph", "khop"]\n'
    (tmp_path / "k1.toml").write_text(base + "k = 1\n")
    (tmp_path / "k3.toml").write_text(base + "k = 3\n")
    k1, k3 = load_feature_spec(tmp_path / "k1.toml"), load_feature_spec(tmp_path / "k3.toml")
    assert (k1.k, k3.k) == (1, 3) and k1.hash != k3.hash
    for text, message in [(base + "k = -1\n", "'k'"), (base + "radius = 2\n", "unknown keys"),
                          ('families = ["graph", "transformer"]\n', "unknown feature families"),
                          ("families = [\n", "not valid TOML")]:
        (tmp_path / "bad.toml").write_text(text)
        with pytest.raises(SpecError, match=message):
            load_feature_spec(tmp_path / "bad.toml")
    with pytest.raises(SpecError, match="not found"):
        load_feature_spec(tmp_path / "missing.toml")


def test_row_groups_hold_whole_graphs(tiny_data, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import xlarank.frame as frame_module
    from xlarank.frame import row_group_graph_sizes

    monkeypatch.setattr(frame_module, "ROW_GROUP_ROWS", 40)
    collection = get_collection("tile-xla")
    out = tmp_path / "f.parquet"
    featurize_files(split_files(tiny_data, collection, "train"), out, collection, "train",
                    DEFAULT, dedup=False)
    table, _ = read_frame(out)
    per_group = row_group_graph_sizes(out)
    assert 1 < len(per_group) < len(group_sizes(table))
    assert list(np.concatenate(per_group)) == list(group_sizes(table))
    parquet = pq.ParquetFile(out)
    ids = [set(parquet.read_row_group(g, columns=["graph_id"])["graph_id"].to_pylist())
           for g in range(parquet.metadata.num_row_groups)]
    assert sum(len(s) for s in ids) == len(set().union(*ids))  # no graph in two groups
