"""Booster specs, training and saved rankers.

A saved ranker is a directory: the booster's native file (``model.txt`` for LightGBM,
``model.json`` for XGBoost) and ``card.json``, which records the collection, the library
and objective, the feature spec (name, hash, feature names), the seed, package versions,
a summary of the training data and, when given, validation metrics.
"""

from __future__ import annotations

import json
import platform
import shutil
import zlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank import __version__
from xlarank.atomic import atomic_dir
from xlarank.data.collections import get_collection
from xlarank.errors import MismatchError, SpecError, XlarankError
from xlarank.features.spec import DEFAULT_GNN, FeatureSpec
from xlarank.files import read_structured
from xlarank.frame import FrameMeta, group_sizes
from xlarank.rank.labels import N_GRADES, log_slowdown, ranking_target, relevance_grades

# Bump when the saved layout changes; a card of a higher format is refused.
MODEL_FORMAT = 1
OBJECTIVES = {
    "lightgbm": ("lambdarank", "rank_xendcg", "regression"),
    "xgboost": ("rank:ndcg", "rank:pairwise", "rank:map", "reg:squarederror"),
}
# Pointwise objectives regress -log_slowdown; the others rank graded configs per graph.
POINTWISE = ("regression", "reg:squarederror")
MAX_GRADES = 1000
GNN_WEIGHTS_FILE = "gnn_weights.npz"
# LightGBM refuses queries of more than 10,000 rows.
MAX_GROUP_ROWS = 10_000


@dataclass(frozen=True)
class RankerSpec:
    """How to train one ranker; read from ``models/*.toml``."""

    name: str
    features: str
    library: str = "lightgbm"
    objective: str = "lambdarank"
    num_rounds: int = 200
    max_configs_per_graph: int = 2000
    seed: int = 0
    # Relevance grades per graph (quantiles of runtime); gains are linear in the grade.
    grades: int = N_GRADES
    params: dict = field(default_factory=dict)

    @property
    def pointwise(self) -> bool:
        return self.objective in POINTWISE


def load_ranker_spec(path: str | Path) -> RankerSpec:
    path = Path(path)
    raw = read_structured(path, "booster spec", SpecError)
    raw.setdefault("name", path.stem)
    try:
        spec = RankerSpec(**raw)
    except TypeError as exc:
        raise SpecError(f"{path}: {exc}") from None
    if spec.library not in OBJECTIVES:
        raise SpecError(f"{path}: library must be one of {', '.join(OBJECTIVES)}")
    if spec.objective not in OBJECTIVES[spec.library]:
        raise SpecError(f"{path}: objective {spec.objective!r} is not one of "
                        f"{', '.join(OBJECTIVES[spec.library])} for {spec.library}")
    if not 2 <= spec.max_configs_per_graph <= MAX_GROUP_ROWS:
        raise SpecError(f"{path}: max_configs_per_graph must lie in 2..{MAX_GROUP_ROWS}")
    if not 2 <= spec.grades <= MAX_GRADES:
        raise SpecError(f"{path}: grades must lie in 2..{MAX_GRADES}")
    return spec


def sample_configs(frame: pd.DataFrame, sizes: np.ndarray, limit: int,
                   seed: int) -> np.ndarray:
    """int64 row ids keeping at most ``limit`` random configs of each graph, in order.

    Each graph's draw is seeded by (seed, its id), so it is the same whichever engine or
    partition reads the graph.
    """
    ids = frame["graph_id"].to_numpy()
    keep, start = [], 0
    for size in sizes:
        rows = np.arange(start, start + size)
        if size > limit:
            rng = np.random.default_rng([seed, zlib.crc32(str(ids[start]).encode())])
            rows = np.sort(rng.choice(rows, limit, replace=False))
        keep.append(rows)
        start += size
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


def check_trainable(meta: FrameMeta, spec: RankerSpec):
    """The frame's collection, after refusing frames this spec cannot train on."""
    if meta.spec["name"] != spec.features:
        raise MismatchError(f"frame has feature spec {meta.spec['name']!r}, booster spec "
                            f"{spec.name!r} wants {spec.features!r}")
    return get_collection(meta.collection)


