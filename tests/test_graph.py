"""data/graph.py, npzstream.py, collections.py: reading the real files, streaming their
members, and clear errors for broken ones."""

from __future__ import annotations

import itertools
import re
import zipfile
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from conftest import SAMPLES
from helpers import (
    first_file,
    one_error_line,
    run,
)
from xlarank.data.collections import get_collection, locate
from xlarank.data.graph import LayoutGraph, TileGraph, load_graph
from xlarank.data.npzstream import NpzStream
from xlarank.errors import (
    BadGraphError,
)
from xlarank.kernels.graph import cycle_edge


def samples_readme() -> dict[str, tuple[int, int, int, str]]:
    """The sample table of ../shared/tpugraphs/README.md: file under npz/ -> (nodes, edges,
    configs, note), so the tests follow the README as files are added to it."""
    rows = {}
    for line in (SAMPLES / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].endswith(".npz"):
            nodes, edges = (int(n) for n in re.findall(r"\d+", cells[2])[:2])
            configs = int(re.match(r"\d+", cells[3]).group())
            rows[cells[0]] = (nodes, edges, configs, cells[4])
    return rows


def test_every_real_sample_loads_with_collection_and_split(samples):
    listed = samples_readme()
    assert len(listed) >= 14
    assert sorted(str(p.relative_to(SAMPLES / "npz")) for p in samples) == sorted(listed)
    for path in samples:
        graph = load_graph(path)
        nodes, edges, configs, note = listed[str(path.relative_to(SAMPLES / "npz"))]
        assert (graph.n_nodes, len(graph.edge_index), graph.n_configs) == (nodes, edges, configs)
        assert graph.labelled == ("labelled" in note)
        collection, split = locate(path)
        assert graph.collection == collection and graph.split == split == path.parent.name
        assert graph.node_opcode.dtype == np.uint8 and graph.config_runtime.dtype == np.int64
        assert graph.labelled == (split != "test")
        if isinstance(graph, LayoutGraph):
            raw = np.load(path)
            assert graph.node_config_feat.dtype == np.int8
            np.testing.assert_array_equal(graph.node_config_feat, raw["node_config_feat"])
            np.testing.assert_array_equal(graph.node_splits, raw["node_splits"].reshape(-1))
        else:
            assert isinstance(graph, TileGraph) and graph.collection.is_tile


def test_streamed_blocks_equal_np_load(samples):
    path = next(p for p in samples if p.stem == "unet3d")
    with NpzStream(path) as npz:
        blocks = list(npz.iter_rows("node_config_feat", 100))
    assert len(blocks) == 12
    np.testing.assert_array_equal(np.concatenate(blocks), np.load(path)["node_config_feat"])


def test_locate_official_layout():
    assert locate(Path("x/npz/layout/nlp/random/valid/g.npz")) == (
        get_collection("layout:nlp:random"), "valid")
    assert locate(Path("x/npz/tile/xla/test/g.npz")) == (get_collection("tile-xla"), "test")
    assert locate(Path("elsewhere/g.npz")) == (None, None)


@pytest.fixture
def good_arrays(samples):
    path = next(p for p in samples if p.stem == "unet3d")
    return {k: v for k, v in np.load(path).items()}


def write(tmp_path: Path, arrays: dict, name="g.npz") -> Path:
    path = tmp_path / "npz" / "layout" / "xla" / "default" / "train" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def fault_of(path: Path) -> str:
    with pytest.raises(BadGraphError) as info:
        load_graph(path)
    assert str(path) in str(info.value)
    return info.value.fault


def test_truncated_file(tmp_path, good_arrays):
    path = write(tmp_path, good_arrays)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "npz" in fault_of(path) or "truncated" in fault_of(path)


def test_not_a_zip(tmp_path):
    path = tmp_path / "g.npz"
    path.write_text("hello")
    assert "not a readable npz" in fault_of(path)


def test_missing_key(tmp_path, good_arrays):
    del good_arrays["edge_index"]
    assert "missing array(s) edge_index" in fault_of(write(tmp_path, good_arrays))


def test_wrong_shape(tmp_path, good_arrays):
    good_arrays["node_feat"] = good_arrays["node_feat"][:, :100]
    assert "node_feat: shape" in fault_of(write(tmp_path, good_arrays))


