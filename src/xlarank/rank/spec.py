"""Booster specs: how to train one ranker, read from ``models/*.toml`` and checked against
the library's adapter (`xlarank.rank.boosters`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xlarank.errors import SpecError
from xlarank.files import read_structured
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.labels import N_GRADES

MAX_GRADES = 1000
# LightGBM refuses queries of more than 10,000 rows; the bound holds for every library.
MAX_GROUP_ROWS = 10_000


@dataclass(frozen=True)
class RankerSpec:
    """How to train one ranker; read from ``models/*.toml``. The fields, in this order, are
    the card's "spec"."""

    name: str
    features: str
    library: str = "lightgbm"
    objective: str = "lambdarank"
    num_rounds: int = 200
    max_configs_per_graph: int = 2000
    seed: int = 0
    # Relevance grades per graph (quantiles of runtime); gains are linear in the grade.
    grades: int = N_GRADES
    params: dict = field(default_factory=dict)

    @property
    def pointwise(self) -> bool:
        """Whether the objective regresses -log slowdown per row instead of ranking graded
        configs per graph."""
        library = BOOSTERS.get(self.library)
        return library is not None and self.objective in library.pointwise


def load_ranker_spec(path: str | Path) -> RankerSpec:
    """The booster spec in a TOML (or JSON) file; its name defaults to the file's stem."""
    path = Path(path)
    raw = read_structured(path, "booster spec", SpecError)
    raw.setdefault("name", path.stem)
    try:
        spec = RankerSpec(**raw)
    except TypeError as exc:
        raise SpecError(f"{path}: {exc}") from None
    if spec.library not in BOOSTERS:
        raise SpecError(f"{path}: library must be one of {', '.join(BOOSTERS)}")
    objectives = BOOSTERS[spec.library].objectives
    if spec.objective not in objectives:
        raise SpecError(f"{path}: objective {spec.objective!r} is not one of "
                        f"{', '.join(objectives)} for {spec.library}")
    if not 2 <= spec.max_configs_per_graph <= MAX_GROUP_ROWS:
        raise SpecError(f"{path}: max_configs_per_graph must lie in 2..{MAX_GROUP_ROWS}")
    if not 2 <= spec.grades <= MAX_GRADES:
        raise SpecError(f"{path}: grades must lie in 2..{MAX_GRADES}")
    return spec
