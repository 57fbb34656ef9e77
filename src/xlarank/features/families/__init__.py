"""The registry of feature families: every module in this package that defines ``FAMILY``.

A family is one object (see `Family`) with ``name``, ``description``,
``names(spec, is_tile)``, ``prepare(graph, tables, spec)`` (once per graph) and
``columns(prepared, configs)`` (once per config batch). Adding a family is adding a module
here (plus its kernel, its reference in tests/naive.py and its test): the registry finds it.
A family with trained weights says so itself (``weights``, ``load_weights`` and
``train_weights``); the spec, featurize, model folders and ``gnn-train`` find it by
`weighted_families`.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Protocol

import numpy as np


class Family(Protocol):
    """One feature family.

    names(spec, is_tile): the column names it adds (none: the family does not apply, as
    khop on tile kernels). prepare(graph, tables, spec): per-graph state, from the graph and
    its `xlarank.features.tables.GraphTables`. columns(prepared, configs): float32 (b,
    len(names)) for a batch of distinct configs: layout int8 (b, nc, 18), tile float32
    (b, 24).

    A family with trained weights also has ``weights``: the name of the spec field that
    holds them ("random:SEED" or a weights .npz; featurize's ``--<weights>-weights``;
    ``<weights>_weights.npz`` in a model folder), ``load_weights(source)`` (the weights,
    refusing a bad file) and ``train_weights(files, collection, k, seed, epochs,
    configs_per_graph, on_epoch)`` (needs jax; returns the weights and each epoch's loss)
    with ``loss`` naming what it minimises. Families without weights have ``weights``
    None or no such attribute.
    """

    name: str
    description: str

    def names(self, spec, is_tile: bool) -> list[str]: ...

    def prepare(self, graph, tables, spec) -> Any: ...

    def columns(self, prepared: Any, configs: np.ndarray) -> np.ndarray: ...


def _discover() -> dict[str, Family]:
    found = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        # A plug-in point, by name on purpose: every module of this package that defines
        # FAMILY is a feature family; adding one is adding its module.
        family = getattr(importlib.import_module(f"{__name__}.{module}"), "FAMILY", None)
        if family is not None:
            found[family.name] = family
    return found


FAMILIES: dict[str, Family] = _discover()


def get_family(name: str) -> Family:
    return FAMILIES[name]


def weighted_families() -> dict[str, Family]:
    """The families with trained weights, by their ``weights`` field, in registry order."""
    return {family.weights: family for family in FAMILIES.values()
            if getattr(family, "weights", None)}
