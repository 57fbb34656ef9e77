"""bench/systems.py's cross-graph part (the curves, bench/crossgraph.py and bench/curves.py):
the held-out sample, the held graphs' curve around the library's rule
(`xlarank.systems.cross`) and the summary's times, against hand-worked examples; the scale
part's epochs (bench/epoch_cost.py); and the page's rendering of them (bench/render/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import crossgraph
    import curves
    import epoch_cost
    import publish
    import tile_kernels
    from render.systems import cross_graph
finally:
    sys.path.remove(str(ROOT / "bench"))


def point(epoch: int, inner: float, held: float, cpu: float) -> dict:
    return {"epoch": epoch, "inner": inner, "held": held, "held_median": held,
            "seconds": cpu, "cpu_seconds": cpu}


def test_the_held_out_sample_is_the_same_for_every_seed():
    few = [Path(f"v{i}.npz") for i in range(8)]
    assert crossgraph.held_out_files(few) == sorted(few)
    many = [Path(f"v{i:03d}.npz") for i in range(100)]
    picked = crossgraph.held_out_files(many)
    assert len(picked) == crossgraph.CROSS_MOST_GRAPHS and picked == sorted(picked)
    assert crossgraph.held_out_files(list(reversed(many))) == picked


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
    out = {r["system"]: r for r in crossgraph.cross_summary(rows)}
    assert out["gnn"]["xlarank_cpu_s_to_plateau"] == 2.0
    assert out["gnn"]["plateau_ratio"] == 10.0
    # xlarank's 0.40 does not come within 0.01 of 0.45: no time, no ratio.
    assert out["better"]["xlarank_cpu_s_to_plateau"] is None
    assert out["better"]["plateau_ratio"] is None
    assert "plateau_ratio" not in out["xlarank"]

    page = "\n".join(cross_graph(
        {"data": "synthetic: d (xlarank synth), valid split", "seed_list": [0],
         "epochs": {"layout": 30}, "inner_share": 0.2, "most_graphs": 25,
         "results": crossgraph.cross_summary(rows)}, "bench/results/x-cross-curve.png"))
    assert "| gnn | 0.300 ± 0.000 (0.300) |" in page
    assert "| c | gnn | 1/1 | 0.300/0.300 | 50 | 20 | 10 | 2 |" in page
    assert "xlarank's one fit, CPU s / peak RSS MB: c 2 / 1." in page
    assert "(../bench/published/x-cross-curve.png)" in page


def test_a_record_from_the_partial_alone_lists_the_units_it_lacks(tmp_path, monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a unit was run")

    monkeypatch.setattr(crossgraph, "in_fresh_process", no_process)
    made = {"collection": "layout:xla:random", "seed": 0, "metric": 0.4, "median": 0.4,
            "train_cpu_s": 2.0, "curve": [], "peak_rss_mb": 1.0}
    partial = tmp_path / "rows.jsonl"
    partial.write_text("".join(json.dumps({**made, "system": s}) + "\n"
                               for s in ("xlarank", "random")))
    not_run: list = []
    results = crossgraph.run_cross(tmp_path, [0, 1], ["xlarank"], ["layout:xla:random"],
                                partial, not_run=not_run)
    assert not_run == [["layout:xla:random", "xlarank", 1], ["layout:xla:random", "random", 1]]
    assert [(r["system"], r["seeds"]) for r in results] == [("xlarank", [0]), ("random", [0])]
    page = "\n".join(cross_graph(
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


def test_cross_fit_adds_the_held_graphs_headline_at_each_checkpoint(tiny_data):
    """The bench's curve is the library rule's, with the held graphs' headline (mean and
    median over graphs) at each checkpoint and the kept epoch's figures."""
    from test_systems_cross import Stepped, layout_train
    from xlarank.evaluate import graph_headline

    collection, files, graphs = layout_train(tiny_data)
    held = graphs[:2]
    Stepped.held_ids = {id(g) for g in held}
    got = crossgraph.cross_fit(Stepped(seed=0, epochs=30), files, collection, held, seed=0)
    assert len(got["curve"]) == got["stopped"] + 1 + crossgraph.CROSS_AFTER_STOP
    for point in got["curve"]:
        values = [graph_headline(g, np.full(g.n_configs, 0.0) + point["epoch"]) for g in held]
        assert point["held"] == round(float(np.mean(values)), 4)
    assert got["metric"] == got["curve"][got["kept"]]["held"]
    assert all((s == float(got["kept_epoch"])).all() for s in got["scores"])
    assert got["fit_files"] + got["inner_files"] == len(files)
