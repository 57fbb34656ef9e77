"""The five TpuGraphs collections and the official directory layout.

A collection has three spellings: its id as in submissions (``layout:xla:default``), its
slug for file names (``layout-xla-default``) and its folder under ``npz/``
(``layout/xla/default``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlarank.errors import XlarankError, checked_type

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Collection:
    kind: str  # "tile" or "layout"
    source: str  # "xla" or "nlp"
    search: str | None  # "default" or "random" for layout, None for tile

    @property
    def id(self) -> str:
        return ":".join(p for p in (self.kind, self.source, self.search) if p)

    @property
    def slug(self) -> str:
        return self.id.replace(":", "-")

    @property
    def folder(self) -> Path:
        return Path(*[p for p in (self.kind, self.source, self.search) if p])

    @property
    def is_tile(self) -> bool:
        return self.kind == "tile"

    def __str__(self) -> str:
        return self.id


COLLECTIONS = (
    Collection("tile", "xla", None),
    Collection("layout", "xla", "default"),
    Collection("layout", "xla", "random"),
    Collection("layout", "nlp", "default"),
    Collection("layout", "nlp", "random"),
)
_BY_NAME = {name: c for c in COLLECTIONS for name in (c.id, c.slug)}


def get_collection(name: str) -> Collection:
    """Look a collection up by id (``tile:xla``) or slug (``tile-xla``)."""
    checked_type(name, str, "collection", "a collection id or slug (str)")
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(c.slug for c in COLLECTIONS)
        raise XlarankError(f"unknown collection {name!r}; known: {known}") from None


def locate(path: Path) -> tuple[Collection | None, str | None]:
    """Collection and split of a file from the official layout, or (None, None) outside it.

    Matches ``.../tile/xla/<split>/<name>.npz`` and
    ``.../layout/<source>/<search>/<split>/<name>.npz``.
    """
    parts = Path(path).parts
    if len(parts) >= 4 and parts[-4] == "tile" and parts[-3] == "xla" and parts[-2] in SPLITS:
        return COLLECTIONS[0], parts[-2]
    if len(parts) >= 5 and parts[-5] == "layout" and parts[-2] in SPLITS:
        name = f"layout:{parts[-4]}:{parts[-3]}"
        if name in _BY_NAME:
            return _BY_NAME[name], parts[-2]
    return None, None


def npz_root(data_root: Path) -> Path:
    """The ``npz`` folder of a dataset root; accepts the root itself or its ``npz`` folder."""
    data_root = Path(data_root)
    for candidate in (data_root / "npz", data_root):
        if (candidate / "tile").is_dir() or (candidate / "layout").is_dir():
            return candidate
    raise XlarankError(
        f"{data_root}: not a TpuGraphs tree (expected npz/tile/xla/... or npz/layout/...; "
        "see README: real data, or make one with 'xlarank synth')"
    )


def split_files(data_root: Path, collection: Collection, split: str) -> list[Path]:
    """The npz files of one collection and split, sorted by name."""
    if split not in SPLITS:
        raise XlarankError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    folder = npz_root(data_root) / collection.folder / split
    return sorted(folder.glob("*.npz")) if folder.is_dir() else []
