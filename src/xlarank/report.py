"""A static report of rankers on a labelled frame: an HTML page, PNG plots and a CSV table.

The page shows the metrics table (each model, and the peers that apply: random order, and
for layout "keep the default layout"), the main model's per-graph headline metric, predicted
against measured rank for a few graphs, feature importance (gain) and the learning curve
(headline metric against boosting rounds). Plots use matplotlib's object API on the Agg
canvas, so no display and no global pyplot state are involved. `report_from_paths` is what
``xlarank report`` runs: the frames and models read from their files, then `write_report`.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_dir, check_output, locks_outputs
from xlarank.data.collections import get_collection
from xlarank.data.origin import (
    MIXED,
    REAL,
    SYNTHETIC,
    model_origin,
    warn_if_synthetic_meets_real_frame,
)
from xlarank.errors import MismatchError, XlarankError
from xlarank.evaluate import (
    default_layout_scores,
    headline_label,
    headline_metric,
    mean_metrics,
    per_graph_metrics,
    random_scores,
    summarize,
)
from xlarank.features.glossary import describe_column
from xlarank.frame import FrameMeta, group_sizes, read_frame
from xlarank.rank.model import load_model
from xlarank.seeds import check_seed
from xlarank.target import ranking_target

# The importance plot shows this many columns; the page explains the same ones.
IMPORTANCE_TOP = 20
IMAGES = ("per_graph.png", "rank_scatter.png", "importance.png", "learning_curve.png")
LEARNING_POINTS = 12

# The page of a report folder; a folder without it is not replaced by a report.
REPORT_PAGE = "index.html"


@dataclass
class ReportInputs:
    """What a report is made of: named models (the first is the main one), a labelled
    frame and its meta, and optionally the training frame for the learning curve."""

    models: dict[str, object]
    frame: pd.DataFrame
    meta: FrameMeta
    frame_path: str
    train: pd.DataFrame | None = None
    seed: int = 0
    # A model of another feature spec (the config-aggregates peer) and the frame of the
    # same graphs and configs it scores, by the model's name.
    own_frames: dict[str, pd.DataFrame] = field(default_factory=dict)


def scores_on_main_rows(model, own: pd.DataFrame, main: pd.DataFrame, name: str) -> np.ndarray:
    """float64 (len(main),): ``model``'s scores on its own frame ``own``, put in the main
    frame's row order by (graph_id, config_index); MismatchError if a row is missing."""
    keys = ["graph_id", "config_index"]
    scored = own[keys].assign(score=model.predict(own))
    aligned = main[keys].merge(scored, on=keys, how="left", validate="one_to_one")
    if aligned["score"].isna().any() or len(own) != len(main):
        raise MismatchError(f"model {name}: its frame does not hold the report frame's graphs "
                            "and configs (featurize the same files with its spec)")
    return aligned["score"].to_numpy(np.float64)


def metrics_table(inputs: ReportInputs
                  ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], dict[str, np.ndarray]]:
    """(one row per system with mean metrics, per-graph metrics of each system, each
    system's scores float64 (n_rows,))."""
    is_tile = get_collection(inputs.meta.collection).is_tile
    scores = {name: (scores_on_main_rows(model, inputs.own_frames[name], inputs.frame, name)
                     if name in inputs.own_frames else model.predict(inputs.frame))
              for name, model in inputs.models.items()}
    scores["peer: random"] = random_scores(inputs.frame, inputs.seed)
    if not is_tile and "c_default_out_frac" in inputs.frame:
        scores["peer: keep the default layout"] = default_layout_scores(inputs.frame)
    per_graph = {name: per_graph_metrics(inputs.frame, s, is_tile) for name, s in scores.items()}
    rows = [{"system": name, **summarize(table)} for name, table in per_graph.items()]
    return pd.DataFrame(rows), per_graph, scores


# Columns of the metrics table that count graphs: whole numbers, shown as such.
COUNT_COLUMNS = ("graphs", "graphs_without_tau")
# Tile is judged by its top five: the scatter shows the configs ranked in the top
# TILE_SCATTER_TOP by measurement or by prediction, not all of a kernel's thousands.
TILE_SCATTER_TOP = 20
TILE_JUDGED_TOP = 5