def test_the_curve_figures_draw_a_line_per_rate_and_a_point_per_unstepped_seed(tmp_path):
    from PIL import Image

    rated = [{"learning_rate": lr, "cpu_seconds": float(i + 1), "held_tau": 0.1 * i}
             for lr in (1e-3, 1e-2) for i in range(3)]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    curves.plot_rates(ax, rated, "gnn")
    assert [line.get_label() for line in ax.get_lines()] == ["gnn lr 0.001", "gnn lr 0.01"]
    assert list(ax.get_lines()[1].get_ydata()) == [0.0, 0.1, 0.2]
    # A system keeps its colour across rates; the rates differ by line style.
    first, second = ax.get_lines()
    assert first.get_color() == second.get_color() == curves.colour_of("gnn")
    assert first.get_linestyle() != second.get_linestyle()
    plt.close(fig)

    ingraph = [{"share": 0.5, "system": "gnn", "curves": {"0": rated}, "per_seed": []},
               {"share": 0.5, "system": "xlarank", "curves": {},
                "per_seed": [{"train_s": 1.0, "train_cpu_s": 1.0, "tau": 0.8}]}]
    cross = [{"collection": "c", "system": "gnn", "per_seed": [{"kept_epoch": 2}],
              "curves": {"0": [point(e, 0, 0.1 * e, float(e)) for e in (1, 2, 3)]}},
             {"collection": "c", "system": "xlarank", "curves": {},
              "per_seed": [{"train_cpu_s": 1.0, "metric": 0.4}]}]
    for path in (curves.ingraph_curves(ingraph, tmp_path, "a"),
                 curves.cross_curves(cross, tmp_path, "b")):
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size[0] >= 640
    assert curves.ingraph_curves([], tmp_path, "c") is None


def test_the_counts_tree_adds_train_files_to_the_base_tree_and_keeps_its_valid_ones(tmp_path):
    from xlarank.data.collections import COLLECTIONS, split_files
    from xlarank.data.synth import PRESETS, synth_dataset

    base = synth_dataset(tmp_path / "tiny", "tiny", seed=0)
    tree = crossgraph.counts_tree(tmp_path / "counts", 7, base="tiny", counts="small")
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
    assert crossgraph.counts_tree(tmp_path / "counts", 7, base="tiny", counts="small") == tree
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
        "results": crossgraph.cross_summary([row("xlarank", 0.5), row("random", 0.0)]),
        "demo_results": crossgraph.cross_summary([row("xlarank", 0.4)])}}
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

    monkeypatch.setattr(crossgraph, "in_fresh_process", no_process)

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
    results = crossgraph.run_cross(tmp_path, [0, 1], ["gru"], ["layout:xla:random"], larger,
                                not_run=not_run)
    assert not_run == [["layout:xla:random", "gru", 1]]
    demo_results = crossgraph.run_cross(tmp_path, [0, 1], ["gru"], ["layout:xla:random"], demo,
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
    record["counts"]["demo_results"] = crossgraph.cross_summary([row("random", 0, 0.0)])
    page = "\n".join(publish.RENDERERS["systems_counts"](record))
    assert "| random | 0.000 → 0.000 (+0.000) (demo: seed 0) |" in page


def test_the_scale_part_projects_each_system_at_its_own_epochs():
    from xlarank.systems import get_system
    from xlarank.systems.competition_gnn.system import OFFICIAL

    assert epoch_cost.authors_epochs("tpugraphs-gnn", "layout:nlp:random", 207) == \
        epoch_cost.OFFICIAL_EPOCHS["layout"]
    assert epoch_cost.authors_epochs("tpugraphs-gnn", "tile:xla", 5709) == \
        epoch_cost.OFFICIAL_EPOCHS["tile"]
    # The original's nlp scripts run 1,000 epochs, its xla ones 750; its tile script counts
    # 100,000 steps of one kernel, so an epoch over 5,000 kernels is 5,000 of them.
    assert epoch_cost.authors_epochs("competition-gnn", "layout:nlp:default", 198) == \
        {"original": OFFICIAL["layout:nlp:default"]["epochs"]} == {"original": 1000}
    assert epoch_cost.authors_epochs("competition-gnn", "layout:xla:random", 69) == \
        {"original": 750}
    assert OFFICIAL["tile:xla"]["max_steps"] == 100_000
    assert epoch_cost.authors_epochs("competition-gnn", "tile:xla", 5000) == {"original": 20.0}
    assert epoch_cost.authors_epochs("gru", "tile:xla", 5709) == \
        {"default": get_system("gru").defaults()["epochs"]}
    assert epoch_cost.authors_epochs("hybrid", "layout:xla:default", 61) == \
        {"default": get_system("hybrid").defaults()["gnn_epochs"]}


def test_the_tile_kernels_bench_runs_random_beside_the_systems(tiny_data):
    # random is the order to beat, not a registered system: nothing to look up for it.
    files = sorted(str(p) for p in (tiny_data / "npz/tile/xla/train").glob("*.npz"))[:2]
    got = tile_kernels.kernel_task({"system": "random", "files": files, "seeds": [0],
                                    "threads": 1})
    assert [run["seed"] for run in got["loko"]] == [0]
    assert set(got["loko"][0]["per_kernel"]) == {Path(f).stem for f in files}
    for kernel in got["loko"][0]["per_kernel"].values():
        assert 0 <= kernel["slowdown_at_5"] <= 1
