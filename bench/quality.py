"""Quality benchmark: objectives side by side, the ensemble and the peers.

Two parts, each over several seeds (mean, spread and training time per system):

- synthetic: an `xlarank synth` tree; per collection, train on the train split and score
  the valid split (graphs split by graph). Figures show learning under the synthetic cost
  model, not TpuGraphs results.
- unet3d: the real labelled sample ``layout/xla/default/train/unet3d.npz``, split inside
  the graph: each seed trains on a random half of its distinct configs and scores the other
  half (one graph, so one Kendall tau per seed).

Systems: xlarank's default (models/<collection>.toml), the same booster with the gnn
embedding columns added (random weights: the training-free variant; and weights trained
with jax on the training split, or for unet3d on the training half), each objective in
models/objectives/, the collection's ensemble (models/ensembles/<collection>.toml; its
members' seeds offset by the run's seed; per-graph min-max normalized scores averaged), and
the peers: the config-aggregates-only XGBoost pairwise
ranker (models/baseline.toml on features/baseline.toml), random order, and "keep the
default layout" (layout only). The published systems xlarank descends from: the
default booster with the closed-form graph metrics added (features/graph-metrics.toml),
and the "GNN vs trees" hybrid: graph metrics plus trained gnn columns into scikit-learn's
HistGradientBoostingRegressor (models/objectives/sklearn-hgb.toml); the default booster
with the gru columns (weights trained by regression of log runtime on the training split,
or for unet3d on the training half); and the GRU recipe alone: the trained gru network
with a linear readout of its columns, the readout refitted by least squares on the same
training rows (per graph centred -log runtime, as the network was trained), used as the
ranker.

Costs per system: training seconds (mean over seeds), the featurize seconds of its feature
spec, and the peak of Python-tracked memory (numpy and pandas buffers, by tracemalloc;
the boosters' own C++ memory is not counted) of one untimed fit.

    python bench/quality.py DATA --samples ../shared/tpugraphs --out bench/results/quality.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from provenance import write_record
from xlarank.data.collections import COLLECTIONS, get_collection, split_files
from xlarank.data.graph import load_graph
from xlarank.evaluate import (
    default_layout_scores,
    headline,
    headline_metric,
    in_graph_split,
    random_scores,
)
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.features.embedding import save_weights
from xlarank.features.gnn_train import train_gnn_weights
from xlarank.features.gru import gru_column_names
from xlarank.features.gru_train import train_gru_weights
from xlarank.featurize import featurize_files
from xlarank.frame import FrameMeta, read_frame
from xlarank.rank.ensemble import average_normalized, load_training_plan
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVES = sorted((ROOT / "models" / "objectives").glob("*.toml"))
DEFAULT_NAME = "xlarank default"
BASELINE_NAME = "peer: config aggregates (XGBoost pairwise)"  # as bench/systems.py
ENSEMBLE_NAME = "ensemble (models/ensembles/<collection>.toml)"
GNN_NAME = "xlarank default + gnn columns (random weights)"
GNN_SPEC = load_feature_spec(ROOT / "features" / "default.toml").with_weights("gnn", "random:0")
TRAINED_GNN_NAME = "xlarank default + gnn columns (trained weights)"
GNN_EPOCHS = 5
GM_SPEC = load_feature_spec(ROOT / "features" / "graph-metrics.toml")
GM_NAME = "xlarank default + graph_metrics"
HYBRID_NAME = "hybrid: graph_metrics + gnn (trained) + HistGradientBoosting"
HYBRID_FEATURES = "hybrid"
GRU_NAME = "xlarank default + gru columns (trained weights)"
GRU_ALONE_NAME = "GRU recipe alone (its regression as the ranker)"
GRU_FEATURES = "default+gru-trained"


def gru_spec(weights: str):
    return dataclasses.replace(load_feature_spec(ROOT / "features" / "default.toml")
                               .with_weights("gru", weights), name=GRU_FEATURES)


def gru_alone_scores(train: tuple, valid_frame, is_tile: bool) -> np.ndarray:
    """The GRU recipe's scores (higher is faster) of the valid rows: a least-squares
    readout of the gru columns fitted to per-graph centred -log runtime of the train rows."""
    table, _ = train
    names = gru_column_names(is_tile)
    target = table["runtime"].to_numpy(np.float64)
    if is_tile:
        target = target / table["normalizer"].to_numpy(np.float64)
    y = -np.log(target)
    graphs = table["graph_id"].to_numpy()
    x = table[names].to_numpy(np.float64)
    frame = pd.DataFrame(x).assign(y=y, g=graphs)
    centred = frame.groupby("g").transform(lambda col: col - col.mean())
    readout, *_ = np.linalg.lstsq(centred[list(range(len(names)))].to_numpy(),
                                  centred["y"].to_numpy(), rcond=None)
    return valid_frame[names].to_numpy(np.float64) @ readout


def hybrid_spec(weights: str):
    """The hybrid's features: the default families, graph_metrics and the gnn columns of
    the given weights."""
    return dataclasses.replace(GM_SPEC.with_weights("gnn", weights), name=HYBRID_FEATURES)


def traced_peak_mb(fn) -> float:
    """Peak Python-tracked memory (MB) while fn() runs."""
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def fit_memory(train: dict, specs: dict) -> dict:
    """{system: peak traced MB of one fit} (`traced_peak_mb`)."""
    def one(spec):
        table, meta = train[spec.features]
        return traced_peak_mb(lambda: train_ranker(table, meta, spec))
    return {system: round(one(spec), 1) for system, spec in specs.items()}


def evaluate_seed(train: dict, valid: dict, specs: dict, ensemble: tuple, seed: int,
                  is_tile: bool) -> dict:
    """{system: (metric, train seconds)} for one seed. train/valid: {feature spec name:
    (frame, meta)}; specs: {system: RankerSpec}; ensemble: (member specs, seeds or None)
    of the collection's ensemble spec, its seeds offset by this seed."""
    frame = valid["default"][0]
    out = {}

    def fit(spec, member_seed):
        table, meta = train[spec.features]
        started = time.perf_counter()
        ranker = train_ranker(table, meta, dataclasses.replace(spec, seed=member_seed))
        return ranker.predict(valid[spec.features][0]), time.perf_counter() - started

    for system, spec in specs.items():
        scores, seconds = fit(spec, seed)
        out[system] = (headline(frame, scores, is_tile), seconds)
    members, member_seeds = ensemble
    fitted = [fit(spec, seed + 1000 * offset) for spec in members
              for offset in (member_seeds or [0])]
    scores = average_normalized([f[0] for f in fitted], frame["graph_id"].to_numpy())
    out[ENSEMBLE_NAME] = (headline(frame, scores, is_tile), sum(f[1] for f in fitted))
    if GRU_FEATURES in train:
        started = time.perf_counter()
        scores = gru_alone_scores(train[GRU_FEATURES], valid[GRU_FEATURES][0], is_tile)
        out[GRU_ALONE_NAME] = (headline(frame, scores, is_tile), time.perf_counter() - started)
    out["peer: random"] = (headline(frame, random_scores(frame, seed), is_tile), 0.0)
    if not is_tile:
        out["peer: keep the default layout"] = (
            headline(frame, default_layout_scores(frame), is_tile), 0.0)
    return out


