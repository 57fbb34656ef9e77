"""Measured-runtime CSVs as rank-graph and suggest read them: text that is not UTF-8 is
one error line naming the file, for both commands, and an empty file is still a cold
start for suggest."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files
from xlarank.rank.measured import MeasuredError, read_measured

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


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
