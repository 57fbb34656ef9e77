"""competition-gnn (xlarank.systems.competition_gnn): the pruning, the loss and the schedule
against plain references, padding invariance, training across graphs on a tiny synthetic
tree, determinism, save/load and refused folders, and learning a planted signal in-graph."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle

import numpy as np
import pandas as pd
import pytest

from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import load_graph
from xlarank.data.synth import synth_dataset
from xlarank.errors import XlarankError
from xlarank.metrics import kendall_tau
from xlarank.systems import SYSTEMS, get_system, load_system

pytestmark = pytest.mark.gnn
TILE, LAYOUT = COLLECTIONS[0], COLLECTIONS[1]
# A small network, so that a test trains in seconds; the architecture is the original's.
SMALL = {"hidden": 16, "op_embed": 4, "eval_steps": 4}
SMALL_RECIPE = {"in_graph_epochs": 60, "in_graph_rung": 20, "in_graph_check_every": 10,
                "in_graph_learning_rates": [3e-3, 1e-2]}


@pytest.fixture(scope="module")
def competition():
    pytest.importorskip("jax")
    from xlarank.systems import competition_gnn

    return competition_gnn


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return synth_dataset(tmp_path_factory.mktemp("comp") / "tiny", preset="tiny", seed=0)


def test_it_is_registered_by_name(competition):
    assert SYSTEMS["competition-gnn"].endswith(":CompetitionGnn")
    cls = get_system("competition-gnn")
    assert cls is competition.CompetitionGnn and cls.name == "competition-gnn"
    with pytest.raises(XlarankError, match="unknown settings"):
        cls(bogus=1)


def test_pruning_keeps_the_edges_touching_a_configurable_node(competition, tiny):
    graph = load_graph(split_files(tiny, LAYOUT, "train")[0], LAYOUT, configs=False)
    inputs = competition.graph_inputs(graph)
    edges = graph.edge_index.reshape(-1, 2)
    configurable = np.isin(edges, graph.node_config_ids).any(1)
    kept = np.union1d(np.unique(edges[configurable]), graph.node_config_ids)
    assert len(inputs.op) == len(kept) and len(inputs.src) == configurable.sum()
    # Renumbered in the original order: mapping back gives the original edges.
    assert np.array_equal(np.stack([kept[inputs.src], kept[inputs.dst]], 1),
                          edges[configurable])
    assert np.array_equal(kept[inputs.cfg_node], graph.node_config_ids)
    assert np.array_equal(inputs.op, graph.node_opcode[kept])


def test_pairwise_hinge_matches_a_plain_loop(competition):
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    out, label = rng.normal(size=7), rng.integers(0, 4, 7).astype(float)   # ties too
    valid = np.array([True] * 5 + [False] * 2)
    expect = sum(max(0.0, 1 - (out[i] - out[j])) for i in range(5) for j in range(5)
                 if label[i] > label[j]) / 25
    got = competition.pairwise_hinge(jnp.asarray(out), jnp.asarray(label), jnp.asarray(valid))
    assert float(got) == pytest.approx(expect, rel=1e-5)


def test_schedule_warms_up_then_falls_to_zero_as_a_cosine(competition):
    f = competition.lr_factor
    assert [f(s, 100, 0.05) for s in (0, 1, 5)] == [0.0, 0.2, 1.0]
    # 95 cosine steps after 5 of warmup: halfway at step 52.5.
    assert f(52, 100, 0.05) > 0.5 > f(53, 100, 0.05) and f(100, 100, 0.05) == 0.0
    assert f(0, 100, 0.0) == 1.0 and f(50, 100, 0.0) == pytest.approx(0.5)


def test_padding_changes_no_output(competition, tiny):
    """Bucketed (cross-graph) and exact (in-graph) padding give the same outputs, with
    cross-config attention on: masked nodes, edges and configs take no part."""
    graph = load_graph(split_files(tiny, LAYOUT, "train")[0], LAYOUT)
    runtime = pd.Series(graph.config_runtime.astype(np.float64))
    system = get_system("competition-gnn")(seed=0, **SMALL, in_graph_epochs=0,
                                           in_graph_rung=0, cross_attention=True)
    system.fit_graph(graph, runtime)
    rows = np.arange(min(graph.n_configs, 5))
    exact = system.score_rows(graph, rows)
    system.exact_ = False
    bucketed = system.score_rows(graph, rows)
    assert exact.shape == (len(rows),) and np.isfinite(exact).all()
    np.testing.assert_allclose(bucketed, exact, rtol=1e-5, atol=1e-6)


def test_tile_padding_to_the_fits_largest_kernel_changes_no_output(competition, tiny,
                                                                   tmp_path):
    """Across kernels, tile node and edge counts pad to the fit's largest bucket and
    config counts to a power of two (few compiled shapes): the outputs are those of the
    plain buckets."""
    files = split_files(tiny, TILE, "train")
    system = get_system("competition-gnn")(seed=0, **SMALL, epochs=1).fit(files[:3], TILE)
    graphs = [load_graph(f, TILE) for f in files[:3]]
    assert system.tile_pad_[0] >= max(len(g.node_opcode) for g in graphs)
    saved_pad = system.tile_pad_
    # Padded well past every kernel's own bucket, so the comparison can tell.
    system.tile_pad_ = (64, 64)
    inputs = competition.graph_inputs(graphs[0])
    assert len(system._arrays(inputs, graphs[0].config_feat[:5])["op"]) == 64
    padded = [system.score(g) for g in graphs]
    system.tile_pad_ = (0, 0)
    assert len(system._arrays(inputs, graphs[0].config_feat[:5])["op"]) < 64
    for graph, score in zip(graphs, padded):
        np.testing.assert_allclose(system.score(graph), score, rtol=1e-5, atol=1e-6)
    # The padding round-trips; one that is not a bucket, or past any kernel, is refused
    # on load, not allocated.
    system.tile_pad_ = saved_pad
    folder = tmp_path / "saved"
    folder.mkdir()
    system.save(folder)
    assert load_system(folder).tile_pad_ == saved_pad
    card = json.loads((folder / "gnn.json").read_text())
    for bad in ([1 << 40, 8], [1 << 17, 8], [12, 8], [8.0, 8], "12", [True, 8], [8]):
        (folder / "gnn.json").write_text(json.dumps({**card, "tile_pad": bad}))
        with pytest.raises(XlarankError, match="tile_pad"):
            load_system(folder)
    (folder / "gnn.json").write_text(json.dumps({**card, "kind": "layout",
                                                 "tile_pad": [8, 8]}))
    with pytest.raises(XlarankError, match="tile_pad"):
        load_system(folder)


@pytest.mark.slow
@pytest.mark.parametrize("collection", [LAYOUT, TILE], ids=["layout", "tile"])
def test_fit_across_graphs_is_seeded_and_saves_what_it_scores(competition, tiny, collection,
                                                             tmp_path):
    files = split_files(tiny, collection, "train"), split_files(tiny, collection, "valid")
    settings = {**SMALL, "epochs": 2, "learning_rate": 3e-3}
    records = []
    system = get_system("competition-gnn")(seed=0, **settings)
    system.fit(files[0], collection, files[1], on_epoch=records.append)
    assert records == system.history_ and len(records) == 2
    assert all(np.isfinite(r["train_loss"]) for r in records)
    assert any(r["valid_metric"] is not None for r in records)
    graph = load_graph(files[1][0], collection)
    score = system.score(graph)
    assert score.dtype == np.float64 and score.shape == (graph.n_configs,)
    assert np.isfinite(score).all()
    again = get_system("competition-gnn")(seed=0, **settings).fit(files[0], collection,
                                                                  files[1])
    assert np.array_equal(again.score(graph), score)
    other = get_system("competition-gnn")(seed=1, **settings).fit(files[0], collection,
                                                                  files[1])
    assert not np.array_equal(other.score(graph), score)
    system.save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["gnn.json", "system.json", "weights.npz"]
    loaded = load_system(tmp_path)
    assert loaded.resolved_ == system.resolved_
    assert np.array_equal(loaded.score(graph), score)


class _Payload:
    """Unpickling this creates ``marker``: the proof that a pickle ran code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_folder_with_a_pickle_or_an_odd_file_is_refused(competition, tiny, tmp_path):
    graph = load_graph(split_files(tiny, LAYOUT, "train")[0], LAYOUT)
    system = get_system("competition-gnn")(seed=0, **SMALL, in_graph_epochs=0,
                                           in_graph_rung=0)
    system.fit_graph(graph, pd.Series(graph.config_runtime.astype(np.float64)))
    folder = tmp_path / "saved"
    folder.mkdir()
    system.save(folder)
    weights = folder / "weights.npz"
    marker = tmp_path / "ran"
    # A pickle in place of the weights, and an npz holding a pickled object array.
    weights.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(XlarankError, match="weights"):
        load_system(folder)
    np.savez(weights, param__x=np.array([_Payload(marker)], dtype=object))
    with pytest.raises(XlarankError, match="weights"):
        load_system(folder)
    assert not marker.exists()
    # A FIFO in place of the weights would hang a reader: refused before it is opened.
    weights.unlink()
    os.mkfifo(weights)
    with pytest.raises(XlarankError, match="weights"):
        load_system(folder)