def spread(per_seed: list[dict]) -> dict:
    """{system: mean, sd, min, max of the metric and mean train seconds} over seeds."""
    table = {}
    for system in per_seed[0]:
        values = np.array([run[system][0] for run in per_seed])
        table[system] = {"mean": float(values.mean()), "sd": float(values.std(ddof=1))
                         if len(values) > 1 else 0.0, "min": float(values.min()),
                         "max": float(values.max()), "per_seed": values.round(5).tolist(),
                         "train_seconds": float(np.mean([run[system][1] for run in per_seed]))}
    return table


def system_specs(collection_slug: str | None, trained_gnn: str | None = None) -> dict:
    specs = {}
    if collection_slug is not None:
        specs[DEFAULT_NAME] = load_ranker_spec(ROOT / "models" / f"{collection_slug}.toml")
        # The same booster on the default features plus the gnn embedding columns.
        specs[GNN_NAME] = dataclasses.replace(specs[DEFAULT_NAME], features=GNN_SPEC.name)
        if trained_gnn is not None:
            specs[TRAINED_GNN_NAME] = dataclasses.replace(specs[DEFAULT_NAME],
                                                          features=trained_gnn)
        specs[GM_NAME] = dataclasses.replace(specs[DEFAULT_NAME], features=GM_SPEC.name)
        specs[GRU_NAME] = dataclasses.replace(specs[DEFAULT_NAME], features=GRU_FEATURES)
        if trained_gnn is not None:
            specs[HYBRID_NAME] = dataclasses.replace(
                load_ranker_spec(ROOT / "models" / "objectives" / "sklearn-hgb.toml"),
                features=HYBRID_FEATURES)
    for path in OBJECTIVES:
        specs[f"objective: {path.stem}"] = load_ranker_spec(path)
    specs[BASELINE_NAME] = load_ranker_spec(ROOT / "models" / "baseline.toml")
    return specs


