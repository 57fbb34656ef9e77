"""Checks of LightGBM and XGBoost model files in Python, before the library reads them.

The libraries trust their own files. LightGBM's text parser walks past the end of a
line that has no ``=`` (SIGSEGV on a model.txt cut in half), aborts on a tree of
negative size (SIGABRT), follows ``tree_sizes`` byte offsets wherever they point and,
when scoring, child and feature indices wherever they point; XGBoost's JSON reader and
tree walk trust their arrays likewise. A card's checksum proves only that card and file
were written together, which is no proof when whoever hands over a folder writes both.
So each file is checked against the structure the library writes: the header, every
tree's arrays against its size, every index in range, each tree a tree (every node
reached from the root exactly once, children after their parent), and nothing the
library would parse that xlarank has not looked at. A file that passes is handed to the
library as the bytes checked, never read again from disk.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from xlarank.errors import BadModelError

MAX_LEAVES = 131_072
MAX_TREES = 1_000_000
MAX_FEATURES = 1_000_000

_INT = re.compile(r"-?\d{1,10}")
_NUMBER = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d{1,3})?"
_FINITE = re.compile(_NUMBER)
_FLOAT = re.compile(rf"{_NUMBER}|[-+]?inf|nan")
_BOUND = rf"({_NUMBER}|[-+]?inf)"
_FEATURE_INFO = re.compile(rf"none|\[{_BOUND}:{_BOUND}\]")
_OBJECTIVE_OPTION = re.compile(r"\w+:[-+.\w]+")
_PARAM_LINE = re.compile(r"\[\w+: [^\]\n\r\x00]*\]")
_IMPORTANCE_LINE = re.compile(r"[^=\s]+=\d{1,20}")

# What LightGBM 4 writes before the first tree; the others are refused.
_LGB_HEADER = ("version", "num_class", "num_tree_per_iteration", "label_index",
               "max_feature_idx", "objective", "feature_names", "feature_infos",
               "tree_sizes", "average_output")
_LGB_REQUIRED = ("version", "num_class", "num_tree_per_iteration", "label_index",
                 "max_feature_idx", "objective", "feature_names", "feature_infos")
# Every field of a numeric (not categorical, not linear) tree, once each.
_LGB_TREE_KEYS = ("num_leaves", "num_cat", "split_feature", "split_gain", "threshold",
                  "decision_type", "left_child", "right_child", "leaf_value", "leaf_weight",
                  "leaf_count", "internal_value", "internal_weight", "internal_count",
                  "is_linear", "shrinkage")
# Per internal node (num_leaves - 1 values) and per leaf (num_leaves).
_LGB_INTERNAL_INTS = ("split_feature", "decision_type", "left_child", "right_child",
                      "internal_count")
_LGB_INTERNAL_FLOATS = ("split_gain", "threshold", "internal_value", "internal_weight")


def _bad(where: Path | str, library: str, why: str) -> BadModelError:
    return BadModelError(f"{where}: not a {library} model xlarank can read: {why}; the file "
                         "is damaged or was not written by xlarank train (retrain it)")


def check_lightgbm_text(raw: bytes, where: Path | str, objectives: tuple[str, ...]
                        ) -> str:
    """The text of a LightGBM model.txt after checking its structure (BadModelError),
    ready for ``lightgbm.Booster(model_str=...)``. ``objectives``: the ones accepted."""

    def bad(why: str) -> BadModelError:
        return _bad(where, "LightGBM", why)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("not UTF-8 text") from None
    if "\r" in text or "\0" in text:
        raise bad("it holds carriage returns or NUL bytes")
    lines = text.split("\n")
    if lines[0] != "tree":
        raise bad("its first line is not 'tree'")
    # Byte offset of each line's start, for tree_sizes.
    offsets = np.concatenate([[0], np.cumsum([len(line.encode()) + 1 for line in lines])])
    header: dict[str, str] = {}
    i = 1
    while i < len(lines) and not lines[i].startswith("Tree="):
        line = lines[i]
        i += 1
        if not line:
            continue
        key, sep, value = line.partition("=")
        if key not in _LGB_HEADER or key in header or (not sep) != (key == "average_output"):
            raise bad(f"unexpected header line {line[:40]!r}")
        header[key] = value
    missing = [k for k in _LGB_REQUIRED if k not in header]
    if missing:
        raise bad(f"its header lacks {', '.join(missing)}")
    if header["version"] not in ("v3", "v4"):
        raise bad(f"version {header['version'][:20]!r}")
    for key in ("num_class", "num_tree_per_iteration"):
        if header[key] != "1":
            raise bad(f"{key} is {header[key][:20]!r}, not 1")
    if header["label_index"] != "0":
        raise bad("label_index is not 0")
    n_features = _int(header["max_feature_idx"], 0, MAX_FEATURES - 1, bad,
                      "max_feature_idx") + 1
    names = header["feature_names"].split(" ")
    if len(names) != n_features or not all(names):
        raise bad(f"{len(names)} feature names for {n_features} features")
    infos = header["feature_infos"].split(" ")
    if len(infos) != n_features or not all(_FEATURE_INFO.fullmatch(x) for x in infos):
        raise bad("feature_infos do not describe one numeric feature each")
    objective = header["objective"].split(" ")
    if objective[0] not in objectives or not all(_OBJECTIVE_OPTION.fullmatch(x)
                                                 for x in objective[1:]):
        raise bad(f"objective {header['objective'][:40]!r}; xlarank trains "
                  f"{', '.join(objectives)}")
    # The trees, each "Tree=N", its fields, blank lines.
    starts = []
    while i < len(lines) and lines[i].startswith("Tree="):
        if lines[i] != f"Tree={len(starts)}":
            raise bad(f"line {lines[i][:30]!r} where Tree={len(starts)} belongs")
        if len(starts) >= MAX_TREES:
            raise bad(f"more than {MAX_TREES:,} trees")
        starts.append(offsets[i])
        i += 1
        fields: dict[str, str] = {}
        while i < len(lines) and lines[i]:
            key, sep, value = lines[i].partition("=")
            if not sep or key not in _LGB_TREE_KEYS or key in fields:
                raise bad(f"tree {len(starts) - 1}: unexpected line {lines[i][:40]!r}")
            fields[key] = value
            i += 1
        _check_lightgbm_tree(fields, n_features, len(starts) - 1, bad)
        while i < len(lines) and not lines[i]:
            i += 1
    if not starts:
        raise bad("it holds no trees")
    if i >= len(lines) or lines[i] != "end of trees":
        raise bad("its trees do not end with 'end of trees' (a cut file?)")
    if "tree_sizes" in header:
        sizes = header["tree_sizes"].split(" ")
        ends = [*starts[1:], offsets[i]]
        if len(sizes) != len(starts) or any(
                not s.isdigit() or int(s) != end - start
                for s, start, end in zip(sizes, starts, ends, strict=True)):
            raise bad("tree_sizes do not match its trees")
    _check_lightgbm_trailer(lines[i + 1:], bad)
    return text


def _int(token: str, low: int, high: int, bad, what: str) -> int:
    if not _INT.fullmatch(token) or not low <= int(token) <= high:
        raise bad(f"{what} {token[:20]!r} is not an integer in {low}..{high}")
    return int(token)


def _numbers(value: str, count: int, kind: str, bad, what: str) -> np.ndarray:
    tokens = value.split(" ") if value else []
    if len(tokens) != count:
        raise bad(f"{what} has {len(tokens)} values, not {count}")
    pattern = _INT if kind == "int" else _FLOAT
    if not all(pattern.fullmatch(t) for t in tokens):
        wanted = "an integer" if kind == "int" else "a number"
        raise bad(f"{what} holds a value that is not {wanted}")
    if kind == "int":
        numbers = np.array([int(t) for t in tokens], dtype=np.int64)
        if ((numbers < -2**31) | (numbers >= 2**31)).any():
            raise bad(f"{what} holds an integer beyond 32 bits")
        return numbers
    return np.array([float(t) for t in tokens], dtype=np.float64)


def _check_lightgbm_tree(fields: dict[str, str], n_features: int, t: int, bad) -> None:
    missing = [k for k in _LGB_TREE_KEYS if k not in fields]
    if missing:
        raise bad(f"tree {t} lacks {', '.join(missing)}")
    n = _int(fields["num_leaves"], 1, MAX_LEAVES, bad, f"tree {t} num_leaves")
    if fields["num_cat"] != "0" or fields["is_linear"] != "0":
        raise bad(f"tree {t} has categorical or linear splits")
    if not _FLOAT.fullmatch(fields["shrinkage"]):
        raise bad(f"tree {t} shrinkage is not a number")
    if not np.isfinite(_numbers(fields["leaf_value"], n, "float", bad,
                                f"tree {t} leaf_value")).all():
        raise bad(f"tree {t} leaf_value holds a value that is not finite")
    _numbers(fields["leaf_count"], n, "int", bad, f"tree {t} leaf_count")
    # A one-leaf tree is written without weights.
    weights = fields["leaf_weight"]
    _numbers(weights, 0 if n == 1 and not weights else n, "float", bad, f"tree {t} leaf_weight")
    floats = {key: _numbers(fields[key], n - 1, "float", bad, f"tree {t} {key}")
              for key in _LGB_INTERNAL_FLOATS}
    # inf is what LightGBM writes for a split of every number from NaN; nothing else
    # that is not finite.
    if (np.isnan(floats["threshold"]) | (floats["threshold"] == -np.inf)).any():
        raise bad(f"tree {t} threshold holds NaN or -inf")
    ints = {key: _numbers(fields[key], n - 1, "int", bad, f"tree {t} {key}")
            for key in _LGB_INTERNAL_INTS}
    if n == 1:
        return
    feature, decision = ints["split_feature"], ints["decision_type"]
    if ((feature < 0) | (feature >= n_features)).any():
        raise bad(f"tree {t} splits on a feature it does not have")
    # Bit 0: categorical (there are none), bit 1: default left, bits 2-3: missing type
    # (none, zero, NaN).
    if ((decision < 0) | (decision > 11) | ((decision & 1) == 1)).any():
        raise bad(f"tree {t} has a decision_type LightGBM does not write for it")
    children = np.concatenate([ints["left_child"], ints["right_child"]])
    internal = children[children >= 0]
    leaves = ~children[children < 0]
    if (not np.array_equal(np.sort(internal), np.arange(1, n - 1))
            or not np.array_equal(np.sort(leaves), np.arange(n))):
        raise bad(f"tree {t}: its child indices do not make a tree of {n} leaves")
    # Every internal node reached from the root: with one parent each, no cycle.
    seen, stack = 0, [0]
    while stack:
        node = stack.pop()
        seen += 1
        if seen > n - 1:
            break
        stack += [int(c) for c in (ints["left_child"][node], ints["right_child"][node])
                  if c >= 0]
    if seen != n - 1:
        raise bad(f"tree {t}: its child indices do not make a tree of {n} leaves")


def _check_lightgbm_trailer(lines: list[str], bad) -> None:
    """After 'end of trees': feature importances, the parameters, pandas_categorical."""
    section = "importances"
    for line in lines:
        if not line or line == "feature_importances:" and section == "importances":
            continue
        if section == "importances" and _IMPORTANCE_LINE.fullmatch(line):
            continue
        if line == "parameters:" and section == "importances":
            section = "parameters"
        elif section == "parameters" and _PARAM_LINE.fullmatch(line):
            continue
        elif line == "end of parameters" and section == "parameters":
            section = "after"
        elif line == "pandas_categorical:null" and section in ("importances", "after"):
            section = "end"
        else:
            raise bad(f"unexpected line {line[:40]!r} after its trees")


# ---------------------------------------------------------------- XGBoost

MAX_JSON_DEPTH = 16


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice in one object")
    return dict(pairs)


def _depth(value) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else ()
        stack += [(c, depth + 1) for c in children if isinstance(c, dict | list)]
    return deepest


def check_xgboost_json(raw: bytes, where: Path | str, objectives: tuple[str, ...]) -> bytes:
    """The bytes of an XGBoost model.json after checking its structure (BadModelError),
    ready for ``Booster.load_model(bytearray(...))``."""

    def bad(why: str) -> BadModelError:
        return _bad(where, "XGBoost", why)

    if not raw.startswith(b"{"):
        raise bad("not a JSON object")
    try:
        model = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates,
                           parse_constant=lambda name: math.nan)
    except RecursionError:
        raise bad("JSON nested too deep") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"not valid JSON ({str(exc)[:80]})") from None
    if _depth(model) > MAX_JSON_DEPTH:
        raise bad("JSON nested deeper than an XGBoost model")
    learner = _table(model, "learner", bad)
    version = model.get("version")
    if (not isinstance(version, list) or len(version) != 3
            or not all(_is_int(v) for v in version) or set(model) != {"learner", "version"}):
        raise bad("its top level is not a learner and a version")
    names = learner.get("feature_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise bad("feature_names is not a list of names")
    if learner.get("feature_types") not in ([], None) and (
            not isinstance(learner["feature_types"], list)
            or len(learner["feature_types"]) != len(names)
            or not all(t in ("float", "q", "int", "i") for t in learner["feature_types"])):
        raise bad("feature_types are not numeric types, one per feature")
    param = _table(learner, "learner_model_param", bad)
    if (_str_int(param.get("num_feature"), bad, "num_feature") != len(names)
            or param.get("num_class") != "0" or param.get("num_target", "1") != "1"):
        raise bad("learner_model_param is not one target over its feature names")
    # One number, in brackets as XGBoost 3 writes it ("[5E-1]") or bare as before.
    score = param.get("base_score")
    number = score[1:-1] if isinstance(score, str) and score[:1] + score[-1:] == "[]" \
        else score
    if (not isinstance(number, str) or not _FINITE.fullmatch(number)
            or not math.isfinite(float(number))):
        raise bad(f"base_score {str(score)[:40]!r} is not one finite number")
    objective = _table(learner, "objective", bad)
    if objective.get("name") not in objectives:
        raise bad(f"objective {str(objective.get('name'))[:40]!r}; xlarank trains "
                  f"{', '.join(objectives)}")
    booster = _table(learner, "gradient_booster", bad)
    if booster.get("name") != "gbtree":
        raise bad("its booster is not gbtree")
    trees_model = _table(booster, "model", bad)
    tree_param = _table(trees_model, "gbtree_model_param", bad)
    trees = trees_model.get("trees")
    if not isinstance(trees, list) or not trees or len(trees) > MAX_TREES:
        raise bad("it holds no list of trees")
    if (_str_int(tree_param.get("num_trees"), bad, "num_trees") != len(trees)
            or tree_param.get("num_parallel_tree") != "1"):
        raise bad("num_trees does not match its trees")
    info = trees_model.get("tree_info")
    if not isinstance(info, list) or len(info) != len(trees) or any(v != 0 for v in info):
        raise bad("tree_info is not one 0 per tree")
    indptr = trees_model.get("iteration_indptr")
    if (not isinstance(indptr, list) or not indptr or not all(_is_int(v) for v in indptr)
            or indptr[0] != 0 or indptr[-1] != len(trees)
            or any(b <= a for a, b in zip(indptr, indptr[1:]))):
        raise bad("iteration_indptr does not cut its trees into rounds")
    cats = trees_model.get("cats", {})
    if not isinstance(cats, dict) or any(v != [] for v in cats.values()):
        raise bad("it has categorical features")
    for t, tree in enumerate(trees):
        _check_xgboost_tree(tree, t, len(names), bad)
    return raw


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _table(parent: dict, key: str, bad) -> dict:
    value = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(value, dict):
        raise bad(f"{key} is missing or not an object")
    return value


def _str_int(value, bad, what: str) -> int:
    if not isinstance(value, str) or not value.isdigit() or len(value) > 10:
        raise bad(f"{what} is not a count")
    return int(value)


_XGB_NODE_ARRAYS = ("left_children", "right_children", "parents", "split_indices",
                    "split_conditions", "split_type", "default_left", "base_weights",
                    "loss_changes", "sum_hessian")
_XGB_INT_ARRAYS = ("left_children", "right_children", "parents", "split_indices",
                   "split_type", "default_left")


def _check_xgboost_tree(tree, t: int, n_features: int, bad) -> None:
    if not isinstance(tree, dict) or tree.get("id") != t:
        raise bad(f"tree {t} is not an object of id {t}")
    param = _table(tree, "tree_param", bad)
    n = _str_int(param.get("num_nodes"), bad, f"tree {t} num_nodes")
    if (not 1 <= n <= 2 * MAX_LEAVES - 1
            or _str_int(param.get("num_feature"), bad, "num_feature") != n_features
            or param.get("num_deleted") != "0" or param.get("size_leaf_vector") not in
            ("0", "1")):
        raise bad(f"tree {t}: tree_param is not one of a plain tree over its features")
    arrays = {}
    for key in _XGB_NODE_ARRAYS:
        values = tree.get(key)
        if not isinstance(values, list) or len(values) != n:
            raise bad(f"tree {t}: {key} is not a list of {n} values")
        ints = key in _XGB_INT_ARRAYS
        if not all((_is_int(v) if ints else (isinstance(v, int | float)
                                             and not isinstance(v, bool)
                                             and math.isfinite(v))) for v in values):
            raise bad(f"tree {t}: {key} holds a value that is not "
                      f"{'an integer' if ints else 'a finite number'}")
        arrays[key] = values
    for key in ("categories", "categories_nodes", "categories_segments", "categories_sizes"):
        if tree.get(key, []) != []:
            raise bad(f"tree {t} has categorical splits")
    left, right = np.array(arrays["left_children"]), np.array(arrays["right_children"])
    split = left != -1
    node = np.arange(n)
    if (((right != -1) != split).any() or (left[split] <= node[split]).any()
            or (right[split] <= node[split]).any() or (left[split] >= n).any()
            or (right[split] >= n).any()):
        raise bad(f"tree {t}: a child index lies outside the tree or before its parent")
    children = np.concatenate([left[split], right[split]])
    if not np.array_equal(np.sort(children), np.arange(1, n)):
        raise bad(f"tree {t}: its child indices do not make a tree")
    parents = np.array(arrays["parents"])
    if parents[0] != 2**31 - 1 or (parents[left[split]] != node[split]).any() or (
            parents[right[split]] != node[split]).any():
        raise bad(f"tree {t}: its parents do not match its children")
    feature = np.array(arrays["split_indices"])[split]
    if ((feature < 0) | (feature >= n_features)).any():
        raise bad(f"tree {t} splits on a feature it does not have")
    if any(v != 0 for v in arrays["split_type"]) or any(v not in (0, 1) for v in
                                                         arrays["default_left"]):
        raise bad(f"tree {t}: split_type or default_left is not what XGBoost writes")
