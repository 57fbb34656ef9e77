"""Feature specs: which feature families a frame holds, read from ``features/*.toml``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from xlarank.errors import SpecError, XlarankError, checked_type
from xlarank.files import read_structured

# Bump when a family's columns or their meaning change: frames and models of another
# schema are then refused instead of being mixed.
FEATURE_SCHEMA_VERSION = 5

# The weights of a family that has them, unless the spec says otherwise.
DEFAULT_WEIGHTS = "random:0"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class FeatureSpec:
    """Which families a frame holds, in order, and ``k``, the neighbourhood radius."""

    name: str
    families: tuple[str, ...]
    k: int = 2
    # The weights of the spec's families that have them (`weighted_families`: the gnn
    # and gru families), as (field, source) pairs: "random:SEED" (fixed random
    # projections, no training) or the path of a weights .npz. A family not listed has
    # DEFAULT_WEIGHTS; pairs of families the spec does not hold are dropped.
    weights: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        given = dict(self.weights)
        kept = tuple((field, str(given[field])) for field, family in weighted_families().items()
                     if family.name in self.families and field in given
                     and given[field] != DEFAULT_WEIGHTS)
        object.__setattr__(self, "weights", kept)

    def weights_for(self, field: str) -> str:
        """The weights in ``field`` (a family's ``weights``), DEFAULT_WEIGHTS if unset."""
        return dict(self.weights).get(field, DEFAULT_WEIGHTS)

    def _weighted(self) -> list[str]:
        """The weights fields of this spec's families that have weights, in registry order."""
        return [field for field, family in weighted_families().items()
                if family.name in self.families]

    @property
    def hash(self) -> str:
        """Names the columns and their meaning; 16 hex digits. Not the name: two specs
        with the same content are the same features."""
        content = {"families": list(self.families), "k": self.k,
                   "schema": FEATURE_SCHEMA_VERSION}
        for field in self._weighted():
            content[field] = weights_identity(self.weights_for(field), field)
        text = json.dumps(content, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        out = {"name": self.name, "families": list(self.families), "k": self.k,
               "hash": self.hash, "schema": FEATURE_SCHEMA_VERSION}
        for field in self._weighted():
            out[field] = self.weights_for(field)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> FeatureSpec:
        """The spec that `to_dict` wrote (frame metadata, model cards): name, families, k
        and each weights field (default random:0); the hash and schema there are not read
        back."""
        return cls(str(data["name"]), tuple(data["families"]), int(data.get("k", 2)),
                   tuple((field, str(data.get(field) or DEFAULT_WEIGHTS))
                         for field in weighted_families()))

    def with_weights(self, field: str, weights: str = DEFAULT_WEIGHTS) -> FeatureSpec:
        """This spec plus the family whose weights are in ``field`` (if missing), with the
        given weights."""
        family = weighted_families()[field].name
        present = family in self.families
        return dataclasses.replace(
            self, name=self.name if present else f"{self.name}+{family}",
            families=self.families if present else (*self.families, family),
            weights=(*self.weights, (field, weights)) if weights != DEFAULT_WEIGHTS
            else tuple(pair for pair in self.weights if pair[0] != field))


def weights_identity(weights: str, family: str) -> str:
    """What a family's weights are, for the spec hash: random:SEED as is, a weights file by
    the sha256 of its content (so retrained weights make other features)."""
    if weights.startswith("random:"):
        return weights
    try:
        return "file:" + hashlib.sha256(Path(weights).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise SpecError(f"{weights}: {family} weights cannot be read ({exc.strerror})"
                        ) from None


def known_families() -> dict:
    """The feature family registry, name to family (`xlarank.features.families`)."""
    # Imported on use: the families load the Numba kernels, and specs are also read by
    # modules that never featurize (training, evaluation).
    from xlarank.features.families import FAMILIES

    return FAMILIES


def weighted_families() -> dict:
    """The families with trained weights, by the spec field that holds them (each such
    family's ``weights``; `xlarank.features.families.weighted_families`)."""
    from xlarank.features.families import weighted_families

    return weighted_families()


# The families whose columns are one value per graph, the same for each of its configs
# (their ``columns`` broadcast what ``prepare`` made): a spec of these alone gives every
# config of a graph one row of features, so a model trained on it one score a graph.
GRAPH_LEVEL_FAMILIES = frozenset({"graph", "graph_metrics"})


def check_families(families, where: str | Path, error: type[XlarankError] = SpecError
                   ) -> tuple[str, ...]:
    """``families`` (a spec's, a model card's) as a tuple if it is a non-empty list of
    the registry's families, none twice and one at least whose features vary by config
    (not in `GRAPH_LEVEL_FAMILIES`); else ``error`` naming ``where`` (the file)."""
    known = known_families()
    if not isinstance(families, list) or not families \
            or not all(isinstance(f, str) for f in families):
        raise error(f"{where}: 'families' must be a non-empty list of names; known: "
                    f"{', '.join(known)}")
    unknown = [f for f in families if f not in known]
    if unknown:
        raise error(f"{where}: unknown feature families {unknown}; known: {', '.join(known)}")
    repeated = sorted({f for f in families if families.count(f) > 1})
    if repeated:
        raise error(f"{where}: feature family {repeated[0]!r} is listed more than once in "
                    "'families' (its columns would repeat)")
    if all(f in GRAPH_LEVEL_FAMILIES for f in families):
        varying = [f for f in known if f not in GRAPH_LEVEL_FAMILIES]
        raise error(f"{where}: 'families' {families} give every config of a graph the same "
                    f"features (one score a graph); add a family whose features vary by "
                    f"config: {', '.join(varying)}")
    return tuple(families)


def check_k(k, where: str | Path, error: type[XlarankError] = SpecError) -> int:
    """``k`` if it is a whole number (not a bool) in 0..8, else ``error`` naming
    ``where``."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 8:
        raise error(f"{where}: 'k' (neighbourhood radius in hops) must be an integer in 0..8, "
                    f"not {k!r}")
    return k


def load_feature_spec(path: str | Path) -> FeatureSpec:
    """Read a feature spec TOML: ``name`` and ``families`` (a list drawn from the family
    registry, each once, one at least whose features vary by config: `check_families`),
    optionally ``k`` and the weights field of each family that has one
    (``gnn``, ``gru``)."""
    path = Path(checked_type(path, (str, os.PathLike), "load_feature_spec: path",
                             "a feature spec TOML's path (str or Path)"))
    raw = read_structured(path, "feature spec", SpecError)
    k = check_k(raw.get("k", 2), path)
    fields = list(weighted_families())
    unknown_keys = set(raw) - {"name", "families", "k", *fields}
    if unknown_keys:
        raise SpecError(f"{path}: unknown keys {sorted(unknown_keys)}; known: name, families, "
                        f"k, {', '.join(fields)}")
    name = raw.get("name", path.stem)
    # The name becomes a folder (features/frames/<name>): a plain one cannot leave it.
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise SpecError(f"{path}: 'name' {name!r} must be a plain name: letters, digits, "
                        "'-', '_' and '.', not starting with '.'")
    families = check_families(raw.get("families"), path)
    return FeatureSpec(name=name, families=families, k=k,
                       weights=tuple((field, _weights_source(raw, field, path))
                                     for field in fields))


def _weights_source(raw: dict, key: str, path: Path) -> str:
    """A spec's weights field: random:SEED, or a .npz path made absolute (relative to the
    spec file)."""
    source = raw.get(key, "random:0")
    if not isinstance(source, str) or not source:
        raise SpecError(f"{path}: '{key}' must be \"random:SEED\" or a weights .npz path")
    if not source.startswith("random:"):
        return str((path.parent / source).resolve()) if not Path(source).is_absolute() else source
    if not source[len("random:"):].isdigit():
        raise SpecError(f"{path}: '{key}' random seed must be an integer, as in \"random:0\"")
    return source
