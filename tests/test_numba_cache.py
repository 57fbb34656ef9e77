"""Where Numba caches xlarank's compiled kernels: the user's cache folder, never the
source tree of an editable install, unless NUMBA_CACHE_DIR says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import xlarank, xlarank.kernels.graph, numba.core.config as c; "
         "print(repr(c.CACHE_DIR))")


def cache_dir(**env) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    environment.update(PYTHONPATH=str(ROOT / "src"), **env)
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                            env=environment, timeout=120, check=True)
    return eval(result.stdout.strip())


def test_the_cache_goes_to_the_users_cache_folder(tmp_path):
    assert cache_dir(XDG_CACHE_HOME=str(tmp_path)) == str(tmp_path / "xlarank" / "numba")
    assert (tmp_path / "xlarank" / "numba").is_dir()


def test_a_cache_dir_the_user_set_wins(tmp_path):
    assert cache_dir(NUMBA_CACHE_DIR=str(tmp_path / "mine"),
                     XDG_CACHE_HOME=str(tmp_path)) == str(tmp_path / "mine")


def test_an_unwritable_cache_folder_leaves_numbas_default(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert cache_dir(XDG_CACHE_HOME=str(blocked)) == ""
