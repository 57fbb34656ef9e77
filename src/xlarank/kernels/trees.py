"""The tree walk of a saved scikit-learn forest (`xlarank.rank.hgb`): plain arrays in,
one score per row out.

Rows are independent (``prange``); within a row the trees are added in their order,
starting from the baseline, as scikit-learn adds them, so the float64 sums are the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True, nogil=True)
def forest_predict(x, starts, feature, threshold, missing_left, left, right, value, is_leaf,
                   baseline, n_trees):
    """float64 (rows,): baseline + the leaf value of each of the first ``n_trees`` trees.

    x float64 (rows, features); starts int64 (trees + 1,), tree t's nodes at
    starts[t]:starts[t + 1]; per node: feature int64, threshold float64, missing_left
    uint8 (NaN goes left), left and right int64 (node numbers within the tree), value
    float64, is_leaf uint8. A value <= threshold goes left. The arrays are checked by the
    caller (every child inside its tree, every path ending at a leaf)."""
    rows = x.shape[0]
    out = np.empty(rows, dtype=np.float64)
    for r in prange(rows):
        acc = baseline
        for t in range(n_trees):
            base = starts[t]
            node = 0
            while is_leaf[base + node] == 0:
                v = x[r, feature[base + node]]
                if np.isnan(v):
                    go_left = missing_left[base + node] != 0
                else:
                    go_left = v <= threshold[base + node]
                node = left[base + node] if go_left else right[base + node]
            acc += value[base + node]
        out[r] = acc
    return out