def synthetic(data: Path, work: Path, seeds: list[int]) -> list[dict]:
    feature_specs = [load_feature_spec(ROOT / "features" / f"{n}.toml")
                     for n in ("default", "baseline")] + [GNN_SPEC, GM_SPEC]
    results = []
    for collection in COLLECTIONS:
        frames = {}
        weights_path = work / "gnn" / f"{collection.slug}.npz"
        started = time.perf_counter()
        weights, history = train_gnn_weights(split_files(data, collection, "train"),
                                             collection, epochs=GNN_EPOCHS)
        gnn_seconds = time.perf_counter() - started
        save_weights(weights, weights_path)
        trained_spec = dataclasses.replace(
            GNN_SPEC.with_weights("gnn", str(weights_path.resolve())), name="default+gnn-trained")
        gru_path = work / "gru" / f"{collection.slug}.npz"
        started = time.perf_counter()
        gru_weights, gru_history = train_gru_weights(split_files(data, collection, "train"),
                                                     collection, epochs=GNN_EPOCHS)
        gru_seconds = time.perf_counter() - started
        save_weights(gru_weights, gru_path)
        featurize_seconds = {}
        for split in ("train", "valid"):
            for spec in feature_specs + [trained_spec, hybrid_spec(str(weights_path.resolve())),
                                         gru_spec(str(gru_path.resolve()))]:
                path = work / spec.name / collection.slug / f"{split}.parquet"
                started = time.perf_counter()
                featurize_files(split_files(data, collection, split), path, collection, split,
                                spec)
                featurize_seconds[spec.name] = (featurize_seconds.get(spec.name, 0.0)
                                                + time.perf_counter() - started)
                frames.setdefault(split, {})[spec.name] = read_frame(path)
        ensemble = load_training_plan(ROOT / "models" / "ensembles" / f"{collection.slug}.toml")
        specs = system_specs(collection.slug, trained_spec.name)
        per_seed = [evaluate_seed(frames["train"], frames["valid"], specs, ensemble,
                                  seed, collection.is_tile)
                    for seed in seeds]
        row = {"collection": collection.id, "metric": headline_metric(collection.is_tile),
               "gnn_training": {"epochs": GNN_EPOCHS, "seconds": round(gnn_seconds, 1),
                                "pairwise_loss_per_epoch": [round(x, 4) for x in history]},
               "gru_training": {"epochs": GNN_EPOCHS, "seconds": round(gru_seconds, 1),
                                "centred_mse_per_epoch": [round(x, 4) for x in gru_history]},
               "valid_graphs": int(frames["valid"]["default"][0]["graph_id"].nunique()),
               "featurize_seconds": {k: round(v, 2) for k, v in featurize_seconds.items()},
               "fit_peak_traced_mb": fit_memory(frames["train"], specs),
               "systems": spread(per_seed)}
        results.append(row)
        print(json.dumps({"collection": row["collection"], **{
            k: round(v["mean"], 4) for k, v in row["systems"].items()}}), flush=True)
    return results


