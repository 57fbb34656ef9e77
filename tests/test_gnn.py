"""features/embedding.py and gnn_train.py: the gnn family's embeddings against plain
references, its columns, weights files, specs, and training the weights with jax."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import naive
from conftest import REPO_SPECS
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import TileGraph, load_graph
from xlarank.errors import SpecError
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.features.embedding import (
    HEAD_DIM,
    NODE_INPUT_COLUMNS,
    TILE_DIM,
    WEIGHT_SHAPES,
    GnnWeights,
    gnn_column_names,
    load_weights,
    node_embeddings,
    random_weights,
    save_weights,
)
from xlarank.rank.measured import config_groups

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))


def random_graph(rng, n):
    node_feat = np.zeros((n, 140), dtype=np.float32)
    node_feat[:, 21:27] = rng.integers(0, 300, (n, 6))
    node_feat[np.arange(n), rng.integers(2, 21, n)] = 1
    node_feat[:, 134:140] = rng.integers(0, 6, (n, 6))
    opcode = rng.integers(0, 120, n).astype(np.uint8)
    consumers = rng.integers(1, max(n, 2), 3 * n) % n
    edges = np.stack([consumers, rng.integers(0, n, 3 * n)], axis=1)
    return node_feat, opcode, edges.astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_embeddings_match_networkx_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    node_feat, opcode, edges = random_graph(rng, int(rng.integers(2, 60)))
    weights = random_weights(seed)
    np.testing.assert_allclose(node_embeddings(node_feat, opcode, edges, weights),
                               naive.gnn_node_embeddings(node_feat, opcode, edges, weights),
                               atol=1e-10)


# slow: networkx on every real sample (the random-graph cases stay fast)
@pytest.mark.slow
def test_embeddings_match_networkx_on_real_samples(samples):
    weights = random_weights(0)
    for path in samples:
        graph = load_graph(path, configs=False)
        if graph.n_nodes > 3000:
            continue  # the networkx loop is slow; the small samples cover both kinds
        np.testing.assert_allclose(
            node_embeddings(graph.node_feat, graph.node_opcode, graph.edge_index, weights),
            naive.gnn_node_embeddings(graph.node_feat, graph.node_opcode, graph.edge_index,
                                      weights), atol=1e-10)


def test_gnn_columns_vary_between_configs_and_follow_duplicates(samples):
    spec = DEFAULT.with_weights("gnn")
    path = next(p for p in samples if p.stem == "unet3d")
    graph = load_graph(path)
    block = featurize_graph(graph, spec)
    names = gnn_column_names(False)
    assert len(names) == 2 * HEAD_DIM and list(block.columns[-len(names):]) == names
    values = block[names].to_numpy()
    assert len(np.unique(values.round(6), axis=0)) > 10
    np.testing.assert_array_equal(values, values[config_groups(graph)])
    # The rest of the frame is the default spec's.
    np.testing.assert_array_equal(block.drop(columns=names).to_numpy(),
                                  featurize_graph(graph, DEFAULT).to_numpy())


def test_tile_gnn_columns(tiny_data):
    spec = DEFAULT.with_weights("gnn")
    path = sorted((tiny_data / "npz" / "tile" / "xla" / "train").glob("*.npz"))[0]
    graph = load_graph(path)
    assert isinstance(graph, TileGraph)
    block = featurize_graph(graph, spec)
    values = block[gnn_column_names(True)].to_numpy()
    assert values.shape == (graph.n_configs, TILE_DIM) and np.all(np.abs(values) <= 1)
    assert np.isfinite(values).all() and values.std(axis=0).max() > 0


def test_spec_hash_and_weights_files(tmp_path):
    spec = DEFAULT.with_weights("gnn")
    assert "gnn" in spec.families and spec.hash != DEFAULT.hash
    assert DEFAULT.with_weights("gnn", "random:1").hash != spec.hash
    weights = random_weights(5)
    path = tmp_path / "w.npz"
    save_weights(weights, path)
    from_file = DEFAULT.with_weights("gnn", str(path))
    loaded = load_weights(str(path))
    for key in WEIGHT_SHAPES:
        np.testing.assert_array_equal(loaded[key], weights[key])
    hash_before = from_file.hash
    save_weights(random_weights(6), path)
    # Other content, other features.
    assert DEFAULT.with_weights("gnn", str(path)).hash != hash_before
    bad = tmp_path / "bad.npz"
    np.savez(bad, head=np.zeros((2, 2)))
    with pytest.raises(SpecError, match="opcode_embedding"):
        load_weights(str(bad))
    text = tmp_path / "s.toml"
    text.write_text('families = ["config_raw", "gnn"]\ngnn = "random:x"\n')
    with pytest.raises(SpecError, match="seed"):
        load_feature_spec(text)
    text.write_text('families = ["config_raw", "gnn"]\ngnn = "w.npz"\n')
    assert load_feature_spec(text).weights_for("gnn") == str(path)


def test_random_weights_are_seeded():
    a, b, c = random_weights(3), random_weights(3), random_weights(4)
    assert all(np.array_equal(a[k], b[k]) for k in WEIGHT_SHAPES)
    assert not np.array_equal(a["head"], c["head"])
    assert isinstance(a, GnnWeights)


def test_featurize_cli_embedding_switch(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from xlarank.cli import app
    from xlarank.frame import read_frame

    runner = CliRunner()
    out = tmp_path / "f.parquet"
    result = runner.invoke(app, ["featurize", str(tiny_data), "--collection",
                                 "layout-xla-random", "--split", "valid", "--embedding", "gnn",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    table, meta = read_frame(out)
    assert "gnn" in meta.spec["families"] and meta.spec["gnn"] == "random:0"
    assert [c for c in table.columns if c.startswith("e_gnn")] == gnn_column_names(False)
    result = runner.invoke(app, ["featurize", str(tiny_data), "--embedding", "gnn",
                                 "--gnn-weights", str(tmp_path / "missing.npz"),
                                 "--out-dir", str(tmp_path / "x")])
    assert result.exit_code == 2 and "missing.npz" in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.gnn
@pytest.mark.parametrize("seed", range(4))
def test_training_network_embeddings_match_numba_on_random_graphs(seed):
    pytest.importorskip("jax")  # in the dev extras, so CI runs this
    from xlarank.features.gnn_train import GnnModel
    from xlarank.features.jax_common import GraphBatch

    rng = np.random.default_rng(seed)
    # Sizes around the padding buckets' edges (8, 16, 32, ...) and graphs without edges.
    n = [1, 7, 8, 31][seed]
    node_feat, opcode, edges = random_graph(rng, n)
    edges = edges[:[0, 5, 24, 93][seed]]
    weights = random_weights(seed)
    batch = GraphBatch(raw=node_feat[:, NODE_INPUT_COLUMNS].astype(np.float64),
                       opcode=opcode.astype(np.int64), consumers=edges[:, 0],
                       producers=edges[:, 1], config_ids=None, choice=np.zeros((2, 1)),
                       target=np.array([1.0, 2.0]))
    model = GnnModel(weights, TILE_DIM, 0)
    np.testing.assert_allclose(np.asarray(model.node_embeddings(batch)),
                               node_embeddings(node_feat, opcode, edges, weights), atol=1e-12)


@pytest.mark.gnn
@pytest.mark.parametrize("slug", ["layout-xla-random", "tile-xla"])
def test_training_network_computes_the_featurized_columns(tiny_data, tmp_path, slug):
    pytest.importorskip("jax")
    from xlarank.features.gnn_train import GnnModel
    from xlarank.features.jax_common import graph_batch

    collection = get_collection(slug)
    weights = random_weights(11)
    save_weights(weights, tmp_path / "w.npz")
    spec = DEFAULT.with_weights("gnn", str(tmp_path / "w.npz"))
    model = GnnModel(weights, len(gnn_column_names(collection.is_tile)), 0)
    for path in split_files(tiny_data, collection, "train")[:2]:
        batch = graph_batch(path, collection, spec.k, 10**9, np.random.default_rng(0))
        columns = np.asarray(model.columns(batch))
        block = featurize_graph(load_graph(path), spec)
        np.testing.assert_allclose(
            columns, block[gnn_column_names(collection.is_tile)].to_numpy(), atol=1e-6)


@pytest.mark.gnn
@pytest.mark.parametrize("slug", ["layout-xla-random", "tile-xla"])
def test_training_is_seeded_and_lowers_the_loss(tiny_data, slug):
    pytest.importorskip("jax")
    from xlarank.features.gnn_train import train_gnn_weights

    collection = get_collection(slug)
    files = split_files(tiny_data, collection, "train")
    first, history = train_gnn_weights(files, collection, seed=3, epochs=6)
    again, history_again = train_gnn_weights(files, collection, seed=3, epochs=6)
    other, _ = train_gnn_weights(files, collection, seed=4, epochs=6)
    assert history == history_again
    for key in WEIGHT_SHAPES:
        np.testing.assert_array_equal(first[key], again[key])
        assert first[key].dtype == np.float64 and first[key].shape == WEIGHT_SHAPES[key]
    assert not np.array_equal(first["feat_proj"], random_weights(3)["feat_proj"])
    assert not np.array_equal(first["feat_proj"], other["feat_proj"])
    assert len(history) == 6 and history[-1] < history[0]


# Config counts padded inside training (to 64 and 16, the sizes the other tests compile for
# these graphs): the padding must not reach the loss.
@pytest.mark.gnn
@pytest.mark.parametrize(("slug", "n_configs"), [("layout-xla-random", 35), ("tile-xla", 13)])
def test_first_training_loss_is_the_pairwise_loss_of_the_start_weights(tiny_data, slug,
                                                                        n_configs):
    pytest.importorskip("jax")
    from xlarank.features.gnn_train import GnnModel, pairwise_loss, train_gnn_weights
    from xlarank.features.jax_common import graph_batch

    collection = get_collection(slug)
    path = split_files(tiny_data, collection, "train")[0]
    _, history = train_gnn_weights([path], collection, seed=5, epochs=1,
                                   configs_per_graph=n_configs)
    batch = graph_batch(path, collection, 2, n_configs, np.random.default_rng(5))
    assert len(batch.target) == n_configs
    model = GnnModel(random_weights(5), len(gnn_column_names(collection.is_tile)), 5)
    score = np.asarray(model.columns(batch)) @ np.asarray(model.score)
    faster = batch.target[:, None] < batch.target[None, :]
    expected = np.logaddexp(0.0, -(score[:, None] - score[None, :]))[faster].mean()
    assert history[0] == pytest.approx(expected, abs=1e-12)
    assert float(pairwise_loss(score, batch.target)) == pytest.approx(expected, abs=1e-12)
    assert float(pairwise_loss(score, np.ones(n_configs))) == 0.0  # no pair to learn from


def test_training_without_jax_says_what_to_install(tiny_data, monkeypatch):
    from xlarank.errors import XlarankError
    from xlarank.features.gnn_train import train_gnn_weights

    monkeypatch.setitem(sys.modules, "jax", None)  # makes `import jax` fail
    collection = get_collection("layout-xla-random")
    with pytest.raises(XlarankError, match=r"jax: pip install 'xlarank\[gnn\]'"):
        train_gnn_weights(split_files(tiny_data, collection, "train"), collection)


def test_importing_xlarank_does_not_load_jax():
    code = ("import sys, xlarank, xlarank.cli, xlarank.features.gnn_train; "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.gnn
@pytest.mark.slow
def test_gnn_train_cli_weights_train_and_travel_with_the_model(tiny_data, repo_specs, tmp_path):
    pytest.importorskip("jax")
    from typer.testing import CliRunner

    from xlarank.cli import app

    runner = CliRunner()
    weights = tmp_path / "gnn.npz"
    result = runner.invoke(app, ["gnn-train", str(tiny_data), "--collection",
                                 "layout-xla-random", "--out", str(weights), "--epochs", "3"])
    assert result.exit_code == 0, result.output
    trained = load_weights(str(weights))
    assert not np.array_equal(trained["head"], random_weights(0)["head"])
    assert_weights_travel_with_the_model(tiny_data, repo_specs, tmp_path, weights, "gnn")


def assert_weights_travel_with_the_model(tiny_data, repo_specs, tmp_path, weights, embedding):
    """Featurize with trained weights of an embedding family, train and save a ranker, delete
    the weights file: the saved model carries its own copy and scores a file as its frame."""
    from typer.testing import CliRunner

    from xlarank.cli import app
    from xlarank.frame import read_frame
    from xlarank.rank.model import load_model
    from xlarank.rank.spec import load_ranker_spec
    from xlarank.rank.train import train_ranker

    runner = CliRunner()
    frames = {}
    for split in ("train", "valid"):
        out = tmp_path / f"{split}.parquet"
        result = runner.invoke(app, ["featurize", str(tiny_data), "--collection",
                                     "layout-xla-random", "--split", split, "--embedding",
                                     embedding, f"--{embedding}-weights", str(weights),
                                     "--out", str(out)])
        assert result.exit_code == 0, result.output
        frames[split] = read_frame(out)
    train, meta = frames["train"]
    spec = load_ranker_spec(repo_specs.models("layout-xla-random"))
    spec = dataclasses.replace(spec, features=meta.spec["name"], num_rounds=10)
    ranker = train_ranker(train, meta, spec)
    ranker.save(tmp_path / "model")
    weights.unlink()  # the model carries its own copy
    again = load_model(tmp_path / "model")
    assert (tmp_path / "model" / f"{embedding}_weights.npz").exists()
    assert again.feature_spec.hash == meta.spec_hash
    valid, valid_meta = frames["valid"]
    again.check_frame(valid_meta)
    path = split_files(tiny_data, get_collection("layout-xla-random"), "valid")[0]
    block = featurize_graph(load_graph(path), again.feature_spec)
    rows = valid[valid["graph_id"] == block["graph_id"].iloc[0]]
    np.testing.assert_allclose(again.predict(block), again.predict(rows.reset_index(drop=True)))