def counts_as_ints(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of the metrics table whose count columns are ints (8, not 8.0)."""
    shown = table.copy()
    for column in COUNT_COLUMNS:
        if column in shown:
            shown[column] = shown[column].round().astype("Int64")
    return shown


def write_report(inputs: ReportInputs, out_dir: str | Path, scatter_graphs: int = 4) -> Path:
    """Write index.html, metrics.csv and the PNGs into ``out_dir`` (replaced whole)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401 (registers Agg)

    is_tile = get_collection(inputs.meta.collection).is_tile
    metric = headline_metric(is_tile)
    label = headline_label(is_tile)
    main_name, main_model = next(iter(inputs.models.items()))
    table, per_graph, scores = metrics_table(inputs)
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        counts_as_ints(table).to_csv(tmp / "metrics.csv", index=False)
        _per_graph_plot(per_graph, main_name, metric, label).savefig(tmp / IMAGES[0], dpi=110)
        _scatter_plot(inputs.frame, scores[main_name], is_tile,
                      scatter_graphs).savefig(tmp / IMAGES[1], dpi=110)
        gain = main_model.importance()
        _importance_plot(gain).savefig(tmp / IMAGES[2], dpi=110)
        _learning_plot(inputs, main_model, is_tile, metric, label).savefig(tmp / IMAGES[3],
                                                                          dpi=110)
        (tmp / REPORT_PAGE).write_text(_page(inputs, table, main_name, main_model, label,
                                             gain))
    return out_dir


@locks_outputs("out_dir")
def report_from_paths(frame_path: str | Path, models: list[tuple[str, str | Path]],
                      out_dir: str | Path, train_path: str | Path | None = None, seed: int = 0,
                      status: Callable[[str], AbstractContextManager] = contextlib.nullcontext,
                      frames_of: dict[str, str | Path] | None = None) -> FrameMeta:
    """`write_report` from files: a labelled frame, saved models and optionally the
    training frame; returns the frame's meta.

    Parameters
    ----------
    frame_path : path
        The labelled frame to report on (e.g. valid).
    models : list of (name, directory)
        The models to compare, the first being the main one; an empty name stands for the
        directory's own name (a later model of the same name replaces an earlier one).
    out_dir : path
        The report folder (replaced whole).
    train_path : path, optional
        The training frame, for its learning curve.
    seed : int
        Seed of the random-order peer.
    frames_of : dict of name to path, optional
        For a model (not the main one) of another feature spec, the frame of the same
        graphs and configs featurized with its spec, which it is scored on.
    status : callable
        Called with a one-line description; the context it returns is held while the
        report is drawn and written.

    Raises
    ------
    XlarankError
        A model that is missing or belongs to another feature spec or collection.
    """
    check_output(out_dir, "dir", marker=REPORT_PAGE)
    seed = check_seed(seed, "seed")
    table, meta = read_frame(frame_path)
    loaded = {}
    own_frames = {}
    frames_of = dict(frames_of or {})
    names = [name or Path(path).name for name, path in models]
    unknown = sorted(set(frames_of) - set(names[1:]))
    if unknown:
        raise XlarankError(f"--frame-of names {', '.join(unknown)}, which is no --model but "
                           "the first (the main model is scored on the report frame)")
    for name, path in zip(names, (p for _, p in models)):
        directory = Path(path)
        model = load_model(directory)
        if name in frames_of:
            own, own_meta = read_frame(frames_of[name])
            if own_meta.collection != meta.collection:
                raise MismatchError(f"{frames_of[name]}: a {own_meta.collection} frame, the "
                                    f"report is on {meta.collection}")
            model.check_frame(own_meta, str(frames_of[name]))
            own_frames[name] = own
        else:
            model.check_frame(meta, str(frame_path))
            warn_if_synthetic_meets_real_frame(model.card, meta.data_origin,
                                               str(frame_path), f"the model {directory}")
        loaded[name] = model
    train = read_frame(train_path)[0] if train_path is not None else None
    with status(f"writing the report on {frame_path}"):
        write_report(ReportInputs(loaded, table, meta, str(frame_path), train, seed,
                                  own_frames), out_dir)
    return meta


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _per_graph_plot(per_graph: dict[str, pd.DataFrame], main: str, metric: str, label: str):
    order = per_graph[main].sort_values(metric)
    graphs = order["graph_id"].tolist()
    fig = _figure(8, max(3.0, min(0.22 * len(graphs) + 1.2, 14)))
    ax = fig.add_subplot()
    y = np.arange(len(graphs))
    values = order[metric].to_numpy()
    ax.barh(y, values, color="#3b75af", label=main)
    # The axis covers the main model; a peer far below it is drawn at the left edge.
    low = min(0.0, float(np.nanmin(values)) if len(values) else 0.0) - 0.1
    high = max(1.0, float(np.nanmax(values)) if len(values) else 1.0) + 0.05
    others = [n for n in per_graph if n != main]
    for k, (name, marker) in enumerate(zip(others, "o^sdv")):
        other = per_graph[name].set_index("graph_id")[metric].reindex(graphs).to_numpy()
        clipped = other < low
        ax.plot(np.where(clipped, low, other), y, marker, color=f"C{k + 1}", markersize=4,
                linestyle="none", label=name + (" (left edge: below the axis)"
                                                if clipped.any() else ""))
    ax.set_xlim(low, high)
    ax.set_yticks(y, graphs if len(graphs) <= 60 else [""] * len(graphs), fontsize=7)
    # Worst first, read from the top: the first (worst) bar is drawn at the top.
    ax.invert_yaxis()
    ax.set_xlabel(label)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_title(f"{label} per graph (mean {order[metric].mean():.4f})")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def _scatter_plot(frame: pd.DataFrame, score: np.ndarray, is_tile: bool, n_graphs: int):
    from scipy.stats import rankdata

    target = ranking_target(frame, is_tile)
    starts = np.concatenate([[0], np.cumsum(group_sizes(frame))])
    sizes = np.diff(starts)
    # The largest graphs: a scatter of a handful of configs says little.
    picked = sorted(np.argsort(-sizes, kind="stable")[:n_graphs])
    fig = _figure(3.2 * max(len(picked), 1), 3.4)
    ids = frame["graph_id"].to_numpy()
    for k, g in enumerate(picked):
        ax = fig.add_subplot(1, max(len(picked), 1), k + 1)
        rows = slice(starts[g], starts[g + 1])
        measured = rankdata(target[rows])          # 1 = fastest
        predicted = rankdata(-score[rows])         # 1 = predicted fastest
        configs = len(measured)
        if is_tile:
            measured, predicted = tile_scatter_points(measured, predicted)
        ax.scatter(measured, predicted, s=5 if not is_tile else 12, alpha=0.5)
        if is_tile:
            top = TILE_SCATTER_TOP
            ax.set_xlim(0.5, top + 0.5)
            ax.set_ylim(0.5, top + 0.5)
            ax.plot([1, top], [1, top], color="grey", linewidth=0.6)
            for line in (ax.axvline, ax.axhline):
                line(TILE_JUDGED_TOP + 0.5, color="C3", linewidth=0.6, linestyle="--")
            ax.set_title(f"{ids[starts[g]][:24]} (top {top} of {configs})", fontsize=8)
        else:
            ax.plot([1, configs], [1, configs], color="grey", linewidth=0.6)
            ax.set_title(f"{ids[starts[g]][:24]} ({configs} configs)", fontsize=8)
        ax.set_xlabel("measured rank (1 = fastest)", fontsize=8)
        if k == 0:
            ax.set_ylabel("predicted rank", fontsize=8)
    return fig


def tile_scatter_points(measured: np.ndarray, predicted: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The (measured, predicted) ranks of a tile kernel's configs that lie in the top
    TILE_SCATTER_TOP by either, ranks beyond it drawn at the axis' edge."""
    keep = (measured <= TILE_SCATTER_TOP) | (predicted <= TILE_SCATTER_TOP)
    edge = TILE_SCATTER_TOP + 0.4
    return np.minimum(measured[keep], edge), np.minimum(predicted[keep], edge)


def _importance_plot(gain: pd.Series, top: int = IMPORTANCE_TOP):
    shown = gain.head(top)[::-1]
    fig = _figure(7, max(2.5, 0.28 * len(shown) + 1))
    ax = fig.add_subplot()
    share = shown / max(gain.sum(), 1e-300)
    ax.barh(np.arange(len(shown)), share.to_numpy(), color="#5a9e6f")
    ax.set_yticks(np.arange(len(shown)), shown.index.tolist(), fontsize=7)
    ax.set_xlabel("share of total split gain")
    ax.set_title(f"feature importance (top {len(shown)} of {len(gain)})")
    return fig


def learning_curve(model, frame: pd.DataFrame, is_tile: bool, metric: str,
                   points: int = LEARNING_POINTS) -> pd.DataFrame:
    """Headline metric after 1..all rounds (``points`` of them) of a single booster; for an
    ensemble, of its first member."""
    booster = model.first_member
    rounds = np.unique(np.linspace(1, booster.rounds, points).round().astype(int))
    values = [mean_metrics(frame, booster.predict(frame, int(r)), is_tile)[metric]
              for r in rounds]
    return pd.DataFrame({"rounds": rounds, metric: values})


def _learning_plot(inputs: ReportInputs, model, is_tile: bool, metric: str, label: str):
    fig = _figure(6, 3.6)
    ax = fig.add_subplot()
    curve = learning_curve(model, inputs.frame, is_tile, metric)
    ax.plot(curve["rounds"], curve[metric], marker="o", markersize=3,
            label=f"{inputs.meta.split or 'evaluated'} ({inputs.frame_path})")
    if inputs.train is not None:
        train = learning_curve(model, inputs.train, is_tile, metric)
        ax.plot(train["rounds"], train[metric], marker="o", markersize=3, label="training frame")
    ax.set_xlabel("boosting rounds")
    ax.set_ylabel(label)
    ax.set_title("learning curve" + (" (first ensemble member)"
                                     if model.first_member is not model else ""))
    ax.legend(fontsize=7)
    return fig


def importance_glossary(gain: pd.Series, top: int = IMPORTANCE_TOP) -> pd.DataFrame:
    """The importance plot's columns, most gain first, with what each means (the features
    glossary): columns ``feature, family, meaning, gain share``."""
    share = gain / max(float(gain.sum()), 1e-300)
    rows = []
    for name in gain.head(top).index:
        entry = describe_column(str(name))
        rows.append({"feature": name, "family": entry.family if entry else "",
                     "meaning": entry.filled(str(name)) if entry else "",
                     "gain share": round(float(share[name]), 4)})
    return pd.DataFrame(rows, columns=["feature", "family", "meaning", "gain share"])


def _origin_words(origin: str) -> str:
    """Where graphs came from, in words a reader of the page needs."""
    return {SYNTHETIC: "synthetic (xlarank synth, not TpuGraphs)", REAL: "real",
            MIXED: "partly synthetic (xlarank synth)"}.get(origin, "of unrecorded origin")


def _page(inputs: ReportInputs, table: pd.DataFrame, main_name: str, model,
          label: str, gain: pd.Series) -> str:
    card = model.card
    is_tile = get_collection(inputs.meta.collection).is_tile
    kind = (f"ensemble of {len(card['members'])}: "
            + ", ".join(f"{m['name']} (seed {m['seed']})" for m in card["members"])
            if card.get("kind") == "ensemble" else f"{card['library']} {card['objective']}")
    facts = {
        "frame": inputs.frame_path,
        "collection / split": f"{inputs.meta.collection} / {inputs.meta.split}",
        "graphs / configs": f"{inputs.frame['graph_id'].nunique()} / {len(inputs.frame)}",
        "main model": f"{main_name}: {kind}",
        "feature spec": f"{card['features']['name']} (hash {card['features']['hash']})",
        "trained on": f"{card['training_data']['graphs']} graphs, "
                      f"{card['training_data']['rows_used']} rows used, "
                      f"{_origin_words(model_origin(card))}",
        "report frame's graphs": _origin_words(inputs.meta.data_origin),
    }
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in facts.items())
    shown = counts_as_ints(table)
    numeric = shown.select_dtypes("float").columns
    shown[numeric] = shown[numeric].round(4)
    captions = {
        "per_graph.png": f"{label} per graph, worst first: bars for {main_name}, marks for "
                         "the other systems.",
        "rank_scatter.png": ("Predicted against measured rank for the largest graphs; "
                             "points on the diagonal are ranked right"
                             + (f" (the top {TILE_SCATTER_TOP} by either; the tile metric "
                                f"judges the top {TILE_JUDGED_TOP}, dashed; ranks beyond "
                                "the axis at its edge)." if is_tile else ".")),
        "importance.png": "Which features the booster split on, by total gain.",
        "learning_curve.png": f"{label} against boosting rounds.",
    }
    figures = "".join(
        f'<figure><img src="{name}" alt="{html.escape(captions[name])}">'
        f"<figcaption>{html.escape(captions[name])}</figcaption></figure>" for name in IMAGES)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>xlarank report: {html.escape(inputs.meta.collection)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 70em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; text-align: left; }}
table.glossary td {{ text-align: left; }}
table.glossary td:last-child {{ text-align: right; }}
figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
figcaption {{ color: #555; font-size: 0.9em; }}
</style></head><body>
<h1>xlarank report: {html.escape(inputs.meta.collection)}</h1>
<table>{rows}</table>
<h2>Metrics (mean over graphs; higher is better except slowdowns)</h2>
{shown.to_html(index=False, escape=True, border=0)}
<p>The same table is in <a href="metrics.csv">metrics.csv</a>.</p>
{figures}
<h2>The features in the importance plot</h2>
<p>What each column means; every column of every family is in the features glossary
(<code>docs/features.md</code> in xlarank's repository, "Column glossary").</p>
{importance_glossary(gain).to_html(index=False, escape=True, border=0,
                                   classes="glossary")}
</body></html>
"""