def test_config_shape_mismatch(tmp_path, good_arrays):
    good_arrays["node_config_feat"] = good_arrays["node_config_feat"][:, :10]
    assert "node_config_feat: shape" in fault_of(write(tmp_path, good_arrays))


def test_edge_out_of_range(tmp_path, good_arrays):
    good_arrays["edge_index"][5, 1] = 99999
    assert "edge_index: node ids must lie in 0..2773" in fault_of(write(tmp_path, good_arrays))


def test_nan_node_feature(tmp_path, good_arrays):
    good_arrays["node_feat"][3, 7] = np.nan
    assert "NaN" in fault_of(write(tmp_path, good_arrays))


def test_nan_config(tmp_path, good_arrays):
    good_arrays["node_config_feat"][3, 2, 1] = np.nan
    assert "node_config_feat" in fault_of(write(tmp_path, good_arrays))


def test_config_value_out_of_range(tmp_path, good_arrays):
    good_arrays["node_config_feat"][0, 0, 0] = 9
    assert "-1..5" in fault_of(write(tmp_path, good_arrays))


def test_negative_runtime(tmp_path, good_arrays):
    good_arrays["config_runtime"][0] = -5
    assert "negative" in fault_of(write(tmp_path, good_arrays))


def test_tile_in_layout_folder(tmp_path, samples):
    tile = next(p for p in samples if p.stem.startswith("retinanet"))
    arrays = dict(np.load(tile).items())
    assert "holds a tile graph" in fault_of(write(tmp_path, arrays))


def test_corrupt_member_crc(tmp_path, good_arrays):
    path = write(tmp_path, good_arrays)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("node_feat.npy")
    data = bytearray(path.read_bytes())
    # Flip bytes inside the compressed node_feat member.
    offset = info.header_offset + 30 + len(info.filename) + 200
    data[offset:offset + 8] = b"\x00" * 8
    path.write_bytes(bytes(data))
    fault_of(path)


def test_header_offset_past_the_end_is_a_bad_graph(tmp_path, samples):
    # Found by test_fuzz: a central directory whose member header offset points past the
    # file's end made the local header read short (struct.error instead of BadGraphError).
    sample = next(p for p in samples if p.name == "d6f5f54247bd1e58a10b9e7062c636ab.npz")
    raw = bytearray(sample.read_bytes())
    raw[959] = 1
    path = tmp_path / "npz" / "tile" / "xla" / "test" / "x.npz"
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(raw))
    with pytest.raises(BadGraphError, match="x.npz"):
        load_graph(path)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_stored_and_deflated_members_read_like_np_load(tmp_path, save):
    rng = np.random.default_rng(0)
    arrays = {"a": rng.integers(-1, 6, (257, 9, 18)).astype(np.float32),
              "b": np.asfortranarray(rng.normal(size=(40, 7))), "c": np.arange(3)}
    path = tmp_path / "m.npz"
    save(path, **arrays)
    with NpzStream(path) as npz:
        for key, expected in arrays.items():
            np.testing.assert_array_equal(npz.read(key), expected)
        # Two members read in turns from one open file.
        pairs = list(itertools.zip_longest(npz.iter_rows("a", 50), npz.iter_rows("b", 11)))
    got_a = [a for a, _ in pairs if a is not None]
    got_b = [b for _, b in pairs if b is not None]
    np.testing.assert_array_equal(np.concatenate(got_a), arrays["a"])
    np.testing.assert_array_equal(np.concatenate(got_b), arrays["b"])


def test_stored_member_with_changed_byte_fails_crc(tmp_path):
    path = tmp_path / "m.npz"
    np.savez(path, a=np.zeros((100, 18), dtype=np.float32))
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("a.npy")
    data = bytearray(path.read_bytes())
    # A stored member has no inflate step to notice; only its CRC-32 can.
    data[info.header_offset + 30 + len(info.filename) + 200] ^= 0x01
    path.write_bytes(bytes(data))
    with NpzStream(path) as npz, pytest.raises(BadGraphError, match="CRC"):
        list(npz.iter_rows("a", 7))


def test_read_ahead_keeps_order_raises_in_order_and_stops_early():
    from xlarank.data.npzstream import ReadAhead

    def items():
        yield from range(5)
        raise BadGraphError(Path("g.npz"), "broken after five")

    got = []
    with ReadAhead(items(), depth=2) as ahead, pytest.raises(BadGraphError, match="five"):
        for item in ahead:
            got.append(item)
    assert got == [0, 1, 2, 3, 4]
    endless = itertools.count()
    with ReadAhead(endless, depth=3) as ahead:
        assert next(iter(ahead)) == 0
    # Leaving the context stopped the thread: nothing more is drawn.
    drawn = next(endless)
    assert drawn <= 5 and next(endless) == drawn + 1


