"""Batch scoring of config files, the competition submission CSV, and scoring a labelled
frame with a saved model (`evaluate_model`: the metrics of `xlarank.evaluate` on a model's
scores, kept here so that evaluation never imports the rankers)."""

from __future__ import annotations

import csv
import functools
import json
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_path, check_output, locks_outputs, write_text_atomic
from xlarank.data.collections import (
    COLLECTIONS,
    Collection,
    get_collection,
    locate,
    split_files,
)
from xlarank.data.distinct import config_columns
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.data.origin import warn_if_synthetic_meets_real, warn_if_synthetic_meets_real_frame
from xlarank.engine import map_ordered
from xlarank.errors import (
    ArgumentTypeError,
    BadGraphError,
    MismatchError,
    XlarankError,
    XlarankWarning,
    checked_type,
)
from xlarank.evaluate import (
    SUMMARY_SUFFIX,
    check_eval_indices,
    check_scores,
    headline_metric,
    load_eval_indices,
    per_graph_metrics,
    random_scores,
    summarize,
)
from xlarank.features.build import featurize_graph
from xlarank.frame import read_frame
from xlarank.outputs import Input, check_outputs
from xlarank.rank.model import Model, load_model
from xlarank.rank.ranker import CARD_FILE, describe_models_below, models_below, read_card
from xlarank.seeds import check_seed

SUBMISSION_TOP_TILE = 5
# Test files per collection in the official TpuGraphs release: 894 submission IDs.
OFFICIAL_TEST_FILES = {"tile:xla": 844, "layout:xla:default": 8, "layout:xla:random": 8,
                       "layout:nlp:default": 17, "layout:nlp:random": 17}


def find_models(models: str | Path) -> dict[str, Path]:
    """Model directories by collection id, from one model directory or a folder of them,
    reading their cards only (nothing is loaded). Two models of one collection are an
    error, not a silent choice; a folder with models only further down says where."""
    models = Path(models)
    if (models / CARD_FILE).exists():
        dirs = [models]
    elif models.is_dir():
        dirs = sorted(d for d in models.iterdir() if (d / CARD_FILE).exists())
    else:
        dirs = []
    if not dirs:
        below = models_below(models) if models.is_dir() else []
        raise XlarankError(f"{models}: no trained model (no card.json here or one level "
                           f"down){describe_models_below(models, below)}")
    found: dict[str, Path] = {}
    for d in dirs:
        collection = read_card(d)["collection"]
        if collection in found:
            raise XlarankError(f"{models}: two models of collection {collection} "
                               f"({found[collection].name}/ and {d.name}/); --models takes "
                               "one model per collection: move one of them out")
        found[collection] = d
    return found


def load_rankers(models: str | Path, collections: Iterable[str] | None = None
                 ) -> dict[str, Model]:
    """Rankers by collection id, from one model directory or a folder of them
    (`find_models`): only those of ``collections`` when given, so a model the input does
    not need is never loaded."""
    found = find_models(models)
    wanted = set(found) if collections is None else set(collections)
    return {c: load_model(d) for c, d in found.items() if c in wanted}


def npz_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    """The files to score: each input file as given, each folder's npz files (recursive,
    sorted), in input order. Raises `XlarankError` if there are none."""
    inputs = [Path(i) for i in inputs]
    files = [p for i in inputs for p in (sorted(i.rglob("*.npz")) if i.is_dir() else [i])]
    if not files:
        named = ", ".join(str(i) for i in inputs) or "the inputs"
        raise XlarankError(f"{named}: no npz files there")
    return files


