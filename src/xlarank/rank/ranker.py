"""A trained booster with its card, saved as a directory, and the card file itself.

A saved ranker is a directory: the booster's native file (``model.txt`` for LightGBM,
``model.json`` for XGBoost, ``model.npz`` of plain arrays for scikit-learn; the adapter in
`xlarank.rank.boosters` names it, and no other file is read as a booster) and
``card.json``, which records the collection, the library and objective, the feature spec
(name, hash, feature names), the seed, package versions, a summary of the training data
and, when given, validation metrics. `xlarank.rank.model.load_model` reads a ranker or an
ensemble of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank import __version__
from xlarank.atomic import atomic_dir
from xlarank.data.collections import COLLECTIONS
from xlarank.errors import BadModelError, MismatchError
from xlarank.features.spec import (
    FEATURE_SCHEMA_VERSION,
    FeatureSpec,
    check_families,
    check_k,
    weighted_families,
)
from xlarank.files import read_structured
from xlarank.frame import FrameMeta
from xlarank.rank.boosters import BOOSTERS, BoosterLibrary, get_library

# Bump when the saved layout changes; a card of a higher format is refused.
MODEL_FORMAT = 1
CARD_FILE = "card.json"
# The "kind" of an ensemble's card (`xlarank.rank.ensemble`); a ranker's card has none.
ENSEMBLE_KIND = "ensemble"


def weights_files() -> dict[str, str]:
    """Trained weights of the families that have them, copied beside the model: the spec's
    weights field (`weighted_families`) to file name."""
    return {field: f"{field}_weights.npz" for field in weighted_families()}


# What every card holds, key by key: a type, or a nested table of the same kind. Cards
# are checked against these before anything reads them, so a hand-edited or truncated card
# gives one BadModelError, never a KeyError or TypeError deep in scoring.
_FEATURES_SHAPE = {"name": str, "families": list, "hash": str, "names": list}
_CARD_SHAPE = {"format": int, "collection": str, "features": _FEATURES_SHAPE,
               "training_data": dict}
RANKER_CARD_SHAPE = {**_CARD_SHAPE, "library": str, "objective": str, "model_file": str,
                     "model_sha256": str}
ENSEMBLE_CARD_SHAPE = {**_CARD_SHAPE, "kind": str, "members": list}


def read_card(directory: Path) -> dict:
    """The card of a saved ranker or ensemble, refused if a newer xlarank wrote it or if
    it lacks a field that loading and scoring read (`check_card_shape`)."""
    # os.path's tests, not Path's: a name too long to look up is "not there", not an
    # OSError (Path.exists raises for ENAMETOOLONG).
    if not os.path.exists(directory / CARD_FILE) and os.path.isdir(directory):
        below = models_below(directory)
        if below:
            raise BadModelError(f"{directory}: not a model directory (no card.json)"
                                f"{describe_models_below(directory, below)}")
    card = read_structured(directory / CARD_FILE, "model card", BadModelError,
                           missing_hint="; train a model with 'xlarank train'")
    where = directory / CARD_FILE
    if not isinstance(card, dict):
        raise BadModelError(f"{where}: a model card is a JSON object, not "
                            f"{type(card).__name__}")
    if isinstance(card.get("format"), int) and card["format"] > MODEL_FORMAT:
        versions = card.get("versions")
        version = versions.get("xlarank") if isinstance(versions, dict) else None
        raise MismatchError(f"{directory}: model of format {card['format']} was written by "
                            f"a newer xlarank ({version}); "
                            f"this is {__version__}, which reads format {MODEL_FORMAT}")
    shape = ENSEMBLE_CARD_SHAPE if card.get("kind") == ENSEMBLE_KIND else RANKER_CARD_SHAPE
    check_card_shape(card, shape, where)
    names = card["features"]["names"]
    if not names or not all(isinstance(n, str) for n in names):
        raise BadModelError(f"{where}: features.names must be a non-empty list of names")
    if card["collection"] not in {c.id for c in COLLECTIONS}:
        raise BadModelError(f"{where}: unknown collection {card['collection']!r}")
    if "kind" in card and card["kind"] != ENSEMBLE_KIND:
        raise BadModelError(f"{where}: card field kind is {card['kind']!r}; an ensemble's "
                            f"is {ENSEMBLE_KIND!r}, a ranker's card has none")
    check_card_features(card["features"], where)
    if shape is RANKER_CARD_SHAPE:
        if card["library"] not in BOOSTERS:
            raise BadModelError(f"{where}: unknown booster library {card['library']!r}; "
                                f"known: {', '.join(BOOSTERS)}")
        objectives = BOOSTERS[card["library"]].objectives
        if card["objective"] not in objectives:
            raise BadModelError(f"{where}: card field objective {card['objective']!r} is not "
                                f"one of {card['library']}'s: {', '.join(objectives)}")
        check_model_file_name(card, where)
    return card


def check_card_features(features: dict, where: Path) -> None:
    """BadModelError unless a card's features block holds what `FeatureSpec.to_dict`
    writes: this xlarank's feature schema (an older one: MismatchError, retrain), ``k`` in
    0..8 and the registry's families, each once (`check_families`)."""
    schema = features.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) \
            and 0 < schema < FEATURE_SCHEMA_VERSION:
        raise MismatchError(f"{where}: model of feature schema {schema}, this xlarank "
                            f"makes {FEATURE_SCHEMA_VERSION}; retrain the model")
    if schema != FEATURE_SCHEMA_VERSION or isinstance(schema, bool):
        raise BadModelError(f"{where}: card field features.schema is {schema!r}, not this "
                            f"xlarank's feature schema {FEATURE_SCHEMA_VERSION}; the card "
                            "was altered")
    check_k(features.get("k"), f"{where}: card field features", BadModelError)
    check_families(features["families"], f"{where}: card field features",
                   BadModelError)