def test_streamed_features_equal_in_memory_with_tiny_blocks(samples, repo_specs, monkeypatch):
    import xlarank.data.graph as graph_module
    from xlarank.features import featurize_graph, load_feature_spec

    spec = load_feature_spec(repo_specs.features("default"))
    path = next(p for p in samples if p.stem == "unet3d")
    whole = featurize_graph(load_graph(path), spec)
    # Many blocks and a short read-ahead queue: the thread waits on the reader often.
    monkeypatch.setattr(graph_module, "CONFIG_BLOCK_BYTES", 4096)
    monkeypatch.setattr(graph_module, "READ_AHEAD_BYTES", 1)
    streamed = featurize_graph(load_graph(path, configs=False), spec)
    pd.testing.assert_frame_equal(streamed, whole)


def graph_with_edges(tiny_data: Path, tmp_path: Path, change) -> Path:
    source = first_file(tiny_data, "tile-xla", min_nodes=6)
    arrays = dict(np.load(source))
    arrays["edge_index"] = change(arrays["edge_index"].copy(), len(arrays["node_opcode"]))
    path = tmp_path / "npz/tile/xla/train/g.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


EDGE_FAULTS = {
    "self-loop": (lambda e, n: np.r_[e, [[2, 2]]], "[2, 2] is a self-loop"),
    "two-cycle": (lambda e, n: np.r_[e, [[1, 3], [3, 1]]], "lies on a cycle"),
    "a cycle through every node": (
        lambda e, n: np.r_[[[i + 1, i] for i in range(n - 1)], [[0, n - 1]]],
        "lies on a cycle"),
    "cycle only": (lambda e, n: np.array([[1, 0], [2, 1], [0, 2]]), "lies on a cycle"),
}