@pytest.mark.slow
def test_in_graph_it_learns_a_planted_signal(competition, tiny):
    """Runtimes made a function of one configurable node's config: the held-out configs
    (never given to the fit) are ranked well above chance."""
    graph = load_graph(split_files(tiny, LAYOUT, "train")[0], LAYOUT)
    # 400 random configs of the tiny graph's configurable nodes; the runtime grows with
    # the first output-layout value summed over them (and a little noise).
    rng = np.random.default_rng(0)
    cfg = rng.integers(-1, 6, (400, graph.n_configurable, 18)).astype(np.int8)
    planted = 1e6 * (20 + cfg[:, :, 0].sum(1) + 0.01 * rng.random(len(cfg)))
    graph = dataclasses.replace(graph, node_config_feat=cfg,
                                config_runtime=np.rint(planted).astype(np.int64))
    order = rng.permutation(len(cfg))
    measured, held = np.sort(order[:300]), order[300:]
    runtime = pd.Series(planted[measured], index=measured)
    records = []
    # Wider than SMALL: at 16 channels (a squeeze-excite of 1) it learns nothing here.
    system = get_system("competition-gnn")(seed=0, **{**SMALL, "hidden": 64}, **SMALL_RECIPE)
    system.fit_graph(graph, runtime, on_epoch=records.append)
    assert records == system.history_ and system.chosen_["inner_configs"] > 0
    assert system.chosen_["learning_rate"] in SMALL_RECIPE["in_graph_learning_rates"]
    tau = kendall_tau(system.score(graph)[held], planted[held])
    # 100 held-out configs put random at 0 +- 0.07.
    assert tau > 0.3, tau
