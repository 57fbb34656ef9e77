"""What the tests of the CLI, its inputs and its outputs share: running a command
(``run``), its one error line (``one_error_line``), copies of saved models and of the tiny
dataset, and the stand-in that fails a command which starts work it should have refused."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import get_collection, split_files

TILE = get_collection("tile-xla")


runner = CliRunner()


def unmeasured_runtimes_hidden(graph, measured_index) -> list:
    """The graph twice, the file's runtimes of the configs not in ``measured_index`` (a
    pandas Index of config indices) made NaN in one and shuffled among themselves in the
    other: an in-graph fit that reads the measured runtimes alone fits the same model on
    both as on the graph."""
    unmeasured = np.setdiff1d(np.arange(graph.n_configs), measured_index.to_numpy())
    nan = graph.config_runtime.astype(np.float64)
    nan[unmeasured] = np.nan
    shuffled = graph.config_runtime.copy()
    shuffled[unmeasured] = np.random.default_rng(0).permutation(shuffled[unmeasured])
    return [dataclasses.replace(graph, config_runtime=runtime) for runtime in (nan, shuffled)]


def run(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def one_error_line(result, *needles: str, warnings: bool = False) -> str:
    """Exit 2 and a single ``error:`` line on stderr holding every needle; with
    ``warnings``, ``warning:`` lines about the input may come before it."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    if warnings:
        lines = [line for line in lines if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


class Lazy(dict):
    """A dict whose missing values ``make(key)`` makes when first asked for, then keeps:
    shared fixtures of many parts (frames, models) that a run leaving tests out needs only
    some of."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        self[key] = value = self.make(key)
        return value


def copy_model(models, kind: str, tmp_path: Path) -> Path:
    target = tmp_path / kind
    shutil.copytree(models[kind], target)
    return target


def dataset_copy(tiny_data: Path, tmp_path: Path) -> Path:
    """A copy of the tiny dataset's tile train and test files, to add bad files to."""
    root = tmp_path / "data"
    for split in ("train", "test"):
        shutil.copytree(tiny_data / "npz/tile/xla" / split, root / "npz/tile/xla" / split)
    return root


def contents(path: Path) -> dict:
    """Every file's bytes under path (or path's own), to show nothing was changed."""
    if path.is_dir():
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
                if p.is_file()}
    return {"": path.read_bytes()}


def refuse_work(*args, **kwargs):
    raise AssertionError("work started before the output was checked")


def refuse_all_work(monkeypatch) -> None:
    # Patched where each command calls it: train_specs binds train_ranker_from_file at import, so
    # patching xlarank.rank.train alone would leak into a train_specs first imported here.
    import xlarank.rank.train_specs  # noqa: F401 (imported before it is patched)

    for where in ("xlarank.rank.train.train_ranker", "xlarank.rank.train.train_ranker_from_file",
                  "xlarank.rank.train_specs.train_ranker_from_file",
                  "xlarank.score.featurize_graph"):
        monkeypatch.setattr(where, refuse_work)


def tile_arrays(tiny_data: Path) -> dict[str, np.ndarray]:
    source = sorted((tiny_data / "npz/tile/xla/train").glob("*.npz"))[0]
    return {k: v.copy() for k, v in np.load(source).items()}


def write_tile(arrays: dict, tmp_path: Path, name: str = "g") -> Path:
    path = tmp_path / "npz/tile/xla/train" / f"{name}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def first_file(tiny_data: Path, slug: str, split: str = "train", min_nodes: int = 0) -> Path:
    files = split_files(tiny_data, get_collection(slug), split)
    return next(f for f in files if len(np.load(f)["node_opcode"]) >= min_nodes)


def npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every member of an npz file, read whole (for crafting a changed copy)."""
    with np.load(path) as npz:
        return {key: npz[key] for key in npz.files}


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the xlarank package under src/."""
    src = Path(__file__).resolve().parents[1] / "src"
    out = {}
    for path in sorted((src / "xlarank").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out