def training_arrays(frame: pd.DataFrame, names: list[str], is_tile: bool, spec: RankerSpec
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sampled rows of a frame of whole graphs: x float32 (rows, features), labels (rows,),
    group sizes int64 (graphs,).

    Labels are int32 relevance grades (higher is faster) for ranking objectives, and
    float64 -log_slowdown (0 for the fastest, higher is faster) for pointwise ones.
    """
    rows = sample_configs(frame, group_sizes(frame), spec.max_configs_per_graph, spec.seed)
    train = frame.iloc[rows]
    sizes = group_sizes(train)
    target = ranking_target(train, is_tile)
    labels = (-log_slowdown(target, sizes) if spec.pointwise
              else relevance_grades(target, sizes, spec.grades))
    return train[names].to_numpy(dtype=np.float32), labels, sizes


def lightgbm_params(spec: RankerSpec, threads: int) -> dict:
    """LightGBM parameters of a spec; the spec's own params win."""
    params = {"objective": spec.objective, "seed": spec.seed, "deterministic": True,
              "force_row_wise": True, "verbosity": -1, "num_threads": threads}
    if not spec.pointwise:
        params["label_gain"] = list(range(spec.grades))
    return {**params, **spec.params}


def xgboost_params(spec: RankerSpec, threads: int | None) -> dict:
    """XGBoost parameters of a spec; the spec's own params win."""
    params = {"objective": spec.objective, "seed": spec.seed, "tree_method": "hist",
              "nthread": threads}
    if spec.objective == "rank:ndcg":
        # Linear gains as for LightGBM; exponential ones overflow past 31 grades.
        params["ndcg_exp_gain"] = False
    return {k: v for k, v in {**params, **spec.params}.items() if v is not None}


def load_partition(frame_path: str, start: int, stop: int, names: list[str], is_tile: bool,
                   spec: RankerSpec, first_graph: int):
    """Training arrays of row groups [start, stop) of a frame (whole graphs), plus qid
    int64 (rows,) numbering their graphs from ``first_graph``; for Dask workers."""
    import pyarrow.parquet as pq

    frame = pq.ParquetFile(frame_path).read_row_groups(list(range(start, stop))).to_pandas()
    x, labels, sizes = training_arrays(frame, names, is_tile, spec)
    qid = np.repeat(np.arange(first_graph, first_graph + len(sizes)), sizes)
    return x, labels, sizes, qid


def build_card(meta: FrameMeta, spec: RankerSpec, collection, version: str, model_file: str,
               graphs: int, rows: int, rows_used: int, seconds: float | None) -> dict:
    return {
        "format": MODEL_FORMAT,
        "collection": collection.id,
        "library": spec.library,
        "objective": spec.objective,
        "model_file": model_file,
        "spec": asdict(spec),
        "features": {**meta.spec, "names": meta.feature_names},
        "training_data": {"split": meta.split, "graphs": int(graphs), "rows": int(rows),
                          "rows_used": int(rows_used), "deduplicated": meta.dedup,
                          "skipped_files": len(meta.skipped)},
        "seed": spec.seed,
        "train_seconds": None if seconds is None else round(seconds, 3),
        "engine": {"name": "local"},
        "versions": {"xlarank": __version__, spec.library: version,
                     "numpy": np.__version__, "python": platform.python_version()},
    }


@dataclass
class Ranker:
    """A trained booster and its card; `predict` scores rows, higher means faster."""

    card: dict
    booster: object
    # Where the ranker was loaded from: a weights file the card names relative to it.
    directory: Path | None = None

    @property
    def feature_names(self) -> list[str]:
        return self.card["features"]["names"]

    @property
    def feature_spec(self) -> FeatureSpec:
        """The spec to featurize new graphs with; its hash is the one the model saw."""
        features = self.card["features"]
        spec = FeatureSpec(features["name"], tuple(features["families"]), features.get("k", 2),
                           self._gnn_source() or DEFAULT_GNN)
        if spec.hash != self.card["features"]["hash"]:
            raise MismatchError(f"model's feature spec (hash {self.card['features']['hash']}) "
                                f"is not this xlarank's (hash {spec.hash}); retrain the model")
        return spec

    def check_frame(self, meta: FrameMeta, where: str = "frame") -> None:
        """Refuse a frame of another feature spec or collection."""
        if meta.spec_hash != self.card["features"]["hash"]:
            raise MismatchError(
                f"{where}: feature spec {meta.spec['name']!r} (hash {meta.spec_hash}) differs "
                f"from the model's {self.card['features']['name']!r} "
                f"(hash {self.card['features']['hash']}); featurize with the model's spec")
        if meta.collection != self.card["collection"]:
            raise MismatchError(f"{where}: collection {meta.collection}, but the model was "
                                f"trained on {self.card['collection']}")

    @property
    def rounds(self) -> int:
        """Boosting rounds in the trained booster."""
        if self.card["library"] == "lightgbm":
            return int(self.booster.current_iteration())
        return int(self.booster.num_boosted_rounds())

    def predict(self, frame: pd.DataFrame, rounds: int | None = None) -> np.ndarray:
        """float64 (n_rows,): one score per row of a frame holding the model's features,
        from the first ``rounds`` boosting rounds (all when None)."""
        x = frame[self.feature_names].to_numpy(dtype=np.float32)
        if self.card["library"] == "lightgbm":
            return np.asarray(self.booster.predict(x, num_iteration=rounds), dtype=np.float64)
        import xgboost as xgb

        data = xgb.DMatrix(x, feature_names=self.feature_names)
        upto = (0, rounds) if rounds is not None else (0, 0)
        return np.asarray(self.booster.predict(data, iteration_range=upto), dtype=np.float64)

    def importance(self) -> pd.Series:
        """Total split gain of each feature (0 for unused ones), largest first."""
        if self.card["library"] == "lightgbm":
            gain = self.booster.feature_importance(importance_type="gain")
            series = pd.Series(gain, index=self.booster.feature_name(), dtype=np.float64)
        else:
            scores = self.booster.get_score(importance_type="total_gain")
            series = pd.Series(scores, dtype=np.float64).reindex(self.feature_names,
                                                                  fill_value=0.0)
        return series.sort_values(ascending=False)

    def _gnn_source(self) -> str | None:
        """The gnn weights the features need: random:SEED, or a file's full path."""
        source = self.card["features"].get("gnn")
        if source is None or source.startswith("random:") or Path(source).is_absolute():
            return source
        return str((self.directory or Path(".")) / source)

    def save(self, directory: str | Path) -> Path:
        """Write model file and card (and trained gnn weights, copied beside them, so the
        model scores without the original file); the directory is replaced whole."""
        directory = Path(directory)
        card = self.card
        source = self._gnn_source() if "gnn" in card["features"]["families"] else None
        with atomic_dir(directory) as tmp:
            # XGBoost picks its format from the suffix: model.json is JSON.
            self.booster.save_model(str(tmp / card["model_file"]))
            if source is not None and not source.startswith("random:"):
                shutil.copyfile(source, tmp / GNN_WEIGHTS_FILE)
                card = {**card, "features": {**card["features"], "gnn": GNN_WEIGHTS_FILE}}
            (tmp / "card.json").write_text(json.dumps(card, indent=2) + "\n")
        self.card, self.directory = card, directory
        return directory


def load_ranker(directory: str | Path):
    """The `Ranker`, or `xlarank.rank.ensemble.Ensemble`, saved in a directory."""
    directory = Path(directory)
    card = read_structured(directory / "card.json", "model card",
                           missing_hint="; train a model with 'xlarank train'")
    if card.get("format", 0) > MODEL_FORMAT:
        raise MismatchError(f"{directory}: model of format {card.get('format')} was written by "
                            f"a newer xlarank ({card.get('versions', {}).get('xlarank')}); "
                            f"this is {__version__}, which reads format {MODEL_FORMAT}")
    if card.get("kind") == "ensemble":
        from xlarank.rank.ensemble import load_ensemble

        return load_ensemble(directory, card)
    model_file = directory / card["model_file"]
    if card["library"] == "lightgbm":
        import lightgbm as lgb

        booster = lgb.Booster(model_file=str(model_file))
    else:
        import xgboost as xgb

        booster = xgb.Booster()
        booster.load_model(str(model_file))
    return Ranker(card=card, booster=booster, directory=directory)


def train_ranker(frame: pd.DataFrame, meta: FrameMeta, spec: RankerSpec,
                 threads: int = 0) -> Ranker:
    """Fit one booster on a frame; groups are graphs, labels are within-graph grades.

    At most ``spec.max_configs_per_graph`` configs per graph are drawn (seeded) for
    training. ``threads`` 0 lets the booster choose.
    """
    collection = check_trainable(meta, spec)
    if len(frame) == 0:
        raise XlarankError("the training frame has no rows")
    if not (frame["runtime"].to_numpy() > 0).any():
        raise MismatchError("the training frame has no runtimes (all zero: a test split?)")
    names = meta.feature_names
    x, labels, train_sizes = training_arrays(frame, names, collection.is_tile, spec)
    started = time.perf_counter()
    if spec.library == "lightgbm":
        import lightgbm as lgb

        data = lgb.Dataset(x, label=labels, group=None if spec.pointwise else train_sizes,
                           feature_name=names)
        booster = lgb.train(lightgbm_params(spec, threads), data,
                            num_boost_round=spec.num_rounds)
        version, model_file = lgb.__version__, "model.txt"
    else:
        import xgboost as xgb

        qid = np.repeat(np.arange(len(train_sizes)), train_sizes)
        data = xgb.DMatrix(x, label=labels, qid=None if spec.pointwise else qid,
                           feature_names=names)
        booster = xgb.train(xgboost_params(spec, threads or None), data,
                            num_boost_round=spec.num_rounds)
        version, model_file = xgb.__version__, "model.json"
    card = build_card(meta, spec, collection, version, model_file,
                      graphs=len(group_sizes(frame)), rows=len(frame), rows_used=len(x),
                      seconds=time.perf_counter() - started)
    return Ranker(card=card, booster=booster)