def ranked_configs(graph, ranker: Model) -> tuple[np.ndarray, np.ndarray]:
    """(config indices best first, their scores) for every config of a graph, duplicates too.

    graph: a graph from `load_graph` (``configs=False`` is enough) or an npz path;
    ranker: a model (`load_model`) or its directory, or anything with ``score(graph)``
    giving float64 (n_configs,), higher is faster (a fitted `xlarank.systems` system).
    A model of another collection than the graph's (as ``xlarank score`` refuses it) is
    a `MismatchError`; arguments of other types an `ArgumentTypeError`. A layout graph of
    no configurable nodes (its configs are all one) is an XlarankError, as rank-graph
    refuses it; a layout graph's configs all equal in every raw column an
    `XlarankWarning` (their order is the file's, arbitrary)."""
    if isinstance(graph, str | os.PathLike):
        graph = load_graph(graph, configs=False)
    elif not isinstance(graph, TileGraph | LayoutGraph):
        raise ArgumentTypeError(f"graph: expected an npz path or a graph from "
                                f"xlarank.load_graph, got {type(graph).__name__}")
    if isinstance(ranker, str | os.PathLike):
        ranker = load_model(ranker)
    elif not (hasattr(ranker, "score") or hasattr(ranker, "predict")):
        raise ArgumentTypeError(f"ranker: expected a model from xlarank.load_model or its "
                                f"directory, got {type(ranker).__name__}")
    card = getattr(ranker, "card", None)
    if isinstance(card, dict) and "collection" in card:
        check_model_collection(graph, card["collection"])
    if isinstance(graph, LayoutGraph) and graph.n_configurable == 0 and graph.n_configs > 1:
        raise XlarankError(f"{graph.path}: the graph has no configurable nodes "
                           "(node_config_ids is empty): its configs are all one, nothing "
                           "to rank")
    if hasattr(ranker, "score"):
        score = np.asarray(ranker.score(graph), dtype=np.float64)
        check_scores(score, None, str(graph.path), lambda: config_columns(graph))
    else:
        rows = featurize_graph(graph, ranker.feature_spec)
        score = ranker.predict(rows)
        check_scores(score, None, str(graph.path),
                     lambda: rows[ranker.feature_names].to_numpy(np.float64))
    # A tile kernel's configs can all be alike in the official release (a test file of 32
    # equal configs): any order is right there, and a warning on each submission noise.
    if isinstance(graph, LayoutGraph) and len(score) > 1 and (score == score[0]).all() and len(
            np.unique(config_columns(graph), axis=0)) == 1:
        warnings.warn(f"{graph.path}: its {len(score)} configs are all equal (every raw "
                      "config column the same): they score one, and their order is the "
                      "file's, an arbitrary ranking", XlarankWarning, stacklevel=2)
    order = np.argsort(-score, kind="stable")
    return order.astype(np.int64), score[order]


def check_model_collection(graph: TileGraph | LayoutGraph, trained_on: str) -> None:
    """MismatchError if a model trained on collection ``trained_on`` cannot rank ``graph``:
    another collection than the graph's, or for a graph outside the official layout
    (collection unknown) a tile model for a layout graph or the reverse."""
    model_is_tile = get_collection(trained_on).is_tile
    graph_is_tile = isinstance(graph, TileGraph)
    if graph.collection is not None:
        if graph.collection.id != trained_on:
            raise MismatchError(f"{graph.path}: collection {graph.collection.id}, but the "
                                f"model was trained on {trained_on}")
    elif model_is_tile != graph_is_tile:
        kind = "tile" if graph_is_tile else "layout"
        raise MismatchError(f"{graph.path}: a {kind} graph, but the model was trained on "
                            f"{trained_on}")


@functools.lru_cache(maxsize=16)
def _cached_ranker(models: str, stamp: tuple[int, ...], collection: str) -> Model | None:
    # Each worker process loads the one model a file needs once, however many files it
    # scores; ``stamp`` (the cards' mtimes) makes a model retrained into the same folder a
    # new entry. None: no model of that collection.
    found = find_models(models)
    return load_model(found[collection]) if collection in found else None


def _models_stamp(models: str) -> tuple[int, ...]:
    return tuple(p.stat().st_mtime_ns for p in sorted(Path(models).glob("**/card.json")))


@dataclass(frozen=True)
class ScoreJob:
    path: Path
    models: str
    stamp: tuple[int, ...]
    collection: Collection | None
    top: int | None
    skip_bad: bool


def score_file(job: ScoreJob) -> tuple[pd.DataFrame | None, str | None]:
    """One file's ranked configs (rank 1 = predicted fastest), or its error if skipped."""
    try:
        graph = load_graph(job.path, collection=job.collection, configs=False)
    except BadGraphError as exc:
        if not job.skip_bad:
            raise
        return None, str(exc)
    if graph.collection is None:
        raise XlarankError(f"{job.path}: collection unknown (file outside the official "
                           "layout); pass --collection")
    ranker = _cached_ranker(job.models, job.stamp, graph.collection.id)
    if ranker is None:
        held = sorted(find_models(job.models))
        raise XlarankError(f"{job.path}: no model for collection {graph.collection.id} in "
                           f"{job.models} (its models are for "
                           f"{', '.join(held) if held else 'no collection'})")
    order, score = ranked_configs(graph, ranker)
    keep = slice(0, job.top) if job.top else slice(None)
    return pd.DataFrame({
        "file": str(job.path), "collection": graph.collection.id, "graph_id": graph.graph_id,
        "rank": np.arange(1, len(order) + 1)[keep], "config_index": order[keep],
        "score": score[keep]}), None


