"""bench/full.py's share of a preset: the files the whole preset holds at those indices."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import full
finally:
    sys.path.remove(str(ROOT / "bench"))

from xlarank.data.synth import synth_dataset  # noqa: E402


def test_a_share_holds_every_kth_file_of_the_whole_preset_byte_for_byte(tmp_path):
    whole = synth_dataset(tmp_path / "whole", preset="tiny")
    share = tmp_path / "share"
    full.make_share(share, "tiny", 3, workers=1)
    got = sorted(p.relative_to(share) for p in share.rglob("*.npz"))
    expected = sorted(p.relative_to(whole) for p in whole.rglob("*.npz")
                      if int(p.stem.rsplit("_", 1)[1]) % 3 == 0)
    assert got == expected and len(got) >= 10
    for rel in got:
        assert (share / rel).read_bytes() == (whole / rel).read_bytes(), rel
    assert json.loads((share / "synth.json").read_text())["share"] == 3
    assert not list(tmp_path.glob(".share*"))
