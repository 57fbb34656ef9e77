"""Fuzzing the reader and featurizer (any input gives a result or BadGraphError), model
cards, spec files and output paths (a result or XlarankError), nothing else.

Bounded here (the 'ci' hypothesis profile); `make fuzz` runs the 'fuzz' profile, far longer.
"""

from __future__ import annotations

import contextlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO_SPECS
from xlarank.data.collections import COLLECTIONS
from xlarank.data.graph import load_graph
from xlarank.data.synth import PRESETS, make_layout_file, make_tile_file
from xlarank.errors import BadGraphError
from xlarank.features import featurize_graph, load_feature_spec

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3000"))
settings.register_profile("fuzz", max_examples=FUZZ_EXAMPLES, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SPEC = load_feature_spec(REPO_SPECS.features("default"))
# Small real files, so many inputs fit in the time: the three tiles and two layouts.
SMALL = ("retinanet", "inception", "d6f5f5", "openai_v0", "cd708819")


def small_samples(samples):
    return [p for p in samples if p.stem.startswith(SMALL)]


def check(path: Path) -> str:
    """Load and featurize; the only allowed failure is BadGraphError naming the file."""
    try:
        graph = load_graph(path)
    except BadGraphError as exc:
        assert exc.path == path
        return "refused"
    block = featurize_graph(graph, SPEC)
    assert len(block) == graph.n_configs
    return "accepted"


MUTATIONS = ("drop", "nan", "inf", "huge", "negative", "truncate_rows", "extra_dim",
             "flatten", "as_float", "as_bool", "as_complex", "empty", "transpose", "as_uint8")


def mutate(array: np.ndarray, kind: str, rng: np.random.Generator):
    a = array.copy()
    flat = a.reshape(-1) if a.size else a
    pick = int(rng.integers(a.size)) if a.size else 0
    if kind in ("nan", "inf", "huge", "negative") and a.size:
        if a.dtype.kind != "f":
            a = a.astype(np.float64)
            flat = a.reshape(-1)
        flat[pick] = {"nan": np.nan, "inf": np.inf, "huge": 1e30, "negative": -7}[kind]
    elif kind == "truncate_rows" and a.ndim:
        a = a[: int(rng.integers(0, max(1, len(a))))]
    elif kind == "extra_dim":
        a = a[..., None]
    elif kind == "flatten":
        a = a.reshape(-1)
    elif kind == "as_float":
        a = a.astype(np.float64) + 0.5
    elif kind == "as_bool":
        a = a.astype(bool)
    elif kind == "as_complex":
        a = a.astype(np.complex64)
    elif kind == "empty":
        a = np.zeros((0,) + a.shape[1:], dtype=a.dtype)
    elif kind == "transpose":
        a = a.T
    elif kind == "as_uint8":
        a = a.astype(np.uint8)
    return a


@pytest.mark.slow
@given(data=st.data())
def test_array_mutations(samples, tmp_path_factory, data):
    path = data.draw(st.sampled_from(small_samples(samples)))
    arrays = dict(np.load(path).items())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(arrays)))
        kind = data.draw(st.sampled_from(MUTATIONS))
        if kind == "drop":
            arrays.pop(key)
            if not arrays:
                break
        else:
            arrays[key] = mutate(arrays[key], kind, rng)
    target = tmp_path_factory.mktemp("mut") / path.relative_to(path.parents[4])
    target.parent.mkdir(parents=True, exist_ok=True)
    np.savez(target, **arrays)
    check(target)


@pytest.mark.slow
@given(data=st.data())
def test_byte_mutations(samples, tmp_path_factory, data):
    path = data.draw(st.sampled_from(small_samples(samples)))
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        where = data.draw(st.integers(0, len(raw) - 1))
        raw[where] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    target = tmp_path_factory.mktemp("bytes") / path.name
    target.write_bytes(bytes(raw))
    check(target)


@pytest.mark.slow
@given(data=st.data())
def test_stored_uncompressed_members(samples, tmp_path_factory, data):
    """Corrupt .npy headers directly (stored, not deflated, so the bytes are the header)."""
    path = data.draw(st.sampled_from(small_samples(samples)))
    target = tmp_path_factory.mktemp("hdr") / path.name
    with np.load(path) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zf:
        victim = data.draw(st.sampled_from(sorted(source.files)))
        for key in source.files:
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, source[key])
            raw = bytearray(buffer.getvalue())
            if key == victim:
                where = data.draw(st.integers(6, min(len(raw), 128) - 1))
                raw[where] = data.draw(st.integers(0, 255))
            zf.writestr(key + ".npy", bytes(raw))
    check(target)


