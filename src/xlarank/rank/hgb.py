"""scikit-learn's HistGradientBoostingRegressor as plain arrays: the fitted trees copied
out of the estimator, saved as an npz of numbers and names (``model.npz``), and scored by
xlarank's own tree walk (`xlarank.kernels.trees.forest_predict`).

Why not a pickle, scikit-learn's own way to save an estimator: unpickling runs whatever
code the file names, and a model folder is something users hand each other (the card's
checksum protects nothing there, since whoever writes the folder writes the card too).
Why not skops: a further dependency whose loader still rebuilds Python objects from a
list of trusted types, tied to scikit-learn's private classes of one version. A fitted
regressor is a baseline and, per tree, a few node arrays (feature, threshold, where NaN
goes, children, leaf value); those are saved as numbers, checked on load (every child
inside its tree and after its parent, every split on a known feature), and walked in
the same order scikit-learn walks them, so the scores are the estimator's to the bit.
Nothing in the file can run, and a model loads whatever scikit-learn is installed.
"""

from __future__ import annotations

import io
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from xlarank.errors import BadGraphError, BadModelError, XlarankError

# Bump when the arrays change; a file of another format is refused.
HGB_FORMAT = 1
# The arrays of model.npz and their dtypes; the per-node ones share one length.
_NODE_ARRAYS = {"feature": np.int64, "threshold": np.float64, "missing_left": np.uint8,
                "left": np.int64, "right": np.int64, "value": np.float64,
                "is_leaf": np.uint8, "gain": np.float64, "count": np.int64}
_ARRAYS = {"format": np.int64, "baseline": np.float64, "starts": np.int64,
           **_NODE_ARRAYS}
# The most trees (a spec's num_rounds) and nodes per tree (2 x 131,072 leaves - 1).
MAX_TREES = 100_000
MAX_TREE_NODES = 2 * 131_072 - 1
# How many times its own size a model.npz's arrays may inflate to. A saved forest's node
# arrays inflate 3 to 4 times (each node's float64 values hardly compress), its names up
# to some 20 times; deflate can inflate 1,032 times, which only a crafted file asks for.
MAX_INFLATION = 64


