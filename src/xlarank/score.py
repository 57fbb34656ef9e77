"""Batch scoring of config files and the competition submission CSV."""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_path
from xlarank.data.collections import COLLECTIONS, Collection, split_files
from xlarank.data.graph import load_graph
from xlarank.engine import map_ordered
from xlarank.errors import BadGraphError, XlarankError
from xlarank.features.build import featurize_graph
from xlarank.rank.model import Model, load_model

SUBMISSION_TOP_TILE = 5


def load_rankers(models: str | Path) -> dict[str, Model]:
    """Rankers by collection id, from one model directory or a folder of them."""
    models = Path(models)
    if (models / "card.json").exists():
        dirs = [models]
    elif models.is_dir():
        dirs = sorted(d for d in models.iterdir() if (d / "card.json").exists())
    else:
        dirs = []
    if not dirs:
        raise XlarankError(f"{models}: no trained model (no card.json here or one level down)")
    rankers: dict[str, Model] = {}
    for d in dirs:
        ranker = load_model(d)
        rankers[ranker.card["collection"]] = ranker
    return rankers


def npz_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    """The files to score: each input file as given, each folder's npz files (recursive,
    sorted), in input order. Raises `XlarankError` if there are none."""
    files = [p for i in map(Path, inputs) for p in (sorted(i.rglob("*.npz")) if i.is_dir()
                                                     else [i])]
    if not files:
        raise XlarankError("no npz files among the inputs")
    return files


def ranked_configs(graph, ranker: Model) -> tuple[np.ndarray, np.ndarray]:
    """(config indices best first, their scores) for every config of a graph, duplicates too."""
    block = featurize_graph(graph, ranker.feature_spec)
    score = ranker.predict(block)
    order = np.argsort(-score, kind="stable")
    return order.astype(np.int64), score[order]


@functools.lru_cache(maxsize=4)
def _cached_rankers(models: str, stamp: tuple[int, ...]) -> dict[str, Model]:
    # Each worker process loads the models once, however many files it scores; ``stamp``
    # (the cards' mtimes) makes a model retrained into the same folder a new entry.
    return load_rankers(models)


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
    rankers = _cached_rankers(job.models, job.stamp)
    if graph.collection.id not in rankers:
        raise XlarankError(f"{job.path}: no model for collection {graph.collection.id}")
    order, score = ranked_configs(graph, rankers[graph.collection.id])
    keep = slice(0, job.top) if job.top else slice(None)
    return pd.DataFrame({
        "file": str(job.path), "collection": graph.collection.id, "graph_id": graph.graph_id,
        "rank": np.arange(1, len(order) + 1)[keep], "config_index": order[keep],
        "score": score[keep]}), None


def score_files(paths: Iterable[str | Path], models: str | Path, out: str | Path,
                collection: Collection | None = None, top: int | None = None,
                skip_bad: bool = False, on_file: Callable[[Path], None] | None = None,
                workers: int = 1, client=None) -> tuple[int, list[str]]:
    """Rank the configs of each file and write one CSV row per (file, config).

    Columns: file, collection, graph_id, rank (1 = predicted fastest), config_index, score.
    One task per file on the chosen engine; rows follow the input order.
    Returns (rows, skipped files' errors).
    """
    models = str(Path(models).resolve())
    stamp = _models_stamp(models)
    _cached_rankers(models, stamp)  # fail here, once, if the models are missing or mismatched
    jobs = [ScoreJob(Path(p), models, stamp, collection, top, skip_bad) for p in paths]
    results = list(map_ordered(score_file, jobs, workers,
                               on_done=(lambda job: on_file(job.path)) if on_file else None,
                               client=client))
    frames = [table for table, _ in results if table is not None]
    skipped = [error for _, error in results if error]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["file", "collection", "graph_id", "rank", "config_index", "score"])
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    return len(table), skipped


def submission_files(data_root: str | Path) -> list[Path]:
    """The test files of all five collections under a dataset root."""
    return [p for c in COLLECTIONS for p in split_files(Path(data_root), c, "test")]


def write_submission(data_root: str | Path, rankers: dict[str, Model], out: str | Path,
                     on_file: Callable[[Path], None] | None = None) -> int:
    """The competition CSV ``ID,TopConfigs`` for the test split of every collection.

    Tile lists its 5 best configs, layout the full order. Every collection must have a
    model and test files. Returns the number of IDs written.
    """
    missing = [c.id for c in COLLECTIONS if c.id not in rankers]
    if missing:
        raise XlarankError(f"no model for collection(s) {', '.join(missing)}")
    rows = []
    for collection in COLLECTIONS:
        files = split_files(Path(data_root), collection, "test")
        if not files:
            raise XlarankError(f"{data_root}: no test files for {collection.id}")
        for path in files:
            graph = load_graph(path, collection=collection, configs=False)
            order, _ = ranked_configs(graph, rankers[collection.id])
            top = order[:SUBMISSION_TOP_TILE] if collection.is_tile else order
            rows.append((f"{collection.id}:{graph.graph_id}", ";".join(map(str, top))))
            if on_file:
                on_file(path)
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ID", "TopConfigs"])
        writer.writerows(rows)
    return len(rows)
