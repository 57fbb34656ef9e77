"""HLO opcode names to the ids of the dataset's ``node_opcode`` (FORMAT.md, "Opcode ids").

The table is the official converter's: its live opcodes and the two it keeps as
tombstones (trace, tuple-select) so that old ids never change meaning. An opcode outside
it (one XLA added later) gets id 0, as the converter gives it; the importer names each
such opcode once in a warning.
"""

from __future__ import annotations

UNKNOWN_OPCODE = 0

_NAMES = (
    "abs add add-dependency after-all all-reduce all-to-all atan2 batch-norm-grad "
    "batch-norm-inference batch-norm-training bitcast bitcast-convert broadcast call ceil "
    "cholesky clamp collective-permute count-leading-zeros compare complex concatenate "
    "conditional constant convert convolution copy copy-done copy-start cosine custom-call "
    "divide domain dot dynamic-slice dynamic-update-slice exponential exponential-minus-one "
    "fft floor fusion gather get-dimension-size set-dimension-size get-tuple-element imag "
    "infeed iota is-finite log log-plus-one and not or xor map maximum minimum multiply "
    "negate outfeed pad parameter partition-id popcnt power real recv recv-done reduce "
    "reduce-precision reduce-window remainder replica-id reshape reverse rng "
    "rng-get-and-update-state rng-bit-generator round-nearest-afz rsqrt scatter select "
    "select-and-scatter send send-done shift-left shift-right-arithmetic "
    "shift-right-logical sign sine slice sort sqrt subtract tanh trace transpose "
    "triangular-solve tuple tuple-select while cbrt all-gather collective-permute-start "
    "collective-permute-done logistic dynamic-reshape all-reduce-start all-reduce-done "
    "reduce-scatter all-gather-start all-gather-done opt-barrier async-start async-update "
    "async-done round-nearest-even stochastic-convert tan"
).split()

OPCODE_IDS: dict[str, int] = {name: i for i, name in enumerate(_NAMES, start=1)}


def opcode_id(name: str) -> int:
    """The dataset's id of an HLO opcode name; 0 for one the table does not know."""
    return OPCODE_IDS.get(name, UNKNOWN_OPCODE)