# Model files that could carry code (a pickle runs what it names when it is read): never
# read, whatever the card says.
CODE_CARRYING_SUFFIXES = (".pkl", ".pickle", ".joblib", ".dill", ".cloudpickle")


def check_model_file_name(card: dict, where: Path) -> None:
    """BadModelError unless the card names its library's own model file (model.txt,
    model.json or model.npz): a card cannot make xlarank read a pickle, or any other
    file, as a booster."""
    library = BOOSTERS[card["library"]]
    name = card["model_file"]
    if name.lower().endswith(CODE_CARRYING_SUFFIXES):
        raise BadModelError(f"{where}: the model file {name!r} is a pickle, which can run "
                            "code when read; xlarank reads no pickles (a sklearn model saved "
                            "by an older xlarank): retrain the model")
    if name != library.model_file:
        raise BadModelError(f"{where}: a {library.name} model's file is "
                            f"{library.model_file!r}, not {name!r}; the card was altered")


def models_below(folder: Path, depth: int = 4, limit: int = 2000) -> list[Path]:
    """Model directories (holding card.json) below ``folder``, at most ``depth`` levels
    down, not inside one another, sorted; the walk stops after ``limit`` folders."""
    found, seen = [], 0
    for root, dirs, files in os.walk(folder):
        seen += 1
        here = Path(root)
        if CARD_FILE in files and here != folder:
            found.append(here)
            dirs.clear()
        elif len(here.relative_to(folder).parts) >= depth or seen > limit:
            dirs.clear()
        dirs.sort()
    return sorted(found)


def describe_models_below(folder: Path, below: list[Path]) -> str:
    """'; found ...' naming the model directories below a folder and the folders that
    hold them, or a hint to train one when there are none."""
    if not below:
        return "; train a model with 'xlarank train'"
    parents = sorted({str(p.parent) for p in below})
    shown = ", ".join(str(p.relative_to(folder)) for p in below[:4])
    more = f" and {len(below) - 4} more" if len(below) > 4 else ""
    return (f"; found {len(below)} model folder(s) below it ({shown}{more}) in "
            f"{len(parents)} folder(s): pass one model directory, or for score and submit "
            f"the folder that holds one per collection, such as {parents[0]}")


_TYPE_WORDS = {int: "an integer", str: "a string", list: "a list", dict: "a table"}


def check_card_shape(card: dict, shape: dict, where: Path | str, prefix: str = "") -> None:
    """Raise BadModelError unless ``card`` has every key of ``shape`` with its type."""
    for key, wanted in shape.items():
        value = card.get(key)
        kind = dict if isinstance(wanted, dict) else wanted
        # bool is an int to Python, never to a card.
        if not isinstance(value, kind) or isinstance(value, bool):
            what = "missing" if key not in card else f"not {_TYPE_WORDS[kind]}"
            hint = ("; it was saved by an older xlarank, retrain it" if key == "model_sha256"
                    and key not in card else "")
            raise BadModelError(f"{where}: card field {prefix}{key} is {what}{hint}")
        if isinstance(wanted, dict):
            check_card_shape(value, wanted, where, f"{prefix}{key}.")


