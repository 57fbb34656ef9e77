"""Ablation: validation quality of the default ranker with each feature family removed.

On synthetic data (an `xlarank synth` tree): featurizes train and valid with the default
spec, then per collection trains models/<collection>.toml on all features and once per
family with that family's columns left out, and evaluates each on valid. Synthetic data:
the figures show what each family carries under the synthetic cost model, not on TpuGraphs.

    python bench/ablation.py DATA --out bench/results/ablation.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from xlarank.data.collections import COLLECTIONS, split_files
from xlarank.evaluate import headline_metric, per_graph_metrics, random_scores, summarize
from xlarank.features import feature_names, load_feature_spec
from xlarank.features.spec import FeatureSpec
from xlarank.frame import featurize_files, read_frame
from xlarank.rank.model import load_ranker_spec, train_ranker

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--out", default="bench/results/ablation.json")
    parser.add_argument("--work", default="bench/results/ablation-frames")
    args = parser.parse_args()
    spec = load_feature_spec(ROOT / "features" / "default.toml")
    results = []
    for collection in COLLECTIONS:
        frames = {}
        for split in ("train", "valid"):
            path = Path(args.work) / collection.slug / f"{split}.parquet"
            featurize_files(split_files(Path(args.data), collection, split), path, collection,
                            split, spec)
            frames[split] = read_frame(path)
        (train, meta), (valid, _) = frames["train"], frames["valid"]
        ranker_spec = load_ranker_spec(ROOT / "models" / f"{collection.slug}.toml")
        metric = headline_metric(collection.is_tile)
        row = {"collection": collection.id, "metric": metric}
        random = summarize(per_graph_metrics(valid, random_scores(valid, 0), collection.is_tile))
        row["random"] = random[metric]
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
            value = summarize(per_graph_metrics(valid, scores, collection.is_tile))[metric]
            row["all features" if removed is None else f"without {removed}"] = value
            row.setdefault("train_seconds", {})[removed or "all"] = round(
                time.perf_counter() - started, 2)
        results.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                          for k, v in row.items() if k != "train_seconds"}))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"data": f"synthetic: {args.data}", "spec": spec.to_dict(),
                               "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
