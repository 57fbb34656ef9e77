"""Where graph files came from: ``xlarank synth`` (synthetic) or anywhere else (real).

`xlarank synth` leaves ``synth.json`` in the root of every dataset it writes and names
its files ``synth_<split>_NNNN.npz``; a file under such a root, or so named (a synthetic
file copied out of its tree), is synthetic, any other file is taken as real. Featurize records the
origin of a frame's files in its metadata (``data_origin``), train copies it into the
card (``training_data.origin``), and score, submit and ``--prior`` warn when a model
trained on synthetic data meets real graphs: the synthetic cost model is not TPU
hardware, so such a model's ranking of real graphs measures nothing.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

from xlarank.errors import XlarankWarning

SYNTH_MANIFEST = "synth.json"
SYNTHETIC, REAL, MIXED, UNKNOWN = "synthetic", "real", "mixed", "unknown"
ORIGINS = (SYNTHETIC, REAL, MIXED, UNKNOWN)


@functools.lru_cache(maxsize=256)
def _synthetic_dir(folder: str) -> bool:
    return any((p / SYNTH_MANIFEST).is_file() for p in (Path(folder), *Path(folder).parents))


# How `xlarank.data.synth.synth_jobs` names its files.
_SYNTH_NAME = re.compile(r"synth_(train|valid|test)_\d{4,}\.npz")


def file_origin(path: str | Path) -> str:
    """SYNTHETIC for a file under a dataset root `xlarank synth` wrote or named as it
    names its files, else REAL."""
    path = Path(path)
    if _SYNTH_NAME.fullmatch(path.name) or _synthetic_dir(str(path.resolve().parent)):
        return SYNTHETIC
    return REAL


def files_origin(paths: Iterable[str | Path]) -> str:
    """The origin all ``paths`` share, MIXED if they differ, UNKNOWN for none."""
    origins = {file_origin(p) for p in paths}
    return origins.pop() if len(origins) == 1 else MIXED if origins else UNKNOWN


def model_origin(card: dict) -> str:
    """Where a model's training data came from, as its card records it (UNKNOWN for a
    card written before xlarank recorded it)."""
    data = card.get("training_data")
    origin = data.get("origin") if isinstance(data, dict) else None
    return origin if origin in ORIGINS else UNKNOWN


def warn_if_synthetic_meets_real(card: dict, graphs: Iterable[str | Path], what: str) -> None:
    """An XlarankWarning when a model trained (even partly) on synthetic data is to score
    real graphs among ``graphs``; ``what`` names the model (e.g. "the --prior model")."""
    if _synthetic_model(card):
        real = [p for p in graphs if file_origin(p) == REAL]
        if real:
            _warn(card, what, f"scores {len(real)} real graph(s), e.g. {real[0]}")


def warn_if_synthetic_meets_real_frame(card: dict, frame_origin: str, where: str,
                                       what: str) -> None:
    """`warn_if_synthetic_meets_real` for a frame: ``frame_origin`` its data_origin (the
    frame's metadata), ``where`` the frame's path."""
    if _synthetic_model(card) and frame_origin in (REAL, MIXED):
        _warn(card, what, f"is evaluated on {where}, a frame of real graphs")


def _synthetic_model(card) -> bool:
    return isinstance(card, dict) and model_origin(card) in (SYNTHETIC, MIXED)


def _warn(card: dict, what: str, meets: str) -> None:
    partly = "partly " if model_origin(card) == MIXED else ""
    # stacklevel 4: the caller of the public function above.
    warnings.warn(f"{what} ({card.get('collection')}) was trained {partly}on synthetic data "
                  f"(xlarank synth) and {meets}: its ranking of real graphs means little; "
                  "train on TpuGraphs data", XlarankWarning, stacklevel=4)
