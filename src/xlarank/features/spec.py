"""Feature specs: which feature families a frame holds, read from ``features/*.toml``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from xlarank.errors import SpecError
from xlarank.files import read_structured

# Bump when a family's columns or their meaning change: frames and models of another
# schema are then refused instead of being mixed.
FEATURE_SCHEMA_VERSION = 4

FAMILIES = {
    "graph": "graph size, opcode histogram and node-feature aggregates (one value per graph)",
    "config_raw": "the config columns themselves; layout: their mean over configurable nodes",
    "config_joined": "configs joined with the graph's shapes: padding, alignment, relayouts",
    "khop": "layout: k-hop neighbourhoods of the configurable nodes whose layout a config "
            "changes (size, bytes, rank, op mix), and the pruned graph's size",
}


@dataclass(frozen=True)
class FeatureSpec:
    """Which families a frame holds, in order, and ``k``, the neighbourhood radius."""

    name: str
    families: tuple[str, ...]
    k: int = 2

    @property
    def hash(self) -> str:
        """Names the columns and their meaning; 16 hex digits. Not the name: two specs
        with the same content are the same features."""
        content = json.dumps({"families": list(self.families), "k": self.k,
                              "schema": FEATURE_SCHEMA_VERSION}, sort_keys=True)
        return hashlib.sha256(content.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"name": self.name, "families": list(self.families), "k": self.k,
                "hash": self.hash, "schema": FEATURE_SCHEMA_VERSION}


def load_feature_spec(path: str | Path) -> FeatureSpec:
    """Read a feature spec TOML: ``name`` and ``families`` (a list drawn from FAMILIES)."""
    path = Path(path)
    raw = read_structured(path, "feature spec", SpecError)
    families = raw.get("families")
    if not isinstance(families, list) or not families:
        raise SpecError(f"{path}: 'families' must be a non-empty list; known: {', '.join(FAMILIES)}")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SpecError(f"{path}: unknown feature families {unknown}; known: {', '.join(FAMILIES)}")
    k = raw.get("k", 2)
    if not isinstance(k, int) or not 0 <= k <= 8:
        raise SpecError(f"{path}: 'k' (neighbourhood radius in hops) must be an integer in 0..8")
    unknown_keys = set(raw) - {"name", "families", "k"}
    if unknown_keys:
        raise SpecError(f"{path}: unknown keys {sorted(unknown_keys)}; known: name, families, k")
    return FeatureSpec(name=str(raw.get("name", path.stem)), families=tuple(families), k=k)
