"""Saved LightGBM and XGBoost boosters scored by xlarank's own tree walk, without the
library: a model.txt or model.json read into flat node arrays (`BoosterForest`) and walked
by the Numba kernels of `xlarank.kernels.booster_walk`, which follow each library's own
split rules and summation, so the scores are the library's ``predict`` to the bit.

What the walk scores is what xlarank trains: one output per row, numeric splits, and an
objective whose ``predict`` is the raw score (LightGBM lambdarank, rank_xendcg, plain
regression; XGBoost rank:ndcg, rank:pairwise, rank:map, reg:squarederror). Anything else
(categorical or linear trees, several classes or targets, DART weights, a transformed
output) raises `ForestWalkUnsupported`, naming it, so that the caller scores that model
with its library instead. A file whose structure is broken raises BadModelError, as the
library's loader does; the parsers here check only what the walk relies on (every split
on a known feature, every child inside its tree and after its parent), not everything
`xlarank.rank.booster_files` checks before a library reads a file.

Why categorical splits are not walked: LightGBM's ``CategoricalDecision`` turns the value
into an int with ``static_cast<int>``, whose result for NaN and out-of-range values is the
processor's (x86 gives INT_MIN, ARM saturates), so no walk matches it everywhere; xlarank
trains no categorical features anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from xlarank.errors import BadModelError, XlarankError

# Objectives whose predict() is the raw score (no link function, no sqrt).
LIGHTGBM_OBJECTIVES = ("lambdarank", "rank_xendcg", "regression")
XGBOOST_OBJECTIVES = ("rank:ndcg", "rank:pairwise", "rank:map", "reg:squarederror")
# The node arrays of each library's forest and their dtypes (the layout of
# `xlarank.kernels.booster_walk`): feature (-1 for a leaf), threshold (a leaf's value),
# left (the right child is the next node), flags (LightGBM's decision_type bits: 2 default
# left, 4-8 the missing type). XGBoost keeps its thresholds and leaves in float32, as it
# compares and adds them.
_LIGHTGBM_NODES = {"feature": np.int32, "threshold": np.float64, "left": np.int32,
                   "flags": np.uint8}
_XGBOOST_NODES = {"feature": np.int32, "threshold": np.float32, "left": np.int32,
                  "flags": np.uint8}
# Node numbers and feature columns are int32 in the kernels.
_MAX_INDEX = 2**31 - 2


class ForestWalkUnsupported(XlarankError):
    """A saved booster the forest walk does not score exactly: ``feature`` says what (a
    categorical split, a linear tree, an objective with a transformed output...). The
    caller scores the model with its library instead."""

    def __init__(self, library: str, feature: str):
        self.library = library
        self.feature = feature
        super().__init__(f"xlarank's forest walk does not score this {library} model "
                         f"({feature}); {library} scores it")

    def __reduce__(self):
        # Rebuilt from its two fields when it crosses from a worker process.
        return (ForestWalkUnsupported, (self.library, self.feature))


@dataclass(frozen=True)
class BoosterForest:
    """The trees of a saved LightGBM or XGBoost booster as flat arrays.

    ``round_starts`` int64 (rounds + 1,): the trees of boosting round i are
    round_starts[i]:round_starts[i + 1]. ``arrays``: ``starts`` int64 (trees + 1,), tree
    t's nodes at starts[t]:starts[t + 1], its root first, and per node the arrays of
    `_LIGHTGBM_NODES` or `_XGBOOST_NODES` (children numbered within their tree, after
    their parent, the right one next to the left one). ``base_score``: XGBoost's float32
    base margin (0 for LightGBM). ``average_output``: LightGBM's random forest mode, whose
    score is the mean of its rounds."""

    library: str
    feature_names: list[str]
    n_features: int
    round_starts: np.ndarray
    arrays: dict[str, np.ndarray]
    base_score: float = 0.0
    average_output: bool = False

    @property
    def n_trees(self) -> int:
        return len(self.arrays["starts"]) - 1

    @property
    def rounds(self) -> int:
        """Boosting rounds, as the library counts them."""
        return len(self.round_starts) - 1

    def predict(self, x: np.ndarray, rounds: int | None = None) -> np.ndarray:
        """float64 (rows,): the library's predict() of x (rows, features) from the first
        ``rounds`` boosting rounds (all when None or 0). x of another dtype than float32
        or float64 is read as float32, as both libraries read it; XGBoost reads float64 as
        float32 too. As in the libraries, LightGBM takes at most the rounds it has, and
        XGBoost refuses more."""
        from xlarank.kernels.booster_walk import lightgbm_predict, xgboost_predict

        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise XlarankError(f"the {self.library} model takes {self.n_features} feature "
                               f"columns, not an array of shape {x.shape}")
        if x.dtype.kind not in "fiub":
            raise XlarankError(f"features must be numbers, not {x.dtype}")
        n_rounds = self._rounds(rounds)
        n_trees = int(self.round_starts[n_rounds])
        a = self.arrays
        if self.library == "xgboost":
            x = np.ascontiguousarray(x, dtype=np.float32)
            return xgboost_predict(x, a["starts"], a["feature"], a["threshold"], a["left"],
                                   a["flags"], np.float32(self.base_score), n_trees)
        if x.dtype not in (np.float32, np.float64):
            x = x.astype(np.float32)
        x = np.ascontiguousarray(x)
        divisor = float(n_rounds) if self.average_output and n_rounds > 0 else 1.0
        return lightgbm_predict(x, a["starts"], a["feature"], a["threshold"], a["left"],
                                a["flags"], n_trees, divisor)

    def _rounds(self, rounds: int | None) -> int:
        if rounds is None or rounds == 0:
            return self.rounds
        if rounds < 0:
            raise XlarankError(f"rounds must be at least 1, not {rounds}")
        if rounds > self.rounds and self.library == "xgboost":
            raise XlarankError(f"rounds {rounds} is more than the model's {self.rounds}")
        return min(rounds, self.rounds)


def load_forest(path: str | Path, raw: bytes | None = None,
                library: str | None = None) -> BoosterForest:
    """The forest of a saved booster file (``raw``: its bytes, when read already);
    ``library`` "lightgbm" or "xgboost", by default from the suffix (.txt LightGBM,
    .json XGBoost)."""
    path = Path(path)
    if library is None:
        library = {".txt": "lightgbm", ".json": "xgboost"}.get(path.suffix)
    if library not in ("lightgbm", "xgboost"):
        raise ForestWalkUnsupported(str(library or "unknown"), f"a model file "
                                    f"{path.name!r} that is not LightGBM's model.txt or "
                                    "XGBoost's model.json")
    raw = path.read_bytes() if raw is None else raw
    return parse_lightgbm(raw, path) if library == "lightgbm" else parse_xgboost(raw, path)


def _bad(where, library: str, why: str) -> BadModelError:
    return BadModelError(f"{where}: not a {library} model the forest walk can read: {why}")


def _nodes(parts: list[dict], dtypes: dict, n_features: int, bad,
           unsupported) -> dict[str, np.ndarray]:
    """The trees' node arrays (int64 and float64, or JSON number tokens for float32 ones)
    joined, after checking that every split is on a feature of x and every child lies
    inside its tree (BadModelError) and after its parent (ForestWalkUnsupported: a tree
    whose nodes are numbered otherwise is the library's to walk), so that every walk ends
    at a leaf of its own tree."""
    sizes = np.array([len(part["left"]) for part in parts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if (sizes < 1).any() or (sizes > _MAX_INDEX).any():
        raise bad("a tree has no nodes, or more than int32 numbers")
    joined = {key: np.concatenate([part[key] for part in parts]) for key in ("feature", "left")}
    tree_of = np.repeat(np.arange(len(sizes)), sizes)
    local = np.arange(starts[-1]) - starts[tree_of]
    split = joined["feature"] >= 0
    left = joined["left"][split]
    if ((left < 0) | (left + 1 >= sizes[tree_of][split])).any():
        raise bad("a child lies outside its tree")
    if (joined["feature"][split] >= n_features).any():
        raise bad("a split is on a feature it does not have")
    if (left <= local[split]).any():
        raise unsupported("a tree whose children are numbered before their parent")
    arrays = {"starts": starts}
    for key, dtype in dtypes.items():
        if dtype is np.float32:
            try:
                column = float32_of([v for part in parts for v in part[key]])
            except (ValueError, TypeError):
                raise bad(f"a node's {key} is not a number") from None
        else:
            column = joined[key] if key in joined else np.concatenate([p[key] for p in parts])
        arrays[key] = np.ascontiguousarray(column, dtype=dtype)
    return arrays


# ---------------------------------------------------------------- LightGBM


def parse_lightgbm(text: str | bytes, where: str | Path = "model.txt") -> BoosterForest:
    """The forest of a LightGBM model.txt (``Booster.model_to_string()``, ``save_model``).
    ForestWalkUnsupported for what the walk does not score, BadModelError for a file it
    cannot read."""

    def bad(why: str) -> BadModelError:
        return _bad(where, "LightGBM", why)

    def unsupported(feature: str) -> ForestWalkUnsupported:
        return ForestWalkUnsupported("lightgbm", feature)

    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise bad("not UTF-8 text") from None
    lines = text.splitlines()
    if not lines or lines[0] != "tree":
        raise bad("its first line is not 'tree'")
    header: dict[str, str] = {}
    i = 1
    while i < len(lines) and not lines[i].startswith("Tree="):
        key, _, value = lines[i].partition("=")
        header[key] = value
        i += 1
    for key in ("num_class", "num_tree_per_iteration", "max_feature_idx", "objective"):
        if key not in header:
            raise bad(f"its header lacks {key}")
    for key in ("num_class", "num_tree_per_iteration"):
        if header[key] != "1":
            raise unsupported(f"{key} {header[key][:20]}, not one output per row")
    objective = header["objective"].split(" ")
    if objective[0] not in LIGHTGBM_OBJECTIVES:
        raise unsupported(f"objective {objective[0][:40]!r}, whose predict() is not its raw "
                          f"score; the walk scores {', '.join(LIGHTGBM_OBJECTIVES)}")
    if "sqrt" in objective[1:]:
        raise unsupported("objective regression with sqrt, whose predict() squares the raw "
                          "score")
    try:
        n_features = int(header["max_feature_idx"]) + 1
    except ValueError:
        raise bad("max_feature_idx is not an integer") from None
    if not 1 <= n_features <= _MAX_INDEX:
        raise bad(f"max_feature_idx {n_features - 1} is out of range")
    names = header.get("feature_names", "").split(" ")
    if len(names) != n_features:
        raise bad(f"{len(names)} feature names for {n_features} features")
    trees = []
    while i < len(lines) and lines[i].startswith("Tree="):
        t = len(trees)
        i += 1
        fields: dict[str, str] = {}
        while i < len(lines) and lines[i]:
            key, _, value = lines[i].partition("=")
            fields[key] = value
            i += 1
        trees.append(_lightgbm_tree(fields, t, bad, unsupported))
        while i < len(lines) and not lines[i]:
            i += 1
    if not trees:
        raise bad("it holds no trees")
    if i >= len(lines) or lines[i] != "end of trees":
        raise bad("its trees do not end with 'end of trees' (a cut file?)")
    arrays = _nodes(trees, _LIGHTGBM_NODES, n_features, bad, unsupported)
    # One tree per round: num_tree_per_iteration is 1.
    return BoosterForest(library="lightgbm", feature_names=names, n_features=n_features,
                         round_starts=np.arange(len(trees) + 1, dtype=np.int64),
                         arrays=arrays, average_output="average_output" in header)


def _numbers(fields: dict[str, str], key: str, count: int, dtype, t: int, bad) -> np.ndarray:
    value = fields.get(key)
    if value is None:
        raise bad(f"tree {t} lacks {key}")
    try:
        numbers = np.array(value.split(" ") if value else [], dtype=dtype)
    except (ValueError, OverflowError):
        raise bad(f"tree {t} {key} holds a value that is not a number") from None
    if len(numbers) != count:
        raise bad(f"tree {t} {key} has {len(numbers)} values, not {count}")
    return numbers


def _lightgbm_tree(fields: dict[str, str], t: int, bad, unsupported) -> dict[str, np.ndarray]:
    """One tree's nodes, laid out in sibling pairs: node 0 is LightGBM's split 0 (the root)
    and nodes 2i + 1, 2i + 2 are the left and right children of its split i (a split or a
    leaf; LightGBM's child ~k is leaf k). LightGBM numbers a split after its parent's, so
    each child's node number is above its parent's."""
    try:
        n = int(fields.get("num_leaves", ""))
    except ValueError:
        raise bad(f"tree {t} num_leaves is not an integer") from None
    if not 1 <= n <= _MAX_INDEX // 2:
        raise bad(f"tree {t} has {n} leaves")
    if fields.get("is_linear", "0") != "0":
        raise unsupported(f"linear trees (tree {t}), whose leaves are linear models")
    if fields.get("num_cat", "0") != "0":
        raise unsupported(f"categorical splits (tree {t})")
    leaves = _numbers(fields, "leaf_value", n, np.float64, t, bad)
    splits = n - 1
    if splits == 0:
        # A one-leaf tree is its leaf: LightGBM writes its split fields empty, or not at all.
        return {"feature": np.array([-1]), "threshold": leaves, "left": np.array([0]),
                "flags": np.array([0])}
    feature = _numbers(fields, "split_feature", splits, np.int64, t, bad)
    threshold = _numbers(fields, "threshold", splits, np.float64, t, bad)
    decision = _numbers(fields, "decision_type", splits, np.int64, t, bad)
    left = _numbers(fields, "left_child", splits, np.int64, t, bad)
    right = _numbers(fields, "right_child", splits, np.int64, t, bad)
    if (decision & 1).any():
        raise unsupported(f"categorical splits (tree {t})")
    if ((decision < 0) | (decision > 15)).any():
        raise bad(f"tree {t} has a decision_type LightGBM does not write")
    if (feature < 0).any():
        raise bad(f"tree {t}: a split is on a feature it does not have")
    split = np.arange(splits)
    for children in (left, right):
        if ((children < -n) | (children >= splits)
                | ((children >= 0) & (children <= split))).any():
            raise bad(f"tree {t}: a child lies outside the tree or before its parent")
    # What each node holds: LightGBM's split j (j >= 0) or leaf ~j.
    held = np.empty(2 * splits + 1, np.int64)
    held[0] = 0
    held[1::2] = left
    held[2::2] = right
    inner = held >= 0
    j = np.where(inner, held, 0)
    return {"feature": np.where(inner, feature[j], -1),
            "threshold": np.where(inner, threshold[j], leaves[np.where(inner, 0, ~held)]),
            "left": np.where(inner, 2 * j + 1, 0),
            "flags": np.where(inner, decision[j], 0)}


# ---------------------------------------------------------------- XGBoost


def float32_of(tokens: list) -> np.ndarray:
    """float32 (n,): JSON number tokens (str, or int) rounded once to the nearest float32,
    as XGBoost's JSON reader rounds them (through float64 a decimal is rounded twice, which
    can land on a float32 midpoint and then go the wrong way; those few are settled with
    exact fractions)."""
    wide = np.array(tokens, dtype=np.float64)
    narrow = wide.astype(np.float32)
    toward = np.where(wide > narrow, np.inf, -np.inf).astype(np.float32)
    neighbour = np.nextafter(narrow, toward)
    with np.errstate(invalid="ignore"):
        midpoint = (narrow.astype(np.float64) + neighbour.astype(np.float64)) / 2
    for j in np.flatnonzero((wide == midpoint) & (wide != narrow)):
        exact = Fraction(str(tokens[j]))
        middle = Fraction(float(midpoint[j]))
        if exact != middle and (exact > middle) == (float(neighbour[j]) > float(narrow[j])):
            narrow[j] = neighbour[j]
    return narrow


def parse_xgboost(raw: bytes | str, where: str | Path = "model.json") -> BoosterForest:
    """The forest of an XGBoost model.json (``Booster.save_model('x.json')``,
    ``save_raw('json')``). ForestWalkUnsupported for what the walk does not score,
    BadModelError for a file it cannot read."""

    def bad(why: str) -> BadModelError:
        return _bad(where, "XGBoost", why)

    def unsupported(feature: str) -> ForestWalkUnsupported:
        return ForestWalkUnsupported("xgboost", feature)

    try:
        # Floats stay text until `float32_of` rounds the ones the walk reads.
        model = json.loads(raw, parse_float=str, parse_constant=float)
        learner = model["learner"]
        param = learner["learner_model_param"]
        objective = learner["objective"]["name"]
        booster = learner["gradient_booster"]
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad(f"not valid JSON ({str(exc)[:80]})") from None
    except (KeyError, TypeError):
        raise bad("it lacks a learner with a model param, an objective and a booster") from None
    if param.get("num_class", "0") != "0" or param.get("num_target", "1") != "1":
        raise unsupported(f"num_class {param.get('num_class')}, num_target "
                          f"{param.get('num_target')}: not one output per row")
    if objective not in XGBOOST_OBJECTIVES:
        raise unsupported(f"objective {str(objective)[:40]!r}, whose predict() is not its "
                          f"margin; the walk scores {', '.join(XGBOOST_OBJECTIVES)}")
    if booster.get("name") != "gbtree":
        raise unsupported(f"booster {str(booster.get('name'))[:20]!r}, not gbtree (DART "
                          "weighs its trees, gblinear has none)")
    try:
        trees_model = booster["model"]
        trees = trees_model["trees"]
        n_features = int(param["num_feature"])
        base = str(param["base_score"]).strip("[]").split(",")
    except (KeyError, TypeError, ValueError):
        raise bad("it lacks trees, num_feature or base_score") from None
    if len(base) != 1:
        raise unsupported(f"{len(base)} base scores, not one output per row")
    if not isinstance(trees, list) or not trees:
        raise bad("it holds no trees")
    info = trees_model.get("tree_info")
    if not isinstance(info, list) or len(info) != len(trees):
        raise bad("tree_info does not name one output group per tree")
    if any(v != 0 for v in info):
        raise unsupported("trees of several output groups")
    if trees_model.get("cats") not in (None, {}) and any(
            v != [] for v in trees_model["cats"].values()):
        raise unsupported("categorical features")
    round_starts = _xgboost_rounds(trees_model, len(trees), bad)
    # A booster trained without names has none: XGBoost calls its features f0, f1, ...
    names = learner.get("feature_names") or [f"f{j}" for j in range(n_features)]
    if len(names) != n_features:
        raise bad(f"{len(names)} feature names for {n_features} features")
    parts = [_xgboost_tree(tree, t, bad, unsupported) for t, tree in enumerate(trees)]
    arrays = _nodes(parts, _XGBOOST_NODES, n_features, bad, unsupported)
    try:
        base_score = float(float32_of(base)[0])
    except (ValueError, TypeError):
        raise bad(f"base_score {param['base_score'][:30]!r} is not a number") from None
    return BoosterForest(library="xgboost", feature_names=list(names), n_features=n_features,
                         round_starts=round_starts, arrays=arrays, base_score=base_score)


def _xgboost_rounds(trees_model: dict, n_trees: int, bad) -> np.ndarray:
    """int64 (rounds + 1,): where each boosting round's trees start."""
    indptr = trees_model.get("iteration_indptr")
    if indptr is None:
        # Before XGBoost 2: each round grew num_parallel_tree trees.
        per_round = int(trees_model.get("gbtree_model_param", {}).get("num_parallel_tree", 1))
        if per_round < 1 or n_trees % per_round:
            raise bad("num_parallel_tree does not divide its trees into rounds")
        return np.arange(0, n_trees + 1, per_round, dtype=np.int64)
    starts = np.asarray(indptr, dtype=np.int64) if isinstance(indptr, list) else None
    if (starts is None or starts.ndim != 1 or len(starts) < 2 or starts[0] != 0
            or starts[-1] != n_trees or (np.diff(starts) <= 0).any()):
        raise bad("iteration_indptr does not cut its trees into rounds")
    return starts


def _xgboost_tree(tree: dict, t: int, bad, unsupported) -> dict:
    """One tree's nodes as XGBoost numbers them; split_conditions holds a split's threshold
    and a leaf's value."""
    try:
        n = int(tree["tree_param"]["num_nodes"])
        if tree["tree_param"].get("size_leaf_vector", "1") not in ("0", "1"):
            raise unsupported(f"vector leaves (tree {t})")
        if any(v != 0 for v in tree.get("split_type", [])) or tree.get("categories"):
            raise unsupported(f"categorical splits (tree {t})")
        left = np.array(tree["left_children"], dtype=np.int64)
        right = np.array(tree["right_children"], dtype=np.int64)
        feature = np.array(tree["split_indices"], dtype=np.int64)
        default_left = np.array(tree["default_left"], dtype=np.int64)
        conditions = tree["split_conditions"]
    except (KeyError, TypeError, ValueError, OverflowError):
        raise bad(f"tree {t} lacks its node arrays, or they hold other than integers") from None
    if not isinstance(conditions, list) or any(
            len(a) != n for a in (left, right, feature, default_left, conditions)):
        raise bad(f"tree {t}: its node arrays are not of num_nodes {n} values")
    split = left != -1
    if ((right != -1) != split).any():
        raise bad(f"tree {t}: a node has one child")
    # XGBoost walks to left + 1 for right (GetNextNode); the files it writes agree.
    if (right[split] != left[split] + 1).any():
        raise unsupported(f"tree {t}: a right child that is not its left sibling's next node")
    if not np.isin(default_left, (0, 1)).all():
        raise bad(f"tree {t}: default_left is not 0 or 1")
    if (feature[split] < 0).any():
        raise bad(f"tree {t}: a split is on a feature it does not have")
    return {"feature": np.where(split, feature, -1), "threshold": conditions,
            "left": np.where(split, left, 0), "flags": default_left * 2}
