"""Batch scoring of config files and the competition submission CSV."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_path
from xlarank.data.collections import COLLECTIONS, Collection, split_files
from xlarank.data.graph import load_graph
from xlarank.errors import BadGraphError, XlarankError
from xlarank.features.build import featurize_graph
from xlarank.rank.model import Ranker, load_ranker

SUBMISSION_TOP_TILE = 5


def load_rankers(models: str | Path) -> dict[str, Ranker]:
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
    rankers: dict[str, Ranker] = {}
    for d in dirs:
        ranker = load_ranker(d)
        rankers[ranker.card["collection"]] = ranker
    return rankers


def ranked_configs(graph, ranker: Ranker) -> tuple[np.ndarray, np.ndarray]:
    """(config indices best first, their scores) for every config of a graph, duplicates too."""
    block = featurize_graph(graph, ranker.feature_spec)
    score = ranker.predict(block)
    order = np.argsort(-score, kind="stable")
    return order.astype(np.int64), score[order]


def _ranker_for(path: Path, graph, rankers: dict[str, Ranker]) -> Ranker:
    if graph.collection is None:
        raise XlarankError(f"{path}: collection unknown (file outside the official layout); "
                           "pass --collection")
    if graph.collection.id not in rankers:
        raise XlarankError(f"{path}: no model for collection {graph.collection.id}")
    return rankers[graph.collection.id]


def score_files(paths: Iterable[str | Path], rankers: dict[str, Ranker], out: str | Path,
                collection: Collection | None = None, top: int | None = None,
                skip_bad: bool = False,
                on_file: Callable[[Path], None] | None = None) -> tuple[int, list[str]]:
    """Rank the configs of each file and write one CSV row per (file, config).

    Columns: file, collection, graph_id, rank (1 = predicted fastest), config_index, score.
    Returns (rows, skipped files' errors).
    """
    frames, skipped = [], []
    for path in map(Path, paths):
        try:
            graph = load_graph(path, collection=collection)
        except BadGraphError as exc:
            if not skip_bad:
                raise
            skipped.append(str(exc))
            continue
        order, score = ranked_configs(graph, _ranker_for(path, graph, rankers))
        keep = slice(0, top) if top else slice(None)
        frames.append(pd.DataFrame({
            "file": str(path), "collection": graph.collection.id, "graph_id": graph.graph_id,
            "rank": np.arange(1, len(order) + 1)[keep], "config_index": order[keep],
            "score": score[keep]}))
        if on_file:
            on_file(path)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["file", "collection", "graph_id", "rank", "config_index", "score"])
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    return len(table), skipped


def submission_files(data_root: str | Path) -> list[Path]:
    """The test files of all five collections under a dataset root."""
    return [p for c in COLLECTIONS for p in split_files(Path(data_root), c, "test")]


def write_submission(data_root: str | Path, rankers: dict[str, Ranker], out: str | Path,
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
            graph = load_graph(path, collection=collection)
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
