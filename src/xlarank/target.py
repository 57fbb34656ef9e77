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

from xlarank.errors import XlarankError


def ranking_target(frame: pd.DataFrame, is_tile: bool) -> np.ndarray:
    """float64 (n_rows,): what is ranked, smaller is better.

    Tile: runtime / normalizer. Layout: the runtime itself (exact in float64 below 2^53 ns).
    A tile normalizer that is not a positive number (which `xlarank.frame.check_rows`
    refuses in a frame file) is an XlarankError naming the graph, never a NaN target.
    """
    runtime = frame["runtime"].to_numpy(dtype=np.float64)
    if not is_tile:
        return runtime
    normalizer = frame["normalizer"].to_numpy(dtype=np.float64)
    bad = ~(normalizer > 0) | ~np.isfinite(normalizer)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        where = (f"graph {frame['graph_id'].iloc[row]}" if "graph_id" in frame.columns
                 else f"row {row}")
        raise XlarankError(f"{where}: normalizer "
                           f"{normalizer[row]:g} is not a positive number; the tile target "
                           "runtime / normalizer needs one (featurize again)")
    return runtime / normalizer
