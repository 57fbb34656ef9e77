"""The CLI's promise, enumerated rather than listed: every path parameter of every command
(found in the typer app, from the callbacks' type annotations) meets every hostile kind of
path, and each run ends with exit code 2, one stderr line starting ``error:`` that names
the file, no traceback, and nothing written (no output made, an existing one unchanged).

What a command needs to run is catalogued once per command (`BASE`), and each path
parameter is an input (`INPUTS`) or an output (`OUTPUTS`); the completeness tests fail
for a command or a path parameter added without an entry, so it is covered when it is
written. The default run takes a fast subset (`FAST`); the whole cross product is marked
slow. Usage errors (a typo'd option, a missing one, a number out of range) and the root's
``--verbose`` after a command's name are checked for every command too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import traceback
import typing
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np
import pytest
import typer.main
from typer.testing import CliRunner

from conftest import ROOT, small
from helpers import first_file
from xlarank.cli import app
from xlarank.data.collections import split_files

# ---------------------------------------------------------------- the app, enumerated
GROUP = typer.main.get_command(app)


def _holds_path(annotation) -> bool:
    """Whether a parameter's annotation is pathlib.Path or holds it (Path | None,
    list[Path], Annotated[Path, ...])."""
    return annotation is Path or any(_holds_path(a) for a in typing.get_args(annotation))


def path_params() -> dict[str, dict[str, object]]:
    """{command: {parameter name: its click parameter}} for every parameter typed as a
    Path, in the command's order. Read from the callbacks' annotations, as typer may type
    its click parameters lazily."""
    found = {}
    for name, command in GROUP.commands.items():
        hints = typing.get_type_hints(command.callback, include_extras=True)
        params = {p.name: p for p in command.params}
        found[name] = {key: params.get(key) for key, hint in hints.items()
                       if key != "return" and _holds_path(hint)}
    return found


PATHS = path_params()


# ---------------------------------------------------------------- the catalogue
@dataclasses.dataclass(frozen=True)
class In:
    """An input path parameter. ``given``: the `Given` attribute holding a valid one (a
    file, or with ``folder`` a folder); ``suffix``: its files' suffix; ``spoil``: in a
    copy of a valid folder, the glob of the file the truncated and random kinds spoil
    (the largest file if empty); ``either``: a file or a folder of them (score's inputs);
    ``accepts``: hostile kinds the command documents as valid."""

    given: str
    suffix: str = ""
    folder: bool = False
    spoil: str = ""
    either: bool = False
    accepts: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Out:
    """An output path parameter: a file of ``suffix``, or with ``folder`` a folder, which
    an earlier run marked as xlarank's with its ``marker`` file."""

    suffix: str = ""
    folder: bool = False
    marker: str | None = None


FRAME = In("frame", ".parquet")
NPZ_FILE = In("npz", ".npz")
MODEL = In("model", folder=True)
DATA = In("data", folder=True, spoil="npz/tile/xla/train/*.npz")
CSV = Out(".csv")

INPUTS: dict[tuple[str, str], In] = {
    ("import", "sources"): In("record", ".pb"),
    ("measure", "remeasure"): In("record", ".pb"),
    ("measure", "configs_of"): In("candidates", ".npz"),
    ("measure", "indices"): In("indices", ".csv"),
    # Read and added to: "made if absent".
    ("measure", "measured"): In("measured", ".csv", accepts=("missing", "empty")),
    ("corpus", "programs"): In("programs", ".toml"),
    ("featurize", "data"): DATA,
    ("gnn-train", "data"): DATA,
    ("train", "frame"): FRAME,
    ("train", "valid"): FRAME,
    ("tune", "train_frame"): FRAME,
    ("tune", "valid_frame"): FRAME,
    ("evaluate", "frame"): FRAME,
    ("evaluate", "model"): MODEL,
    ("evaluate", "eval_indices"): In("eval_indices", ".json"),
    ("compare", "reports"): In("reports", folder=True, spoil="*.summary.json"),
    ("report", "frame"): FRAME,
    ("report", "train_frame"): FRAME,
    ("score", "inputs"): In("npz", ".npz", either=True),
    ("score", "models"): MODEL,
    ("rank-graph", "graph"): NPZ_FILE,
    ("rank-graph", "measured"): In("measured", ".csv"),
    ("rank-graph", "prior"): MODEL,
    ("suggest", "graph"): NPZ_FILE,
    # "empty, header-only or absent: a cold start".
    ("suggest", "measured"): In("measured", ".csv", accepts=("missing", "empty")),
    ("suggest", "prior"): MODEL,
    ("submit", "data"): In("data", folder=True, spoil="npz/tile/xla/test/*.npz"),
    ("submit", "models"): In("model_folder", folder=True, spoil="tile-xla/*"),
}

OUTPUTS: dict[tuple[str, str], Out] = {
    ("synth", "out_dir"): Out(folder=True),
    ("import", "out_dir"): Out(folder=True, marker="xlarank-import.json"),
    ("measure", "out"): Out(".pb"),
    ("measure", "measured"): CSV,
    ("corpus", "out_dir"): Out(folder=True, marker="manifest.json"),
    ("featurize", "out_dir"): Out(folder=True),
    ("featurize", "out"): Out(".parquet"),
    ("gnn-train", "out"): Out(".npz"),
    ("train", "out_dir"): Out(folder=True, marker="card.json"),
    ("tune", "out"): Out(".toml"),
    ("tune", "log"): CSV,
    ("evaluate", "out_csv"): CSV,
    ("compare", "out_csv"): CSV,
    ("report", "out_dir"): Out(folder=True, marker="index.html"),
    ("score", "out_csv"): CSV,
    ("rank-graph", "out_csv"): CSV,
    ("suggest", "out_csv"): CSV,
    ("submit", "out_csv"): CSV,
}

# A file of another kind, by the kind a parameter wants (`In.given`).
WRONG = {"npz": "frame", "candidates": "frame", "frame": "npz", "record": "npz",
         "indices": "npz", "measured": "npz", "programs": "npz", "eval_indices": "npz",
         "data": "model", "model": "npz_folder", "model_folder": "npz_folder",
         "reports": "model"}


def _measure(g: Given, under: str):
    timing = ["--rounds", "1", "--repeats", "1", "--warmup", "0"]
    program = f"{g.program}:f"
    if under == "remeasure":
        return ({"program": program, "out": g.tmp / "again.pb", "remeasure": g.record},
                ["--configs", "2", *timing])
    if under in ("configs_of", "indices", "measured"):
        return ({"program": program, "out": g.tmp / "some.pb", "configs_of": g.candidates,
                 "indices": g.indices, "measured": g.tmp / "measured.csv"}, timing)
    return {"program": program, "out": g.tmp / "m.pb"}, ["--configs", "2", *timing]


# command -> (given, the parameter under test) -> ({parameter: value}, more arguments):
# a valid command line, or one whose other inputs are valid.
BASE: dict[str, Callable[[Given, str], tuple[dict[str, object], list[str]]]] = {
    "synth": lambda g, _: ({"out_dir": g.tmp / "synth"}, ["--preset", "tiny", "--seed", "1"]),
    "import": lambda g, _: ({"sources": [g.record], "out_dir": g.tmp / "imported"}, []),
    "measure": _measure,
    "corpus": lambda g, _: ({"programs": g.programs, "out_dir": g.tmp / "corpus"},
                            ["--no-measure"]),
    "specs": lambda g, _: ({"kind": "feature"}, []),
    "featurize": lambda g, under: (
        {"data": g.data, "out_dir": None if under == "out" else g.tmp / "frames",
         "out": g.tmp / "f.parquet" if under == "out" else None},
        ["--collection", "tile-xla", "--split", "train"]),
    "gnn-train": lambda g, _: (
        {"data": g.data, "collection": "tile-xla", "out": g.tmp / "w.npz"},
        ["--epochs", "1", "--configs-per-graph", "2", "--k", "1"]),
    "train": lambda g, _: ({"frame": g.frame, "out_dir": g.tmp / "model",
                            "spec": [g.spec], "valid": g.valid_frame}, []),
    "tune": lambda g, _: ({"train_frame": g.frame, "valid_frame": g.valid_frame,
                           "spec": g.spec, "out": g.tmp / "tuned.toml",
                           "log": g.tmp / "trials.csv"}, ["--trials", "1"]),
    "evaluate": lambda g, _: ({"frame": g.frame, "model": g.model,
                               "eval_indices": g.eval_indices,
                               "out_csv": g.tmp / "metrics.csv"}, []),
    "compare": lambda g, _: ({"reports": g.reports, "out_csv": g.tmp / "compare.csv"}, []),
    "report": lambda g, _: ({"frame": g.valid_frame, "model": [g.model],
                             "out_dir": g.tmp / "report", "train_frame": g.frame}, []),
    "score": lambda g, _: ({"inputs": [g.npz], "models": g.model,
                            "out_csv": g.tmp / "scores.csv"}, []),
    "rank-graph": lambda g, _: ({"graph": g.npz, "measured": g.measured,
                                 "out_csv": g.tmp / "ranked.csv", "prior": g.model}, []),
    "suggest": lambda g, _: ({"graph": g.npz, "out_csv": g.tmp / "suggested.csv",
                              "measured": g.measured, "prior": g.model}, []),
    "submit": lambda g, _: ({"data": g.data, "models": g.model_folder,
                             "out_csv": g.tmp / "submission.csv"}, []),
}

# How a command without input paths is made to fail, to show an existing output is kept.
FAIL_OTHERWISE = {"synth": (["--preset", "nope"], "nope")}

# Where a valid run needs jax: every case (None), or the kinds that reach the work.
NEEDS_JAX: dict[str, frozenset[str] | None] = {
    "measure": None,
    "corpus": frozenset({"out-missing-folder"}),
    "gnn-train": frozenset({"truncated", "random", "out-missing-folder"}),
}

INPUT_KINDS = ("missing", "directory", "empty", "truncated", "random", "wrong-kind", "fifo",
               "dev-zero", "symlink-loop", "long-name", "non-utf8-name", "newline-name",
               "unreadable")
OUTPUT_KINDS = ("out-missing-folder", "out-fifo", "out-directory", "out-symlink",
                "out-existing")
# Kinds whose run could hang in-process: run in a fresh process with a timeout.
HANGS = {"fifo", "dev-zero", "out-fifo"}
# `make test-fast` runs these kinds on one parameter of each command; the FIFOs (a fresh
# process each, most of the harness's time) run in `make test`.
FAST_INPUT_KINDS = ("missing", "directory", "empty", "random")
FAST_OUTPUT_KINDS = ("out-directory",)

# Known failures, each naming the file where its fix belongs:
# (command, parameter, kind or "*") -> reason. Strict: a fixed one fails until removed.
XFAIL: dict[tuple[str, str, str], str] = {
}


def _cases() -> tuple[list, list]:
    """(the fast subset, the rest of the cross product) as pytest params."""
    fast, rest = [], []
    for command, params in PATHS.items():
        inputs = [p for p in params if (command, p) in INPUTS]
        outputs = [p for p in params if (command, p) in OUTPUTS]
        quick = inputs[:1] or outputs[:1]
        for param in params:
            kinds = ((INPUT_KINDS if (command, param) in INPUTS else ())
                     + (OUTPUT_KINDS if (command, param) in OUTPUTS else ()))
            for kind in kinds:
                case = (command, param, kind)
                reason = XFAIL.get(case) or XFAIL.get((command, param, "*"))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                item = pytest.param(*case, marks=marks, id=f"{command}-{param}-{kind}")
                chosen = param in quick and kind in FAST_INPUT_KINDS + FAST_OUTPUT_KINDS
                (fast if chosen else rest).append(item)
    return fast, rest


FAST, REST = _cases()


# ---------------------------------------------------------------- the valid inputs
PROGRAM = '''
import numpy as np
import jax.numpy as jnp


def f(x, w):
    return jnp.tanh(x @ w).reshape(4, 2, 16) + 1.0


def f_inputs():
    return (np.ones((8, 16), np.float32), np.eye(16, dtype=np.float32))
'''


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory) -> Path:
    """A tiny JAX program and a programs list naming it."""
    folder = tmp_path_factory.mktemp("program")
    (folder / "prog.py").write_text(PROGRAM)
    (folder / "programs.toml").write_text(
        '[[program]]\nname = "f"\nfamily = "mlp"\nfunction = "prog.py:f"\n')
    return folder


