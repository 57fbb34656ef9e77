"""The public API: every name in `xlarank.__all__` resolves, docs/api.md lists exactly
those names, and its tour runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import xlarank

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"


def test_every_public_name_resolves():
    for name in xlarank.__all__:
        assert getattr(xlarank, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        xlarank.nope  # noqa: B018
    assert set(dir(xlarank)) == set(xlarank.__all__)


def test_the_api_page_lists_every_public_name_and_only_those():
    listed = re.findall(r"^\| `(\w+)` \|", API.read_text(), re.M)
    assert len(listed) == len(set(listed)), "a name listed twice"
    assert set(listed) == set(xlarank.__all__) - {"__version__"}


@pytest.mark.slow
def test_the_tour_runs_as_written(tiny_data, tmp_path):
    block = re.search(r"```python\n(.*?)```", API.read_text(), re.S).group(1)
    script = block.replace('Path("data/synth-demo")', f"Path({str(tiny_data)!r})")
    assert script != block
    (tmp_path / "features").symlink_to(ROOT / "features")
    (tmp_path / "tour.py").write_text(script)
    done = subprocess.run([sys.executable, "tour.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONWARNINGS": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^tau on a train graph -?\d", out, re.M)
    assert re.search(r"^best so far \(\d+, ", out, re.M)
    assert re.search(r"^system tau -?\d", out, re.M)
    assert "refused: " in out and "no/such/model" in out
    assert (tmp_path / "out" / "model").is_dir()