def unet3d(samples: Path, work: Path, seeds: list[int]) -> dict:
    """In-graph split of the real unet3d sample: halves of its distinct configs."""
    path = samples / "npz" / "layout" / "xla" / "default" / "train" / "unet3d.npz"
    collection = get_collection("layout-xla-default")
    graph = load_graph(path)
    blocks, metas = {}, {}
    for spec in [load_feature_spec(ROOT / "features" / f"{name}.toml")
                 for name in ("default", "baseline")] + [GNN_SPEC, GM_SPEC]:
        name = spec.name
        # One row per distinct config, so no config sits on both sides of the split.
        blocks[name] = featurize_graph(graph, spec, dedup=True)
        metas[name] = FrameMeta(collection=collection.id, split="train", spec=spec.to_dict(),
                                feature_names=list(blocks[name].columns[4:]), dedup=True)
    per_seed = []
    n = len(blocks["default"])
    for seed in seeds:
        # The frames' rows are the split's distinct configs, in the same order.
        split = in_graph_split(graph, 0.5, seed)
        halves = split.measured, split.held
        # gnn weights trained on this seed's training half only.
        allowed = blocks["default"]["config_index"].to_numpy()[halves[0]]
        weights, _ = train_gnn_weights([path], collection, seed=seed, epochs=GNN_EPOCHS * 4,
                                       allowed={path: allowed})
        weights_path = work / "gnn" / f"unet3d-seed{seed}.npz"
        save_weights(weights, weights_path)
        trained_spec = dataclasses.replace(
            GNN_SPEC.with_weights("gnn", str(weights_path.resolve())), name="default+gnn-trained")
        gru_weights, _ = train_gru_weights([path], collection, seed=seed,
                                           epochs=GNN_EPOCHS * 4, allowed={path: allowed})
        gru_path = work / "gru" / f"unet3d-seed{seed}.npz"
        save_weights(gru_weights, gru_path)
        seed_blocks, seed_metas = dict(blocks), dict(metas)
        for spec in (trained_spec, hybrid_spec(str(weights_path.resolve())),
                     gru_spec(str(gru_path.resolve()))):
            seed_blocks[spec.name] = featurize_graph(graph, spec, dedup=True)
            seed_metas[spec.name] = FrameMeta(
                collection=collection.id, split="train", spec=spec.to_dict(),
                feature_names=list(seed_blocks[spec.name].columns[4:]), dedup=True)
        train = {k: (b.iloc[halves[0]].reset_index(drop=True), seed_metas[k])
                 for k, b in seed_blocks.items()}
        valid = {k: (b.iloc[halves[1]].reset_index(drop=True), seed_metas[k])
                 for k, b in seed_blocks.items()}
        ensemble = load_training_plan(ROOT / "models" / "ensembles" / "layout-xla-default.toml")
        per_seed.append(evaluate_seed(train, valid,
                                      system_specs("layout-xla-default", trained_spec.name),
                                      ensemble, seed, False))
    result = {"file": str(path), "data": "real TpuGraphs sample (in-graph split)",
              "configs": int(graph.n_configs), "distinct_configs": n,
              "train_configs": len(halves[0]), "eval_configs": len(halves[1]),
              "metric": "kendall_tau", "systems": spread(per_seed)}
    print(json.dumps({"unet3d": {k: round(v["mean"], 4) for k, v in
                                 result["systems"].items()}}), flush=True)
    for key, name in (("gnn_random_minus_default", GNN_NAME),
                      ("gnn_trained_minus_default", TRAINED_GNN_NAME),
                      ("graph_metrics_minus_default", GM_NAME),
                      ("hybrid_minus_default", HYBRID_NAME),
                      ("gru_trained_minus_default", GRU_NAME),
                      ("gru_alone_minus_default", GRU_ALONE_NAME)):
        result[key] = round(result["systems"][name]["mean"]
                            - result["systems"][DEFAULT_NAME]["mean"], 4)
    return result


def targets(results: list[dict]) -> list[dict]:
    """The quality targets per collection, checked on the means over seeds."""
    checks = []
    for row in results:
        systems = row["systems"]
        need = 0.02 if row["metric"] == "score" else 0.2
        gap = systems[DEFAULT_NAME]["mean"] - systems[BASELINE_NAME]["mean"]
        singles = {k: v["mean"] for k, v in systems.items()
                   if k == DEFAULT_NAME or k.startswith("objective: ")}
        best = max(singles, key=singles.get)
        checks.append({"collection": row["collection"],
                       "default_minus_peer": round(gap, 4), "needed": need,
                       "default_beats_peer": bool(gap >= need),
                       "best_single": best, "best_single_mean": round(singles[best], 4),
                       "ensemble_mean": round(systems[ENSEMBLE_NAME]["mean"], 4),
                       "ensemble_not_worse": bool(systems[ENSEMBLE_NAME]["mean"]
                                                  >= singles[best]),
                       "gnn_random_minus_default": round(systems[GNN_NAME]["mean"]
                                                         - systems[DEFAULT_NAME]["mean"], 4),
                       "gnn_trained_minus_default": round(
                           systems[TRAINED_GNN_NAME]["mean"] - systems[DEFAULT_NAME]["mean"],
                           4),
                       **{f"{key}_minus_default": round(systems[name]["mean"]
                                                        - systems[DEFAULT_NAME]["mean"], 4)
                          for key, name in (("graph_metrics", GM_NAME),
                                            ("hybrid", HYBRID_NAME), ("gru_trained", GRU_NAME),
                                            ("gru_alone", GRU_ALONE_NAME))},
                       "default_sd": round(systems[DEFAULT_NAME]["sd"], 4)})
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="an xlarank synth tree")
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    parser.add_argument("--out", type=Path, default=Path("bench/results/quality.json"))
    parser.add_argument("--work", type=Path, default=Path("bench/results/quality-frames"))
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the synthetic part")
    parser.add_argument("--unet3d-seeds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    synth = synthetic(args.data, args.work, list(range(args.seeds)))
    real = unet3d(args.samples, args.work, list(range(args.unet3d_seeds)))
    generator = args.data / "synth.json"
    record = {"synthetic": {"data": f"synthetic: {args.data} (xlarank synth), valid split",
                            # The preset, seed and sizes the data was made with.
                            "generator": (json.loads(generator.read_text())
                                          if generator.exists() else None),
                            "seeds": args.seeds, "results": synth, "targets": targets(synth)},
              "unet3d": real, "seconds": round(time.perf_counter() - started, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_record(args.out, record)
    for check in record["synthetic"]["targets"]:
        print(json.dumps(check))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
