"""The tree walks of saved LightGBM and XGBoost boosters (`xlarank.rank.forest_walk`):
plain arrays in, one raw score per row out, each the library's own score to the bit.

`xlarank.kernels.trees.forest_predict` (scikit-learn's walk) does not fit either library:
LightGBM sends NaN and, for some splits, zero its default way and zeroes near-zero inputs;
XGBoost splits on ``x < threshold`` in float32 and adds its leaves in float32. So each
library has its own kernel here, with the library's rules:

- LightGBM (``include/LightGBM/tree.h``, ``Tree::NumericalDecision``; ``src/c_api.cpp``,
  ``RowPairFunctionFromDenseMatrix``): the C API keeps a dense input value only when
  ``|v| > kZeroThreshold`` or v is NaN, so smaller ones reach the trees as 0.0. At a split
  of missing type None or Zero a NaN is 0.0; missing type Zero sends values within
  ``kZeroThreshold`` of 0 the default way, missing type NaN sends NaN the default way;
  otherwise ``v <= threshold`` goes left. Leaves are added in float64 from 0.0, tree by
  tree.
- XGBoost (``src/predictor/predict_fn.h``, ``GetNextNode``; ``cpu_predictor.cc``): a NaN
  (the DMatrix's missing value) goes the default way, otherwise float32 ``v < threshold``
  goes left; the score starts at the float32 base score and adds each tree's float32 leaf
  in float32, tree by tree.

The node layout, one for both: tree t's nodes lie at starts[t]:starts[t + 1], its root
first; per node feature int32 (the split's column of x, -1 for a leaf), threshold (the
split's, or the leaf's value), left int32 (the left child's number within the tree; the
right child is the next node, as XGBoost lays them out), flags uint8 (LightGBM's
decision_type bits: 2 default left, 4-8 the missing type). Rows go through the trees in
blocks (as XGBoost's CPU predictor does), so a tree stays in cache while the block walks
it; each row still adds its trees in their order, so the sums are the library's. Numeric
splits only, checked by the caller with the rest (every split on a column of x, every
child inside its tree and after its parent, so every walk ends at a leaf).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# LightGBM's kZeroThreshold, declared ``const double kZeroThreshold = 1e-35f``: a float
# literal widened to double, so not the double nearest 1e-35.
K_ZERO_THRESHOLD = float(np.float32(1e-35))
# decision_type bits (LightGBM's kDefaultLeftMask; the missing type above it).
DEFAULT_LEFT = 2
MISSING_ZERO, MISSING_NAN = 1, 2
# Rows walked through each tree together.
BLOCK_ROWS = 64


@njit(cache=True, nogil=True)
def _lightgbm_right(v, threshold, flags):
    """1 if LightGBM sends value v (read as float64) right at a split, else 0."""
    v = np.float64(v)
    # Dropped by the C API's dense-row reader, so 0.0 in the predict buffer.
    if abs(v) <= K_ZERO_THRESHOLD:
        v = 0.0
    kind = (flags >> 2) & 3
    if np.isnan(v) and kind != MISSING_NAN:
        v = 0.0
    if ((kind == MISSING_ZERO and -K_ZERO_THRESHOLD <= v <= K_ZERO_THRESHOLD)
            or (kind == MISSING_NAN and np.isnan(v))):
        return 0 if flags & DEFAULT_LEFT else 1
    return 0 if v <= threshold else 1


@njit(cache=True, nogil=True)
def _xgboost_right(v, threshold, flags):
    """1 if XGBoost sends float32 value v right at a split, else 0."""
    if np.isnan(v):
        return 0 if flags & DEFAULT_LEFT else 1
    return 0 if v < threshold else 1


@njit(cache=True, parallel=True, nogil=True)
def lightgbm_predict(x, starts, feature, threshold, left, flags, n_trees, divisor):
    """float64 (rows,): the sum of the first ``n_trees`` trees' leaves, divided by
    ``divisor`` (the rounds averaged, for LightGBM's average_output; else 1.0).

    x float32 or float64 (rows, features), read as float64; threshold float64."""
    rows = x.shape[0]
    out = np.zeros(rows, dtype=np.float64)
    for block in prange((rows + BLOCK_ROWS - 1) // BLOCK_ROWS):
        begin = block * BLOCK_ROWS
        n = min(rows, begin + BLOCK_ROWS) - begin
        # Each row's node (an index into the node arrays). The rows of a block step down
        # a tree together: their walks are independent, so the processor overlaps their
        # loads and their mispredicted branches instead of waiting on one row's chain.
        at = np.empty(BLOCK_ROWS, dtype=np.int64)
        for t in range(n_trees):
            base = starts[t]
            at[:n] = base
            walking = True
            while walking:
                walking = False
                for k in range(n):
                    i = at[k]
                    f = feature[i]
                    if f >= 0:
                        at[k] = base + left[i] + _lightgbm_right(x[begin + k, f],
                                                                 threshold[i], flags[i])
                        walking = True
            for k in range(n):
                out[begin + k] += threshold[at[k]]
        for k in range(n):
            out[begin + k] /= divisor
    return out


@njit(cache=True, parallel=True, nogil=True)
def xgboost_predict(x, starts, feature, threshold, left, flags, base_score, n_trees):
    """float64 (rows,): the float32 margin base_score + the first ``n_trees`` trees'
    leaves, added in float32, widened.

    x float32 (rows, features); threshold float32; base_score a float32 scalar."""
    rows = x.shape[0]
    margin = np.full(rows, base_score, dtype=np.float32)
    for block in prange((rows + BLOCK_ROWS - 1) // BLOCK_ROWS):
        begin = block * BLOCK_ROWS
        n = min(rows, begin + BLOCK_ROWS) - begin
        # As in lightgbm_predict: the block's rows step down each tree together.
        at = np.empty(BLOCK_ROWS, dtype=np.int64)
        for t in range(n_trees):
            base = starts[t]
            at[:n] = base
            walking = True
            while walking:
                walking = False
                for k in range(n):
                    i = at[k]
                    f = feature[i]
                    if f >= 0:
                        at[k] = base + left[i] + _xgboost_right(x[begin + k, f],
                                                                threshold[i], flags[i])
                        walking = True
            for k in range(n):
                margin[begin + k] += threshold[at[k]]
    return margin.astype(np.float64)