@pytest.fixture(scope="module")
def candidates(program_dir) -> Path:
    """Candidate configs of the tiny program (measure --candidates's file)."""
    pytest.importorskip("jax")
    from xlarank.measure import load_program, write_candidates

    fn, args, name = load_program(f"{program_dir / 'prog.py'}:f")
    path = program_dir / "candidates.npz"
    write_candidates(fn, args, path, count=6, seed=0, name=name)
    return path


@pytest.fixture(scope="module")
def model_folder(models, frames, spec_dir, tmp_path_factory) -> Path:
    """A model of each of the five collections, as submit takes them."""
    from xlarank.frame import read_frame
    from xlarank.rank.spec import load_ranker_spec
    from xlarank.rank.train import train_ranker

    folder = tmp_path_factory.mktemp("five_models")
    for slug in ("tile-xla", "layout-xla-default"):
        shutil.copytree(models[slug], folder / slug)
    for slug in ("layout-xla-random", "layout-nlp-default", "layout-nlp-random"):
        table, meta = read_frame(frames["default", slug, "train"])
        spec = small(load_ranker_spec(spec_dir / "lgbm.toml"), rounds=5)
        train_ranker(table, meta, spec).save(folder / slug)
    return folder


class Given:
    """The valid inputs a `BASE` entry builds its command line from, each made (or its
    session fixture asked for) when first used; the small ones written under
    tmp/given."""

    def __init__(self, request, tmp: Path):
        self.request, self.tmp = request, tmp
        self.folder = tmp / "given"
        self.folder.mkdir()

    def _fixture(self, name: str):
        return self.request.getfixturevalue(name)

    @cached_property
    def data(self) -> Path:
        return self._fixture("tiny_data")

    @cached_property
    def npz(self) -> Path:
        return first_file(self.data, "tile-xla", "test")

    @cached_property
    def npz_folder(self) -> Path:
        return self.npz.parent

    @cached_property
    def frame(self) -> Path:
        return self._fixture("tile_frames")["default"]

    @cached_property
    def valid_frame(self) -> Path:
        return self._fixture("frames")["default", "tile-xla", "valid"]

    @cached_property
    def model(self) -> Path:
        return self._fixture("models")["lightgbm"]

    @cached_property
    def model_folder(self) -> Path:
        return self._fixture("model_folder")

    @cached_property
    def spec(self) -> Path:
        return self._fixture("spec_dir") / "lgbm.toml"

    @cached_property
    def record(self) -> Path:
        """The smallest ModuleTuningData record of the measured corpus."""
        return min((ROOT / "corpus" / "records").glob("*.pb"), key=lambda p: p.stat().st_size)

    @cached_property
    def program(self) -> Path:
        return self._fixture("program_dir") / "prog.py"

    @cached_property
    def programs(self) -> Path:
        return self._fixture("program_dir") / "programs.toml"

    @cached_property
    def candidates(self) -> Path:
        return self._fixture("candidates")

    def _write(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.write_text(text)
        return path

    @cached_property
    def indices(self) -> Path:
        return self._write("indices.csv", "config_index\n1\n")

    @cached_property
    def measured(self) -> Path:
        return self._write("measured.csv",
                           "config_index,runtime\n0,5\n1,7\n2,6\n3,9\n4,8\n5,4\n")

    @cached_property
    def eval_indices(self) -> Path:
        from xlarank.frame import read_frame

        table, _ = read_frame(self.frame)
        graphs = sorted(map(str, table["graph_id"].unique()))
        return self._write("eval.json", json.dumps({g: [0, 1] for g in graphs}))

    @cached_property
    def reports(self) -> Path:
        folder = self.folder / "reports"
        folder.mkdir()
        (folder / "a.summary.json").write_text(json.dumps(
            {"run": "r", "collection": "tile:xla", "headline": "score", "score": 0.5}))
        return folder


def command_line(command: str, values: dict[str, object], extras: list[str]) -> list[str]:
    """The arguments of ``command`` given its parameters' ``values`` (a list for one
    repeated; None leaves a parameter out), arguments first, then options."""
    params = {p.name: p for p in GROUP.commands[command].params}
    assert set(values) <= set(params), sorted(set(values) - set(params))
    positional, options = [], []
    for name, param in params.items():
        value = values.get(name)
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if param.param_type_name == "argument":
                positional.append(str(item))
            else:
                options += [param.opts[0], str(item)]
    return [command, *positional, *options, *extras]


# ---------------------------------------------------------------- hostile paths
def _random_bytes(size: int = 4096, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def _spoil_in(folder: Path, glob: str) -> Path:
    """The file of a folder's copy that the truncated and random kinds spoil."""
    if glob:
        return sorted(folder.glob(glob))[0]
    files = [p for p in folder.rglob("*") if p.is_file()]
    return max(files, key=lambda p: (p.stat().st_size, str(p)))


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)


def hostile_input(kind: str, spec: In, g: Given) -> tuple[str, list[str]]:
    """A hostile path of ``kind`` for an input of ``spec``, made in g.tmp: (the path, the
    names an error line may name it by)."""
    suffix = spec.suffix
    name = f"{kind}{suffix}"
    path = g.tmp / name
    needles = [name]
    if kind == "missing":  # the path is left unmade
        return str(path), needles
    if kind == "directory":
        # Where a file is wanted, a folder (an empty one, for a file-or-folder input);
        # where a folder is wanted, a file.
        if spec.folder:
            path.write_text("a file, not a folder\n")
        else:
            path.mkdir()
    elif kind == "empty":
        if spec.folder:
            path.mkdir()
        else:
            path.write_bytes(b"")
    elif kind in ("truncated", "random"):
        source = getattr(g, spec.given)
        if spec.folder:
            _copy(source, path)
            target = _spoil_in(path, spec.spoil)
            needles.append(target.name)
        else:
            target = path
        text = (source if not spec.folder else target).read_bytes()
        target.write_bytes(text[: int(len(text) * 0.4)] if kind == "truncated"
                           else _random_bytes())
    elif kind == "wrong-kind":
        _copy(getattr(g, WRONG[spec.given]), path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        return "/dev/zero", ["/dev/zero"]
    elif kind == "symlink-loop":
        os.symlink(name, path)
    elif kind == "unreadable":
        _copy(getattr(g, spec.given), path)
        path.chmod(0)
    else:  # a name of its own, holding random bytes
        name = {"long-name": "n" * 300 + suffix,
                "non-utf8-name": os.fsdecode(b"bad\xffname" + suffix.encode()),
                "newline-name": f"bad\nname{suffix}"}[kind]
        path = g.tmp / name
        needles = [name]
        if kind != "long-name":  # too long to be made: ENAMETOOLONG
            path.write_bytes(_random_bytes())
    return str(path), needles


def hostile_output(kind: str, spec: Out, g: Given, outside: Path) -> tuple[str, list[str]]:
    """A hostile output path of ``kind``, made in g.tmp: (the path, its names)."""
    name = f"{kind}{spec.suffix}" if not spec.folder else kind
    path = g.tmp / name
    if kind == "out-missing-folder":
        path = g.tmp / "absent" / "deeper" / name
    elif kind == "out-fifo":
        os.mkfifo(path)
    elif kind == "out-directory":
        if spec.folder:
            path.write_text("a file, not a folder\n")
        else:
            path.mkdir()
            (path / "keep.txt").write_text("kept\n")
    elif kind == "out-symlink":
        os.symlink(outside / name, path)
    elif kind == "out-existing":
        if spec.folder:
            path.mkdir()
            (path / "keep.txt").write_text("kept\n")
            if spec.marker:
                (path / spec.marker).write_text("{}\n")
        else:
            path.write_bytes(b"precious\n")
    return str(path), [name]


def renderings(name: str) -> set[str]:
    """The ways an error line may show a file name: as it is, repr-escaped, its
    whitespace collapsed, or its undecodable bytes escaped or replaced."""
    raw = name.encode("utf-8", "surrogateescape")
    return {name, repr(name)[1:-1], " ".join(name.split()),
            name.encode("utf-8", "backslashreplace").decode(),
            raw.decode("utf-8", "replace"), raw.decode("utf-8", "backslashreplace")}


# ---------------------------------------------------------------- running a command
def _runner() -> CliRunner | None:
    """typer's CliRunner keeping stderr apart from stdout (mix_stderr=False where click
    takes it; click 8.2 and later always keep them apart), or None where it cannot: then
    every command runs in a fresh process."""
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    try:
        probe = runner.invoke(app, ["--no-such-option"])
        return runner if "error:" in probe.stderr and "error:" not in probe.stdout else None
    except ValueError:  # an older click that mixed the streams
        return None


RUNNER = _runner()

ENV = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "COLUMNS": ""}


@dataclasses.dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    crash: str | None = None  # an exception's traceback, in-process


def invoke(args: list[str], cwd: Path, fresh: bool) -> Outcome:
    """Run ``xlarank args`` in this process, or with ``fresh`` in a new one that is
    stopped after 60 s (a FIFO or /dev/zero read would hang)."""
    if fresh or RUNNER is None:
        try:
            done = subprocess.run([sys.executable, "-m", "xlarank", *args], cwd=cwd,
                                  capture_output=True, timeout=60, env=ENV)
        except subprocess.TimeoutExpired:
            pytest.fail(f"xlarank {args[0]} still running after 60 s (a hang)")
        return Outcome(done.returncode, done.stdout.decode("utf-8", "backslashreplace"),
                       done.stderr.decode("utf-8", "backslashreplace"))
    result = RUNNER.invoke(app, args)
    crash = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(*result.exc_info))
    return Outcome(result.exit_code, result.stdout, result.stderr, crash)


