"""Seeds as every command and API takes them: whole numbers >= 0 (numpy's generators,
jax's keys and the boosters refuse or wrap others)."""

from __future__ import annotations

import numpy as np

from xlarank.errors import ArgumentTypeError, XlarankError


def check_seed(seed, what: str = "seed") -> int:
    """``seed`` as an int if it is a whole number >= 0; XlarankError naming ``what``
    (an option such as --seed, or an argument) otherwise, `ArgumentTypeError` (also a
    TypeError) for a non-integer."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ArgumentTypeError(f"{what}: expected an int, got {type(seed).__name__} {seed!r}")
    if seed < 0:
        raise XlarankError(f"{what} {int(seed)}: a seed is a whole number >= 0")
    return int(seed)


# The boosters keep a seed in a C int (LightGBM wraps 2^31 and above onto other seeds:
# 0 and 4294967296 train the same booster); `xlarank.rank.spec.SEEDS` is the same range.
MAX_BOOSTER_SEED = 2**31 - 1


def check_booster_seed(seed, what: str = "seed") -> int:
    """`check_seed`, and at most `MAX_BOOSTER_SEED`: the seed of a command or API that
    seeds a booster (rank-graph, suggest), where a larger one would wrap onto another
    seed; XlarankError naming ``what`` otherwise."""
    seed = check_seed(seed, what)
    if seed > MAX_BOOSTER_SEED:
        raise XlarankError(f"{what} {seed}: a seed is a whole number in 0.."
                           f"{MAX_BOOSTER_SEED} here (the boosters it seeds take no larger "
                           "one; it would wrap onto another seed)")
    return seed


def random_seed(source: str, what: str) -> int:
    """The seed of a "random:SEED" weights source, checked (`check_seed`)."""
    try:
        seed = int(source.split(":", 1)[1])
    except ValueError:
        seed = -1
    if seed < 0:
        raise XlarankError(f"{what} {source!r}: expected random:SEED, SEED a whole number "
                           ">= 0")
    return seed
