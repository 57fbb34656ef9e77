"""The in-graph recipe every system with training steps follows (`TpuGraphsGnn`,
`CompetitionGnn`, `GruSystem`, and `HybridSystem`'s GNN): inner validation on the
measured configs alone, successive halving over a learning-rate grid, early stopping,
the best checkpoint kept (or a refit on every measured config).

No such system has an official in-graph recipe (their authors train across graphs only),
so one rule chooses it inside each fit, the same for every system (docs/systems.md, "How
they are compared"): a seeded share of the measured configs (``in_graph_inner_share``)
is held out as inner validation; Kendall tau on it at a checkpoint every
``in_graph_check_every`` steps; a rate stops early once its inner tau gains less than
``in_graph_min_gain`` over ``in_graph_patience`` checkpoints; every rate of
``in_graph_learning_rates`` trains ``in_graph_rung`` steps, the one with the best inner
tau so far goes on to ``in_graph_epochs`` steps (one in-graph epoch is one step), and
the checkpoint of its best inner tau is kept.
The held-out configs of a bench never reach the fit.

A system hands the recipe three callables and keeps its weights in ``params_``,
``moments_`` (Adam's two moment trees) and ``step_`` (steps taken, from 0), which the
recipe sets before each call: ``draw(runtime, rng)`` (the positions, into ``runtime``, of
one step's configs), ``step(positions, rng, rate)`` (one training step on the measured
configs at those positions: advances ``params_``, ``moments_`` and ``step_``, returns the
loss) and ``tau(positions)`` (the inner Kendall tau of the current weights on those
measured configs). For the networks of xlarank's gnn and gru families, `uniform_draw` and
`network_step` make the first two.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from xlarank.compat import jax, jnp
from xlarank.systems import MOST_STEPS, EpochCallback

# The recipe's settings, the same for every system (their in_graph_* settings; the
# hybrid's gnn_in_graph_*).
IN_GRAPH_LEARNING_RATES = (1e-3, 3e-3, 1e-2)
IN_GRAPH_STEPS = 1500       # the step budget of the chosen rate
IN_GRAPH_RUNG = 500         # steps every rate of the grid gets before one is chosen
IN_GRAPH_CHECK_EVERY = 100  # steps between checkpoints
IN_GRAPH_PATIENCE = 3       # checkpoints without a gain of IN_GRAPH_MIN_GAIN: stop
IN_GRAPH_MIN_GAIN = 0.005
IN_GRAPH_INNER_SHARE = 0.2
IN_GRAPH_MIN_INNER = 5      # fewer inner configs than this: no choice (see the function)
IN_GRAPH = {"in_graph_epochs": IN_GRAPH_STEPS,
            "in_graph_learning_rates": IN_GRAPH_LEARNING_RATES,
            "in_graph_rung": IN_GRAPH_RUNG, "in_graph_check_every": IN_GRAPH_CHECK_EVERY,
            "in_graph_patience": IN_GRAPH_PATIENCE, "in_graph_min_gain": IN_GRAPH_MIN_GAIN,
            "in_graph_inner_share": IN_GRAPH_INNER_SHARE, "in_graph_refit": False}
# Their ranges (`xlarank.systems.RankingSystem.SETTING_RANGES`: name -> (low, high, whole
# number?, low excluded?)), flag and learning-rate grid: step counts 0..`MOST_STEPS` (0
# steps: the initial weights), a checkpoint every 1 or more steps, a patience of 1 to
# 10,000 checkpoints, a minimum gain of Kendall tau (itself in [-1, 1]) in [0, 2], and an
# inner share in [0, 0.9] (at most 90% held out, so some configs train).
IN_GRAPH_RANGES = {"in_graph_epochs": (0, MOST_STEPS, True, False),
                   "in_graph_rung": (0, MOST_STEPS, True, False),
                   "in_graph_check_every": (1, MOST_STEPS, True, False),
                   "in_graph_patience": (1, 10_000, True, False),
                   "in_graph_min_gain": (0.0, 2.0, False, False),
                   "in_graph_inner_share": (0.0, 0.9, False, False)}
IN_GRAPH_FLAGS = ("in_graph_refit",)
IN_GRAPH_GRIDS = ("in_graph_learning_rates",)


def uniform_draw(configs: int) -> Callable:
    """The ``draw`` of ``configs`` positions a step, uniform without replacement and
    sorted (every position when the part has no more; configs 0: every one)."""
    def draw(part_runtime: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(part_runtime)
        return (np.sort(rng.choice(n, configs, replace=False)) if 0 < configs < n
                else np.arange(n))
    return draw


def network_step(system, network, batch) -> Callable:
    """The ``step`` of a network of xlarank's gnn or gru family
    (`xlarank.features.jax_common.Network`) on one graph's measured configs: ``batch``
    (a GraphBatch of every measured config, in the order the recipe's positions index);
    one Adam step (`adam_step`) on the configs at the positions. Called inside
    `float64_context`."""
    from xlarank.features.jax_common import adam_step, configs_at

    def step(picks: np.ndarray, rng: np.random.Generator, rate: float) -> float:
        system.step_ += 1
        system.params_, system.moments_, loss = adam_step(
            system.params_, system.moments_, system.step_, rate,
            network.to_arrays(configs_at(batch, picks)), network.loss_and_grads)
        return loss
    return step


def fit_by_inner_validation(system, measured: np.ndarray, settings: dict,
                            draw: Callable, step: Callable, tau: Callable,
                            on_epoch: EpochCallback | None = None) -> dict:
    """Train ``system`` (its ``params_`` the initial weights) on the measured runtimes
    (float64 (n,), one per measured config, in the order the callables' positions index)
    by the recipe; returns ``chosen`` (learning_rate, steps, inner_tau, inner_configs,
    refit) and leaves the kept weights in ``system.params_``.

    ``system.history_`` gets one record per checkpoint: epoch (the step), learning_rate,
    phase ("rung", "chosen", "refit" or "fixed"), train_loss (mean since the last
    checkpoint), inner_tau (None without an inner split), seconds and cpu_seconds (wall
    and process CPU time of training so far, the callbacks' time left out). ``on_epoch``
    gets each record while ``system.params_`` holds that checkpoint's weights, so it may
    score with them. With fewer than ``IN_GRAPH_MIN_INNER`` inner configs (or one runtime
    only on either side) no choice is possible: the grid's middle rate trains on every
    measured config for ``in_graph_rung`` steps ("fixed")."""
    s = settings
    seed = system.seed
    grid = [float(r) for r in s["in_graph_learning_rates"]]
    budget, rung = int(s["in_graph_epochs"]), int(s["in_graph_rung"])
    n = len(measured)
    # The inner split, seeded apart from the weights and the sampling.
    order = np.random.default_rng([seed, 4]).permutation(n)
    n_inner = int(round(float(s["in_graph_inner_share"]) * n))
    inner, train = np.sort(order[:n_inner]), np.sort(order[n_inner:])
    usable = (n_inner >= IN_GRAPH_MIN_INNER and len(np.unique(measured[inner])) > 1
              and len(np.unique(measured[train])) > 1)
    clock = {"spent": 0.0, "since": time.perf_counter(), "cpu": 0.0,
             "cpu_since": time.process_time()}
    init = system.params_
    system.history_ = []

    def arm(rate: float, key: int, part: np.ndarray) -> dict:
        zeros = jax.tree.map(jnp.zeros_like, init)
        return {"rate": rate, "part": part, "params": init,
                "moments": (zeros, jax.tree.map(jnp.copy, zeros)),
                "step": 0, "rng": np.random.default_rng([seed, 2, key]),
                "best_tau": -np.inf, "best_params": init, "best_step": 0,
                "reference": -np.inf, "waited": 0, "stopped": False, "losses": []}

    def run(a: dict, until: int, phase: str, validate: bool) -> None:
        """Train arm ``a`` up to step ``until`` (or its early stop), checkpointing."""
        system.params_, system.moments_, system.step_ = a["params"], a["moments"], a["step"]
        part = a["part"]
        every = int(s["in_graph_check_every"])
        while system.step_ < until and not a["stopped"]:
            picks = part[draw(measured[part], a["rng"])]
            a["losses"].append(step(picks, a["rng"], a["rate"]))
            if system.step_ % every and system.step_ < until:
                continue
            value = None
            if validate:
                value = tau(inner)
                if value > a["best_tau"]:
                    a["best_tau"], a["best_params"] = value, system.params_
                    a["best_step"] = system.step_
                if value >= a["reference"] + float(s["in_graph_min_gain"]):
                    a["reference"], a["waited"] = value, 0
                else:
                    a["waited"] += 1
                    a["stopped"] = a["waited"] >= int(s["in_graph_patience"])
            clock["spent"] += time.perf_counter() - clock["since"]
            clock["cpu"] += time.process_time() - clock["cpu_since"]
            record = {"epoch": system.step_, "learning_rate": a["rate"], "phase": phase,
                      "train_loss": float(np.mean(a["losses"])), "valid_loss": None,
                      "valid_opa": None, "inner_tau": value,
                      "seconds": round(clock["spent"], 3),
                      "cpu_seconds": round(clock["cpu"], 3)}
            a["losses"] = []
            system.history_.append(record)
            if on_epoch is not None:
                on_epoch(record)
            clock["since"], clock["cpu_since"] = time.perf_counter(), time.process_time()
        a["params"], a["moments"], a["step"] = system.params_, system.moments_, system.step_

    everything = np.arange(n)
    if not usable:
        rate = sorted(grid)[len(grid) // 2]
        run(arm(rate, 0, everything), rung, "fixed", validate=False)
        return {"learning_rate": rate, "steps": rung, "inner_tau": None,
                "inner_configs": 0, "refit": False}
    arms = [arm(rate, i, train) for i, rate in enumerate(grid)]
    for a in arms:
        run(a, min(rung, budget), "rung", validate=True)
    # Ties go to the first rate of the grid.
    best = max(arms, key=lambda a: (a["best_tau"], -arms.index(a)))
    run(best, budget, "chosen", validate=True)
    chosen = {"learning_rate": best["rate"], "steps": best["best_step"],
              "inner_tau": round(float(best["best_tau"]), 4),
              "inner_configs": int(n_inner), "refit": bool(s["in_graph_refit"])}
    if s["in_graph_refit"]:
        again = arm(best["rate"], len(grid), everything)
        run(again, max(best["best_step"], 1), "refit", validate=False)
        system.params_ = again["params"]
    else:
        system.params_ = best["best_params"]
    return chosen
