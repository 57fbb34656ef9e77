"""A trained booster with its card, saved as a directory, and the card file itself.

A saved ranker is a directory: the booster's native file (``model.txt`` for LightGBM,
``model.json`` for XGBoost; the adapter in `xlarank.rank.boosters` names it) and
``card.json``, which records the collection, the library and objective, the feature spec
(name, hash, feature names), the seed, package versions, a summary of the training data
and, when given, validation metrics. `xlarank.rank.model.load_model` reads a ranker or an
ensemble of them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank import __version__
from xlarank.atomic import atomic_dir
from xlarank.errors import MismatchError
from xlarank.features.spec import FeatureSpec
from xlarank.files import read_structured
from xlarank.frame import FrameMeta
from xlarank.rank.boosters import BoosterLibrary, get_library

# Bump when the saved layout changes; a card of a higher format is refused.
MODEL_FORMAT = 1
CARD_FILE = "card.json"
# Trained weights of an embedding family, copied beside the model: family to file name.
WEIGHTS_FILES = {"gnn": "gnn_weights.npz", "gru": "gru_weights.npz"}


def read_card(directory: Path) -> dict:
    """The card of a saved ranker or ensemble, refused if a newer xlarank wrote it."""
    card = read_structured(directory / CARD_FILE, "model card",
                           missing_hint="; train a model with 'xlarank train'")
    if card.get("format", 0) > MODEL_FORMAT:
        raise MismatchError(f"{directory}: model of format {card.get('format')} was written by "
                            f"a newer xlarank ({card.get('versions', {}).get('xlarank')}); "
                            f"this is {__version__}, which reads format {MODEL_FORMAT}")
    return card


def write_card(directory: Path, card: dict) -> None:
    (directory / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")


@dataclass
class Ranker:
    """A trained booster and its card; `predict` scores rows, higher means faster."""

    card: dict
    booster: object
    # Where the ranker was loaded from: a weights file the card names relative to it.
    directory: Path | None = None

    @classmethod
    def load(cls, directory: str | Path, card: dict | None = None) -> Ranker:
        """The ranker saved in a directory; ``card`` when its card is read already."""
        directory = Path(directory)
        card = read_card(directory) if card is None else card
        booster = get_library(card["library"]).load(directory / card["model_file"])
        return cls(card=card, booster=booster, directory=directory)

    @property
    def library(self) -> BoosterLibrary:
        return get_library(self.card["library"])

    @property
    def feature_names(self) -> list[str]:
        return self.card["features"]["names"]

    @property
    def feature_spec(self) -> FeatureSpec:
        """The spec to featurize new graphs with; its hash is the one the model saw."""
        features = self.card["features"]
        spec = FeatureSpec.from_dict({**features, **{family: self._weights_source(family)
                                                     for family in WEIGHTS_FILES}})
        if spec.hash != features["hash"]:
            raise MismatchError(f"model's feature spec (hash {features['hash']}) "
                                f"is not this xlarank's (hash {spec.hash}); retrain the model")
        return spec

    @property
    def first_member(self) -> Ranker:
        """The single booster behind the scores: the ranker itself."""
        return self

    def check_frame(self, meta: FrameMeta, where: str = "frame") -> None:
        """Refuse a frame of another feature spec or collection."""
        card = self.card
        if meta.spec_hash != card["features"]["hash"]:
            raise MismatchError(
                f"{where}: feature spec {meta.spec['name']!r} (hash {meta.spec_hash}) differs "
                f"from the model's {card['features']['name']!r} "
                f"(hash {card['features']['hash']}); featurize with the model's spec")
        if meta.collection != card["collection"]:
            raise MismatchError(f"{where}: collection {meta.collection}, but the model was "
                                f"trained on {card['collection']}")

    @property
    def rounds(self) -> int:
        """Boosting rounds in the trained booster."""
        return self.library.rounds(self.booster)

    def predict(self, frame: pd.DataFrame, rounds: int | None = None) -> np.ndarray:
        """float64 (n_rows,): one score per row of a frame holding the model's features,
        from the first ``rounds`` boosting rounds (all when None)."""
        x = frame[self.feature_names].to_numpy(dtype=np.float32)
        return self.library.predict(self.booster, x, self.feature_names, rounds)

    def importance(self) -> pd.Series:
        """Total split gain of each feature (0 for unused ones), largest first."""
        gain = self.library.importance(self.booster, self.feature_names)
        return gain.sort_values(ascending=False)

    def _weights_source(self, family: str) -> str | None:
        """The family's weights the features need: random:SEED, or a file's full path."""
        source = self.card["features"].get(family)
        if source is None or source.startswith("random:") or Path(source).is_absolute():
            return source
        return str((self.directory or Path(".")) / source)

    def save(self, directory: str | Path) -> Path:
        """Write model file and card (and trained gnn or gru weights, copied beside them, so
        the model scores without the original file); the directory is replaced whole."""
        directory = Path(directory)
        card = self.card
        with atomic_dir(directory) as tmp:
            self.library.save(self.booster, tmp / card["model_file"])
            for family, name in WEIGHTS_FILES.items():
                source = (self._weights_source(family)
                          if family in card["features"]["families"] else None)
                if source is not None and not source.startswith("random:"):
                    shutil.copyfile(source, tmp / name)
                    card = {**card, "features": {**card["features"], family: name}}
            write_card(tmp, card)
        self.card, self.directory = card, directory
        return directory