def plain_name(name: str, where: Path | str, what: str) -> str:
    """``name`` if it names a file inside its folder (no separator, not . or ..), else
    BadModelError: paths read from a card never leave the model directory."""
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        raise BadModelError(f"{where}: {what} {name!r} must be a file name inside the model "
                            "directory")
    return name


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_model_file(directory: Path, card: dict) -> tuple[Path, bytes]:
    """The booster file a card names and its bytes, read once, after checking they are
    the ones saved with the card. That shows damage; a crafted file with a matching
    sha256 is caught by the adapter's own checks (`xlarank.rank.booster_files`), since
    whoever writes a folder writes its card too."""
    where = directory / CARD_FILE
    path = directory / plain_name(card["model_file"], where, "model_file")
    try:
        if not path.is_file():  # a FIFO or a device would hang or never end
            raise FileNotFoundError
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadModelError(f"{path}: model file missing or not a regular file; retrain the "
                            "model or copy the whole model directory") from None
    except OSError as exc:
        raise BadModelError(f"{path}: model file cannot be read ({exc.strerror})") from None
    found = hashlib.sha256(raw).hexdigest()
    if found != card["model_sha256"]:
        raise BadModelError(f"{path}: model file is not the one saved with {where} (sha256 "
                            f"{found[:16]}..., card says {card['model_sha256'][:16]}...): "
                            "truncated, altered or copied from another model; retrain it")
    return path, raw


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
        if card.get("kind") == ENSEMBLE_KIND:
            # An ensemble's member that is an ensemble (a copy, a link to itself or to
            # another): members are rankers, so no cycle can be followed.
            raise BadModelError(f"{directory}: an ensemble where a ranker belongs (an "
                                "ensemble's members are rankers); the card was altered")
        library = get_library(card["library"])
        booster = library.load(*checked_model_file(directory, card))
        names = library.feature_names(booster)
        if names != card["features"]["names"]:
            raise BadModelError(f"{directory / CARD_FILE}: the card's "
                                f"{len(card['features']['names'])} feature names are not the "
                                f"{len(names)} the booster was trained on, in its order; the "
                                "card was altered")
        ranker = cls(card=card, booster=booster, directory=directory)
        for family in weights_files():  # a weights path outside the directory: refused now
            ranker._weights_source(family)
        return ranker

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
        try:
            spec = FeatureSpec.from_dict({**features, **{family: self._weights_source(family)
                                                         for family in weights_files()}})
            spec.hash  # noqa: B018 (families or k of the wrong type fail here)
        except (TypeError, ValueError) as exc:
            raise BadModelError(f"{self.directory}: card field features is malformed "
                                f"({exc})") from None
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
        # The hash says which spec made the frame; the names say what it still holds.
        absent = [n for n in self.feature_names if n not in set(meta.feature_names)]
        if absent:
            raise MismatchError(f"{where}: lacks {len(absent)} of the model's feature "
                                f"column(s), e.g. {absent[0]!r}; featurize with the model's "
                                "spec")

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
        if source is not None and not isinstance(source, str):
            raise BadModelError(f"card field features.{family} must be a string, not "
                                f"{source!r}")
        if source is None or source.startswith("random:") or self.directory is None:
            return source
        # A saved model keeps its weights beside the card (`save`): a card naming any
        # other path is refused, so it cannot make xlarank read files outside the model.
        where = self.directory / CARD_FILE
        return str(self.directory / plain_name(source, where, f"features.{family}"))

    def save(self, directory: str | Path) -> Path:
        """Write model file and card (and trained gnn or gru weights, copied beside them, so
        the model scores without the original file); the directory is replaced whole."""
        directory = Path(directory)
        card = self.card
        with atomic_dir(directory) as tmp:
            self.library.save(self.booster, tmp / card["model_file"])
            # Checked at load (`checked_model_file`) before the library reads the file.
            card = {**card, "model_sha256": file_sha256(tmp / card["model_file"])}
            for family, name in weights_files().items():
                source = (self._weights_source(family)
                          if weighted_families()[family].name in card["features"]["families"]
                          else None)
                if source is not None and not source.startswith("random:"):
                    shutil.copyfile(source, tmp / name)
                    card = {**card, "features": {**card["features"], family: name}}
            write_card(tmp, card)
        self.card, self.directory = card, directory
        return directory
