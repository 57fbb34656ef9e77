"""The CLI's promise for environment variables, enumerated: every variable xlarank's
sources read (found by scanning src/, so a new one fails `test_every_variable_read_is_
catalogued` until it has an entry) and the documented ones of the libraries under it that a
user would plausibly set (thread counts, threading layers, cache folders, XLA and jax
switches, Dask's scheduler), each with hostile values: empty, "0", negative, huge, text, a
path that is a file, and some of its own.

A run either works as it would without the variable (exit 0, the output written, nothing
on stderr: the documented fallback) or is refused: exit 2 and one stderr line starting
``error:`` that names the variable. Never a traceback, a library's own complaint on
stderr, a hang (each run is stopped after `TIMEOUT` s), or a file written outside the
output (the working folder and the inputs are compared before and after; a cache folder
the variable names is its own).

Each run is a fresh process: the libraries read these variables when they load. The
default run takes one value per variable (`Var.fast`), in `make test` only (a fresh
process each, a third of `make test-fast`'s time); the whole table is marked slow.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from helpers import first_file
from test_contract import Outcome, _changes, assert_refused, listing

TIMEOUT = 120
HUGE = "9" * 20
# The hostile kinds every variable meets; "file" is a path to an existing plain file.
HOSTILE = {"empty": "", "zero": "0", "negative": "-3", "huge": HUGE, "text": "abc",
           "file": None}
BAD = ("zero", "negative", "huge", "text", "file")
# Where the Numba cache folder is chosen from: the test process's own NUMBA_CACHE_DIR
# (xlarank's import sets it) is left out for these, or it would win.
CACHE_CHOOSERS = {"XDG_CACHE_HOME": ("XDG_CACHE_HOME",), "HOME": ("XDG_CACHE_HOME",),
                  "LOCALAPPDATA": ()}


@dataclasses.dataclass(frozen=True)
class Var:
    """One variable. ``reader``: who reads it; ``command``: the run it meets ("score", or
    "jax" for gnn-train, "dask" for featurize on a local Dask cluster); ``refused``: the
    kinds refused (every other kind works); ``extra``: more values {kind: value}, refused
    when their kind is listed in ``refused``; ``fast``: the kind of the default run;
    ``cache``: files may be made under the folder the value names; ``xfail``: {kind:
    reason}, known failures whose fix is outside this test's reach."""

    reader: str
    command: str = "score"
    refused: tuple[str, ...] = ()
    extra: dict[str, str] = dataclasses.field(default_factory=dict)
    fast: str | None = "text"
    cache: bool = False
    xfail: dict[str, str] = dataclasses.field(default_factory=dict)


THREADS = "xlarank.environment.screen_environment (refused in use_threads / chosen_threads)"
VARIABLES: dict[str, Var] = {
    # Read by xlarank itself.
    "XLARANK_LOAD_BACKOFF": Var("xlarank.threads.load_backoff_enabled",
                                refused=("negative", "huge", "text", "file", "word"),
                                extra={"off": "off", "on": " TRUE ", "word": "maybe"}),
    "MAKEFLAGS": Var("xlarank.threads.make_jobs",
                     extra={"j0": "-j0", "jhuge": f"-j{HUGE}", "jdigits": "-j" + "9" * 5000,
                            "jbare": "-j", "jtext": "-jabc -l"}),
    "XDG_RUNTIME_DIR": Var("xlarank.threads._job_folders (the pid files' folder)"),
    "NUMBA_CACHE_DIR": Var("xlarank.__init__ (kept as given) and Numba", cache=True,
                           fast="file"),
    "XDG_CACHE_HOME": Var("xlarank.__init__._numba_cache_dir (Numba's cache folder)",
                          fast="file"),
    "LOCALAPPDATA": Var("xlarank.__init__._numba_cache_dir, on Windows only"),
    "XLA_FLAGS": Var("xlarank.compat.require_jax (adds the thread flags), xlarank.measure "
                     "(recorded in the record's conditions)", command="jax",
                     refused=(*BAD, "unknown"),
                     extra={"flags": "--xla_cpu_enable_fast_math=false",
                            "unknown": "--xla_no_such_flag=1"}),
    # The libraries' own, that xlarank checks for them before they load.
    "NUMBA_NUM_THREADS": Var(f"Numba at import; {THREADS}", refused=BAD,
                             extra={"one": "1"}, fast="huge"),
    "NUMBA_THREADING_LAYER": Var(f"Numba at its first parallel kernel; {THREADS}",
                                 refused=BAD, extra={"layer": "workqueue"}),
    "OMP_NUM_THREADS": Var(f"libgomp when a booster or Numba loads it; {THREADS}",
                           refused=(*BAD, "list0"), extra={"list": "2,1", "list0": "2,0"}),
    "OMP_WAIT_POLICY": Var(f"libgomp; {THREADS}", refused=BAD,
                           extra={"passive": "passive", "active": "ACTIVE"}),
    "JAX_PLATFORMS": Var("jax, at its first backend (xlarank.compat.require_jax asks)",
                         command="jax", refused=("zero", "negative", "huge", "text", "file"),
                         extra={"cpu": "cpu"}),
    "JAX_ENABLE_X64": Var("jax at import (xlarank.compat.require_jax checks it first)",
                          command="jax", refused=("negative", "huge", "text", "file"),
                          extra={"yes": "1"}),
    "JAX_DISABLE_JIT": Var("jax at import (xlarank.compat.require_jax checks it first)",
                           command="jax", refused=("negative", "huge", "text", "file")),
    # Read by libraries whose own fallback is valid: the run works.
    "MKL_NUM_THREADS": Var("MKL (not loaded: numpy and the boosters use OpenBLAS)"),
    "OPENBLAS_NUM_THREADS": Var("OpenBLAS, numpy's (an unreadable count means its default)"),
    "TMPDIR": Var("tempfile (the pid files' second folder)"),
    "HOME": Var("Path.home (the pid files' last folder), xlarank.__init__ (Numba's cache "
                "folder without XDG_CACHE_HOME)", fast="file"),
    "COLUMNS": Var("rich (the CLI's console width)"),
    "DASK_SCHEDULER_ADDRESS": Var("Dask's config (xlarank connects to --scheduler or its own "
                                  "local cluster, never to this)", command="dask", fast=None),
}


