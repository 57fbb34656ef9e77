"""The packaged specs: the feature specs and booster specs that ship inside xlarank.

``features/`` and ``models/`` here are links to the repository's top-level folders, the
versioned, user-editable source of every spec; a wheel carries copies of their TOML files
(pyproject's package-data), so a ``pip install`` works from any folder. A spec is named by
its path below those folders without ``.toml``: ``default`` (a feature spec),
``tile-xla``, ``ensembles/tile-xla``, ``objectives/xendcg`` (booster specs).

`spec_path` turns what a user gave ``--spec`` into a file: an existing path wins, else a
packaged spec of that name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlarank.errors import SpecError

PACKAGED = Path(__file__).resolve().parent
# The kinds of spec, and the folder each lives in.
KINDS = {"feature": "features", "booster": "models"}


@dataclass(frozen=True)
class PackagedSpec:
    kind: str     # "feature" or "booster"
    name: str     # e.g. "default", "tile-xla", "ensembles/tile-xla"
    path: Path
    summary: str  # the first sentence of the file's opening comment


def packaged_specs(kind: str | None = None) -> list[PackagedSpec]:
    """Every packaged spec (of one ``kind`` when given), sorted by kind and name."""
    found = []
    for spec_kind, folder in KINDS.items():
        if kind not in (None, spec_kind):
            continue
        root = PACKAGED / folder
        for path in sorted(root.glob("**/*.toml")):
            name = path.relative_to(root).with_suffix("").as_posix()
            if name.split("/")[0] in ("trained", "tuned"):  # outputs, not specs
                continue
            found.append(PackagedSpec(spec_kind, name, path, _summary(path)))
    return found


def _summary(path: Path) -> str:
    """The first sentence of the file's opening comment."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").strip())
    text = " ".join(lines)
    return text.split(". ")[0].rstrip(".")


def spec_path(value: str | Path, kind: str) -> Path:
    """The spec file ``value`` names: an existing path, else the packaged ``kind`` spec
    of that name (``tile-xla`` or ``tile-xla.toml``).

    Raises
    ------
    SpecError
        Neither a file nor a packaged spec; the message lists the packaged names.
    """
    given = Path(value)
    if given.is_file():
        return given
    name = given.as_posix().removesuffix(".toml")
    for spec in packaged_specs(kind):
        if spec.name == name:
            return spec.path
    names = ", ".join(s.name for s in packaged_specs(kind))
    raise SpecError(f"{value}: {kind} spec not found (no such file, and no packaged spec of "
                    f"that name; packaged: {names})")


def default_booster_spec(collection_slug: str) -> Path:
    """The packaged default booster spec of a collection (e.g. ``tile-xla``)."""
    return spec_path(collection_slug, "booster")
