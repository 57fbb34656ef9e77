"""The TOML files xlarank writes (tune's chosen spec) read back, whatever the paths and
names in them hold: control characters, quotes, backslashes, DEL, non-ASCII and
undecodable bytes of file names."""

from __future__ import annotations

import shutil
import tomllib

import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.errors import XlarankError
from xlarank.files import toml_text

runner = CliRunner()


@pytest.mark.parametrize("text", ["a\nb", "vt\x0bff\x0c", "q\"uo\\te", "del\x7fx", "tab\tx",
                                  "é😀", "ctl\x01\x1b", "sep\x1c\x1d\x1e\x85\u2028"])
def test_toml_text_reads_back_whatever_strings_hold(text):
    written = toml_text({"name": text, "params": {"x": text, "n": [text]}},
                        header=f"made from {text}\nsecond line")
    read = tomllib.loads(written)
    assert read == {"name": text, "params": {"x": text, "n": [text]}}
    assert written.startswith("# made from ") and "\n# second line\n" in written


def test_an_undecodable_name_is_escaped_in_a_comment_and_refused_in_a_value():
    assert tomllib.loads(toml_text({"a": 1}, header="from /x/\udcff.parquet")) == {"a": 1}
    with pytest.raises(XlarankError, match="cannot hold"):
        toml_text({"name": "x\udcff"})


def test_tune_writes_a_readable_toml_when_a_frame_path_holds_control_characters(
        frames, spec_dir, tmp_path):
    folder = tmp_path / "a\x0bb\x01c\nd"
    folder.mkdir()
    train, valid = folder / "train.parquet", folder / "valid.parquet"
    shutil.copy(frames["default", "tile-xla", "train"], train)
    shutil.copy(frames["default", "tile-xla", "valid"], valid)
    out = tmp_path / "t.toml"
    result = runner.invoke(app, ["tune", str(train), str(valid), "--spec",
                                 str(spec_dir / "lgbm.toml"), "--trials", "2", "--out",
                                 str(out)])
    assert result.exit_code == 0, result.output
    spec = tomllib.loads(out.read_text(encoding="utf-8"))
    assert "params" in spec or "library" in spec
