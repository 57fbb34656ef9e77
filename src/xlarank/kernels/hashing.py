"""The config reader's row hashes: one uint64 per config, so that equal configs of a graph
are found by comparing numbers (`xlarank.data.graph.config_blocks`)."""

from __future__ import annotations

import numpy as np
from numba import njit


def config_row_hashes(configs):
    """uint64 (n_configs,): FNV-1a-style hash of each config's bytes, taken as little-endian
    8-byte words (the last zero-padded); configs int8 (b, nc, 18).

    Equal configs get equal hashes; with 64 bits, two different configs of one graph
    sharing a hash is about 1e-10 likely even at 10^5 configs.
    """
    b = configs.shape[0]
    flat = np.ascontiguousarray(configs).reshape(b, -1)
    if flat.shape[1] % 8:
        flat = np.pad(flat, ((0, 0), (0, 8 - flat.shape[1] % 8)))
    # Whole words keep the multiply chain 8x shorter than hashing byte by byte.
    return _word_hashes(flat.view(np.uint64))


@njit(cache=True, nogil=True)
def _word_hashes(words):
    """uint64 (b,): FNV-1a over each row of words uint64 (b, w)."""
    b, w = words.shape
    out = np.empty(b, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(b):
        h = np.uint64(14695981039346656037)
        for k in range(w):
            h = (h ^ words[i, k]) * prime
        out[i] = h
    return out
