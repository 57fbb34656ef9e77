"""Fuzzing the reader and featurizer: any input gives a result or BadGraphError, nothing else.

Bounded here (the 'ci' hypothesis profile); `make fuzz` runs the 'fuzz' profile, far longer.
"""

from __future__ import annotations

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