@pytest.mark.parametrize("case", EDGE_FAULTS)
def test_a_cyclic_edge_index_is_refused_naming_the_edge(tiny_data, tmp_path, case):
    change, needle = EDGE_FAULTS[case]
    path = graph_with_edges(tiny_data, tmp_path, change)
    with pytest.raises(BadGraphError, match=re.escape(needle)) as caught:
        load_graph(path)
    assert caught.value.path == path
    result = run("featurize", tmp_path, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet")
    one_error_line(result, str(path), "edge_index")


def test_a_dag_out_of_topological_order_is_accepted(tiny_data, tmp_path):
    def renumber(edges, n):
        return (n - 1) - edges  # every edge now points from a lower to a higher id

    path = graph_with_edges(tiny_data, tmp_path, renumber)
    assert not (np.load(path)["edge_index"][:, 0] > np.load(path)["edge_index"][:, 1]).all()
    assert load_graph(path).n_nodes >= 6


@pytest.mark.parametrize("seed", range(6))
def test_cycle_edge_agrees_with_networkx(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(1, 15))
        m = int(rng.integers(0, 30))
        src = rng.integers(0, n, m).astype(np.int64)
        dst = rng.integers(0, n, m).astype(np.int64)
        if rng.random() < 0.5:  # mostly acyclic: keep edges pointing down, add one back
            keep = src > dst
            src, dst = src[keep], dst[keep]
            if len(src) and rng.random() < 0.5:
                src, dst = np.r_[src, dst[0]], np.r_[dst, src[0]]
        graph = nx.MultiDiGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
        edge = cycle_edge(src, dst, n)
        assert (edge < 0) == nx.is_directed_acyclic_graph(graph)
        if edge >= 0:  # the edge named closes a cycle: its head reaches its tail
            assert src[edge] == dst[edge] or nx.has_path(graph, int(dst[edge]), int(src[edge]))


def test_every_real_sample_passes_the_acyclic_check(samples):
    for path in samples:
        edges = np.load(path)["edge_index"]
        assert cycle_edge(edges[:, 0].copy(), edges[:, 1].copy(), int(edges.max()) + 1) < 0
        load_graph(path, configs=False)


@pytest.mark.parametrize("value", [3e38, -3e38, 1e19])
def test_huge_node_features_are_refused_with_a_clear_message(tiny_data, tmp_path, value):
    source = first_file(tiny_data, "tile-xla")
    arrays = dict(np.load(source))
    arrays["node_feat"] = arrays["node_feat"].copy()
    arrays["node_feat"][:, 30] = value
    path = tmp_path / "npz/tile/xla/train/g.npz"
    path.parent.mkdir(parents=True)
    np.savez(path, **arrays)
    with pytest.raises(BadGraphError, match="node 0, column 30: .* is beyond 1e\\+18"):
        load_graph(path)
    result = run("featurize", tmp_path, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet")
    one_error_line(result, str(path), "beyond")
    assert "RuntimeWarning" not in result.output


@pytest.fixture(params=["isal_zlib", "zlib"])
def inflate_with(request, monkeypatch):
    """The reader with each inflate library: ISA-L where its wheel is installed, and the
    standard zlib that stands in where it is not."""
    import zlib

    from xlarank.data import npzstream

    if request.param == "isal_zlib":
        library = pytest.importorskip("isal.isal_zlib")
    else:
        library = zlib
    monkeypatch.setattr(npzstream, "inflate_library", library)
    return request.param


def test_each_inflate_reads_like_np_load_and_checks_the_crc(tmp_path, inflate_with, samples):
    rng = np.random.default_rng(1)
    arrays = {"a": rng.integers(-1, 6, (3001, 13, 18)).astype(np.float32)}
    path = tmp_path / "m.npz"
    np.savez_compressed(path, **arrays)
    with NpzStream(path) as npz:
        np.testing.assert_array_equal(np.concatenate(list(npz.iter_rows("a", 97))),
                                      arrays["a"])
    layout = max((p for p in samples if "layout" in p.parts), key=lambda p: p.stat().st_size)
    with NpzStream(layout) as npz, np.load(layout) as expected:
        np.testing.assert_array_equal(npz.read("node_config_feat"),
                                      expected["node_config_feat"])
    # A whole, valid deflate stream whose central directory claims another CRC-32.
    raw = bytearray(path.read_bytes())
    central = raw.rindex(b"PK\x01\x02")
    raw[central + 16] ^= 0xFF
    path.write_bytes(bytes(raw))
    with NpzStream(path) as npz, pytest.raises(BadGraphError, match="CRC"):
        list(npz.iter_rows("a", 97))


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_npy_headers_parse_as_numpy_parses_them(version):
    """The reader's pattern for numpy's usual header text, against np.lib.format, on many
    shapes and dtypes; a header numpy wrote otherwise still goes through numpy's parser."""
    import io

    from xlarank.data.npzstream import _parse_npy_header

    arrays = [np.zeros(()), np.zeros(0, np.int8), np.zeros(7, np.float32),
              np.zeros((3, 0, 2), np.int64), np.zeros((5, 4), ">f8"),
              np.asfortranarray(np.zeros((3, 4), np.float32)), np.zeros((2, 3), "<U5"),
              np.zeros(3, bool), np.zeros((1,) * 9, np.uint16),
              np.zeros(4, [("a", "<f4"), ("b", "<i2")])]
    for array in arrays:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array, version=version)
        expected_stream = io.BytesIO(buffer.getvalue())
        np.lib.format.read_magic(expected_stream)
        expected = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)(expected_stream)
        stream = io.BytesIO(buffer.getvalue())
        assert _parse_npy_header(stream) == expected, array.dtype
        assert stream.tell() == expected_stream.tell()
    # Key order or spacing numpy does not write: numpy's parser decides.
    text = "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}"
    header = text.encode() + b" " * (63 - len(text)) + b"\n"
    stream = io.BytesIO(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    assert _parse_npy_header(stream) == ((3,), False, np.dtype("<f4"))
    with pytest.raises(ValueError):
        _parse_npy_header(io.BytesIO(b"\x93NUMPY\x01\x00\x08\x00{'a': 1}"))
    # numpy's usual text with a code numpy does not know (found by the fuzzer): ValueError,
    # as numpy's own parser gives, not numpy's TypeError.
    for code in ("<b8", "<X4", "|K"):
        text = f"{{'descr': '{code}', 'fortran_order': False, 'shape': (3,), }}"
        header = text.encode() + b" " * (63 - len(text)) + b"\n"
        stream = io.BytesIO(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                            + header)
        with pytest.raises(ValueError, match="dtype descriptor"):
            _parse_npy_header(stream)