@pytest.mark.slow
@given(seed=st.integers(0, 10**6), layout=st.sampled_from(COLLECTIONS[1:]))
def test_generated_graphs_always_featurize(tmp_path_factory, seed, layout):
    folder = tmp_path_factory.mktemp("gen")
    tile = folder / "npz/tile/xla/train/g.npz"
    make_tile_file(tile, seed, "train", 0, PRESETS["tiny"])
    other = folder / "npz" / layout.folder / "train" / "g.npz"
    make_layout_file(other, layout, seed, "train", 0, PRESETS["tiny"])
    assert check(tile) == "accepted" and check(other) == "accepted"


def test_ci_profile_is_bounded():
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci":
        assert settings().max_examples == 60
    else:
        assert settings().max_examples == FUZZ_EXAMPLES


@pytest.mark.parametrize("kind", MUTATIONS)
def test_every_mutation_kind_on_every_key(samples, tmp_path, kind):
    """Each mutation applied to each array of one layout and one tile sample, exhaustively."""
    rng = np.random.default_rng(0)
    for path in small_samples(samples)[:2] + [p for p in samples
                                              if p.stem == "openai_v0_rnn_optimized"]:
        for key in np.load(path).files:
            arrays = dict(np.load(path).items())
            if kind == "drop":
                arrays.pop(key)
            else:
                arrays[key] = mutate(arrays[key], kind, rng)
            target = tmp_path / kind / key / path.relative_to(path.parents[4])
            target.parent.mkdir(parents=True, exist_ok=True)
            np.savez(target, **arrays)
            check(target)


# ---------------------------------------------------------------- model cards, specs, outputs
# Any card, spec file or output path gives a result or an XlarankError: never another
# exception, a crash in a booster library, or a file written where it must not be.

@pytest.fixture(scope="module")
def fuzz_model(tiny_data, tmp_path_factory):
    """A small saved LightGBM model of the tiny tile train split."""
    from conftest import small
    from xlarank.data.collections import get_collection, split_files
    from xlarank.featurize import featurize_files
    from xlarank.frame import read_frame
    from xlarank.rank.spec import RankerSpec
    from xlarank.rank.train import train_ranker

    tile = get_collection("tile-xla")
    folder = tmp_path_factory.mktemp("fuzz_model")
    featurize_files(split_files(tiny_data, tile, "train"), folder / "f.parquet", tile,
                    "train", SPEC)
    table, meta = read_frame(folder / "f.parquet")
    spec = small(RankerSpec(name="fuzz", features=SPEC.name), rounds=3)
    return train_ranker(table, meta, spec).save(folder / "model")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=30)
    | st.sampled_from(["../../../../etc/passwd", "/etc/passwd", ".", "model.txt", "ensemble",
                       "lightgbm", "xgboost", "tile:xla", "members/00", "random:0"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=8)


def _mutate_card(card, data, depth=0):
    """The card with one of its values (at any depth) replaced, dropped or truncated."""
    if isinstance(card, dict) and card:
        key = data.draw(st.sampled_from(sorted(card)))
        action = data.draw(st.sampled_from(["replace", "drop", "descend"]))
        if action == "drop":
            return {k: v for k, v in card.items() if k != key}
        if action == "descend" and depth < 3:
            return {**card, key: _mutate_card(card[key], data, depth + 1)}
        return {**card, key: data.draw(JSON_VALUES)}
    if isinstance(card, list) and card:
        action = data.draw(st.sampled_from(["shorten", "reverse", "replace"]))
        if action == "shorten":
            return card[: data.draw(st.integers(0, len(card) - 1))]
        if action == "reverse":
            return card[::-1]
        return [data.draw(JSON_VALUES)] + card[1:]
    return data.draw(JSON_VALUES)


@pytest.mark.slow
@given(data=st.data())
def test_model_cards_and_files(fuzz_model, tmp_path_factory, data):
    import json
    import shutil

    from xlarank.errors import XlarankError
    from xlarank.rank.model import load_model

    model = tmp_path_factory.mktemp("card") / "model"
    shutil.copytree(fuzz_model, model)
    card_path = model / "card.json"
    card = json.loads(card_path.read_text())
    for _ in range(data.draw(st.integers(0, 3))):
        card = _mutate_card(card, data)
    if data.draw(st.booleans()):
        card_path.write_text(json.dumps(card))
    else:
        raw = card_path.read_bytes()
        card_path.write_bytes(raw[: data.draw(st.integers(0, len(raw)))])
    if data.draw(st.booleans()):
        booster = model / "model.txt"
        raw = bytearray(booster.read_bytes())
        if data.draw(st.booleans()):
            where = data.draw(st.integers(0, len(raw) - 1))
            raw[where] = data.draw(st.integers(0, 255))
        booster.write_bytes(bytes(raw[: data.draw(st.integers(0, len(raw)))]))
    try:
        loaded = load_model(model)
        assert loaded.feature_spec.hash == loaded.card["features"]["hash"]
    except XlarankError:
        return


# ---------------------------------------------------------------- model folders
# A folder as whoever hands it over can make it: card and booster file mutated together,
# the card's sha256 updated (so the checks behind the checksum are what is tested), for
# each library. Loading and scoring give a result or XlarankError; a crash of a booster
# library kills this test's process, which fails the run.

@pytest.fixture(scope="module")
def fuzz_models(fuzz_model, tiny_data, tmp_path_factory):
    """Small saved tile models of each library: {"lightgbm": dir, ...}, and a frame."""
    from conftest import small
    from xlarank.frame import read_frame
    from xlarank.rank.spec import RankerSpec
    from xlarank.rank.train import train_ranker

    frame = fuzz_model.parent / "f.parquet"
    table, meta = read_frame(frame)
    folder = tmp_path_factory.mktemp("fuzz_models")
    out = {"lightgbm": fuzz_model}
    for library, objective in (("xgboost", "rank:ndcg"), ("sklearn", "squared_error")):
        spec = small(RankerSpec(name=library, features=SPEC.name, library=library,
                                objective=objective), rounds=3)
        out[library] = train_ranker(table, meta, spec).save(folder / library)
    return out, table


INTERESTING_INTS = st.sampled_from([-1, 0, 1, 2, 3, 7, -2**31, 2**31 - 1, 2**31, 2**63,
                                    10**30]) | st.integers(-10, 10**6)


def _mutated_text(raw: bytes, data) -> bytes:
    """model.txt with a line changed: a number replaced, a line dropped, doubled, moved
    or cut, or bytes flipped."""
    lines = raw.decode().split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["number", "drop", "double", "move", "cut",
                                            "bytes"]))
        if action == "number":
            tokens = lines[i].replace("=", "= ").split(" ")
            j = data.draw(st.integers(0, len(tokens) - 1))
            tokens[j] = str(data.draw(INTERESTING_INTS | st.floats().map(repr)
                                      | st.sampled_from(["", "nan", "-", "1e999", "x"])))
            lines[i] = " ".join(tokens).replace("= ", "=")
        elif action == "drop":
            del lines[i]
        elif action == "double":
            lines.insert(i, lines[i])
        elif action == "move":
            lines.insert(data.draw(st.integers(0, len(lines))), lines.pop(i))
        elif action == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        else:
            text = bytearray(lines[i].encode())
            if text:
                text[data.draw(st.integers(0, len(text) - 1))] = data.draw(st.integers(0, 255))
            lines[i] = text.decode(errors="replace")
        if not lines:
            break
    return "\n".join(lines).encode()


