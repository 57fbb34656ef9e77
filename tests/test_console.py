"""The command line's last words: a result that is written exits 0 even when its message
cannot be shown (a stdout that is /dev/full, an encoding without the path's characters),
and an error is still one line and exit 2 then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def xlarank(*args, stdout=subprocess.PIPE, **env):
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env}
    return subprocess.run([sys.executable, "-m", "xlarank", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, env=environment, timeout=300)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_result_whose_message_meets_a_full_stdout_exits_0(tmp_path):
    out = tmp_path / "data"
    with open("/dev/full", "w") as full:
        result = xlarank("synth", out, "--preset", "tiny", stdout=full)
    assert result.returncode == 0, result.stderr.decode()
    assert (out / "synth.json").is_file()
    assert b"Traceback" not in result.stderr


def test_a_non_ascii_path_under_an_ascii_stdout_exits_0(tmp_path):
    out = tmp_path / "dé"
    result = xlarank("synth", out, "--preset", "tiny", PYTHONIOENCODING="ascii")
    assert result.returncode == 0, result.stderr.decode()
    assert (out / "synth.json").is_file()
    assert b"d\\xe9" in result.stdout


# slow: evaluate in a child process (the synth ones stay fast)
@pytest.mark.slow
def test_an_error_naming_a_non_ascii_path_is_one_line_under_ascii(tmp_path):
    result = xlarank("evaluate", tmp_path / "é.parquet", "--random",
                     PYTHONIOENCODING="ascii")
    assert result.returncode == 2
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "\\xe9" in lines[0]
