"""What is ranked: one target per config, smaller is better.

Training (`xlarank.rank.labels` turns it into grades) and evaluation (`xlarank.evaluate`
compares scores with it) must agree on it, so it sits here, below both: this module
imports neither, and neither imports the other for it. Evaluation stays independent of
training code, and `xlarank.rank.search` may use `xlarank.evaluate` without an arrow
pointing back up.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def ranking_target(frame: pd.DataFrame, is_tile: bool) -> np.ndarray:
    """float64 (n_rows,): what is ranked, smaller is better.

    Tile: runtime / normalizer. Layout: the runtime itself (exact in float64 below 2^53 ns).
    """
    runtime = frame["runtime"].to_numpy(dtype=np.float64)
    return runtime / frame["normalizer"].to_numpy(dtype=np.float64) if is_tile else runtime