def _mutated_json(raw: bytes, data) -> bytes:
    """model.json with one tree's array element, a tree field or any field changed."""
    import json

    model = json.loads(raw)
    trees = model["learner"]["gradient_booster"]["model"]["trees"]
    if data.draw(st.booleans()):
        tree = trees[data.draw(st.integers(0, len(trees) - 1))]
        key = data.draw(st.sampled_from(sorted(tree)))
        value = tree[key]
        if isinstance(value, list) and value and data.draw(st.booleans()):
            value[data.draw(st.integers(0, len(value) - 1))] = data.draw(
                INTERESTING_INTS | st.floats() | st.none() | st.text(max_size=3))
        else:
            tree[key] = _mutate_card(value, data)
    else:
        model = _mutate_card(model, data)
    return json.dumps(model).encode()


def _mutated_npz(path: Path, data) -> bytes:
    """model.npz with one array mutated (`mutate`'s kinds) or one value replaced."""
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    key = data.draw(st.sampled_from(sorted(arrays)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    if data.draw(st.booleans()) and arrays[key].size and arrays[key].dtype.kind in "iuf":
        a = arrays[key].astype(np.float64 if arrays[key].dtype.kind == "f" else np.int64)
        a.reshape(-1)[data.draw(st.integers(0, a.size - 1))] = data.draw(
            st.sampled_from([-1, 0, 1, 2, 2**31, -2**40]))
        arrays[key] = a.astype(arrays[key].dtype)
    elif data.draw(st.booleans()):
        arrays.pop(key)
    elif arrays[key].dtype.kind == "U":  # the feature names
        names = list(arrays[key])
        if names:
            names[data.draw(st.integers(0, len(names) - 1))] = data.draw(st.text(max_size=8))
        arrays[key] = np.array(names[: data.draw(st.integers(0, len(names)))], dtype=str)
    else:
        arrays[key] = mutate(arrays[key], data.draw(st.sampled_from(MUTATIONS[1:])), rng)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.slow
@given(data=st.data())
def test_model_folders(fuzz_models, tmp_path_factory, data):
    """A mutated card and booster file with a matching sha256 (most of the time): load
    and score give a result or BadModelError/XlarankError, never another exception or a
    crash."""
    import hashlib
    import json
    import shutil

    from hypothesis import event

    from xlarank.errors import XlarankError
    from xlarank.rank.model import load_model

    models, table = fuzz_models
    library = data.draw(st.sampled_from(sorted(models)))
    model = tmp_path_factory.mktemp("folder") / "model"
    shutil.copytree(models[library], model)
    card = json.loads((model / "card.json").read_text())
    booster = model / card["model_file"]
    raw = booster.read_bytes()
    kind = data.draw(st.sampled_from(["structure", "bytes", "cut", "none"]))
    if kind == "structure":
        raw = (_mutated_text(raw, data) if library == "lightgbm" else
               _mutated_json(raw, data) if library == "xgboost" else
               _mutated_npz(booster, data))
    elif kind == "bytes":
        raw = bytearray(raw)
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        raw = bytes(raw)
    elif kind == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    booster.write_bytes(raw)
    if data.draw(st.integers(0, 9)) > 0:
        card["model_sha256"] = hashlib.sha256(raw).hexdigest()
    for _ in range(data.draw(st.integers(0, 2))):
        card = _mutate_card(card, data)
    (model / "card.json").write_text(json.dumps(card))
    try:
        loaded = load_model(model)
        scores = loaded.predict(table)
    except XlarankError:
        event(f"{library}: refused")
        return
    event(f"{library}: loaded")
    assert len(scores) == len(table)


SPEC_KEYS = ["name", "features", "library", "objective", "num_rounds", "seed", "grades",
             "max_configs_per_graph", "kind", "members", "seeds", "families", "k", "gnn",
             "params", "junk"]
PARAM_KEYS = ["learning_rate", "num_leaves", "eta", "max_depth", "objective", "label_gain",
              "num_iterations", "seed", "bagging_fraction", "boosting", "nthread", "junk"]
SCALARS = (st.booleans() | st.integers(-2**64, 2**64) | st.floats() | st.text(max_size=20)
           | st.sampled_from(["lightgbm", "xgboost", "lambdarank", "rank:ndcg", "default",
                              "ensemble", "../../evil", "graph", "random:0", "gbdt"]))
TOML_VALUES = SCALARS | st.lists(st.integers(-5, 5) | st.floats(0, 3), max_size=5) \
    | st.lists(st.sampled_from(["graph", "config_raw", "khop", "x.toml", "nope"]), max_size=4)


@pytest.mark.slow
@given(data=st.data())
def test_spec_files(tmp_path_factory, data):
    from xlarank.errors import XlarankError
    from xlarank.files import toml_text
    from xlarank.rank.ensemble import load_training_plan

    folder = tmp_path_factory.mktemp("spec")
    table = data.draw(st.dictionaries(st.sampled_from(SPEC_KEYS), TOML_VALUES, max_size=9))
    if data.draw(st.booleans()):
        table["params"] = data.draw(st.dictionaries(st.sampled_from(PARAM_KEYS), TOML_VALUES,
                                                    max_size=4))
    text = toml_text(table)
    if data.draw(st.integers(0, 9)) == 0:
        text = data.draw(st.text(max_size=200))  # not even TOML, most of the time
    path = folder / "spec.toml"
    path.write_text(text)
    (folder / "x.toml").write_text('name = "x"\nfeatures = "default"\n')
    # The property: a loader returns a spec or refuses with XlarankError; anything else
    # (a TypeError, a KeyError, a crash in the booster library) escapes and fails the test.
    for load in (load_training_plan, load_feature_spec):
        with contextlib.suppress(XlarankError):
            load(path)


OUTPUT_KINDS = ("missing", "file", "dir", "nonempty dir", "symlink", "dangling symlink",
                "fifo", "under a file", "deep missing")


@pytest.mark.slow
@given(kind=st.sampled_from(OUTPUT_KINDS), want=st.sampled_from(["file", "dir"]),
       name=st.text(st.characters(blacklist_characters="/\x00"), min_size=1, max_size=12))
def test_output_paths(tmp_path_factory, kind, want, name):
    from xlarank.atomic import atomic_dir, atomic_path, check_output
    from xlarank.errors import XlarankError

    folder = tmp_path_factory.mktemp("out")
    if name in (".", ".."):
        name = "x" + name
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        # Not a possible file name: refused before anything is made.
        with pytest.raises(XlarankError, match="this system can encode"):
            check_output(folder / name, want)
        return
    path = folder / name
    if kind == "file":
        path.write_text("old")
    elif kind in ("dir", "nonempty dir"):
        path.mkdir()
        if kind == "nonempty dir":
            (path / "inside").write_text("old")
    elif kind == "symlink":
        (folder / "target").write_text("keep")
        path.symlink_to(folder / "target")
    elif kind == "dangling symlink":
        path.symlink_to(folder / "nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "under a file":
        (folder / "plain").write_text("keep")
        path = folder / "plain" / name
    elif kind == "deep missing":
        path = folder / "a" / "b" / name
    before = sorted(str(p) for p in folder.rglob("*"))
    try:
        check_output(path, want)
    except XlarankError:
        assert sorted(str(p) for p in folder.rglob("*")) == before
        if kind == "symlink":
            assert (folder / "target").read_text() == "keep"
        return
    assert kind in ("missing", "deep missing") or (kind == "file") == (want == "file")
    if want == "file":
        with atomic_path(path) as tmp:
            tmp.write_text("new")
        assert path.read_text() == "new" and not path.is_symlink()
    else:
        with atomic_dir(path) as tmp:
            (tmp / "f").write_text("new")
        assert sorted(p.name for p in path.iterdir()) == ["f"]
    leftovers = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
    assert leftovers == []


# ---------------------------------------------------------------- frames and measured CSVs

@pytest.fixture(scope="module")
def fuzz_frame(fuzz_model, tiny_data, tmp_path_factory):
    """A small labelled tile frame (valid split) and the model of its spec."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.featurize import featurize_files

    tile = get_collection("tile-xla")
    path = tmp_path_factory.mktemp("fuzz_frame") / "valid.parquet"
    featurize_files(split_files(tiny_data, tile, "valid"), path, tile, "valid", SPEC)
    return path


FRAME_MUTATIONS = ("meta value", "meta drop", "meta bytes", "column drop", "column rename",
                   "column type", "column values", "rows")
CELL_VALUES = (st.none() | st.integers(-2**63, 2**63 - 1) | st.floats()
               | st.text(max_size=6))


def _mutated_frame(source: Path, target: Path, data) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = pq.read_metadata(source).metadata[b"xlarank"]
    table = pq.read_table(source)
    kind = data.draw(st.sampled_from(FRAME_MUTATIONS))
    if kind == "meta value":
        raw = json.dumps(_mutate_card(json.loads(raw), data)).encode()
    elif kind == "meta drop":
        record = json.loads(raw)
        del record[data.draw(st.sampled_from(sorted(record)))]
        raw = json.dumps(record).encode()
    elif kind == "meta bytes":
        raw = data.draw(st.binary(max_size=40) | st.sampled_from([b"[]", b"{}", b"null"]))
    else:
        name = data.draw(st.sampled_from(table.column_names))
        column = table.schema.get_field_index(name)
        if kind == "column drop":
            table = table.remove_column(column)
        elif kind == "column rename":
            names = list(table.column_names)
            names[column] = data.draw(st.text(max_size=8) | st.sampled_from(names))
            table = table.rename_columns(names)
        elif kind == "column type":
            to = data.draw(st.sampled_from([pa.string(), pa.float64(), pa.int8(), pa.bool_(),
                                            pa.float16()]))
            try:
                values = table[name].cast(to, safe=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                values = pa.array([str(v) for v in table[name].to_pylist()])
            table = table.set_column(column, name, values)
        elif kind == "column values":
            values = table[name].to_pylist()
            for _ in range(data.draw(st.integers(1, 3))):
                values[data.draw(st.integers(0, len(values) - 1))] = data.draw(CELL_VALUES)
            try:
                array = pa.array(values, type=table.schema.field(name).type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                array = pa.array([None if v is None else str(v) for v in values])
            table = table.set_column(column, name, array)
        else:
            order = data.draw(st.lists(st.integers(0, table.num_rows - 1), max_size=40))
            table = table.take(pa.array(order, type=pa.int64()))
    pq.write_table(table.replace_schema_metadata({b"xlarank": raw}), target)


@pytest.mark.slow
@given(data=st.data())
def test_frame_files(fuzz_frame, fuzz_model, tmp_path_factory, data):
    """A mutated frame's metadata or columns: every command's reader gives a frame it can
    score and evaluate, or XlarankError, nothing else."""
    from hypothesis import event

    from xlarank.data.collections import get_collection
    from xlarank.errors import XlarankError
    from xlarank.evaluate import per_graph_metrics, random_scores
    from xlarank.frame import read_frame, read_meta
    from xlarank.rank.model import load_model

    path = tmp_path_factory.mktemp("frame") / "f.parquet"
    _mutated_frame(fuzz_frame, path, data)
    try:
        meta = read_meta(path)
        table, meta = read_frame(path)
    except XlarankError:
        event("refused")
        return
    event("accepted")
    is_tile = get_collection(meta.collection).is_tile
    model = load_model(fuzz_model)
    try:
        model.check_frame(meta, str(path))
        scores = model.predict(table)
    except XlarankError:
        scores = random_scores(table, 0)
    assert len(scores) == len(table)
    with contextlib.suppress(XlarankError):
        per_graph_metrics(table, scores, is_tile)


CSV_FIELDS = (st.integers(-5, 10**6).map(str) | st.floats().map(repr) | st.text(max_size=5)
              | st.sampled_from(["", "nan", "inf", "-1", "1e400", '"1,2"', "0x10", " 7 "]))
CSV_NAMES = ("m.csv", "m", "m.xz", "m.bz2", "m.gz", "m.zip", "m.zst", "m.tar", "m.csv.gz",
             "m.tgz")


def _compressed(name: str, raw: bytes, data) -> bytes:
    import bz2
    import gzip
    import lzma

    how = data.draw(st.sampled_from(["plain", "matching", "truncated"]))
    if how == "plain":
        return raw
    packed = (gzip.compress(raw) if name.endswith((".gz", ".tgz")) else bz2.compress(raw)
              if name.endswith(".bz2") else lzma.compress(raw) if name.endswith(".xz")
              else _zipped(raw) if name.endswith(".zip") else raw)
    if how == "truncated":
        packed = packed[: data.draw(st.integers(0, max(0, len(packed) - 1)))]
    return packed


def _zipped(raw: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("m.csv", raw)
    return buffer.getvalue()


@pytest.mark.slow
@given(data=st.data())
def test_measured_files(tmp_path_factory, data):
    """A measured CSV of any rows, name and compression: read_measured gives whole config
    indices and positive finite runtimes, or MeasuredError naming the file."""
    from hypothesis import event

    from xlarank.rank.measured import MeasuredError, read_measured

    header = data.draw(st.sampled_from(["config_index,runtime", "runtime,config_index",
                                        "config_index,runtime,note", "config_index", ""]))
    # Mostly well-formed rows of two whole numbers, so acceptance is explored too.
    good = st.lists(st.integers(1, 10**6).map(str), min_size=2, max_size=2)
    row = st.one_of(good, good, good, st.lists(CSV_FIELDS, min_size=0, max_size=4))
    rows = data.draw(st.lists(row, max_size=8))
    text = "\n".join([header, *(",".join(row) for row in rows)])
    raw = (data.draw(st.binary(max_size=60)) if data.draw(st.booleans()) and not rows
           else text.encode())
    name = data.draw(st.sampled_from(CSV_NAMES[:2]) | st.sampled_from(CSV_NAMES))
    path = tmp_path_factory.mktemp("measured") / name
    path.write_bytes(_compressed(name, raw, data))
    try:
        table = read_measured(path)
    except MeasuredError as exc:
        assert str(path) in str(exc)
        event("refused")
        return
    event("accepted")
    assert list(table.columns) == ["config_index", "runtime"]
    assert table["config_index"].dtype == np.int64 and (table["config_index"] >= 0).all()
    assert np.isfinite(table["runtime"]).all() and (table["runtime"] > 0).all()


# ---------------------------------------------------------------- tuning records (import)
RECORD_MUTATIONS = ("truncate", "flip", "insert", "delete", "splice")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*opcode\\(s\\) unknown")
@given(data=st.data())
def test_tuning_records(tmp_path_factory, data):
    """A mutated tuning record or HLO dump gives graphs or one XlarankError, nothing else."""
    from conftest import SAMPLES
    from xlarank.data.xla import read_records
    from xlarank.errors import XlarankError

    records = sorted((SAMPLES / "raw").glob("*.pb"))
    if not records:
        pytest.skip("no tuning records in the samples")
    source = data.draw(st.sampled_from(records))
    raw = bytearray(source.read_bytes())
    kind = data.draw(st.sampled_from(RECORD_MUTATIONS))
    at = data.draw(st.integers(0, len(raw) - 1))
    if kind == "truncate":
        raw = raw[:at]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
    elif kind == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    elif kind == "delete":
        del raw[at:at + data.draw(st.integers(1, 64))]
    else:  # a run of bytes from elsewhere in the record
        start = data.draw(st.integers(0, len(raw) - 1))
        raw[at:at] = raw[start:start + data.draw(st.integers(1, 256))]
    path = tmp_path_factory.mktemp("record") / source.name
    path.write_bytes(bytes(raw))
    try:
        graphs = read_records(path, drop_failed_runs=True)
    except XlarankError as exc:
        assert str(path) in str(exc)
        return
    for graph in graphs:
        assert graph.arrays["node_feat"].shape[1] == 140
        assert len(graph.arrays["node_opcode"]) == len(graph.arrays["node_feat"])


# ---------------------------------------------------------------- structure of records and systems
# Field by field, not byte by byte: a real or made-up tuning record parsed into its
# fields (tests/protowrite.py), one at any depth dropped, doubled, repeated many times,
# retyped, renumbered or given an extreme value, then maybe cut or flipped; and a saved
# system's card (system.json). The bounded runs are smaller than the others': they are
# the newest, and `make test` has ~20 s for them (`make fuzz` runs FUZZ_EXAMPLES).
BOUNDED = 25 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else FUZZ_EXAMPLES
# More than any example should need (MiB of peak resident memory): a record claiming
# 10**9 of something must be refused, not allocated.
MEMORY_MIB = 1024
PROTO_ACTIONS = ("drop", "double", "repeat", "retype", "renumber", "value", "descend",
                 "descend", "descend")
EXTREME_INTS = st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**32 + 1, 2**62, 2**63, 2**64 - 1,
                                10**9, 10**12]) | st.integers(-3, -1) | st.integers(0, 300)


def _mutated_message(pairs: list, data, depth: int = 0) -> list:
    """``pairs`` (protowrite's) with one field, at this depth or below, changed."""
    import protowrite as pw

    pairs = list(pairs)
    if not pairs:
        return [(data.draw(st.integers(1, 40)), data.draw(EXTREME_INTS))]
    i = data.draw(st.integers(0, len(pairs) - 1))
    number, value = pairs[i]
    action = data.draw(st.sampled_from(PROTO_ACTIONS))
    if action == "descend" and depth < 8 and isinstance(value, bytes):
        inner = pw.parse(value)
        if inner:
            pairs[i] = (number, _mutated_message(inner, data, depth + 1))
            return pairs
        action = "value"
    if action == "drop":
        del pairs[i]
    elif action == "double":
        pairs.insert(i, pairs[i])
    elif action == "repeat":  # a repeated field far longer than it was
        pairs[i + 1:i + 1] = [pairs[i]] * data.draw(st.sampled_from([10, 300, 3000]))
    elif action == "retype":
        pairs[i] = (number, str(value).encode() if isinstance(value, int)
                    else data.draw(EXTREME_INTS) if not isinstance(value, pw.Fixed)
                    else int.from_bytes(value, "little"))
    elif action == "renumber":
        pairs[i] = (data.draw(st.integers(1, 60) | st.sampled_from([2**29 - 1])), value)
    elif isinstance(value, int):
        pairs[i] = (number, data.draw(EXTREME_INTS))
    elif isinstance(value, pw.Fixed):
        pairs[i] = (number, pw.Fixed(data.draw(st.sampled_from(
            [b"\x00\x00\xc0\x7f", b"\x00\x00\x80\x7f", b"\xff" * 4, b"\x00" * 8,
             b"\x00\x00\x00\x00\x00\x00\xf0\x7f", b"\x01" * 8]))))  # NaN, inf, ...
    else:
        pairs[i] = (number, data.draw(st.sampled_from([b"", b"\x00", b"\xff" * 9])
                                      | st.text(max_size=12).map(str.encode)
                                      | st.binary(max_size=24)))
    return pairs


def _records() -> dict[str, bytes]:
    """Tuning records to start from: made-up layout and HLO ones, and the samples' tile
    record (the layout one takes a second a read)."""
    import protowrite as pw
    from conftest import SAMPLES
    from test_xla_import import GOOD_RUNS, _chain_module, _layout_record

    out = {"layout": _layout_record(GOOD_RUNS), "hlo": pw.message([(1, _chain_module())])}
    tile = SAMPLES / "raw" / "op_tuning_data.pb"
    if tile.is_file():
        out["tile"] = tile.read_bytes()
    return out


@contextlib.contextmanager
def _bounded_memory(what: str):
    """Fail when the block raised this process's peak resident memory by more than
    MEMORY_MIB (ru_maxrss, KiB on Linux)."""
    import resource
    import sys

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    if sys.platform == "linux":
        assert grown < MEMORY_MIB * 1024, f"{what}: peak memory grew {grown // 1024} MiB"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*opcode\\(s\\) unknown")
@settings(max_examples=BOUNDED)
@given(data=st.data())
def test_tuning_records_structure(tmp_path_factory, data):
    """A record changed field by field gives graphs of the format's shapes or one
    XlarankError naming the file: never another exception, never a huge allocation."""
    from hypothesis import event

    import protowrite as pw
    from xlarank.data.xla import read_records
    from xlarank.errors import XlarankError

    records = _records()
    name = data.draw(st.sampled_from(sorted(records)))
    pairs = pw.parse(records[name])
    for _ in range(data.draw(st.integers(1, 3))):
        pairs = _mutated_message(pairs, data)
    raw = bytearray(pw.message(pairs))
    if raw and data.draw(st.integers(0, 4)) == 0:
        if data.draw(st.booleans()):
            raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
        else:
            raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    path = tmp_path_factory.mktemp("structure") / f"{name}.pb"
    path.write_bytes(bytes(raw))
    with _bounded_memory(f"{name} record"):
        try:
            graphs = read_records(path, drop_failed_runs=True, candidates=4)
        except XlarankError as exc:
            assert str(path) in str(exc)
            event(f"{name}: refused")
            return
    event(f"{name}: read")
    for graph in graphs:
        arrays = graph.arrays
        n = len(arrays["node_opcode"])
        assert arrays["node_feat"].shape == (n, 140)
        assert arrays["edge_index"].ndim == 2 and arrays["edge_index"].shape[1] == 2
        assert ((arrays["edge_index"] >= 0) & (arrays["edge_index"] < n)).all()
        assert np.isfinite(arrays["node_feat"]).all()


@pytest.fixture(scope="module")
def fuzz_system(fuzz_model, tiny_data, tmp_path_factory):
    """A saved "xlarank" system (system.json and the model it wraps), through its own
    save, and a tiny tile graph to score."""
    from xlarank.data.collections import get_collection, split_files
    from xlarank.rank.model import load_model
    from xlarank.systems.booster import BoosterSystem

    system = BoosterSystem(seed=0)
    system.ranker_ = load_model(fuzz_model)
    folder = tmp_path_factory.mktemp("fuzz_system")
    system.save(folder)
    tile = get_collection("tile-xla")
    return folder, load_graph(split_files(tiny_data, tile, "valid")[0], tile)


@pytest.mark.slow
@settings(max_examples=BOUNDED)
@given(data=st.data())
def test_saved_systems(fuzz_system, tmp_path_factory, data):
    """A saved system whose system.json is changed (values at any depth, fields dropped,
    cut short): load_system gives a system that scores every config finitely, or an
    XlarankError."""
    import json
    import shutil

    from hypothesis import event

    from xlarank.errors import XlarankError
    from xlarank.systems import load_system

    source, graph = fuzz_system
    folder = tmp_path_factory.mktemp("system") / "system"
    shutil.copytree(source, folder)
    card_path = folder / "system.json"
    card = json.loads(card_path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        card = _mutate_card(card, data)
    raw = json.dumps(card).encode()
    if data.draw(st.integers(0, 5)) == 0:
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    card_path.write_bytes(raw)
    try:
        system = load_system(folder)
        scores = system.score(graph)
    except XlarankError:
        event("refused")
        return
    event("loaded")
    assert scores.shape == (graph.n_configs,) and np.isfinite(scores).all()


class _Scripted:
    """A stand-in for hypothesis' data that draws the given values in turn."""

    def __init__(self, *values):
        self.values = list(values)

    def draw(self, _strategy):
        return self.values.pop(0)


def test_the_record_strategy_reaches_deep_fields_and_keeps_the_rest():
    """Parsing a record and writing it back changes nothing; the strategy's descents
    reach an instruction's id inside a computation inside the module, and change that
    alone."""
    import protowrite as pw

    record = _records()["layout"]
    pairs = pw.parse(record)
    assert pw.message(pairs) == record
    # module (field 1) > its computation #2 > its first instruction > its id (field 35).
    module = pw.parse(pairs[0][1])
    computation = pw.parse(module[2][1])
    instruction = pw.parse(computation[1][1])
    at = [number for number, _ in instruction].index(35)
    script = _Scripted(0, "descend", 2, "descend", 1, "descend", at, "value", 2**63)
    mutated = _mutated_message(pairs, script)
    assert script.values == []
    changed = list(instruction)
    changed[at] = (35, 2**63)
    expected = list(pairs)
    module[2] = (module[2][0], pw.message([*computation[:1], (2, changed),
                                            *computation[2:]]))
    expected[0] = (1, pw.message(module))
    assert pw.message(mutated) == pw.message(expected) != record
