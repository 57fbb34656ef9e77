"""bench/autotune.py's noise and regret helpers, against hand-computed examples."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import autotune
finally:
    sys.path.remove(str(ROOT / "bench"))


def test_regret_at_reads_the_curve_at_each_budget_share():
    # 100 distinct configs: 2% -> 2 measurements; 5% -> 5; 10% and 20% past the curve's
    # 5 measurements read its end.
    regret = autotune.regret_at([1.5, 1.2, 1.1, 1.1, 1.0], 100)
    assert regret == pytest.approx({"0.02": 0.2, "0.05": 0.0, "0.1": 0.0, "0.2": 0.0})


def test_graph_record_keeps_the_top_one_percent_only_clear_of_the_noise():
    # 200 configs at 100..299 ns: the top 1% is 2 configs, 1 ns apart.
    runtime = np.arange(100.0, 300.0)

    def pool(noise):
        # Each config measured once: the noise is given, not measured.
        return SimpleNamespace(runtime=runtime, noise=noise, repeated=3,
                               graph=SimpleNamespace(config_runtime=runtime),
                               group=np.arange(len(runtime)))

    clear = autotune.graph_record(pool(0.5))
    assert clear["top1_clear_of_noise"] and clear["top1_spread_ns"] == 1.0
    assert clear["runtime_spread"] == pytest.approx(2.99)
    assert clear["plateau"] == 1 / 200  # only 100 ns lies within 0.5% of 100 ns
    assert clear["noise_relative"] == 0.005 and clear["within_noise_configs"] == 1
    noisy = autotune.graph_record(pool(1.0))
    assert not noisy["top1_clear_of_noise"] and noisy["within_noise_configs"] == 2


def test_noise_note_says_the_trees_own_settings(tmp_path):
    """The note names the tree's noise (synth.json), the defaults for a tree without it,
    and whether the synthetic files' relative noise spans the real files'."""
    from xlarank.data.synth import synth_dataset
    from xlarank.data.synth.dataset import SynthNoise

    old = tmp_path / "old"
    old.mkdir()
    assert autotune.tree_noise(old) == {"layout_repeat_tau": (0.6, 0.95), "tile_sigma": 0.02}
    tree = synth_dataset(tmp_path / "d", "tiny", noise=SynthNoise((0.3, 0.45), 0.001))
    noise = autotune.tree_noise(tree)
    assert noise == {"layout_repeat_tau": (0.3, 0.45), "tile_sigma": 0.001}
    records = [{"data": "real", "noise_relative": 1e-5},
               {"data": "synthetic", "noise_relative": 1e-3}]
    note = autotune.synthetic_noise_note(records, noise)
    assert "repeat Kendall tau of 0.3-0.45" in note and "tile sigma 0.001" in note
    assert "do not span" in note and "--repeat-tau" in note
    wide = records + [{"data": "synthetic", "noise_relative": 1e-6}]
    assert "files span the real range" in autotune.synthetic_noise_note(wide, noise)
