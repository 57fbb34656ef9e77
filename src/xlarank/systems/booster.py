"""xlarank itself as a system: the default feature spec and booster spec of a collection
across graphs (what ``make models`` trains), and `xlarank.rank.ingraph`'s graph-local
booster inside one graph (`xlarank.rank.ingraph.rank_runtimes`, the one in-graph path
that ``xlarank rank-graph`` and bench/systems.py share)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.data.collections import Collection
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.data.origin import files_origin
from xlarank.errors import SpecError, XlarankError, checked_type
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.frame import FrameMeta
from xlarank.systems import EpochCallback, RankingSystem, checked_scores


def graphs_frame(files: Sequence[Path], collection: Collection, spec) -> tuple:
    """(frame, FrameMeta) of the labelled files, one row per distinct config, in memory."""
    blocks = [featurize_graph(load_graph(f, collection), spec, dedup=True) for f in files]
    frame = pd.concat(blocks, ignore_index=True)
    meta = FrameMeta(collection=collection.id, split="train", spec=spec.to_dict(),
                     feature_names=list(frame.columns[4:]), dedup=True,
                     data_origin=files_origin(files))
    return frame, meta


def _checked_booster_spec(overrides: dict) -> dict:
    """The booster_spec setting of ``overrides`` (none, or None: the collection's default)
    as a str naming a packaged booster spec or a booster spec file that loads; XlarankError
    (`ArgumentTypeError` for another type) otherwise, when the system is made or loaded."""
    from xlarank.rank.spec import load_ranker_spec
    from xlarank.specs import spec_path

    chosen = overrides.get("booster_spec")
    if chosen is None:
        return {}
    checked_type(chosen, (str, os.PathLike), "system xlarank: booster_spec",
                 "a packaged booster spec's name or a spec file's path (str)")
    try:
        load_ranker_spec(spec_path(chosen, "booster"))
    except SpecError as exc:
        raise SpecError(f"system xlarank: booster_spec {str(chosen)[:200]!r} names no booster "
                        f"spec that loads ({exc})") from None
    return {"booster_spec": os.fspath(chosen)}


class BoosterSystem(RankingSystem):
    """xlarank: feature families and a gradient-boosted ranker (see the README)."""

    name = "xlarank"

    def __init__(self, seed: int = 0, threads: int | None = None, prior=None, **settings):
        super().__init__(seed=seed, threads=threads, **settings)
        self.overrides.update(_checked_booster_spec(self.overrides))
        # A cross-graph model whose score is one more input of the graph-local booster
        # (``rank-graph --prior``); not a setting: a graph fit is never saved.
        self.prior = prior

    @classmethod
    def defaults(cls) -> dict:
        # None: the packaged default booster spec of the collection (models/<slug>.toml);
        # a packaged name such as "baseline" trains that spec instead (the peers).
        return {"booster_spec": None}

    def fit(self, files, collection, valid_files=(), on_epoch: EpochCallback | None = None):
        import dataclasses

        from xlarank.rank.spec import load_ranker_spec
        from xlarank.rank.train import train_ranker
        from xlarank.specs import default_booster_spec, spec_path

        chosen = self.settings()["booster_spec"]
        booster_spec = load_ranker_spec(default_booster_spec(collection.slug) if chosen is None
                                        else spec_path(chosen, "booster"))
        booster_spec = dataclasses.replace(booster_spec, seed=self.seed)
        feature_spec = load_feature_spec(spec_path(booster_spec.features, "feature"))
        frame, meta = graphs_frame(files, collection, feature_spec)
        self.ranker_ = train_ranker(frame, meta, booster_spec, threads=self.threads or 0)
        self.graph_table_ = None
        return self

    def fit_graph(self, graph, runtime, on_epoch=None):
        """The graph-local booster fitted on ``runtime`` (measured medians by config
        index), its whole ranked table kept (``graph_table_``, `rank_runtimes`'s) for
        `score` and `rank_measured` of this graph."""
        from xlarank.rank.ingraph import rank_runtimes
        from xlarank.rank.measured import config_groups, graph_with_configs

        graph = graph_with_configs(graph)
        self.graph_table_ = rank_runtimes(graph, runtime, config_groups(graph),
                                          prior=self.prior, seed=self.seed,
                                          threads=self.threads)
        self.graph_id_ = graph.graph_id
        self.ranker_ = None
        return self

    def rank_measured(self, graph, runtime, groups) -> pd.DataFrame:
        """The graph-local booster's table (`xlarank.rank.ingraph.rank_runtimes`), with its
        own fallback where it cannot order the unmeasured configs."""
        return self.fit_graph(graph, runtime).graph_table_

    def score(self, graph: TileGraph | LayoutGraph) -> np.ndarray:
        if getattr(self, "ranker_", None) is not None:
            block = featurize_graph(graph, self.ranker_.feature_spec)
            return checked_scores(self, graph, self.ranker_.predict(block))
        table = getattr(self, "graph_table_", None)
        if table is None:
            raise XlarankError("system xlarank: fit or fit_graph first")
        if graph.graph_id != self.graph_id_ or graph.n_configs != len(table):
            raise XlarankError(f"system xlarank: fitted inside graph {self.graph_id_}, "
                               f"asked to score {graph.graph_id}")
        # The table's order, not its score column: scores tie beyond the measured range
        # and the rank breaks those ties by the booster's own score.
        score = np.empty(len(table))
        score[table["config_index"].to_numpy()] = -table["rank"].to_numpy(np.float64)
        return score

    def _save(self, out_dir: Path) -> None:
        if getattr(self, "ranker_", None) is None:
            raise XlarankError("system xlarank: only a cross-graph fit is saved (a model "
                               "directory, as xlarank train writes)")
        self.ranker_.save(out_dir / "model")

    def _load(self, out_dir: Path) -> None:
        from xlarank.rank.model import load_model

        self.ranker_ = load_model(out_dir / "model")
