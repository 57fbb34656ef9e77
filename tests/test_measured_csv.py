"""Measured-runtime CSVs as rank-graph and suggest read them: text that is not UTF-8 is
one error line naming the file, for both commands, and an empty file is still a cold
start for suggest."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import pytest

from helpers import (
    first_file,
    one_error_line,
    run,
)
from xlarank.data.collections import get_collection, split_files
from xlarank.rank.measured import MeasuredError, read_measured

LATIN1 = "config_index,runtime,note\n0,1000,caf\xe9\n1,2000,na\xefve\n".encode("latin-1")
UTF16 = "config_index,runtime\n0,1000\n1,2000\n".encode("utf-16")


@pytest.mark.parametrize("content", [LATIN1, UTF16, b"\xff\xfe\x00\x81" * 20],
                         ids=["latin-1", "utf-16", "binary"])
@pytest.mark.parametrize("command", ["rank-graph", "suggest"])
def test_a_measured_csv_that_is_not_utf8_is_one_error_line(tiny_data, tmp_path, command,
                                                           content):
    measured = tmp_path / "m.csv"
    measured.write_bytes(content)
    graph = split_files(tiny_data, get_collection("tile-xla"), "train")[0]
    result = run(command, graph, "--measured", measured, "--out", tmp_path / "out.csv")
    one_error_line(result, str(measured))
    assert "Traceback" not in result.output
    assert not (tmp_path / "out.csv").exists()


def test_read_measured_names_the_encoding_fault(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(LATIN1)
    with pytest.raises(MeasuredError, match="not UTF-8"):
        read_measured(path)


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_an_empty_measured_csv_is_a_cold_start_for_suggest(tiny_data, tmp_path, text):
    measured = tmp_path / "m.csv"
    measured.write_text(text)
    graph = split_files(tiny_data, get_collection("tile-xla"), "train")[0]
    result = run("suggest", graph, "--measured", measured, "--out", tmp_path / "s.csv",
                 "--batch", "2")
    assert result.exit_code == 0, result.output
    assert Path(tmp_path / "s.csv").is_file()


PLAIN_CSV = "config_index,runtime\n0,1000\n1,2000\n2,1500\n"


def _zip_of_two(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.csv", PLAIN_CSV)
        z.writestr("b.csv", PLAIN_CSV)


def _truncated_gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(PLAIN_CSV.encode() * 50)[:40])


MEASURED_FAULTS = {
    # name: (file name, writer, needle in the error)
    "plain text named .xz": ("m.xz", lambda p: p.write_text(PLAIN_CSV), "xz-compressed"),
    "plain text named .bz2": ("m.bz2", lambda p: p.write_text(PLAIN_CSV), "bz2-compressed"),
    "plain text named .gz": ("m.gz", lambda p: p.write_text(PLAIN_CSV), "gz-compressed"),
    "a zip of two files": ("m.zip", _zip_of_two, "zip-compressed"),
    "a truncated gzip": ("m.csv.gz", _truncated_gzip, "gz-compressed"),
    "garbage named .tar": ("m.tar", lambda p: p.write_text(PLAIN_CSV), "tar-compressed"),
    "an empty file": ("m.csv", lambda p: p.write_text(""), "empty"),
    "a header alone": ("m.csv", lambda p: p.write_text("config_index,runtime\n"),
                       "no measured rows"),
    "an extra field in the first row": (
        "m.csv", lambda p: p.write_text("config_index,runtime\n0,1000,extra\n1,2000\n"),
        "row 1 (line 2) has extra fields"),
    "an extra field in a later row": (
        "m.csv", lambda p: p.write_text("config_index,runtime\n0,1000\n1,2000,x\n"),
        "row 2 (line 3) has extra fields"),
    "binary bytes": ("m.csv", lambda p: p.write_bytes(b"\xff\xfe\x00\x81" * 20), "measured"),
}


@pytest.mark.parametrize("case", MEASURED_FAULTS)
def test_bad_measured_csv_is_one_error_naming_it(tiny_data, tmp_path, case):
    name, write, needle = MEASURED_FAULTS[case]
    measured = tmp_path / name
    write(measured)
    graph = first_file(tiny_data, "tile-xla")
    result = run("rank-graph", graph, "--measured", measured, "--out", tmp_path / "r.csv")
    line = one_error_line(result, str(measured), needle)
    assert str(graph) not in line, "the CSV is at fault, not the graph"


def test_a_real_gzip_csv_is_read(tmp_path):
    path = tmp_path / "m.csv.gz"
    path.write_bytes(gzip.compress(PLAIN_CSV.encode()))
    table = read_measured(path)
    assert table["config_index"].tolist() == [0, 1, 2]
    assert table["runtime"].tolist() == [1000.0, 2000.0, 1500.0]


def test_extra_columns_with_a_header_are_still_ignored(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("config_index,runtime,note\n0,1000,a\n1,2000,b\n")
    assert read_measured(path)["runtime"].tolist() == [1000.0, 2000.0]


def test_a_header_alone_is_no_error_for_read_measured(tmp_path):
    """A cold start (no runtimes yet) is legal for readers other than rank-graph."""
    path = tmp_path / "m.csv"
    path.write_text("config_index,runtime\n")
    assert read_measured(path).empty
