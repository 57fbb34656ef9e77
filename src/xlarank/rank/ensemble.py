"""Ensembles of rankers: boosters and seeds whose scores are averaged per graph.

Each member's scores are min-max normalized within each graph before averaging, so members
whose scores live on different scales (a LambdaRank margin, a regressed log slowdown) weigh
alike; public TpuGraphs solutions found this beats averaging ranks. An ensemble is saved as a
directory holding ``card.json`` (kind "ensemble") and one ranker directory per member under
``members/``; `xlarank.rank.model.load_model` reads either kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.atomic import atomic_dir
from xlarank.errors import BadModelError, MismatchError, SpecError, XlarankError
from xlarank.features.spec import FeatureSpec
from xlarank.files import read_structured
from xlarank.frame import FrameMeta
from xlarank.rank.ranker import CARD_FILE, ENSEMBLE_KIND, MODEL_FORMAT, Ranker, write_card
from xlarank.rank.spec import RankerSpec, check_seeds, load_ranker_spec


def per_graph_minmax(score: np.ndarray, graph_ids: np.ndarray) -> np.ndarray:
    """float64 (n_rows,): each graph's scores mapped onto [0, 1]; 0.5 where a graph's
    scores are all equal. score (n_rows,), graph_ids (n_rows,) in any order."""
    groups = pd.Series(score, dtype=np.float64).groupby(graph_ids, sort=False)
    low, high = groups.transform("min").to_numpy(), groups.transform("max").to_numpy()
    span = high - low
    return np.where(span > 0, (score - low) / np.where(span > 0, span, 1.0), 0.5)


def average_normalized(scores: list[np.ndarray], graph_ids: np.ndarray) -> np.ndarray:
    """float64 (n_rows,): mean over members of `per_graph_minmax` scores."""
    if not scores:
        raise XlarankError("an ensemble needs at least one member")
    return np.mean([per_graph_minmax(s, graph_ids) for s in scores], axis=0)


@dataclass
class Ensemble:
    """Members of one collection and feature spec; `predict` like `Ranker.predict`."""

    card: dict
    members: list[Ranker]

    @classmethod
    def load(cls, directory: Path, card: dict) -> Ensemble:
        """The ensemble saved in a directory whose card (kind "ensemble") is read already."""
        dirs = [member_dir(entry, directory) for entry in card["members"]]
        if len({Path(d).parts for d in dirs}) != len(dirs):
            raise BadModelError(f"{directory}: ensemble card lists one member more than "
                                "once; the card was altered")
        members = [Ranker.load(directory / d) for d in dirs]
        if not members:
            raise BadModelError(f"{directory}: ensemble card lists no members")
        for member in members:
            if (member.card["features"]["hash"] != members[0].card["features"]["hash"]
                    or member.card["collection"] != card["collection"]):
                raise BadModelError(f"{directory}: ensemble members of different feature "
                                    "specs or collections; the card was altered")
        # The card's own features block is read too (scoring's reports, evaluation): it
        # must be its members' (their weights fields aside: a saved member names its copy).
        own, theirs = card["features"], members[0].card["features"]
        altered = [key for key in ("name", "families", "k", "hash", "names", "schema")
                   if own.get(key) != theirs.get(key)]
        if altered:
            raise BadModelError(f"{directory / CARD_FILE}: card field features.{altered[0]} "
                                "is not its members'; the card was altered")
        return cls(card=card, members=members)

    @property
    def first_member(self) -> Ranker:
        """The first member; its learning curve stands for the ensemble's."""
        return self.members[0]

    @property
    def feature_names(self) -> list[str]:
        return self.first_member.feature_names

    @property
    def feature_spec(self) -> FeatureSpec:
        return self.first_member.feature_spec

    def check_frame(self, meta: FrameMeta, where: str = "frame") -> None:
        """Refuse a frame of another feature spec or collection (the members share both)."""
        self.first_member.check_frame(meta, where)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """float64 (n_rows,) in [0, 1], higher means faster; frame needs graph_id."""
        graph_ids = frame["graph_id"].to_numpy()
        return average_normalized([m.predict(frame) for m in self.members], graph_ids)

    def importance(self) -> pd.Series:
        """Mean over members of each member's gains as shares of its total, largest first."""
        gains = [m.importance() for m in self.members]
        shares = [g / max(g.sum(), 1e-300) for g in gains]
        return pd.concat(shares, axis=1).fillna(0.0).mean(axis=1).sort_values(ascending=False)

    def save(self, directory: str | Path) -> Path:
        """Write members and card; the directory is replaced whole, never half-updated."""
        directory = Path(directory)
        with atomic_dir(directory) as tmp:
            for entry, member in zip(self.card["members"], self.members):
                member.save(tmp / entry["dir"])
            write_card(tmp, self.card)
        return directory


