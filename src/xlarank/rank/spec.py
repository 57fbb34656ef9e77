"""Booster specs: how to train one ranker, read from ``models/*.toml`` and checked against
the library's adapter (`xlarank.rank.boosters`)."""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from pathlib import Path

from xlarank.data.collections import COLLECTIONS
from xlarank.errors import SpecError, XlarankError
from xlarank.files import read_structured
from xlarank.rank.boosters import BOOSTERS
from xlarank.rank.labels import N_GRADES

MAX_GRADES = 1000
POINTWISE_LABELS = ("percentile", "log_slowdown")
COLLECTION_IDS = tuple(c.id for c in COLLECTIONS)
# LightGBM refuses queries of more than 10,000 rows; the bound holds for every library.
MAX_GROUP_ROWS = 10_000
# Every budget is bounded. The repo's specs train 100-500 rounds at learning rates of
# 0.05-0.13; 100,000 rounds is 200x more, hours of training and a model file of hundreds
# of MB, already more than any use; a larger number is a typo (num_rounds = 1e11 would
# run until killed).
MAX_ROUNDS = 100_000
# Both libraries keep the seed in a C int: LightGBM wraps 2^31 and above onto other seeds
# (0 and 4294967296 train the same booster), and scikit-learn takes no negative one.
SEEDS = (0, 2**31 - 1)


def check_seed(seed, what: str, error: type[XlarankError] = SpecError) -> int:
    """``seed`` as an int if it is an integer (not a bool) in SEEDS, else ``error``
    naming ``what`` (the spec file or option)."""
    if (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
            or not SEEDS[0] <= seed <= SEEDS[1]):
        raise error(f"{what}: seed {seed!r} is not an integer in {SEEDS[0]}..{SEEDS[1]} "
                    "(booster libraries keep seeds in 31 bits; a larger one wraps onto "
                    "another seed)")
    return int(seed)


def check_seeds(seeds, what: str, error: type[XlarankError] = SpecError) -> list[int]:
    """``seeds`` as a list of ints if it holds one or more, each `check_seed`'s and none
    given twice (two members of one seed are one model trained twice), else ``error``
    naming ``what`` (the spec file or option)."""
    checked = [check_seed(seed, what, error) for seed in seeds]
    if not checked:
        raise error(f"{what}: give one or more seeds")
    repeated = sorted({seed for seed in checked if checked.count(seed) > 1})
    if repeated:
        raise error(f"{what}: seed {repeated[0]} is given more than once; give distinct "
                    "seeds")
    return checked


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
    # Pointwise objectives' label: "percentile" (`faster_share`) or "log_slowdown"; ranking
    # objectives take grades. Empty: "grades" for ranking objectives, "log_slowdown" for
    # pointwise ones.
    label: str = ""
    # The collections (ids such as "tile:xla") the spec was made for; training refuses a
    # frame of another. Empty: any collection (the objective specs).
    collections: list = field(default_factory=list)
    params: dict = field(default_factory=dict)

    @property
    def pointwise(self) -> bool:
        """Whether the objective regresses a label per row (`label_scheme`) instead of
        ranking graded configs per graph."""
        library = BOOSTERS.get(self.library)
        return library is not None and self.objective in library.pointwise

    @property
    def label_scheme(self) -> str:
        """The training label: "grades", "percentile" or "log_slowdown"."""
        return self.label or ("log_slowdown" if self.pointwise else "grades")


def load_ranker_spec(path: str | Path) -> RankerSpec:
    """The booster spec in a TOML (or JSON) file; its name defaults to the file's stem."""
    path = Path(path)
    raw = read_structured(path, "booster spec", SpecError)
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a booster spec must be a table of fields, not "
                        f"{type(raw).__name__}")
    raw.setdefault("name", path.stem)
    fields = dataclasses.fields(RankerSpec)
    missing = [f.name for f in fields if f.name not in raw
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise SpecError(f"{path}: missing key {missing[0]!r}")
    unknown = sorted(set(raw) - {f.name for f in fields})
    if unknown:
        raise SpecError(f"{path}: unknown key {unknown[0]!r}; known: "
                        f"{', '.join(f.name for f in fields)}")
    spec = RankerSpec(**raw)
    for name in ("name", "features", "library", "objective", "label"):
        if not isinstance(getattr(spec, name), str):
            raise SpecError(f"{path}: {name} must be a string, not "
                            f"{getattr(spec, name)!r}")
    if spec.library not in BOOSTERS:
        raise SpecError(f"{path}: library must be one of {', '.join(BOOSTERS)}")
    library = BOOSTERS[spec.library]
    if spec.objective not in library.objectives:
        raise SpecError(f"{path}: objective {spec.objective!r} is not one of "
                        f"{', '.join(library.objectives)} for {spec.library}")
    allowed = POINTWISE_LABELS if spec.pointwise else ("grades",)
    if spec.label and spec.label not in allowed:
        raise SpecError(f"{path}: label {spec.label!r} does not suit objective "
                        f"{spec.objective!r}; one of {', '.join(allowed)}")
    _check_integer(path, "num_rounds", spec.num_rounds, 1, MAX_ROUNDS)
    _check_integer(path, "max_configs_per_graph", spec.max_configs_per_graph, 2,
                   MAX_GROUP_ROWS)
    _check_integer(path, "seed", spec.seed, *SEEDS)
    _check_integer(path, "grades", spec.grades, 2, MAX_GRADES)
    if not isinstance(spec.collections, list) or not all(
            isinstance(c, str) and c in COLLECTION_IDS for c in spec.collections):
        raise SpecError(f"{path}: collections must be a list of collection ids "
                        f"({', '.join(COLLECTION_IDS)}), not {spec.collections!r}")
    if not isinstance(spec.params, dict):
        raise SpecError(f"{path}: params must be a table ([params]), not {spec.params!r}")
    library.check_params(spec.params, str(path), spec.grades)
    return spec


def _check_integer(path: Path, name: str, value, low: int, high: int) -> None:
    """SpecError unless a spec field is an integer (not a bool) in low..high."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(f"{path}: {name} must be an integer in {low}..{high}, "
                        f"not {value!r}")
