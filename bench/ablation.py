"""Ablation: quality with each feature family removed, on synthetic and on real data.

- synthetic (an `xlarank synth` tree): featurizes train and valid with the default spec
  plus any per-config family it leaves out (EXTRA_FAMILIES; config_nodes is in the
  default now), then per collection trains
  models/<collection>.toml on all features and once per family with that family's columns
  left out, and evaluates each on valid. The figures show what each family carries under
  the synthetic cost model, not on TpuGraphs.
- real (the labelled unet3d sample, split inside the graph by distinct config, half
  measured, 5 seeds; bench/ingraph.py's protocol): the same for the default pipeline
  trained in-graph, and for `rank_graph` with its raw config columns alone and with each
  of its families left out.

    python bench/ablation.py DATA --samples ../shared/tpugraphs --out bench/results/ablation.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from provenance import write_record
from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.data.graph import load_graph
from xlarank.evaluate import headline, headline_metric, in_graph_split, random_scores
from xlarank.features import feature_names, featurize_graph, load_feature_spec
from xlarank.features.spec import FeatureSpec
from xlarank.featurize import featurize_files
from xlarank.frame import FrameMeta, read_frame
from xlarank.rank.ingraph import IN_GRAPH_SPEC, rank_graph
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

ROOT = Path(__file__).resolve().parents[1]
# Per-config families that the default spec may leave out, ablated all the same.
EXTRA_FAMILIES = ("config_nodes",)
REAL_SEEDS = 5


def without(spec: FeatureSpec, family: str | None) -> FeatureSpec:
    return dataclasses.replace(spec, families=tuple(f for f in spec.families if f != family))


def real_in_graph(samples: Path, spec: FeatureSpec) -> dict:
    """Kendall tau mean, sd over seeds on unet3d's held-out half, per system."""
    path = samples / "npz" / "layout" / "xla" / "default" / "train" / "unet3d.npz"
    graph = load_graph(path)
    block = featurize_graph(graph, spec, dedup=True)
    first = block["config_index"].to_numpy()
    runtime = block["runtime"].to_numpy(np.float64)
    ranker_spec = dataclasses.replace(
        load_ranker_spec(ROOT / "models" / "layout-xla-default.toml"), features=spec.name)
    taus: dict[str, list[float]] = {}
    for seed in range(REAL_SEEDS):
        # The frame's rows are the split's distinct configs, in the same order.
        split = in_graph_split(graph, 0.5, seed)
        train, test = split.measured, split.held
        for removed in (None, *spec.families):
            names = feature_names(without(spec, removed), False)
            meta = FrameMeta(collection="layout:xla:default", split="train",
                             spec=spec.to_dict(), feature_names=names, dedup=True)
            ranker = train_ranker(block.iloc[train].reset_index(drop=True), meta, ranker_spec)
            key = "pipeline: " + ("all features" if removed is None else f"without {removed}")
            taus.setdefault(key, []).append(kendalltau(-ranker.predict(block.iloc[test]),
                                                       runtime[test])[0])
        measured = split.measured_runs()
        for removed in (None, *IN_GRAPH_SPEC.families, "all"):
            families = () if removed == "all" else without(IN_GRAPH_SPEC, removed).families
            ranked = rank_graph(graph, measured, seed=seed, threads=2,
                                spec=dataclasses.replace(IN_GRAPH_SPEC, families=families))
            score = ranked.set_index("config_index")["score"].reindex(first[test]).to_numpy()
            key = "rank-graph: " + {None: "raw columns + families",
                                    "all": "raw columns alone"}.get(removed,
                                                                    f"without {removed}")
            taus.setdefault(key, []).append(kendalltau(-score, runtime[test])[0])
    return {"file": str(path), "data": "real TpuGraphs sample, in-graph split (half of the "
            "distinct configs measured)", "metric": "kendall_tau",
            "systems": {k: {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1))}
                        for k, v in taus.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--out", default="bench/results/ablation.json")
    parser.add_argument("--work", default="bench/results/ablation-frames")
    parser.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "tpugraphs")
    args = parser.parse_args()
    default = load_feature_spec(ROOT / "features" / "default.toml")
    spec = dataclasses.replace(default, name="ablation", families=default.families + tuple(
        f for f in EXTRA_FAMILIES if f not in default.families))
    results = []
    for collection in COLLECTIONS:
        frames = {}
        for split in ("train", "valid"):
            path = Path(args.work) / collection.slug / f"{split}.parquet"
            featurize_files(split_files(Path(args.data), collection, split), path, collection,
                            split, spec)
            frames[split] = read_frame(path)
        (train, meta), (valid, _) = frames["train"], frames["valid"]
        ranker_spec = dataclasses.replace(
            load_ranker_spec(ROOT / "models" / f"{collection.slug}.toml"), features=spec.name)
        metric = headline_metric(collection.is_tile)
        row = {"collection": collection.id, "metric": metric}
        row["random"] = headline(valid, random_scores(valid, 0), collection.is_tile)
        for removed in (None, *spec.families):
            family_columns = (set(feature_names(FeatureSpec(removed, (removed,), spec.k),
                                                collection.is_tile)) if removed else set())
            kept = [n for n in meta.feature_names if n not in family_columns]
            if removed and len(kept) == len(meta.feature_names):
                continue  # the family has no columns here (khop on tile)
            started = time.perf_counter()
            ranker = train_ranker(train, dataclasses.replace(meta, feature_names=kept),
                                  ranker_spec)
            scores = ranker.predict(valid)
            row["all features" if removed is None else f"without {removed}"] = headline(
                valid, scores, collection.is_tile)
            row.setdefault("train_seconds", {})[removed or "all"] = round(
                time.perf_counter() - started, 2)
        results.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                          for k, v in row.items() if k != "train_seconds"}))
    real = real_in_graph(args.samples, spec)
    print(json.dumps({k: f"{v['mean']:.3f} ± {v['sd']:.3f}" for k, v in real["systems"].items()},
                     ensure_ascii=False))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_record(out, {"data": f"synthetic: {args.data}", "spec": spec.to_dict(),
                       "results": results, "real": real})


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
