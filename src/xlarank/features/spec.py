"""Feature specs: which feature families a frame holds, read from ``features/*.toml``."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from xlarank.errors import SpecError
from xlarank.files import read_structured

# Bump when a family's columns or their meaning change: frames and models of another
# schema are then refused instead of being mixed.
FEATURE_SCHEMA_VERSION = 5

DEFAULT_GNN = "random:0"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class FeatureSpec:
    """Which families a frame holds, in order, and ``k``, the neighbourhood radius."""

    name: str
    families: tuple[str, ...]
    k: int = 2
    # The gnn family's weights: "random:SEED" (fixed random projections, no training) or
    # the path of a weights .npz. Unused without that family.
    gnn: str = DEFAULT_GNN

    @property
    def hash(self) -> str:
        """Names the columns and their meaning; 16 hex digits. Not the name: two specs
        with the same content are the same features."""
        content = {"families": list(self.families), "k": self.k,
                   "schema": FEATURE_SCHEMA_VERSION}
        if "gnn" in self.families:
            content["gnn"] = gnn_identity(self.gnn)
        text = json.dumps(content, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        out = {"name": self.name, "families": list(self.families), "k": self.k,
               "hash": self.hash, "schema": FEATURE_SCHEMA_VERSION}
        if "gnn" in self.families:
            out["gnn"] = self.gnn
        return out

    @classmethod
    def from_dict(cls, data: dict) -> FeatureSpec:
        """The spec that `to_dict` wrote (frame metadata, model cards): name, families, k
        and gnn (default random:0); the hash and schema there are not read back."""
        return cls(str(data["name"]), tuple(data["families"]), int(data.get("k", 2)),
                   str(data.get("gnn") or DEFAULT_GNN))

    def with_gnn(self, weights: str = DEFAULT_GNN) -> FeatureSpec:
        """This spec plus the gnn family (if missing) with the given weights."""
        families = self.families if "gnn" in self.families else (*self.families, "gnn")
        return FeatureSpec(f"{self.name}+gnn" if "gnn" not in self.families else self.name,
                           families, self.k, weights)


def gnn_identity(weights: str) -> str:
    """What the gnn weights are, for the spec hash: random:SEED as is, a weights file by
    the sha256 of its content (so retrained weights make other features)."""
    if weights.startswith("random:"):
        return weights
    try:
        return "file:" + hashlib.sha256(Path(weights).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise SpecError(f"{weights}: gnn weights cannot be read ({exc.strerror})") from None


def known_families() -> dict:
    """The feature family registry, name to family (`xlarank.features.families`)."""
    # Imported on use: the families load the Numba kernels, and specs are also read by
    # modules that never featurize (training, evaluation).
    from xlarank.features.families import FAMILIES

    return FAMILIES


def load_feature_spec(path: str | Path) -> FeatureSpec:
    """Read a feature spec TOML: ``name`` and ``families`` (a list drawn from the family
    registry), optionally ``k`` and ``gnn``."""
    path = Path(path)
    raw = read_structured(path, "feature spec", SpecError)
    families = raw.get("families")
    known = known_families()
    if not isinstance(families, list) or not families:
        raise SpecError(f"{path}: 'families' must be a non-empty list; known: {', '.join(known)}")
    unknown = [f for f in families if f not in known]
    if unknown:
        raise SpecError(f"{path}: unknown feature families {unknown}; known: {', '.join(known)}")
    k = raw.get("k", 2)
    if not isinstance(k, int) or not 0 <= k <= 8:
        raise SpecError(f"{path}: 'k' (neighbourhood radius in hops) must be an integer in 0..8")
    unknown_keys = set(raw) - {"name", "families", "k", "gnn"}
    if unknown_keys:
        raise SpecError(f"{path}: unknown keys {sorted(unknown_keys)}; known: name, families, "
                        "k, gnn")
    gnn = raw.get("gnn", DEFAULT_GNN)
    if not isinstance(gnn, str) or not gnn:
        raise SpecError(f"{path}: 'gnn' must be \"random:SEED\" or a weights .npz path")
    if not gnn.startswith("random:"):
        gnn = str((path.parent / gnn).resolve()) if not Path(gnn).is_absolute() else gnn
    elif not gnn[len("random:"):].isdigit():
        raise SpecError(f"{path}: 'gnn' random seed must be an integer, as in \"random:0\"")
    name = raw.get("name", path.stem)
    # The name becomes a folder (features/frames/<name>): a plain one cannot leave it.
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise SpecError(f"{path}: 'name' {name!r} must be a plain name: letters, digits, "
                        "'-', '_' and '.', not starting with '.'")
    return FeatureSpec(name=name, families=tuple(families), k=k, gnn=gnn)