@dataclass
class HgbForest:
    """The fitted trees of a HistGradientBoostingRegressor (squared error, one tree per
    iteration): ``baseline`` float, ``starts`` int64 (trees + 1,) and the per-node arrays
    of `_NODE_ARRAYS` (tree t's nodes at starts[t]:starts[t + 1], children numbered
    within the tree), and the feature names in column order."""

    feature_names: list[str]
    baseline: float
    arrays: dict[str, np.ndarray]

    @classmethod
    def from_estimator(cls, model) -> HgbForest:
        """The trees of a fitted estimator, copied out."""
        if model.n_trees_per_iteration_ != 1:
            raise XlarankError("the sklearn booster saves regressors of one tree per "
                               "iteration only")
        trees = [predictors[0].nodes for predictors in model._predictors]
        nodes = np.concatenate(trees)
        if nodes["is_categorical"].any():
            raise XlarankError("the sklearn booster saves numeric splits only, not "
                               "categorical ones")
        starts = np.concatenate([[0], np.cumsum([len(t) for t in trees])]).astype(np.int64)
        arrays = {"starts": starts, "feature": nodes["feature_idx"],
                  "threshold": nodes["num_threshold"],
                  "missing_left": nodes["missing_go_to_left"], "left": nodes["left"],
                  "right": nodes["right"], "value": nodes["value"],
                  "is_leaf": nodes["is_leaf"], "gain": nodes["gain"],
                  "count": nodes["count"]}
        arrays = {k: np.ascontiguousarray(v, dtype=_ARRAYS[k]) for k, v in arrays.items()}
        baseline = float(np.asarray(model._baseline_prediction).reshape(-1)[0])
        names = [str(n) for n in getattr(model, "feature_names_in_", [])]
        return cls(feature_names=names, baseline=baseline, arrays=arrays)

    @property
    def n_trees(self) -> int:
        return len(self.arrays["starts"]) - 1

    def predict(self, x: np.ndarray, rounds: int | None = None) -> np.ndarray:
        """float64 (rows,): scores of x (rows, features) from the first ``rounds`` trees
        (all when None or more)."""
        from xlarank.kernels.trees import forest_predict

        if rounds is not None and rounds < 1:
            raise XlarankError(f"rounds must be at least 1, not {rounds}")
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.feature_names):
            raise XlarankError(f"the sklearn booster takes {len(self.feature_names)} "
                               f"feature columns, not {x.shape[1:]}")
        n = self.n_trees if rounds is None else min(rounds, self.n_trees)
        a = self.arrays
        return forest_predict(x, a["starts"], a["feature"], a["threshold"],
                              a["missing_left"], a["left"], a["right"], a["value"],
                              a["is_leaf"], self.baseline, n)

    def importance(self) -> pd.Series:
        """float64 total split gain per feature name (0 for unused ones), unsorted."""
        split = self.arrays["is_leaf"] == 0
        gain = np.zeros(len(self.feature_names))
        np.add.at(gain, self.arrays["feature"][split], self.arrays["gain"][split])
        return pd.Series(gain, index=self.feature_names, dtype=np.float64)

    def save(self, path: Path) -> None:
        """Write model.npz: plain arrays only, in a fixed order with fixed timestamps, so
        one forest always gives the same bytes."""
        arrays = {"format": np.array([HGB_FORMAT], np.int64),
                  "feature_names": np.array(self.feature_names, dtype=str),
                  "baseline": np.array([self.baseline], np.float64), **self.arrays}
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for key, array in arrays.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(array),
                                          allow_pickle=False)
                archive.writestr(zipfile.ZipInfo(f"{key}.npy", (1980, 1, 1, 0, 0, 0)),
                                 buffer.getvalue(), compress_type=zipfile.ZIP_DEFLATED)

    @classmethod
    def load(cls, path: Path) -> HgbForest:
        """The forest in a model.npz, after checking every array (BadModelError): the file
        holds numbers and names only (nothing to unpickle), each tree's children lie inside
        it and after their parent (so every walk ends at a leaf), every split is on a
        known feature."""
        from xlarank.data.npzstream import NpzStream

        path = Path(path)
        try:
            with NpzStream(path) as npz:
                wanted = set(_ARRAYS) | {"feature_names"}
                if npz.keys != wanted:
                    raise BadModelError(f"{path}: not an xlarank sklearn model (arrays "
                                        f"{sorted(npz.keys)}, expected {sorted(wanted)})")
                _check_headers(path, {key: npz.header(key) for key in sorted(wanted)})
                raw = {key: npz.read(key) for key in sorted(wanted)}
        except BadGraphError as exc:
            raise BadModelError(f"{path}: not a readable sklearn model ({exc.fault})") from None
        return cls._checked(path, raw)

    @classmethod
    def _checked(cls, path: Path, raw: dict[str, np.ndarray]) -> HgbForest:
        def bad(why: str) -> BadModelError:
            return _damaged(path, why)

        names = raw["feature_names"]
        if raw["format"].tolist() != [HGB_FORMAT]:
            raise bad(f"format {raw['format'].tolist()}, this xlarank reads [{HGB_FORMAT}]")
        if len(raw["baseline"]) != 1 or not np.isfinite(raw["baseline"][0]):
            raise bad("baseline is not one finite number")
        starts = raw["starts"]
        n_nodes = len(raw["feature"])
        sizes = np.diff(starts)
        if (starts[0] != 0 or starts[-1] != n_nodes or (sizes < 1).any()
                or (sizes > MAX_TREE_NODES).any()):
            raise bad("its tree boundaries (starts) do not cut the nodes into trees")
        tree_of = np.repeat(np.arange(len(sizes)), sizes)
        local = np.arange(n_nodes) - starts[tree_of]
        size = sizes[tree_of]
        split = raw["is_leaf"] == 0
        if not np.isin(raw["is_leaf"], (0, 1)).all() or not np.isin(raw["missing_left"],
                                                                    (0, 1)).all():
            raise bad("is_leaf or missing_left is not 0 or 1")
        for child in ("left", "right"):
            c = raw[child][split]
            if ((c <= local[split]) | (c >= size[split])).any():
                raise bad(f"a {child} child lies outside its tree or before its parent")
        feature = raw["feature"][split]
        if ((feature < 0) | (feature >= len(names))).any():
            raise bad("a split is on a feature it does not have")
        # A split on NaNs alone has the threshold +inf (scikit-learn's grower); no other
        # threshold is infinite.
        threshold = raw["threshold"][split]
        if (np.isnan(threshold) | (threshold == -np.inf)).any():
            raise bad("a split threshold is NaN or -inf")
        for key in ("value", "gain"):
            if not np.isfinite(raw[key]).all():
                raise bad(f"a node's {key} is not finite")
        arrays = {key: np.ascontiguousarray(raw[key]) for key in ("starts", *_NODE_ARRAYS)}
        return cls(feature_names=[str(n) for n in names], baseline=float(raw["baseline"][0]),
                   arrays=arrays)


def _damaged(path: Path, why: str) -> BadModelError:
    return BadModelError(f"{path}: damaged sklearn model: {why}; retrain it")


def _check_headers(path: Path, headers: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    """The arrays of a model.npz as their .npy headers give them (shape, dtype), checked
    before any is inflated (BadModelError): each of its dtype and 1-d, at least one tree
    and at most MAX_TREES, one length for the node arrays, and no more bytes in all than
    MAX_INFLATION times the file's size."""
    for key, dtype in _ARRAYS.items():
        shape, found = headers[key]
        if found != np.dtype(dtype) or len(shape) != 1:
            raise _damaged(path, f"{key} is not a 1-d {np.dtype(dtype)} array")
    shape, found = headers["feature_names"]
    if found.kind != "U" or len(shape) != 1 or shape[0] == 0:
        raise _damaged(path, "feature_names is not a list of names")
    trees = headers["starts"][0][0] - 1
    if not 1 <= trees <= MAX_TREES:
        raise _damaged(path, f"it holds {max(trees, 0):,} trees, not 1 to {MAX_TREES:,}")
    if len({headers[key][0] for key in _NODE_ARRAYS}) != 1:
        raise _damaged(path, "its node arrays differ in length")
    inflated = sum(math.prod(shape) * found.itemsize for shape, found in headers.values())
    size = path.stat().st_size
    if inflated > MAX_INFLATION * size:
        raise _damaged(path, f"its arrays would inflate to {inflated:,} bytes from "
                             f"{size:,}, more than a saved forest does")
