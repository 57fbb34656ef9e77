"""xlarank report: the page renders, the images are valid PNGs, the table is right."""

from __future__ import annotations

import html
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from helpers import Lazy, run
from xlarank.cli import app
from xlarank.evaluate import per_graph_metrics, summarize
from xlarank.features.glossary import describe_column
from xlarank.frame import read_frame
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.report import (
    IMAGES,
    IMPORTANCE_TOP,
    ReportInputs,
    importance_glossary,
    learning_curve,
    write_report,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def trained(frames, spec_dir, tmp_path_factory) -> Lazy:
    """A saved ranker per collection slug (the small lgbm spec on the default train
    frame), trained when first asked for."""
    spec = load_ranker_spec(spec_dir / "lgbm.toml")
    folder = tmp_path_factory.mktemp("models")

    def make(slug: str) -> Path:
        train, meta = read_frame(frames["default", slug, "train"])
        return train_ranker(train, meta, spec).save(folder / slug)

    return Lazy(make)


@pytest.mark.parametrize("slug", ["tile-xla", pytest.param("layout-nlp-default",
                                                          marks=pytest.mark.slow)])
def test_report_renders_with_valid_images_and_table(frames, trained, tmp_path, slug):
    import matplotlib.image

    valid, meta = read_frame(frames["default", slug, "valid"])
    train, _ = read_frame(frames["default", slug, "train"])
    model = load_model(trained[slug])
    out = write_report(ReportInputs({"xlarank": model}, valid, meta, "valid.parquet", train),
                       tmp_path / "report")
    page = (out / "index.html").read_text()
    for name in IMAGES:
        width, height = png_size(out / name)
        assert width > 100 and height > 100
        pixels = matplotlib.image.imread(out / name)
        # Something was drawn: the image is not one flat colour.
        assert pixels.std() > 0.01
        assert f'src="{name}"' in page
    table = pd.read_csv(out / "metrics.csv")
    systems = table["system"].tolist()
    assert systems[:2] == ["xlarank", "peer: random"]
    assert ("peer: keep the default layout" in systems) == (slug != "tile-xla")
    expected = summarize(per_graph_metrics(valid, model.predict(valid), slug == "tile-xla"))
    row = table.set_index("system").loc["xlarank"]
    for key in ("kendall_tau", "opa"):
        assert row[key] == pytest.approx(expected[key])
    assert "<table" in page and meta.collection in page
    # The importance plot's columns are explained on the page, by the features glossary.
    explained = importance_glossary(model.importance())
    assert len(explained) == min(IMPORTANCE_TOP, len(model.importance()))
    assert (explained["meaning"] != "").all() and (explained["family"] != "").all()
    for name, meaning in zip(explained["feature"], explained["meaning"]):
        assert f"<td>{name}</td>" in page and html.escape(meaning, quote=False) in page
        assert describe_column(name).filled(name) == meaning
        assert not re.search(r"\{[a-z]+\}", meaning), "no unfilled placeholder"
    assert "table.glossary td { text-align: left; }" in page
    assert 'class="dataframe glossary"' in page
    assert "docs/features.md" in page
    assert not list(tmp_path.glob(".*"))  # nothing half-written beside the report


def test_learning_curve_ends_at_the_full_model(frames, trained):
    valid, _ = read_frame(frames["default", "tile-xla", "valid"])
    model = load_model(trained["tile-xla"])
    curve = learning_curve(model, valid, True, "score")
    assert curve["rounds"].iloc[0] == 1 and curve["rounds"].iloc[-1] == model.rounds
    full = summarize(per_graph_metrics(valid, model.predict(valid), True))["score"]
    assert curve["score"].iloc[-1] == pytest.approx(full)


# slow: two reports by the CLI (test_report_counts_are_ints_and_worst_is_on_top stays fast)
@pytest.mark.slow
def test_report_cli_and_bad_model(frames, trained, tmp_path):
    runner = CliRunner()
    valid = frames["default", "layout-nlp-default", "valid"]
    result = runner.invoke(app, ["report", str(valid), "--model",
                                 f"main={trained['layout-nlp-default']}",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "index.html").exists()
    result = runner.invoke(app, ["report", str(valid), "--model", str(trained["tile-xla"]),
                                 "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2 and "collection" in result.output
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("name, needle", [
    ("n03_changed", "slot 03's node"), ("g_op_17", "opcode 17"),
    ("gm_log_width_p50", "50th percentile"), ("raw7", "column 7 of"),
    ("g_node21_mean", "node_feat[21]"),
])
def test_glossary_meanings_are_filled_for_the_column(name, needle):
    meaning = describe_column(name).filled(name)
    assert needle in meaning and "{" not in meaning


def test_the_importance_glossary_fills_every_placeholder():
    gain = pd.Series({"n00_changed": 3.0, "n12_fixed": 2.0, "c_cfg4": 1.0})
    table = importance_glossary(gain)
    assert not table["meaning"].str.contains(r"\{[a-z]+\}").any()
    assert "slot 00" in table["meaning"].iloc[0]


# slow: trains a peer and renders two reports
@pytest.mark.slow
def test_report_shows_a_peer_of_another_feature_spec_on_its_own_frame(frames, trained,
                                                                      tmp_path):
    """The demo table's config-aggregates peer (the baseline spec) is on the report too:
    scored on its own frame of the same configs, put in the report frame's row order."""
    slug = "layout-nlp-default"
    baseline_train, meta = read_frame(frames["baseline", slug, "train"])
    peer = train_ranker(baseline_train, meta, load_ranker_spec(
        Path(__file__).resolve().parents[1] / "models" / "baseline.toml")).save(
        tmp_path / "peer")
    valid = frames["default", slug, "valid"]
    own = frames["baseline", slug, "valid"]
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(valid), "--model",
                                 f"xlarank={trained[slug]}", "--model",
                                 f"config-aggregates={peer}", "--frame-of",
                                 f"config-aggregates={own}", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "r" / "metrics.csv")
    row = table.set_index("system").loc["config-aggregates"]
    # The same figure as evaluating the peer on its own frame.
    own_frame, _ = read_frame(own)
    expected = summarize(per_graph_metrics(own_frame, load_model(peer).predict(own_frame),
                                           False))
    assert row["kendall_tau"] == pytest.approx(expected["kendall_tau"])
    assert "config-aggregates" in (tmp_path / "r" / "index.html").read_text()
    # Without its frame the peer is refused: its features are not the report frame's.
    result = runner.invoke(app, ["report", str(valid), "--model", f"xlarank={trained[slug]}",
                                 "--model", f"config-aggregates={peer}", "--out",
                                 str(tmp_path / "bad")])
    assert result.exit_code == 2 and not (tmp_path / "bad").exists()


def test_report_counts_are_ints_and_worst_is_on_top(frames, models, tmp_path):
    out = tmp_path / "report"
    result = run("report", frames["default", "tile-xla", "valid"], "--model",
                 models["tile-xla"], "--out", out)
    assert result.exit_code == 0, result.stderr
    metrics = pd.read_csv(out / "metrics.csv")
    assert pd.api.types.is_integer_dtype(metrics["graphs"])
    page = (out / "index.html").read_text()
    graphs = int(metrics["graphs"].iloc[0])
    assert f"<td>{graphs}</td>" in page and f"<td>{graphs}.0</td>" not in page


def test_per_graph_plot_draws_the_worst_graph_at_the_top():
    from xlarank.report import _per_graph_plot

    table = pd.DataFrame({"graph_id": ["a", "b", "c"], "score": [0.9, 0.1, 0.5]})
    fig = _per_graph_plot({"m": table}, "m", "score", "1 - slowdown@5")
    ax = fig.axes[0]
    assert ax.yaxis_inverted()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "b"  # y = 0, the worst, drawn topmost on an inverted axis


def test_tile_scatter_keeps_the_top_region_only():
    from xlarank.report import TILE_SCATTER_TOP, tile_scatter_points

    rng = np.random.default_rng(0)
    measured = rng.permutation(7000) + 1.0
    predicted = rng.permutation(7000) + 1.0
    x, y = tile_scatter_points(measured, predicted)
    expected = ((measured <= TILE_SCATTER_TOP) | (predicted <= TILE_SCATTER_TOP)).sum()
    assert len(x) == expected < 60
    assert x.max() <= TILE_SCATTER_TOP + 0.5 and y.max() <= TILE_SCATTER_TOP + 0.5


def test_a_synthetic_trained_model_on_a_real_frame_is_said_in_evaluate_and_report(
        models, samples, repo_specs, tmp_path):
    """A model trained on `xlarank synth` data meets a frame of real graphs: evaluate warns,
    and the report's page says where each came from."""
    from conftest import SAMPLES
    from xlarank.data.collections import get_collection
    from xlarank.errors import XlarankWarning
    from xlarank.features import load_feature_spec
    from xlarank.featurize import featurize_files
    from xlarank.score import evaluate_model

    unet3d = SAMPLES / "npz/layout/xla/default/train/unet3d.npz"
    frame = tmp_path / "real.parquet"
    featurize_files([unet3d], frame, get_collection("layout:xla:default"), "train",
                    load_feature_spec(repo_specs.features("default")))
    assert read_frame(frame)[1].data_origin == "real"
    with pytest.warns(XlarankWarning, match="trained on synthetic data .* a frame of real"):
        evaluate_model(frame, models["layout-xla-default"])
    out = tmp_path / "report"
    result = run("report", frame, "--model", models["layout-xla-default"], "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "warning:" in result.stderr and "synthetic" in result.stderr
    page = (out / "index.html").read_text()
    assert "synthetic (xlarank synth, not TpuGraphs)" in page
    assert "<th>report frame&#x27;s graphs</th><td>real</td>" in page