@locks_outputs("out")
def score_files(paths: Iterable[str | Path], models: str | Path, out: str | Path,
                collection: Collection | None = None, top: int | None = None,
                skip_bad: bool = False, on_file: Callable[[Path], None] | None = None,
                workers: int = 1, client=None) -> tuple[int, list[str]]:
    """Rank the configs of each file and write one CSV row per (file, config).

    Columns: file, collection, graph_id, rank (1 = predicted fastest), config_index, score.
    One task per file on the chosen engine; rows follow the input order.
    Returns (rows, skipped files' errors).
    """
    if isinstance(paths, str | os.PathLike) or not isinstance(paths, Iterable):
        raise ArgumentTypeError(f"score_files: paths: expected a list of npz paths, got "
                                f"{type(paths).__name__}")
    paths = [Path(checked_type(p, (str, os.PathLike), "score_files: paths",
                               "a list of npz paths (str or Path)")) for p in paths]
    checked_type(models, (str, os.PathLike), "score_files: models",
                 "a model folder (str or Path)")
    checked_type(out, (str, os.PathLike), "score_files: out", "a CSV path (str or Path)")
    # As the command checks: no output over an input, whoever calls.
    check_outputs([Path(out)], [Input(p) for p in paths] + [Input(Path(models))])
    if top is not None and top < 1:
        raise XlarankError(f"--top {top}: keep at least 1 config per file")
    # realpath, not Path.resolve(): a link loop stays a path that find_models refuses.
    models = os.path.realpath(models)
    stamp = _models_stamp(models)
    found = find_models(models)  # fail here, once, if the models are missing or doubled
    # The models the inputs need (their collection, from --collection or the official
    # layout) are loaded here, once, to fail early; no other model is ever loaded.
    needed = {collection.id} if collection is not None else {
        located.id for located, _ in map(locate, paths) if located is not None}
    for collection_id in sorted(needed & set(found)):
        _cached_ranker(models, stamp, collection_id)
    jobs = [ScoreJob(p, models, stamp, collection, top, skip_bad) for p in paths]
    results = list(map_ordered(score_file, jobs, workers,
                               on_done=(lambda job: on_file(job.path)) if on_file else None,
                               client=client))
    frames = [table for table, _ in results if table is not None]
    skipped = [error for _, error in results if error]
    # The graphs each model scored: a model trained on synthetic data warns of real ones.
    scored: dict[str, list[Path]] = {}
    for job, table in zip(jobs, (t for t, _ in results), strict=True):
        if table is not None and len(table):
            scored.setdefault(str(table["collection"].iloc[0]), []).append(job.path)
    for collection_id, graphs in sorted(scored.items()):
        warn_if_synthetic_meets_real(_cached_ranker(models, stamp, collection_id).card,
                                     graphs, f"the model {found[collection_id]}")
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["file", "collection", "graph_id", "rank", "config_index", "score"])
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    return len(table), skipped


def submission_files(data_root: str | Path) -> list[Path]:
    """The test files of all five collections under a dataset root."""
    return [p for c in COLLECTIONS for p in split_files(Path(data_root), c, "test")]


@locks_outputs("out")
def write_submission(data_root: str | Path, rankers: dict[str, Model], out: str | Path,
                     on_file: Callable[[Path], None] | None = None) -> int:
    """The competition CSV ``ID,TopConfigs`` for the test split of every collection.

    Tile lists its 5 best configs, layout the full order. Every collection must have a
    model and test files. Returns the number of IDs written.
    """
    check_output(out)
    missing = [c.id for c in COLLECTIONS if c.id not in rankers]
    if missing:
        raise XlarankError(f"no model for collection(s) {', '.join(missing)}")
    for collection in COLLECTIONS:
        warn_if_synthetic_meets_real(getattr(rankers[collection.id], "card", None),
                                     split_files(Path(data_root), collection, "test"),
                                     f"the {collection.id} model")
    rows = []
    for collection in COLLECTIONS:
        files = split_files(Path(data_root), collection, "test")
        if not files:
            raise XlarankError(f"{data_root}: no test files for {collection.id}")
        rows += submission_rows(files, collection, rankers[collection.id], on_file)
    expected = sum(OFFICIAL_TEST_FILES.values())
    # Generated data (`xlarank synth` leaves synth.json) has no official IDs to miss.
    if len(rows) < expected and not (Path(data_root) / "synth.json").exists():
        warnings.warn(f"{expected - len(rows)} of the {expected} official test IDs are "
                      f"missing ({len(rows)} test files found): the submission is partial",
                      XlarankWarning, stacklevel=2)
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ID", "TopConfigs"])
        writer.writerows(rows)
    return len(rows)


