"""Saved models of either kind behind one interface, and `load_model` that reads them.

A model directory holds a single booster (`xlarank.rank.ranker.Ranker`) or an ensemble of
them (`xlarank.rank.ensemble.Ensemble`); its ``card.json`` says which. Scoring, evaluation
and reports use only the `Model` interface below, so they never ask which kind they hold.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from xlarank.errors import ArgumentTypeError
from xlarank.features.spec import FeatureSpec
from xlarank.frame import FrameMeta
from xlarank.rank.ensemble import ENSEMBLE_KIND, Ensemble
from xlarank.rank.ranker import Ranker, read_card


class Model(Protocol):
    """What a `Ranker` and an `Ensemble` both offer."""

    # Collection, feature spec, training data, versions; an ensemble's also lists members.
    card: dict

    @property
    def feature_names(self) -> list[str]: ...

    @property
    def feature_spec(self) -> FeatureSpec:
        """The spec to featurize new graphs with."""

    @property
    def first_member(self) -> Ranker:
        """The ranker itself, or an ensemble's first member: a single booster, whose
        `Ranker.predict` takes a number of rounds (for learning curves)."""

    def check_frame(self, meta: FrameMeta, where: str = "frame") -> None:
        """Refuse a frame of another feature spec or collection."""

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """float64 (n_rows,): one score per row of a frame holding the model's features
        (and graph_id), higher means faster."""

    def importance(self) -> pd.Series:
        """float64 gain (a ranker's total, an ensemble's mean share) per feature, largest
        first."""

    def save(self, directory: str | Path) -> Path:
        """Write the model directory, replacing it whole."""


def load_model(directory: str | Path) -> Model:
    """The `Ranker` or `Ensemble` saved in a directory (TypeError for a ``directory``
    that is not a path)."""
    if not isinstance(directory, str | os.PathLike):
        raise ArgumentTypeError(f"load_model: expected a model directory (str or Path), got "
                        f"{type(directory).__name__}")
    directory = Path(directory)
    card = read_card(directory)
    if card.get("kind") == ENSEMBLE_KIND:
        return Ensemble.load(directory, card)
    return Ranker.load(directory, card)
