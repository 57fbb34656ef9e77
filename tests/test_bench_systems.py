"""bench/systems.py's cross-graph rule (the curves part): the inner split, the held-out
sample, the early-stopping replay and the summary's times, against hand-worked examples;
and the page's rendering of it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import publish
    import systems
finally:
    sys.path.remove(str(ROOT / "bench"))


def point(epoch: int, inner: float, held: float, cpu: float) -> dict:
    return {"epoch": epoch, "inner": inner, "held": held, "held_median": held,
            "seconds": cpu, "cpu_seconds": cpu}


def burn(cpu_seconds: float) -> None:
    """Spin until this process has used ``cpu_seconds`` more CPU time."""
    until = time.process_time() + cpu_seconds
    while time.process_time() < until:
        sum(range(1000))


def test_the_inner_split_is_seeded_disjoint_and_capped():
    files = [Path(f"f{i:03d}.npz") for i in range(30)]
    fit, inner = systems.cross_split(files, 0)
    assert len(inner) == 6 and len(fit) == 24
    assert set(fit) | set(inner) == set(files) and not set(fit) & set(inner)
    assert systems.cross_split(list(reversed(files)), 0) == (fit, inner)
    assert systems.cross_split(files, 1)[1] != inner
    many = [Path(f"k{i:03d}.npz") for i in range(400)]
    assert len(systems.cross_split(many, 0)[1]) == systems.CROSS_MOST_GRAPHS
    assert len(systems.cross_split(files[:2], 0)[1]) == 1
    with pytest.raises(ValueError, match="2 train files"):
        systems.cross_split(files[:1], 0)


def test_the_held_out_sample_is_the_same_for_every_seed():
    few = [Path(f"v{i}.npz") for i in range(8)]
    assert systems.held_out_files(few) == sorted(few)
    many = [Path(f"v{i:03d}.npz") for i in range(100)]
    picked = systems.held_out_files(many)
    assert len(picked) == systems.CROSS_MOST_GRAPHS and picked == sorted(picked)
    assert systems.held_out_files(list(reversed(many))) == picked


def test_early_stopping_replays_the_in_graph_rule():
    # Gains of at least 0.005 reset the wait; three checkpoints without one stop.
    inner = [0.10, 0.20, 0.203, 0.21, 0.30, 0.301, 0.302, 0.303, 0.50]
    curve = [point(i + 1, v, 0.0, float(i)) for i, v in enumerate(inner)]
    # The reference is 0.30 (epoch 5); 0.301, 0.302, 0.303 gain less: stop at epoch 8,
    # keeping the best so far (epoch 8's 0.303), never seeing the 0.50 after it.
    assert systems.early_stop(curve) == (7, 7)
    # 0.203 gains less than 0.005 over 0.20, but 0.21 does over the reference 0.20.
    assert systems.early_stop(curve[:4]) == (3, 3)
    falling = [point(i + 1, v, 0.0, float(i)) for i, v in enumerate([0.4, 0.3, 0.2, 0.1, 0.5])]
    assert systems.early_stop(falling) == (0, 3)


def test_the_summary_times_each_plateau_against_xlarank():
    rows = [{"collection": "c", "system": "xlarank", "seed": 0, "metric": 0.40,
             "median": 0.40, "train_cpu_s": 2.0, "curve": [], "peak_rss_mb": 1.0},
            {"collection": "c", "system": "gnn", "seed": 0, "metric": 0.30, "median": 0.3,
             "train_cpu_s": 50.0, "plateau_cpu_s": 20.0, "curve": [point(1, 0, 0.3, 20.0)],
             "best_held_in_budget": 0.3, "last_held": 0.3,
             "kept_epoch": 1, "stopped_epoch": 1, "peak_rss_mb": 2.0},
            {"collection": "c", "system": "better", "seed": 0, "metric": 0.45,
             "median": 0.45, "train_cpu_s": 9.0, "plateau_cpu_s": 8.0,
             "curve": [point(1, 0, 0.45, 8.0)], "kept_epoch": 1, "stopped_epoch": 1,
             "peak_rss_mb": 2.0}]
    out = {r["system"]: r for r in systems.cross_summary(rows)}
    assert out["gnn"]["xlarank_cpu_s_to_plateau"] == 2.0
    assert out["gnn"]["plateau_ratio"] == 10.0
    # xlarank's 0.40 does not come within 0.01 of 0.45: no time, no ratio.
    assert out["better"]["xlarank_cpu_s_to_plateau"] is None
    assert out["better"]["plateau_ratio"] is None
    assert "plateau_ratio" not in out["xlarank"]

    page = "\n".join(publish.cross_graph(
        {"data": "synthetic: d (xlarank synth), valid split", "seed_list": [0],
         "epochs": {"layout": 30}, "inner_share": 0.2, "most_graphs": 25,
         "results": systems.cross_summary(rows)}, "bench/results/x-cross-curve.png"))
    assert "| gnn | 0.300 ± 0.000 (0.300) |" in page
    assert "| c | gnn | 1/1 | 0.300/0.300 | 50 | 20 | 10 | 2 |" in page
    assert "xlarank's one fit, CPU s / peak RSS MB: c 2 / 1." in page
    assert "(../bench/published/x-cross-curve.png)" in page


def test_a_record_from_the_partial_alone_lists_the_units_it_lacks(tmp_path, monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a unit was run")

    monkeypatch.setattr(systems, "in_fresh_process", no_process)
    made = {"collection": "layout:xla:random", "seed": 0, "metric": 0.4, "median": 0.4,
            "train_cpu_s": 2.0, "curve": [], "peak_rss_mb": 1.0}
    partial = tmp_path / "rows.jsonl"
    partial.write_text("".join(json.dumps({**made, "system": s}) + "\n"
                               for s in ("xlarank", "random")))
    not_run: list = []
    results = systems.run_cross(tmp_path, [0, 1], ["xlarank"], ["layout:xla:random"],
                                partial, not_run=not_run)
    assert not_run == [["layout:xla:random", "xlarank", 1], ["layout:xla:random", "random", 1]]
    assert [(r["system"], r["seeds"]) for r in results] == [("xlarank", [0]), ("random", [0])]
    page = "\n".join(publish.cross_graph(
        {"data": "synthetic: d (xlarank synth), valid split", "seed_list": [0, 1],
         "epochs": {"layout": 30}, "inner_share": 0.2, "most_graphs": 25,
         "results": results, "not_run": not_run}, None))
    assert ("Not run (a dash above, or fewer seeds): xlarank on layout:xla:random, seed 1; "
            "random on layout:xla:random, seed 1.") in page


@pytest.mark.gnn
def test_a_cross_graph_checkpoint_scores_with_that_epochs_weights(tiny_data):
    """gru and the hybrid: the score seen at the last epoch's checkpoint is the fitted
    system's, and an earlier epoch's differs (the callback sees each epoch's model)."""
    pytest.importorskip("jax")
    from xlarank.data.collections import get_collection, split_files
    from xlarank.data.graph import load_graph
    from xlarank.systems import get_system

    for name, collection_id, settings in (("gru", "layout:xla:random", {"epochs": 3}),
                                          ("hybrid", "layout:xla:random", {"gnn_epochs": 2})):
        collection = get_collection(collection_id)
        train = split_files(tiny_data, collection, "train")
        graph = load_graph(split_files(tiny_data, collection, "valid")[0], collection)
        system = get_system(name)(seed=0, **settings)
        seen = []
        system.fit(train, collection, on_epoch=lambda record, system=system, graph=graph,
                   seen=seen: seen.append(system.score(graph)))
        assert len(seen) == list(settings.values())[0] == len(system.history_)
        assert (seen[-1] == system.score(graph)).all()
        assert not (seen[0] == seen[-1]).all()
        plain = get_system(name)(seed=0, **settings).fit(train, collection)
        assert (plain.score(graph) == system.score(graph)).all()


def test_cross_fit_keeps_the_scores_of_the_epoch_the_rule_keeps(tiny_data):
    """A stand-in system whose epoch e orders the configs by runtime for the inner graphs
    (inner headline rising, then flat) and scores held graphs by epoch: the kept epoch's
    held-out scores come back, and the callbacks' held scoring is not training time."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.data.graph import load_graph

    collection = get_collection("layout:xla:random")
    graphs = [load_graph(f, collection) for f in split_files(tiny_data, collection, "train")]
    inner, held = graphs[:2], graphs[2:3]
    inner_ids = {id(g) for g in inner}

    class Stepped:
        name = "stepped"
        epoch = 0

        def __init__(self, epochs=7):
            self.epochs = epochs

        def fit(self, files, collection, on_epoch):
            for epoch in range(1, self.epochs + 1):
                self.epoch = epoch
                on_epoch({"epoch": epoch})
            return self

        def score(self, graph):
            runtime = graph.config_runtime.astype(float)
            if id(graph) in inner_ids:
                burn(0.03)
                # Faster first from epoch 3 on: the inner tau climbs to 1, then holds.
                return -runtime if self.epoch >= 3 else runtime * (3 - self.epoch)
            burn(0.2)
            return np.full(graph.n_configs, float(self.epoch))

    got = systems.cross_fit(Stepped(), [], collection, inner, held, 7)
    inner_curve = [p["inner"] for p in got["curve"]]
    assert inner_curve[2:] == [1.0] * 5 and inner_curve[0] < 0
    # Epoch 3 is the best; epochs 4, 5, 6 gain nothing: stopped at 6, epoch 3 kept.
    assert (got["kept_epoch"], got["stopped_epoch"]) == (3, 6)
    assert len(got["scores"]) == 1 and (got["scores"][0] == 3.0).all()
    cpu = [p["cpu_seconds"] for p in got["curve"]]
    assert cpu == sorted(cpu) and got["train_cpu_s"] == got["curve"][5]["cpu_seconds"]
    # Inner scoring (2 graphs x 0.03 CPU s an epoch) counts; held scoring (0.2) does not.
    assert 7 * 2 * 0.03 - 0.02 <= cpu[-1] < 7 * 2 * 0.03 + 0.5
    with pytest.raises(RuntimeError, match="7 checkpoints of a 8-epoch fit"):
        systems.cross_fit(Stepped(), [], collection, inner, held, 8)
    # With a long budget the fit ends CROSS_AFTER_STOP epochs past the rule's stop.
    long = systems.cross_fit(Stepped(30), [], collection, inner, held, 30)
    assert len(long["curve"]) == 6 + systems.CROSS_AFTER_STOP
    assert (long["kept_epoch"], long["stopped_epoch"]) == (3, 6)


def test_the_curve_figures_draw_a_line_per_rate_and_a_point_per_unstepped_seed(tmp_path):
    from PIL import Image

    rated = [{"learning_rate": lr, "cpu_seconds": float(i + 1), "held_tau": 0.1 * i}
             for lr in (1e-3, 1e-2) for i in range(3)]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    systems.plot_rates(ax, rated, "gnn")
    assert [line.get_label() for line in ax.get_lines()] == ["gnn lr 0.001", "gnn lr 0.01"]
    assert list(ax.get_lines()[1].get_ydata()) == [0.0, 0.1, 0.2]
    # A system keeps its colour across rates; the rates differ by line style.
    first, second = ax.get_lines()
    assert first.get_color() == second.get_color() == systems.colour_of("gnn")
    assert first.get_linestyle() != second.get_linestyle()
    plt.close(fig)

    ingraph = [{"share": 0.5, "system": "gnn", "curves": {"0": rated}, "per_seed": []},
               {"share": 0.5, "system": "xlarank", "curves": {},
                "per_seed": [{"train_s": 1.0, "train_cpu_s": 1.0, "tau": 0.8}]}]
    cross = [{"collection": "c", "system": "gnn", "per_seed": [{"kept_epoch": 2}],
              "curves": {"0": [point(e, 0, 0.1 * e, float(e)) for e in (1, 2, 3)]}},
             {"collection": "c", "system": "xlarank", "curves": {},
              "per_seed": [{"train_cpu_s": 1.0, "metric": 0.4}]}]
    for path in (systems.ingraph_curves(ingraph, tmp_path, "a"),
                 systems.cross_curves(cross, tmp_path, "b")):
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] >= 640
    assert systems.ingraph_curves([], tmp_path, "c") is None


def test_the_counts_tree_adds_train_files_to_the_base_tree_and_keeps_its_valid_ones(tmp_path):
    from xlarank.data.collections import COLLECTIONS, split_files
    from xlarank.data.synth import PRESETS, synth_dataset

    base = synth_dataset(tmp_path / "tiny", "tiny", seed=0)
    tree = systems.counts_tree(tmp_path / "counts", 7, base="tiny", counts="small")
    for collection in COLLECTIONS:
        train = split_files(tree, collection, "train")
        want = 7 if collection.is_tile else PRESETS["small"].files(collection)[0]
        assert len(train) == want
        assert not split_files(tree, collection, "test")
        for split in ("train", "valid"):
            ours = split_files(base, collection, split)
            assert ours, (collection.id, split)
            for path in ours:
                twin = tree / path.relative_to(base)
                assert twin.read_bytes() == path.read_bytes(), twin
        assert len(split_files(tree, collection, "valid")) == len(
            split_files(base, collection, "valid"))
    before = {p: p.stat().st_mtime_ns for p in tree.rglob("*.npz")}
    assert systems.counts_tree(tmp_path / "counts", 7, base="tiny", counts="small") == tree
    assert {p: p.stat().st_mtime_ns for p in tree.rglob("*.npz")} == before


def test_the_counts_page_shows_each_figure_moving_from_the_demo_count():
    def row(system: str, value: float) -> dict:
        return {"collection": "layout:xla:random", "system": system, "seed": 0,
                "metric": value, "median": value, "train_cpu_s": 2.0, "curve": [],
                "peak_rss_mb": 1.0}

    record = {"counts": {
        "data": "synthetic: d", "seed_list": [0], "epochs": {"layout": 30},
        "inner_share": 0.2, "most_graphs": 25, "not_run": [["layout:xla:random", "gru", 0]],
        "train_files": {"layout:xla:random": 69}, "demo_train_files": {"layout:xla:random": 30},
        "results": systems.cross_summary([row("xlarank", 0.5), row("random", 0.0)]),
        "demo_results": systems.cross_summary([row("xlarank", 0.4)])}}
    page = "\n".join(publish.RENDERERS["systems_counts"](record))
    assert "| system | layout:xla:random (30 → 69 files) |" in page
    assert "| xlarank | 0.400 → 0.500 (+0.100) |" in page
    # No demo row for random: the larger count's figure alone.
    assert "| random | 0.000 |" in page
    assert "Not run (a dash above, or fewer seeds): gru on layout:xla:random, seed 0." in page


def test_the_counts_comparison_leaves_out_on_the_demo_side_the_seeds_the_larger_count_lacks(
        tmp_path, monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a unit was run")

    monkeypatch.setattr(systems, "in_fresh_process", no_process)

    def row(system: str, seed: int, value: float) -> dict:
        return {"collection": "layout:xla:random", "system": system, "seed": seed,
                "metric": value, "median": value, "train_cpu_s": 2.0, "curve": [],
                "peak_rss_mb": 1.0}

    larger, demo = tmp_path / "larger.jsonl", tmp_path / "demo.jsonl"
    larger.write_text("".join(json.dumps(r) + "\n" for r in [
        row("gru", 0, 0.3), row("random", 0, 0.0), row("random", 1, 0.0)]))
    # The demo has both seeds; its seed 1 (0.9) must not enter a mean the larger count's
    # seed 0 alone is set against.
    demo.write_text("".join(json.dumps(r) + "\n" for r in [
        row("gru", 0, 0.1), row("gru", 1, 0.9), row("random", 0, 0.0), row("random", 1, 0.0)]))
    not_run: list = []
    results = systems.run_cross(tmp_path, [0, 1], ["gru"], ["layout:xla:random"], larger,
                                not_run=not_run)
    assert not_run == [["layout:xla:random", "gru", 1]]
    demo_results = systems.run_cross(tmp_path, [0, 1], ["gru"], ["layout:xla:random"], demo,
                                     not_run=[], leave_out=not_run)
    assert [(r["system"], r["seeds"]) for r in demo_results] == [("gru", [0]),
                                                                  ("random", [0, 1])]
    record = {"counts": {
        "data": "synthetic: d", "seed_list": [0, 1], "epochs": {"layout": 30},
        "inner_share": 0.2, "most_graphs": 25, "not_run": not_run,
        "train_files": {"layout:xla:random": 69}, "demo_train_files": {"layout:xla:random": 30},
        "results": results, "demo_results": demo_results}}
    page = "\n".join(publish.RENDERERS["systems_counts"](record))
    assert "| gru | 0.100 → 0.300 (+0.200) (seed 0) |" in page
    assert "| random | 0.000 → 0.000 (+0.000) |" in page
    # A demo row that lacks a seed the larger count has says so too.
    record["counts"]["demo_results"] = systems.cross_summary([row("random", 0, 0.0)])
    page = "\n".join(publish.RENDERERS["systems_counts"](record))
    assert "| random | 0.000 → 0.000 (+0.000) (demo: seed 0) |" in page


def test_the_scale_part_projects_each_system_at_its_own_epochs():
    from xlarank.systems import get_system
    from xlarank.systems.competition_gnn.system import OFFICIAL

    assert systems.authors_epochs("tpugraphs-gnn", "layout:nlp:random", 207) == \
        systems.OFFICIAL_EPOCHS["layout"]
    assert systems.authors_epochs("tpugraphs-gnn", "tile:xla", 5709) == \
        systems.OFFICIAL_EPOCHS["tile"]
    # The original's nlp scripts run 1,000 epochs, its xla ones 750; its tile script counts
    # 100,000 steps of one kernel, so an epoch over 5,000 kernels is 5,000 of them.
    assert systems.authors_epochs("competition-gnn", "layout:nlp:default", 198) == \
        {"original": OFFICIAL["layout:nlp:default"]["epochs"]} == {"original": 1000}
    assert systems.authors_epochs("competition-gnn", "layout:xla:random", 69) == \
        {"original": 750}
    assert OFFICIAL["tile:xla"]["max_steps"] == 100_000
    assert systems.authors_epochs("competition-gnn", "tile:xla", 5000) == {"original": 20.0}
    assert systems.authors_epochs("gru", "tile:xla", 5709) == \
        {"default": get_system("gru").defaults()["epochs"]}
    assert systems.authors_epochs("hybrid", "layout:xla:default", 61) == \
        {"default": get_system("hybrid").defaults()["gnn_epochs"]}