def listing(root: Path) -> dict[str, tuple]:
    """Everything under ``root`` (links not followed): its kind and, for a file, a hash
    of its bytes; for a link, its target."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            key = os.path.relpath(path, root)
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    found[key] = ("file", hashlib.sha256(handle.read()).hexdigest())
            elif stat.S_ISLNK(info.st_mode):
                found[key] = ("link", os.readlink(path))
            else:
                found[key] = (stat.S_IFMT(info.st_mode),)
    return found


def _changes(before: dict, after: dict) -> list[str]:
    return ([f"made {k!r}" for k in after.keys() - before.keys()]
            + [f"removed {k!r}" for k in before.keys() - after.keys()]
            + [f"changed {k!r}" for k in before.keys() & after.keys() if before[k] != after[k]])


def assert_refused(outcome: Outcome, needles: list[str]) -> str:
    """Exit code 2, no traceback, and one non-empty stderr line, starting ``error:``,
    that names one of ``needles``; the line."""
    assert outcome.crash is None, outcome.crash
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.code == 2, (outcome.code, outcome.stderr, outcome.stdout)
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), outcome.stderr
    assert any(r in lines[0] for n in needles for r in renderings(n)), (needles, lines[0])
    return lines[0]


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    """A folder beside tmp_path, where an output link may point."""
    return tmp_path_factory.mktemp("outside")


def check_case(command: str, param: str, kind: str, request, tmp_path: Path,
               outside: Path, monkeypatch) -> None:
    """``command``'s BASE line with ``param`` made hostile of ``kind``: refused as one
    error line naming the path, with tmp_path (and any link's target) as it was; an
    output in a missing folder may instead be written."""
    output = kind.startswith("out-")
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("run as root, which reads any file: an unreadable input cannot be made")
    jax_kinds = NEEDS_JAX.get(command, frozenset())
    if jax_kinds is None or kind in jax_kinds:
        pytest.importorskip("jax")
    spec = OUTPUTS[command, param] if output else INPUTS[command, param]
    if not output and kind in spec.accepts:
        pytest.skip(f"{command} documents this --{param} ({kind}) as valid")
    monkeypatch.chdir(tmp_path)
    g = Given(request, tmp_path)
    values, extras = BASE[command](g, param)
    assert param in values, f"BASE[{command!r}] gives no {param}"
    if output:
        path, needles = hostile_output(kind, spec, g, outside)
        if kind == "out-existing" and (command, param) in INPUTS:
            # Read as well as written (measure --measured): what exists must be a valid
            # input, so that the run fails for the other reason below.
            Path(path).write_text("config_index,runtime\n")
    else:
        path, needles = hostile_input(kind, spec, g)
    values[param] = [path] if isinstance(values[param], list) else path
    if kind == "out-existing":
        # The run must fail for another reason: an input that is not there.
        present = [p for p in PATHS[command] if (command, p) in INPUTS
                   and values.get(p) is not None and p != param
                   and "missing" not in INPUTS[command, p].accepts]
        failing = present[:1] or [p for p in PATHS[command] if (command, p) in INPUTS
                                  and "missing" not in INPUTS[command, p].accepts][:1]
        if failing:
            missing = tmp_path / f"missing-input{INPUTS[command, failing[0]].suffix}"
            values[failing[0]] = ([missing] if isinstance(values.get(failing[0]), list)
                                  else missing)
            needles = [missing.name]
        else:
            more, needle = FAIL_OTHERWISE[command]
            extras = [*extras, *more]
            needles = [needle]
    args = command_line(command, values, extras)
    before, outside_before = listing(tmp_path), listing(outside)
    outcome = invoke(args, tmp_path, fresh=kind in HANGS)
    after = listing(tmp_path)
    assert listing(outside) == outside_before, "an output link was followed out of tmp_path"
    if kind == "out-missing-folder" and outcome.code == 0:
        assert outcome.crash is None and "Traceback" not in outcome.stderr, outcome.stderr
        assert os.path.lexists(path), f"exit 0 but {path} not written"
        return
    assert_refused(outcome, needles)
    assert after == before, _changes(before, after)


@pytest.mark.parametrize("command, param, kind", FAST)
def test_a_hostile_path_is_one_error_line(command, param, kind, request, tmp_path, outside,
                                          monkeypatch):
    check_case(command, param, kind, request, tmp_path, outside, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("command, param, kind", REST)
def test_every_hostile_path_is_one_error_line(command, param, kind, request, tmp_path,
                                              outside, monkeypatch):
    check_case(command, param, kind, request, tmp_path, outside, monkeypatch)


# ---------------------------------------------------------------- completeness
def test_every_command_has_a_base_command_line():
    assert sorted(set(GROUP.commands) - set(BASE)) == []
    assert sorted(set(BASE) - set(GROUP.commands)) == []


def test_every_path_parameter_is_a_catalogued_input_or_output():
    found = {(c, p) for c, params in PATHS.items() for p in params}
    assert all(param is not None for params in PATHS.values() for param in params.values())
    assert sorted(found - set(INPUTS) - set(OUTPUTS)) == []
    assert sorted((set(INPUTS) | set(OUTPUTS)) - found) == []
    assert set(WRONG) >= {spec.given for spec in INPUTS.values()}


def test_parameters_named_as_outputs_are_catalogued_as_outputs():
    named = {(c, p) for c, params in PATHS.items() for p in params
             if p in ("out", "log") or p.startswith("out_")}
    assert sorted(named - set(OUTPUTS)) == []


def test_every_base_names_the_parameters_it_is_tested_with(request, tmp_path):
    """Each BASE entry, given placeholders, gives a value to every path parameter (so a
    hostile one can take its place) and only parameters its command has."""

    class Placeholders(Given):
        def __getattribute__(self, name):
            if name in {"data", "npz", "npz_folder", "frame", "valid_frame", "model",
                        "model_folder", "spec", "record", "program", "programs",
                        "candidates", "indices", "measured", "eval_indices", "reports"}:
                return self.tmp / name
            return super().__getattribute__(name)

    g = Placeholders(request, tmp_path)
    for command, params in PATHS.items():
        for param in params:
            values, extras = BASE[command](g, param)
            assert values.get(param) is not None, (command, param)
            command_line(command, values, extras)
    outputs_only = {c for c, params in PATHS.items()
                    if params and not any((c, p) in INPUTS for p in params)}
    assert outputs_only <= set(FAIL_OTHERWISE)


def test_the_cross_product_is_enumerated():
    cases = {tuple(p.values) for p in FAST + REST}
    assert len(cases) == len(FAST) + len(REST)
    expected = len(INPUTS) * len(INPUT_KINDS) + len(OUTPUTS) * len(OUTPUT_KINDS)
    assert len(cases) == expected
    assert {c for c, _, _ in cases} == {c for c, params in PATHS.items() if params}


# ---------------------------------------------------------------- usage errors
def _options(command: str) -> list:
    return [p for p in GROUP.commands[command].params
            if p.param_type_name == "option" and not p.hidden]


def _usage_line(args: list[str], *needles: str) -> str:
    line = assert_refused(invoke(args, Path.cwd(), fresh=False), [needles[0]])
    for needle in needles[1:]:
        assert needle in line, line
    return line


@pytest.mark.parametrize("command", sorted(GROUP.commands))
def test_a_typod_option_is_one_line_with_the_nearest_spelling(command):
    longest = max((o for p in _options(command) for o in p.opts if o.startswith("--")),
                  key=len)
    typo = longest[:-1]  # one letter short
    if typo in {o for p in _options(command) for o in p.opts}:
        pytest.skip(f"{typo} is an option of {command} too")
    _usage_line([command, typo, "x"], typo, longest)


@pytest.mark.parametrize("command", sorted(c for c in GROUP.commands
                                           if any(p.required for p in
                                                  GROUP.commands[c].params)))
def test_a_missing_required_parameter_is_one_line_naming_it(command):
    required = [p for p in GROUP.commands[command].params if p.required]
    first = required[0]
    name = first.opts[0] if first.param_type_name == "option" else first.name.upper()
    _usage_line([command], name)


def _ranged() -> list[tuple[str, str, int]]:
    found = []
    for command in sorted(GROUP.commands):
        for param in _options(command):
            low = getattr(param, "min", None)
            if low is not None:
                found.append((command, param.opts[0], low))
    return found


@pytest.mark.parametrize("command, option, low", _ranged())
def test_a_number_out_of_range_is_one_line_naming_the_option(command, option, low):
    _usage_line([command, option, str(low - 1)], option, str(low))


def test_a_typod_command_is_one_line_with_the_nearest_spelling():
    _usage_line(["traim"], "traim", "train")
    _usage_line(["--verbos", "specs"], "--verbos", "--verbose")


def test_ranged_options_are_found():
    assert ("tune", "--trials", 1) in _ranged() and len(_ranged()) >= 5


def test_no_arguments_still_shows_the_help():
    outcome = invoke([], Path.cwd(), fresh=False)
    assert "Usage:" in outcome.stdout + outcome.stderr and "error:" not in outcome.stderr


# ---------------------------------------------------------------- --verbose, anywhere
@pytest.mark.parametrize("where", ["before", "after", "short after", "absent"])
def test_verbose_works_before_and_after_the_command_name(where, tiny_data, tmp_path):
    args = ["featurize", str(tiny_data), "--collection", "tile-xla", "--split", "train",
            "--out", str(tmp_path / "f.parquet")]
    args = {"before": ["--verbose", *args], "after": [*args, "--verbose"],
            "short after": [args[0], "-v", *args[1:]], "absent": args}[where]
    outcome = invoke(args, tmp_path, fresh=False)
    assert outcome.code == 0 and outcome.crash is None, (outcome.stderr, outcome.crash)
    assert ("feature spec default" in outcome.stdout) == (where != "absent"), outcome.stdout


def test_a_verbose_flag_given_as_an_options_value_is_that_value():
    # `--kind -v` asks for a kind named -v: the flag is not taken from it.
    line = assert_refused(invoke(["specs", "--kind", "-v"], Path.cwd(), fresh=False),
                          ["--kind"])
    assert "--kind '-v'" in line, line


# ---------------------------------------------------------------- the Python API's loaders
# Every public function that opens a user's file, by name: (the input it reads, how it is
# called on a path in a scratch folder). A public load_* or import_* name missing here
# fails `test_every_public_loader_is_catalogued`.
LOADERS: dict[str, tuple[In, str]] = {
    "load_graph": (In("npz", ".npz"), "xlarank.load_graph(path)"),
    "load_model": (In("model", folder=True), "xlarank.load_model(path)"),
    "load_system": (In("system", folder=True, spoil="system.json"),
                    "xlarank.load_system(path)"),
    "load_feature_spec": (In("feature_spec", ".toml"), "xlarank.load_feature_spec(path)"),
    "import_records": (In("record", ".pb"),
                       "xlarank.import_records([path], os.path.join(scratch, 'imported'))"),
}
WRONG.update({"system": "model", "feature_spec": "npz"})
LOADER_CASES = [(name, kind) for name in LOADERS for kind in INPUT_KINDS]
# Run in a fresh process: an open that blocks (a FIFO, /dev/zero) is a hang there, not here.
CALL = """
import os, sys, traceback
import xlarank
path, scratch = sys.argv[1], sys.argv[2]
try:
    {call}
except xlarank.XlarankError as error:
    print("XlarankError:", error)
except BaseException:
    traceback.print_exc()
    print("OTHER")
else:
    print("LOADED")
"""


@pytest.fixture(scope="module")
def saved_system(tiny_data, tmp_path_factory) -> Path:
    from xlarank.data.collections import get_collection
    from xlarank.systems import get_system

    collection = get_collection("tile:xla")
    files = split_files(tiny_data, collection, "train")[:4]
    folder = tmp_path_factory.mktemp("saved-system")
    get_system("xlarank")(seed=0, threads=1).fit(files, collection).save(folder)
    return folder


@pytest.mark.parametrize("loader, kind", [
    pytest.param(name, kind, marks=[] if kind in FAST_INPUT_KINDS else [pytest.mark.slow])
    for name, kind in LOADER_CASES])
def test_a_loader_refuses_a_hostile_path_with_one_error_naming_it(loader, kind, request,
                                                                   tmp_path):
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("run as root, which reads any file: an unreadable input cannot be made")
    spec, call = LOADERS[loader]
    g = Given(request, tmp_path)
    if spec.given == "system":
        g.system = request.getfixturevalue("saved_system")
    if spec.given == "feature_spec":
        g.feature_spec = ROOT / "features" / "default.toml"
    path, needles = hostile_input(kind, spec, g)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if kind in HANGS:
        done = subprocess.run([sys.executable, "-c", CALL.format(call=call), path,
                               str(scratch)], capture_output=True, text=True, timeout=120,
                              env=ENV)
        said = done.stdout.strip().splitlines()
        assert said and said[-1].startswith("XlarankError:"), (done.stdout, done.stderr)
        message = said[-1]
    else:
        import xlarank

        with pytest.raises(xlarank.XlarankError) as refused:
            eval(call, {"xlarank": xlarank, "os": os, "path": path, "scratch": str(scratch)})
        message = str(refused.value)
    assert any(r in message for n in needles for r in renderings(n)), message
    assert not any(scratch.iterdir()), "a refused import left files behind"


def test_every_public_loader_is_catalogued():
    import xlarank

    public = {n for n in xlarank.__all__ if n.startswith(("load_", "import_", "read_"))}
    assert public == set(LOADERS)
