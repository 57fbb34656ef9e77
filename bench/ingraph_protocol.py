"""The in-graph protocol of bench/ingraph.py, shared with bench/corpus.py: one labelled
layout file's distinct configs split at random, a share "measured" and the rest ranked by
rank-graph and its variants, the default pipeline trained in-graph, a raw-column LightGBM
peer and random order; Kendall tau on the held-out distinct configs over seeds, with what
makes the graph hard (runtime spread, repeat noise, plateau) and the peer check.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from xlarank.data.distinct import first_two_runs, repeat_noise
from xlarank.data.graph import LayoutGraph, load_graph
from xlarank.evaluate import in_graph_split
from xlarank.features import featurize_graph, load_feature_spec
from xlarank.frame import FrameMeta
from xlarank.rank.ingraph import IN_GRAPH_SPEC, rank_graph
from xlarank.rank.measured import distinct_configs
from xlarank.rank.model import load_model
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker

ROOT = Path(__file__).resolve().parents[1]
FRACTIONS = (0.5, 0.2, 0.1, 0.05)
SEEDS = 10
THREADS = 1
PEER_PARAMS = dict(n_estimators=300, learning_rate=0.05, num_leaves=31, min_child_samples=5,
                   verbose=-1)
RANK_GRAPH = "rank-graph"
PRIOR = "rank-graph --prior"
WITH_EMBEDDING = {
    "rank-graph + gnn (random weights)": IN_GRAPH_SPEC.with_weights("gnn", "random:0"),
    "rank-graph + gru (random weights)": IN_GRAPH_SPEC.with_weights("gru", "random:0")}
PIPELINE = "default pipeline in-graph"
PEER = "peer: raw config columns (LGBMRegressor)"
RANDOM = "random"
CEILING = "noise ceiling (repeated measurements)"


def tau(score: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall tau of a score (higher is faster) against runtimes; 0 when undefined."""
    value = kendalltau(-score, runtime)[0]
    return 0.0 if np.isnan(value) else float(value)


def noise_ceiling(group: np.ndarray, runtime: np.ndarray) -> float | None:
    """Tau between the first and second measurement of configs measured at least twice
    (group: each config's distinct config, `distinct_configs`); None under 10 such."""
    firsts, seconds = first_two_runs(runtime, group)
    if len(firsts) < 10:
        return None
    return float(kendalltau(firsts, seconds)[0])


def hardness(group: np.ndarray, runtime: np.ndarray, median: np.ndarray) -> dict:
    """The graph's runtime spread, repeat noise over its fastest config and plateau
    (median: float64 (n_distinct,) each distinct config's median runtime)."""
    best = float(median.min())
    noise, _ = repeat_noise(runtime, group)
    return {"runtime_spread": float(median.max() / best),
            "repeat_noise": None if noise is None else noise / best,
            "plateau_0.5%": float(np.mean(median <= best * 1.005))}


def peer_check(table: dict) -> dict:
    """The peer check at one share: rank-graph's mean against the peer's, its worst seed
    against the peer's mean minus sd."""
    ours, peer = table[RANK_GRAPH], table[PEER]
    return {"mean_minus_peer": ours["mean"] - peer["mean"],
            "mean_ok": bool(ours["mean"] >= peer["mean"] - 0.005),
            "worst_ok": bool(ours["worst"] >= peer["mean"] - peer["sd"])}