def value_of(var: str, kind: str, given: Path) -> str:
    if kind in VARIABLES[var].extra:
        return VARIABLES[var].extra[kind]
    if kind == "file":
        path = given / "a-file"
        path.write_text("not a folder, not a number\n")
        return str(path)
    return HOSTILE[kind]


def _cases() -> tuple[list, list]:
    fast, rest = [], []
    for var, entry in VARIABLES.items():
        for kind in (*HOSTILE, *entry.extra):
            marks = [pytest.mark.xfail(strict=True, reason=entry.xfail[kind])] \
                if kind in entry.xfail else []
            if entry.command == "jax":
                marks.append(pytest.mark.gnn)
            if entry.command == "dask":
                marks.append(pytest.mark.dask)
            case = pytest.param(var, kind, marks=marks, id=f"{var}-{kind}")
            (fast if kind == entry.fast else rest).append(case)
    return fast, rest


FAST, REST = _cases()


# ---------------------------------------------------------------- running one case
def command_line(command: str, inputs: dict[str, Path], out: Path) -> list[str]:
    if command == "score":
        return ["score", str(inputs["npz"]), "--models", str(inputs["model"]), "--out", str(out)]
    if command == "jax":
        return ["gnn-train", str(inputs["data"]), "--collection", "tile-xla", "--out",
                str(out), "--epochs", "1", "--configs-per-graph", "2", "--k", "1"]
    return ["featurize", str(inputs["data"]), "--collection", "tile-xla", "--split", "test",
            "--engine", "dask", "--workers", "1", "--out", str(out)]


OUT_NAME = {"score": "scores.csv", "jax": "weights.npz", "dask": "frame.parquet"}


@pytest.fixture
def inputs(tiny_data, models) -> dict[str, Path]:
    return {"data": tiny_data, "npz": first_file(tiny_data, "tile-xla", "test"),
            "model": models["tile-xla"]}


