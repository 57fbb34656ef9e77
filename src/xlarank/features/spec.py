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
FEATURE_SCHEMA_VERSION = 1

FAMILIES = {
    "graph": "graph size, opcode histogram and node-feature aggregates (one value per graph)",
    "config_raw": "the config columns themselves; layout: their mean over configurable nodes",
    "config_joined": "configs joined with the graph's shapes: padding, alignment, relayouts",
}


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    families: tuple[str, ...]

    @property
    def hash(self) -> str:
        """Names the columns a frame of this spec has; 16 hex digits."""
        content = json.dumps({"families": sorted(self.families),
                              "schema": FEATURE_SCHEMA_VERSION}, sort_keys=True)
        return hashlib.sha256(content.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"name": self.name, "families": list(self.families), "hash": self.hash,
                "schema": FEATURE_SCHEMA_VERSION}


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
    return FeatureSpec(name=str(raw.get("name", path.stem)), families=tuple(families))