def one_file(path: Path, seeds: list[int], prior_dir: Path | None,
             fractions: tuple[float, ...] = FRACTIONS, peer_only: bool = False,
             embeddings: bool = True) -> dict:
    import lightgbm as lgb

    graph = load_graph(path)
    assert isinstance(graph, LayoutGraph)
    collection = graph.collection
    spec = load_feature_spec(ROOT / "features" / "default.toml")
    # One row per distinct config (first appearance, median runtime).
    block = featurize_graph(graph, spec, dedup=True)
    meta = FrameMeta(collection=collection.id, split="train", spec=spec.to_dict(),
                     feature_names=list(block.columns[4:]), dedup=True)
    first = block["config_index"].to_numpy()
    median = block["runtime"].to_numpy(np.float64)
    raw = graph.node_config_feat.reshape(graph.n_configs, -1)
    n = len(block)
    record = {"file": str(path), "collection": collection.id, "configs": graph.n_configs,
              "distinct_configs": n}
    if n < 3:
        record["left_out"] = "fewer than 3 distinct configs"
        return record
    distinct = distinct_configs(graph)
    record.update(hardness(distinct.group, graph.config_runtime, distinct.median))
    ceiling = noise_ceiling(distinct.group, graph.config_runtime)
    prior = (load_model(prior_dir / collection.slug)
             if prior_dir is not None and (prior_dir / collection.slug).exists() else None)
    booster_spec = load_ranker_spec(ROOT / "models" / f"{collection.slug}.toml")
    raw_distinct = raw[first].astype(np.float32)
    results = {}
    for fraction in fractions:
        per_seed = {}
        chosen: dict[str, int] = {}
        for seed in seeds:
            # The frame's rows are the split's distinct configs, in the same order.
            split = in_graph_split(graph, fraction, seed)
            train, test = split.measured, split.held
            measured = split.measured_runs()
            scores = {}
            started = time.perf_counter()
            ranked = rank_graph(graph, measured, seed=seed, threads=THREADS)
            by_index = -ranked.set_index("config_index")["rank"].astype(np.float64)
            scores[RANK_GRAPH] = (by_index.reindex(first[test]).to_numpy(),
                                  time.perf_counter() - started)
            model = ranked.attrs["in_graph_model"]["model"]
            chosen[model] = chosen.get(model, 0) + 1
            for system, spec in ({} if peer_only or not embeddings
                                 else WITH_EMBEDDING).items():
                started = time.perf_counter()
                ranked = rank_graph(graph, measured, seed=seed, threads=THREADS, spec=spec)
                by_index = -ranked.set_index("config_index")["rank"].astype(np.float64)
                scores[system] = (by_index.reindex(first[test]).to_numpy(),
                                  time.perf_counter() - started)
            if prior is not None and not peer_only:
                started = time.perf_counter()
                ranked = rank_graph(graph, measured, prior=prior, seed=seed, threads=THREADS)
                by_index = -ranked.set_index("config_index")["rank"].astype(np.float64)
                scores[PRIOR] = (by_index.reindex(first[test]).to_numpy(),
                                 time.perf_counter() - started)
            if not peer_only:
                started = time.perf_counter()
                ranker = train_ranker(block.iloc[train].reset_index(drop=True), meta,
                                      booster_spec, threads=THREADS)
                scores[PIPELINE] = (ranker.predict(block.iloc[test]),
                                    time.perf_counter() - started)
            started = time.perf_counter()
            peer = lgb.LGBMRegressor(**PEER_PARAMS, random_state=seed, n_jobs=THREADS)
            peer.fit(raw_distinct[train], np.log(median[train]))
            scores[PEER] = (-peer.predict(raw_distinct[test]), time.perf_counter() - started)
            scores[RANDOM] = (np.random.default_rng(seed).random(len(test)), 0.0)
            for system, (score, seconds) in scores.items():
                per_seed.setdefault(system, []).append((tau(score, median[test]), seconds))
        table = {system: {"mean": float(np.mean([v[0] for v in values])),
                          "sd": float(np.std([v[0] for v in values], ddof=1)),
                          "worst": float(np.min([v[0] for v in values])),
                          "per_seed": [round(v[0], 4) for v in values],
                          "seconds": float(np.mean([v[1] for v in values]))}
                 for system, values in per_seed.items()}
        table[RANK_GRAPH]["chosen"] = chosen
        table[RANK_GRAPH]["peer_check"] = peer_check(table)
        if ceiling is not None:
            table[CEILING] = {"mean": ceiling, "sd": 0.0, "per_seed": [], "seconds": 0.0}
        results[str(fraction)] = table
    record["results"] = results
    return record