def run(var: str, kind: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    entry = VARIABLES[var]
    if entry.command == "jax":
        pytest.importorskip("jax")
    if entry.command == "dask":
        pytest.importorskip("distributed")
    given = tmp_path / "given"
    given.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    value = value_of(var, kind, given)
    out = tmp_path / "out" / OUT_NAME[entry.command]
    out.parent.mkdir()
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "COLUMNS": ""}
    if var in CACHE_CHOOSERS:
        for name in ("NUMBA_CACHE_DIR", *CACHE_CHOOSERS[var]):
            env.pop(name, None)
    env[var] = value
    watched = [tmp_path, inputs["data"], inputs["model"]]
    before = [listing(root) for root in watched]
    try:
        done = subprocess.run([sys.executable, "-m", "xlarank",
                               *command_line(entry.command, inputs, out)],
                              cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{var}={value!r}: still running after {TIMEOUT} s (a hang)")
    outcome = Outcome(done.returncode, done.stdout.decode(errors="backslashreplace"),
                      done.stderr.decode(errors="backslashreplace"))
    after = [listing(root) for root in watched]
    made = _changes(before[0], after[0])
    if outcome.code == 0:
        # The output, and a frame's parts folder beside it (featurize keeps it on purpose,
        # to redo only changed files next time).
        own = f"out/{out.name}"
        made = [m for m in made if not m.startswith(f"made 'out/.{out.name}.parts")]
        if entry.cache:  # the cache folder it names, relative to the working folder
            cache = os.path.relpath(os.path.join(cwd, value), tmp_path)
            made = [m for m in made if not m.startswith(f"made {cache!r}")
                    and not m.startswith(f"made '{cache}/")]
        made = [m for m in made if m != f"made {own!r}"]
    assert made == [], f"{var}={value!r} wrote outside its output: {made}"
    assert after[1:] == before[1:], f"{var}={value!r} changed an input"
    if kind in entry.refused:
        assert_refused(outcome, [var])
        assert not out.exists()
        return
    assert outcome.code == 0 and outcome.stderr.strip() == "", \
        (var, value, outcome.code, outcome.stderr[-3000:])
    assert out.is_file() and out.stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("var, kind", FAST)
def test_a_hostile_variable_works_or_is_one_error_line(var, kind, inputs, tmp_path):
    run(var, kind, inputs, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("var, kind", REST)
def test_every_hostile_value_of_every_variable(var, kind, inputs, tmp_path):
    run(var, kind, inputs, tmp_path)


# ---------------------------------------------------------------- completeness
ENVIRON_CALLS = {"get", "pop", "setdefault", "getenv"}


def _is_environ(node: ast.AST) -> bool:
    """os.environ, or a bare environ."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def _constants(tree: ast.Module) -> dict[str, object]:
    """The module's top-level names bound to a string, a tuple of strings (a starred name
    of one spread into it) or a dict with string keys."""
    found: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and node.value is not None:
            value = _resolve(node.value, found, {})
            if value is not None:
                found[target.id] = value
    return found


def _resolve(node, constants: dict, loops: dict) -> object:
    """The string, or tuple of strings, an expression names; None when unknown."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return loops.get(node.id, constants.get(node.id))
    if isinstance(node, (ast.Tuple, ast.List)):
        items: list[str] = []
        for element in node.elts:
            inner = _resolve(element.value if isinstance(element, ast.Starred) else element,
                             constants, loops)
            if isinstance(inner, dict):
                inner = tuple(inner)
            if inner is None:
                return None
            items += [inner] if isinstance(inner, str) else list(inner)
        return tuple(items)
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        return {k.value: None for k in node.keys}
    return None


def _names(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or ())


def variables_read(root: Path = ROOT / "src") -> tuple[set[str], list[str]]:
    """(the environment variables the sources read or set, the reads the scan cannot
    name as 'file:line'). A read: environ.get/pop/setdefault(NAME), os.getenv(NAME),
    environ[NAME], NAME in environ; NAME a string, a module constant, or a loop variable
    over a tuple of them."""
    names: set[str] = set()
    unknown: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        constants = _constants(tree)
        loops: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                value = _resolve(node.iter, constants, {})
                if value is not None:
                    loops[node.target.id] = _names(value if not isinstance(value, dict)
                                                   else tuple(value))
        for node in ast.walk(tree):
            arg = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    (node.func.attr in ENVIRON_CALLS and _is_environ(node.func.value))
                    or (node.func.attr == "getenv")):
                arg = node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript) and _is_environ(node.value):
                arg = node.slice
            elif isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn))
                                                        for o in node.ops) \
                    and any(_is_environ(c) for c in node.comparators):
                arg = node.left
            else:
                continue
            value = _resolve(arg, constants, loops) if arg is not None else None
            if value is None and isinstance(arg, ast.Name) and arg.id in loops:
                value = tuple(loops[arg.id])
            if value is None:
                unknown.append(f"{path.relative_to(root)}:{node.lineno}")
            else:
                names.update(_names(value))
    return names, unknown


def test_every_variable_read_is_catalogued():
    names, unknown = variables_read()
    assert unknown == [], f"environment reads the scan cannot name: {unknown}"
    assert names - set(VARIABLES) == set(), "add these to VARIABLES"


def test_the_scan_finds_what_is_known_to_be_read():
    """The scan itself: the variables named in the sources in each of its ways."""
    names, _ = variables_read()
    assert {"XLARANK_LOAD_BACKOFF", "MAKEFLAGS", "XDG_RUNTIME_DIR", "NUMBA_CACHE_DIR",
            "XLA_FLAGS", "NUMBA_NUM_THREADS", "OMP_WAIT_POLICY", "JAX_ENABLE_X64"} <= names


def test_the_scan_names_reads_of_every_form(tmp_path):
    (tmp_path / "m.py").write_text(
        'import os\nfrom os import environ\nA = "ONE"\nB = (A, "TWO")\n'
        'C = {"SIX": 1}\n'
        'os.environ.get(A)\nos.getenv("THREE")\nenviron["FOUR"]\n"FIVE" in os.environ\n'
        'for n in (*B, *C):\n    os.environ.pop(n)\nos.environ.get(unknown)\n')
    names, unknown = variables_read(tmp_path)
    assert names == {"ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX"}
    assert unknown == ["m.py:12"]


def test_every_entry_has_its_fast_case_and_known_kinds():
    for var, entry in VARIABLES.items():
        kinds = {*HOSTILE, *entry.extra}
        assert set(entry.refused) <= kinds and set(entry.xfail) <= kinds, var
        assert entry.fast is None or entry.fast in kinds, var
        assert entry.command in OUT_NAME, var