def member_dir(entry: object, directory: Path) -> str:
    """A member's folder as the ensemble card gives it, refused unless it is a relative
    path that stays inside the ensemble directory."""
    path = entry.get("dir") if isinstance(entry, dict) else None
    parts = Path(path).parts if isinstance(path, str) and path else ()
    if not parts or Path(path).is_absolute() or any(p in ("..", ".") for p in parts):
        raise BadModelError(f"{directory}: ensemble member {entry!r} needs a dir inside the "
                            "ensemble directory, such as members/00")
    return path


def ensemble_card(members: list[Ranker]) -> dict:
    """The card of an ensemble of trained members (one collection, one feature spec)."""
    first = members[0].card
    for member in members[1:]:
        if member.card["features"]["hash"] != first["features"]["hash"]:
            raise MismatchError("ensemble members must share one feature spec; got "
                                f"{first['features']['name']!r} and "
                                f"{member.card['features']['name']!r}")
        if member.card["collection"] != first["collection"]:
            raise MismatchError("ensemble members must share one collection")
    seconds = [m.card.get("train_seconds") for m in members]
    return {
        "format": MODEL_FORMAT,
        "kind": ENSEMBLE_KIND,
        "collection": first["collection"],
        "normalization": "per-graph min-max, then mean over members",
        "members": [{"dir": f"members/{i:02d}", "name": m.card["spec"]["name"],
                     "library": m.card["library"], "objective": m.card["objective"],
                     "seed": m.card["seed"]} for i, m in enumerate(members)],
        "features": first["features"],
        "training_data": first["training_data"],
        "train_seconds": None if None in seconds else round(sum(seconds), 3),
        "engine": first["engine"],
        "versions": first["versions"],
    }


def train_ensemble(specs: list[RankerSpec], seeds: list[int] | None,
                   train_one: Callable[[RankerSpec], Ranker]) -> Ensemble:
    """One member per (spec, seed), in that order, each from ``train_one`` (e.g. a
    `xlarank.rank.train.train_ranker` bound to a frame, or its Dask twin). ``seeds`` None
    keeps each spec's."""
    members = [train_one(dataclasses.replace(spec, seed=seed)) for spec in specs
               for seed in (seeds or [spec.seed])]
    return Ensemble(card=ensemble_card(members), members=members)


def load_training_plan(path: str | Path) -> tuple[list[RankerSpec], list[int] | None]:
    """The booster specs and seeds a spec file asks for.

    A booster spec gives ([spec], None). An ensemble spec (``kind = "ensemble"``) lists
    ``members``, booster spec paths relative to it, and optionally ``seeds``; every member
    is trained with every seed (None: each member's own seed).
    """
    path = Path(path)
    raw = read_structured(path, "booster spec", SpecError)
    if not isinstance(raw, dict) or raw.get("kind") != ENSEMBLE_KIND:
        return [load_ranker_spec(path)], None
    members, seeds = raw.get("members"), raw.get("seeds")
    if not isinstance(members, list) or not members or not all(isinstance(m, str)
                                                                for m in members):
        raise SpecError(f"{path}: an ensemble spec needs members, a list of spec paths")
    if seeds is not None:
        if not isinstance(seeds, list):
            raise SpecError(f"{path}: seeds must be a list of distinct integers")
        seeds = check_seeds(seeds, f"{path}: seeds")
    unknown = set(raw) - {"kind", "name", "members", "seeds"}
    if unknown:
        raise SpecError(f"{path}: unknown keys in an ensemble spec: {', '.join(sorted(unknown))}")
    return [load_ranker_spec(path.parent / m) for m in members], seeds
