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


def seen_table(n_configs: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty table for `first_seen_ids` of a graph of n_configs configs: (uint64
    (size,) hashes, int64 (size,) ids, -1 where empty), size a power of two at least twice
    n_configs, so it never fills."""
    size = 1 << max(1, int(2 * max(1, n_configs) - 1).bit_length())
    return np.zeros(size, dtype=np.uint64), np.full(size, -1, dtype=np.int64)


@njit(cache=True, nogil=True)
def first_seen_ids(hashes, table_hash, table_id, n_seen):
    """Each config's distinct id, numbered by first appearance across a graph's blocks.

    hashes: uint64 (b,) `config_row_hashes` of one block; table_hash, table_id: the
    graph's `seen_table`, updated in place; n_seen: distinct configs seen in earlier
    blocks. Returns (ids int64 (b,), new int64 (n_new,) the rows of the block that first
    show a config, in order, and the new n_seen).

    Why not a dict and np.unique per block: on an nlp random file (79,000 configs in 1,600
    blocks) their Python loop took most of a second of the featurizing thread.
    """
    b = hashes.shape[0]
    mask = np.uint64(table_hash.shape[0] - 1)
    ids = np.empty(b, dtype=np.int64)
    new = np.empty(b, dtype=np.int64)
    n_new = 0
    for r in range(b):
        h = hashes[r]
        slot = (h ^ (h >> np.uint64(31))) & mask
        while True:
            known = table_id[slot]
            if known < 0:
                table_hash[slot] = h
                table_id[slot] = n_seen
                ids[r] = n_seen
                new[n_new] = r
                n_new += 1
                n_seen += 1
                break
            if table_hash[slot] == h:
                ids[r] = known
                break
            slot = (slot + np.uint64(1)) & mask
    return ids, new[:n_new], n_seen
