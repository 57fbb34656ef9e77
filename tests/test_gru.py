"""features/gru.py, kernels/sequence.py and gru_train.py: the gru family's kernels against
plain references, its Numba inference against the jax network (random graphs and real
samples), weights files, specs, the featurize switch, and training the weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import naive
from conftest import REPO_SPECS
from test_gnn import assert_weights_travel_with_the_model, random_graph
from xlarank.data.collections import get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import SpecError
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.features.embedding import NODE_INPUT_COLUMNS, save_weights
from xlarank.features.gru import (
    CONTEXT_HOPS,
    GRU_HIDDEN,
    GRU_WEIGHT_SHAPES,
    LayoutGruState,
    TileGruState,
    config_segments,
    gru_column_names,
    gru_state,
    load_gru_weights,
    random_gru_weights,
)
from xlarank.kernels.sequence import (
    gru_sequence,
    layout_gru_columns,
    opcode_scaled_input,
    tile_gru_columns,
)
from xlarank.rank.measured import config_groups

DEFAULT = load_feature_spec(REPO_SPECS.features("default"))


def random_layout_configs(rng, n_configs, nc):
    """int8 (n_configs, nc, 18) as real configs look: the minor-most pair fixed or none."""
    configs = np.full((n_configs, nc, 18), -1, dtype=np.int8)
    fixed = rng.random((n_configs, nc)) < 0.7
    for start in (0, 6, 12):
        pair = rng.integers(0, 6, (n_configs, nc, 2))
        configs[:, :, start:start + 2] = np.where(fixed[:, :, None], pair, -1)
    # A few odd ones: positions past the pair fixed too.
    odd = rng.random((n_configs, nc)) < 0.1
    for start in (2, 8, 14):
        configs[:, :, start:start + 4] = np.where(
            odd[:, :, None], rng.integers(-1, 6, (n_configs, nc, 4)), -1)
    return configs


def random_tile_configs(rng, n_configs):
    config = np.zeros((n_configs, 24), dtype=np.float32)
    for group in range(3):
        dims = rng.integers(0, 9, (n_configs, 6)).astype(np.float32)
        config[:, 8 * group:8 * group + 6] = dims
        config[:, 8 * group + 6] = dims.sum(axis=1)
        config[:, 8 * group + 7] = np.where(dims > 0, dims, 1).prod(axis=1)
    return config


@pytest.mark.parametrize("seed", range(4))
def test_kernels_match_plain_references(seed):
    rng = np.random.default_rng(seed)
    weights = random_gru_weights(seed)
    n = [1, 9, 40, 120][seed]
    raw = (rng.normal(0, 100, (n, 40)) * (rng.random((n, 40)) < 0.5)).astype(np.float32)
    opcode = rng.integers(0, 121, n).astype(np.uint8)
    args = (weights["opcode_scale"], weights["feat_proj"], weights["feat_bias"])
    np.testing.assert_allclose(opcode_scaled_input(raw, opcode, *args),
                               naive.opcode_scaled_input(raw, opcode, *args), atol=1e-12)
    inputs = rng.normal(0, 1, (n, 16))
    cell = (weights["node_input"], weights["node_input_bias"], weights["hidden"],
            weights["hidden_bias"])
    np.testing.assert_allclose(gru_sequence(inputs, *cell), naive.gru_sequence(inputs, *cell),
                               atol=1e-12)
    # Fewer configurable nodes than steps, none, and more.
    nc = [0, 3, 20, 57][seed]
    configs = random_layout_configs(rng, 7, nc)
    segment = config_segments(rng.permutation(1000)[:nc])
    heads = rng.normal(0, 1, (nc, 8))
    table = rng.normal(0, 1, (3, 49, 8))
    start = rng.normal(0, 0.5, GRU_HIDDEN)
    layout_cell = (weights["layout_input"] + rng.normal(0, 0.3, (8, 3 * GRU_HIDDEN)),
                   rng.normal(0, 0.3, 3 * GRU_HIDDEN), weights["hidden"],
                   rng.normal(0, 0.3, 3 * GRU_HIDDEN))
    np.testing.assert_allclose(
        layout_gru_columns(configs.view(np.int16), segment, heads, table, start, layout_cell),
        naive.layout_gru_columns(configs, segment, heads, table, start, layout_cell), atol=1e-6)
    # Contiguous copies: slices would make Numba compile the kernel again for their layout.
    with pytest.raises(ValueError, match="8 values"):
        layout_gru_columns(configs.view(np.int16), segment, np.ascontiguousarray(heads[:, :4]),
                           np.ascontiguousarray(table[:, :, :4]), start, layout_cell)
    tile = random_tile_configs(rng, 9)
    conv = (rng.normal(0, 1, (3, 2, 8)), rng.normal(0, 0.3, 8))
    tile_cell = (weights["tile_input"], rng.normal(0, 0.3, 3 * GRU_HIDDEN), weights["hidden"],
                 weights["hidden_bias"])
    np.testing.assert_allclose(tile_gru_columns(tile, start, conv, tile_cell),
                               naive.tile_gru_columns(tile, start, conv, tile_cell), atol=1e-6)


def test_config_segments_follow_topological_order():
    segment = config_segments(np.array([50, 3, 7, 100, 20]))
    assert segment.tolist() == [9, 0, 3, 12, 6]  # ranks 3, 0, 1, 4, 2 of 5, times 16 // 5
    assert config_segments(np.arange(40)).max() == 15
    assert len(config_segments(np.zeros(0, np.int64))) == 0


def _trained_like(seed: int):
    """Random weights moved off their start (biases nonzero), as training leaves them."""
    rng = np.random.default_rng([seed, 1])
    weights = random_gru_weights(seed)
    return type(weights)({k: v + rng.normal(0, 0.2, v.shape) for k, v in weights.arrays.items()})


@pytest.mark.gnn
@pytest.mark.parametrize("seed", range(4))
def test_numba_inference_matches_the_jax_network_on_random_graphs(seed):
    pytest.importorskip("jax")
    from xlarank.features.gru_train import LAYOUT_COLUMNS, GruModel
    from xlarank.features.jax_common import GraphBatch

    rng = np.random.default_rng(seed)
    # Sizes around the padding buckets' edges, and graphs without edges.
    n = [1, 8, 31, 70][seed]
    node_feat, opcode, edges = random_graph(rng, n)
    edges = edges[:[0, 5, 24, 200][seed]]
    weights = _trained_like(seed)
    ids = np.sort(rng.choice(n, [0, 3, 17, 40][seed], replace=False)).astype(np.int64)
    configs = random_layout_configs(rng, 11, len(ids))
    target = rng.uniform(1, 2, 11)
    batch = GraphBatch(raw=node_feat[:, NODE_INPUT_COLUMNS].astype(np.float64),
                       opcode=opcode.astype(np.int64), consumers=edges[:, 0],
                       producers=edges[:, 1], config_ids=ids,
                       choice=configs[:, :, LAYOUT_COLUMNS].astype(np.int64) + 1, target=target)
    model = GruModel(weights, 2 * GRU_HIDDEN, 0)
    expected = LayoutGruState(node_feat, opcode, edges, ids, weights).columns(configs)
    np.testing.assert_allclose(np.asarray(model.columns(batch)), expected, atol=1e-6)
    tile = random_tile_configs(rng, 13)
    batch = dataclasses.replace(batch, config_ids=None, choice=tile.astype(np.float64),
                                target=rng.uniform(1, 2, 13))
    expected = TileGruState(node_feat, opcode, edges, weights).columns(tile)
    np.testing.assert_allclose(np.asarray(GruModel(weights, GRU_HIDDEN, 0).columns(batch)),
                               expected, atol=1e-6)


@pytest.mark.gnn
def test_numba_inference_matches_the_jax_network_on_real_samples(samples):
    pytest.importorskip("jax")
    from xlarank.features.gru_train import GruModel

    weights = _trained_like(7)
    model = GruModel(weights, 2 * GRU_HIDDEN, 0)
    layout = [p for p in samples if "layout" in p.parts]
    assert layout
    for path in layout:
        graph = load_graph(path)
        keep = np.sort(np.random.default_rng(0).choice(graph.n_configs,
                                                       min(graph.n_configs, 96),
                                                       replace=False))
        expected = gru_state(graph, weights).columns(graph.node_config_feat[keep])
        np.testing.assert_allclose(np.asarray(model.columns(_batch_of(graph, keep))), expected,
                                   atol=1e-6, err_msg=str(path))


def _batch_of(graph, keep):
    """The training network's arrays of a layout graph's configs ``keep``, as graph_batch
    makes them (test files, whose runtimes are all zero, included)."""
    from xlarank.features.gru_train import LAYOUT_COLUMNS
    from xlarank.features.jax_common import GraphBatch
    from xlarank.features.prune import prune_graph

    pruned, _ = prune_graph(graph, CONTEXT_HOPS)
    return GraphBatch(raw=pruned.node_feat[:, NODE_INPUT_COLUMNS].astype(np.float64),
                      opcode=pruned.node_opcode.astype(np.int64),
                      consumers=pruned.edge_index[:, 0], producers=pruned.edge_index[:, 1],
                      config_ids=pruned.node_config_ids.astype(np.int64),
                      choice=graph.node_config_feat[keep][:, :, LAYOUT_COLUMNS]
                      .astype(np.int64) + 1,
                      target=np.arange(1.0, len(keep) + 1))


@pytest.mark.gnn
@pytest.mark.parametrize("slug", ["layout-xla-random", "tile-xla"])
def test_family_columns_are_the_networks(tiny_data, tmp_path, slug):
    pytest.importorskip("jax")
    from xlarank.features.gru_train import GruModel, gru_graph_batch_options
    from xlarank.features.jax_common import graph_batch

    collection = get_collection(slug)
    weights = _trained_like(11)
    save_weights(weights, tmp_path / "w.npz")
    spec = DEFAULT.with_weights("gru", str(tmp_path / "w.npz"))
    names = gru_column_names(collection.is_tile)
    model = GruModel(weights, len(names), 0)
    for path in split_files(tiny_data, collection, "train")[:2]:
        batch = graph_batch(path, collection, CONTEXT_HOPS, 10**9, np.random.default_rng(0),
                            **gru_graph_batch_options())
        block = featurize_graph(load_graph(path), spec)
        values = block[names].to_numpy()
        assert np.isfinite(values).all() and values.std(axis=0).max() > 0
        np.testing.assert_allclose(np.asarray(model.columns(batch)), values, atol=1e-6)
        # The rest of the frame is the default spec's.
        np.testing.assert_array_equal(block.drop(columns=names).to_numpy(),
                                      featurize_graph(load_graph(path), DEFAULT).to_numpy())


def test_gru_columns_vary_between_configs_and_follow_duplicates(samples):
    path = next(p for p in samples if p.stem == "unet3d")
    graph = load_graph(path)
    values = featurize_graph(graph, DEFAULT.with_weights("gru"))[gru_column_names(False)].to_numpy()
    assert values.shape == (graph.n_configs, 2 * GRU_HIDDEN) and np.isfinite(values).all()
    assert len(np.unique(values, axis=0)) > 100
    np.testing.assert_array_equal(values, values[config_groups(graph)])


def test_weights_files_and_spec_hash(tmp_path):
    spec = DEFAULT.with_weights("gru")
    assert spec.families[-1] == "gru" and spec.name == "default+gru"
    assert spec.hash not in (DEFAULT.hash, DEFAULT.with_weights("gnn").hash)
    assert DEFAULT.with_weights("gru", "random:1").hash != spec.hash
    # gru weights only count when the family is in.
    with_gnn = DEFAULT.with_weights("gnn")
    assert with_gnn.hash == dataclasses.replace(
        with_gnn, weights=(*with_gnn.weights, ("gru", "x.npz"))).hash
    weights = random_gru_weights(5)
    path = tmp_path / "w.npz"
    save_weights(weights, path)
    loaded = load_gru_weights(str(path))
    for key, shape in GRU_WEIGHT_SHAPES.items():
        np.testing.assert_array_equal(loaded[key], weights[key])
        assert loaded[key].shape == shape
    hash_before = DEFAULT.with_weights("gru", str(path)).hash
    save_weights(random_gru_weights(6), path)
    # Other content, other features.
    assert DEFAULT.with_weights("gru", str(path)).hash != hash_before
    with pytest.raises(SpecError, match="gru weights need opcode_scale"):
        bad = tmp_path / "bad.npz"
        np.savez(bad, head=np.zeros((2, 2)))
        load_gru_weights(str(bad))
    text = tmp_path / "s.toml"
    text.write_text('families = ["config_raw", "gru"]\ngru = "random:x"\n')
    with pytest.raises(SpecError, match="'gru' random seed"):
        load_feature_spec(text)
    text.write_text('families = ["config_raw", "gru"]\ngru = "w.npz"\n')
    loaded_spec = load_feature_spec(text)
    assert loaded_spec.weights_for("gru") == str(path)
    assert loaded_spec.weights_for("gnn") == "random:0"
    assert type(loaded_spec).from_dict(loaded_spec.to_dict()) == loaded_spec


def test_random_weights_are_seeded():
    a, b, c = random_gru_weights(3), random_gru_weights(3), random_gru_weights(4)
    assert all(np.array_equal(a[k], b[k]) for k in GRU_WEIGHT_SHAPES)
    assert not np.array_equal(a["hidden"], c["hidden"])


def test_featurize_cli_embedding_gru(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from xlarank.cli import app
    from xlarank.frame import read_frame

    runner = CliRunner()
    for slug in ("layout-xla-random", "tile-xla"):
        out = tmp_path / f"{slug}.parquet"
        result = runner.invoke(app, ["featurize", str(tiny_data), "--collection", slug,
                                     "--split", "valid", "--embedding", "gru", "--out",
                                     str(out)])
        assert result.exit_code == 0, result.output
        table, meta = read_frame(out)
        assert "gru" in meta.spec["families"] and meta.spec["gru"] == "random:0"
        names = [c for c in table.columns if c.startswith("e_gru")]
        assert names == gru_column_names(slug.startswith("tile"))
        assert np.isfinite(table[names].to_numpy()).all()
    result = runner.invoke(app, ["featurize", str(tiny_data), "--embedding", "gru",
                                 "--gru-weights", str(tmp_path / "missing.npz"),
                                 "--out-dir", str(tmp_path / "x")])
    assert result.exit_code == 2 and "missing.npz" in result.output
    result = runner.invoke(app, ["featurize", str(tiny_data), "--gru-weights", "random:1",
                                 "--out-dir", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--embedding gru" in result.output
    result = runner.invoke(app, ["featurize", str(tiny_data), "--embedding", "lstm",
                                 "--out-dir", str(tmp_path / "x")])
    assert result.exit_code == 2 and "'gru'" in result.output
    assert not (tmp_path / "x").exists()


# Config counts padded inside training (to 64 and 16): the padding must not reach the loss.
@pytest.mark.gnn
@pytest.mark.parametrize(("slug", "n_configs"), [("layout-xla-random", 35), ("tile-xla", 13)])
def test_first_training_loss_is_the_centred_mse_of_the_start_weights(tiny_data, slug,
                                                                     n_configs):
    pytest.importorskip("jax")
    from xlarank.features.gru_train import (
        GruModel,
        centred_mse,
        gru_graph_batch_options,
        train_gru_weights,
    )
    from xlarank.features.jax_common import graph_batch

    collection = get_collection(slug)
    path = split_files(tiny_data, collection, "train")[0]
    _, history = train_gru_weights([path], collection, seed=5, epochs=1,
                                   configs_per_graph=n_configs)
    batch = graph_batch(path, collection, CONTEXT_HOPS, n_configs, np.random.default_rng(5),
                        **gru_graph_batch_options())
    assert len(batch.target) == n_configs
    model = GruModel(random_gru_weights(5), len(gru_column_names(collection.is_tile)), 5)
    prediction = np.asarray(model.columns(batch)) @ np.asarray(model.score)
    y = np.log(batch.target)
    expected = np.mean(((prediction - prediction.mean()) - (y - y.mean())) ** 2)
    assert history[0] == pytest.approx(expected, abs=1e-12)
    assert centred_mse(prediction, batch.target) == pytest.approx(expected, abs=1e-12)
    # Offsets per graph cost nothing.
    assert centred_mse(prediction + 3.0, batch.target * 7.0) == pytest.approx(expected, abs=1e-12)


@pytest.mark.gnn
@pytest.mark.slow
@pytest.mark.parametrize("slug", ["layout-xla-random", "tile-xla"])
def test_training_is_seeded_lowers_the_loss_and_numba_follows(tiny_data, slug):
    pytest.importorskip("jax")
    from xlarank.features.gru_train import GruModel, gru_graph_batch_options, train_gru_weights
    from xlarank.features.jax_common import graph_batch

    collection = get_collection(slug)
    files = split_files(tiny_data, collection, "train")
    first, history = train_gru_weights(files, collection, seed=3, epochs=8)
    again, history_again = train_gru_weights(files, collection, seed=3, epochs=8)
    other, _ = train_gru_weights(files, collection, seed=4, epochs=8)
    assert history == history_again
    for key, shape in GRU_WEIGHT_SHAPES.items():
        np.testing.assert_array_equal(first[key], again[key])
        assert first[key].dtype == np.float64 and first[key].shape == shape
    assert not np.array_equal(first["hidden"], random_gru_weights(3)["hidden"])
    assert not np.array_equal(first["hidden"], other["hidden"])
    assert len(history) == 8 and history[-1] < history[0]
    names = gru_column_names(collection.is_tile)
    batch = graph_batch(files[0], collection, CONTEXT_HOPS, 10**9, np.random.default_rng(0),
                        **gru_graph_batch_options())
    graph = load_graph(files[0])
    configs = graph.config_feat if collection.is_tile else graph.node_config_feat
    np.testing.assert_allclose(np.asarray(GruModel(first, len(names), 0).columns(batch)),
                               gru_state(graph, first).columns(configs), atol=1e-6)


@pytest.mark.gnn
@pytest.mark.slow
def test_gnn_train_cli_gru_weights_train_and_travel_with_the_model(tiny_data, repo_specs,
                                                                   tmp_path):
    pytest.importorskip("jax")
    from typer.testing import CliRunner

    from xlarank.cli import app

    runner = CliRunner()
    weights = tmp_path / "gru.npz"
    result = runner.invoke(app, ["gnn-train", str(tiny_data), "--collection",
                                 "layout-xla-random", "--embedding", "gru", "--out",
                                 str(weights), "--epochs", "3"])
    assert result.exit_code == 0, result.output
    assert "centred log-runtime mse" in result.output
    trained = load_gru_weights(str(weights))
    assert not np.array_equal(trained["hidden"], random_gru_weights(0)["hidden"])
    assert_weights_travel_with_the_model(tiny_data, repo_specs, tmp_path, weights, "gru")