def submission_rows(files: Iterable[Path], collection: Collection, ranker: Model,
                    on_file: Callable[[Path], None] | None = None) -> list[tuple[str, str]]:
    """(ID, TopConfigs) of each test file of one collection: its 5 best configs for tile,
    the full order for layout. ranker as `ranked_configs` takes it."""
    rows = []
    for path in files:
        graph = load_graph(path, collection=collection, configs=False)
        order, _ = ranked_configs(graph, ranker)
        top = order[:SUBMISSION_TOP_TILE] if collection.is_tile else order
        if len(top) == 0:  # load_graph refuses such files; an empty entry is invalid
            raise BadGraphError(path, "no configs to submit")
        rows.append((f"{collection.id}:{graph.graph_id}", ";".join(map(str, top))))
        if on_file:
            on_file(path)
    return rows


@dataclass
class Evaluation:
    """What `evaluate_model` found: ``per_graph`` metrics (one row per graph), their
    ``summary`` (means, as `summarize`), and the ``record`` written as summary JSON: run,
    collection, split, frame, model, headline (the metric's name), then the summary."""

    per_graph: pd.DataFrame
    summary: dict[str, float]
    record: dict


@locks_outputs("out")
def evaluate_model(frame_path: str | Path, model_dir: str | Path | None, seed: int = 0,
                   eval_indices: str | Path | None = None, name: str | None = None,
                   out: str | Path | None = None) -> Evaluation:
    """Score a saved model, or a random order, on a labelled frame file.

    Parameters
    ----------
    frame_path : path
        A labelled parquet frame (e.g. a valid split).
    model_dir : path or None
        A model directory (`xlarank.rank.model.load_model`); None scores a random order
        drawn with ``seed``, the floor any ranker must beat.
    seed : int
        Seed of the random order.
    eval_indices : path, optional
        The official eval_indices JSON (`load_eval_indices`).
    name : str, optional
        The run's name in the record [the model directory's parent folder, or "random"].
    out : path, optional
        Per-graph CSV to write; the record goes beside it as JSON (`SUMMARY_SUFFIX`),
        which `compare_runs` reads.

    Raises
    ------
    XlarankError
        The frame has no runtimes, or the model belongs to another feature spec or
        collection.
    """
    frame_path = Path(checked_type(frame_path, (str, os.PathLike), "evaluate_model: frame_path",
                                   "a parquet frame's path (str or Path)"))
    if model_dir is not None:
        checked_type(model_dir, (str, os.PathLike), "evaluate_model: model_dir",
                     "a model folder (str or Path) or None")
    seed = check_seed(seed, "seed")
    if out is not None:
        check_output(out)
        check_output(Path(out).with_suffix(SUMMARY_SUFFIX))
    table, meta = read_frame(frame_path)
    is_tile = get_collection(meta.collection).is_tile
    if model_dir is not None:
        model_dir = Path(model_dir)
        ranker = load_model(model_dir)
        ranker.check_frame(meta, str(frame_path))
        warn_if_synthetic_meets_real_frame(getattr(ranker, "card", None), meta.data_origin,
                                           str(frame_path), f"the model {model_dir}")
        scores = ranker.predict(table)
        check_scores(scores, table["graph_id"].to_numpy(),
                     f"{frame_path} scored by {model_dir}",
                     lambda: table[ranker.feature_names].to_numpy(np.float64))
    else:
        scores = random_scores(table, seed)
    indices = load_eval_indices(eval_indices) if eval_indices else None
    if indices is not None:
        check_eval_indices(eval_indices, indices, table, meta.dedup)
    per_graph = per_graph_metrics(table, scores, is_tile, indices, where=str(frame_path))
    summary = summarize(per_graph)
    if not np.isfinite(summary.get(headline_metric(is_tile), np.nan)):
        warnings.warn(f"{frame_path}: no graph has a defined {headline_metric(is_tile)} "
                      "(every graph's runtimes or scores are constant): the headline is "
                      "NaN, and compare refuses the summary", XlarankWarning, stacklevel=2)
    run = name or (model_dir.parent.name if model_dir is not None else "random")
    record = {"run": run, "collection": meta.collection, "split": meta.split,
              "frame": str(frame_path), "model": str(model_dir) if model_dir else None,
              "headline": headline_metric(is_tile), **summary}
    if out is not None:
        out = Path(out)
        with atomic_path(out) as tmp:
            per_graph.to_csv(tmp, index=False)
        write_text_atomic(out.with_suffix(SUMMARY_SUFFIX), json.dumps(record, indent=2) + "\n")
    return Evaluation(per_graph=per_graph, summary=summary, record=record)
