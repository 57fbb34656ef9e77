"""Faults a hostile probe found in `xlarank measure` and `xlarank corpus`: a program file
that exits while loading, a program whose output is NaN, a programs list with a
function lacking :FUNCTION, unknown keys, or a NaN --min-repeat-tau, and a program that
never ends (``while True: pass``: --timeout)."""

from __future__ import annotations

import signal
import textwrap
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.errors import XlarankError

runner = CliRunner()

PROGRAMS = '''
import jax.numpy as jnp


def f(x, w):
    return x @ w


def f_inputs():
    return (jnp.ones((4, 8)), jnp.ones((8, 4)))


def quits(x, w):
    return x @ w


def quits_inputs():
    raise SystemExit(0)


def nanmm(x, w):
    return (x @ w) * jnp.nan


def nanmm_inputs():
    return (jnp.ones((4, 8)), jnp.ones((8, 4)))


def exits_tracing(x, w):
    raise SystemExit(5)


def exits_tracing_inputs():
    return (jnp.ones((4, 8)), jnp.ones((8, 4)))
'''


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAMS)
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    return tmp_path


def _one_error(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in result.output
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- 1: SystemExit
def test_a_file_exiting_at_import_is_an_error_naming_it(folder):
    from xlarank.measure import load_program

    with pytest.raises(XlarankError, match=r"exits.py: the program file exited "
                                           r"\(SystemExit 3\) while loading"):
        load_program(f"{folder}/exits.py:f")


def test_an_inputs_function_exiting_is_an_error_naming_the_file(folder):
    from xlarank.measure import load_program

    with pytest.raises(XlarankError, match=r"prog.py: the program file exited "
                                           r"\(SystemExit 0\) in quits_inputs\(\)"):
        load_program(f"{folder}/prog.py:quits")


@pytest.mark.parametrize("spec, parts", [
    ("exits.py:f", ["exits.py", "SystemExit 3", "while loading"]),
    ("prog.py:quits", ["prog.py", "SystemExit 0", "quits_inputs()"]),
])
def test_measure_says_the_program_exited_and_exits_2(folder, tmp_path, spec, parts):
    out = tmp_path / "out" / "o.pb"
    result = runner.invoke(app, ["measure", f"{folder}/{spec}", "--out", str(out)])
    _one_error(result, *parts)
    assert not out.parent.exists()


def test_a_function_exiting_while_traced_is_an_error(folder, tmp_path):
    pytest.importorskip("jax")
    from xlarank.measure import load_program
    from xlarank.measure.trace import TracedProgram

    fn, args, name = load_program(f"{folder}/prog.py:exits_tracing")
    with pytest.raises(XlarankError, match=r"does not trace .*SystemExit"):
        TracedProgram(fn, args, name)


def test_keyboard_interrupt_is_left_alone(tmp_path):
    from xlarank.measure import load_program

    (tmp_path / "kb.py").write_text("def f(x):\n    return x\n"
                                    "def f_inputs():\n    raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_program(f"{tmp_path}/kb.py:f")


# ---------------------------------------------------------------- 2: NaN outputs
@pytest.mark.gnn
def test_a_program_whose_output_is_nan_is_refused(folder, tmp_path):
    pytest.importorskip("jax")
    from xlarank.measure import Settings, load_program, measure_program

    spec = f"{folder}/prog.py:nanmm"
    fn, args, name = load_program(spec)
    with pytest.raises(XlarankError, match=r"prog.py:nanmm: nanmm's output .* not finite"):
        measure_program(fn, args, tmp_path / "out" / "n.pb", name=name, source=spec,
                        settings=Settings(configs=3, rounds=1, repeats=1, warmup=0))
    assert not (tmp_path / "out").exists()


@pytest.mark.gnn
def test_measure_refuses_a_nan_program_in_one_line(folder, tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "n.pb"
    result = runner.invoke(app, ["measure", f"{folder}/prog.py:nanmm", "--out", str(out),
                                 "--configs", "3", "--rounds", "1", "--repeats", "1"])
    _one_error(result, "prog.py:nanmm", "not finite")
    assert not out.exists()


def test_a_non_finite_output_where_the_reference_is_finite_fails():
    from xlarank.measure import _mismatch

    ref = [np.ones((2, 2), np.float32)]
    assert _mismatch([np.ones((2, 2), np.float32)], ref, 1e-3) is None
    for bad in (np.nan, np.inf):
        out = np.ones((2, 2), np.float32)
        out[0, 1] = bad
        assert "non-finite" in _mismatch([out], ref, 1e-3)
    # integer and boolean outputs are always finite
    assert _mismatch([np.arange(4)], [np.arange(4)], 1e-3) is None
    assert _mismatch([np.ones(3, bool)], [np.ones(3, bool)], 1e-3) is None


# ---------------------------------------------------------------- 3: the programs list
def _listed(tmp_path, body: str):
    path = tmp_path / "programs.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_function_without_its_name_is_refused_naming_the_list(tmp_path):
    from xlarank.measure.corpus import read_programs

    listed = _listed(tmp_path, '''
        [[program]]
        name = "c"
        family = "x"
        function = "/abs/ok.py"
    ''')
    with pytest.raises(XlarankError) as caught:
        read_programs(listed)
    message = str(caught.value)
    assert message.startswith(f"{listed}: program 1 ('c')"), message
    assert "'/abs/ok.py'" in message and "PATH.py:FUNCTION" in message
    assert f"{tmp_path}/abs" not in message  # no path mangled with the list's folder


def test_an_absolute_function_path_is_kept(tmp_path):
    from xlarank.measure.corpus import read_programs

    listed = _listed(tmp_path, '''
        [[program]]
        name = "e"
        family = "x"
        function = "/abs/ok.py:f"
    ''')
    assert read_programs(listed)[0].function == "/abs/ok.py:f"


@pytest.mark.parametrize("extra, named", [
    ("configs = -5", "'configs'"),
    ("extra = 1", "'extra'"),
    ("extra = 1\ninputs = \"g\"", "'extra', 'inputs'"),
])
def test_unknown_keys_of_a_program_are_refused(tmp_path, extra, named):
    from xlarank.measure.corpus import read_programs

    listed = _listed(tmp_path, '[[program]]\nname = "d"\nfamily = "x"\n'
                               f'function = "ok.py:f"\nabout = "a"\n{extra}\n')
    with pytest.raises(XlarankError, match=f"{listed}: program 1 .* unknown keys? {named}"):
        read_programs(listed)


def test_about_must_be_a_string(tmp_path):
    from xlarank.measure.corpus import read_programs

    listed = _listed(tmp_path, '[[program]]\nname = "d"\nfamily = "x"\n'
                               'function = "ok.py:f"\nabout = 3\n')
    with pytest.raises(XlarankError, match="about must be a string"):
        read_programs(listed)


@pytest.mark.parametrize("body, parts", [
    ('[[program]]\nname = "c"\nfamily = "x"\nfunction = "/abs/ok.py"\n',
     ["programs.toml", "program 1", "PATH.py:FUNCTION"]),
    ('[[program]]\nname = "b"\nfamily = "x"\nfunction = "ok.py:f"\nextra = 1\n',
     ["programs.toml", "unknown key 'extra'"]),
])
def test_corpus_refuses_a_bad_list_in_one_line(tmp_path, body, parts):
    listed = tmp_path / "programs.toml"
    listed.write_text(body)
    result = runner.invoke(app, ["corpus", str(listed), "--out-dir", str(tmp_path / "c")])
    _one_error(result, *parts)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("tau", ["nan", "inf", "-inf", "1.5", "-2"])
def test_corpus_refuses_a_min_repeat_tau_out_of_range(tmp_path, tau):
    listed = tmp_path / "programs.toml"
    listed.write_text('[[program]]\nname = "b"\nfamily = "x"\nfunction = "ok.py:f"\n')
    result = runner.invoke(app, ["corpus", str(listed), "--out-dir", str(tmp_path / "c"),
                                 "--min-repeat-tau", tau])
    _one_error(result, "--min-repeat-tau")
    assert not (tmp_path / "c").exists()


def test_build_corpus_refuses_a_nan_bar(tmp_path):
    from xlarank.measure.corpus import CorpusProgram, build_corpus

    program = CorpusProgram("b", "x", f"{tmp_path}/ok.py:f")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(XlarankError, match="--min-repeat-tau must be a finite"):
            build_corpus([program], tmp_path / "c", min_repeat_tau=bad)
    assert not (tmp_path / "c").exists()


# ---------------------------------------------------------------- 3: a program that never ends
SPINS = """
import numpy as np


def spin(x):
    while True:
        pass


def spin_inputs():
    return (np.ones((4, 4), np.float32),)
"""


@pytest.mark.slow  # waits out the time limit
@pytest.mark.parametrize("where", ["traced", "loaded"])
def test_a_program_that_never_ends_is_stopped_at_the_timeout(tmp_path, where):
    pytest.importorskip("jax")
    program = tmp_path / "spins.py"
    program.write_text(SPINS if where == "traced" else "while True:\n    pass\n")
    out = tmp_path / "out" / "o.pb"
    before = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    result = runner.invoke(app, ["measure", f"{program}:spin", "--out", str(out),
                                 "--timeout", "2"])
    line = _one_error(result, str(program), "time limit of 2 s", "--timeout")
    assert time.monotonic() - started < 60, line
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.slow  # waits out the time limit
def test_corpus_stops_a_program_that_never_ends(tmp_path):
    pytest.importorskip("jax")
    (tmp_path / "spins.py").write_text(SPINS)
    listed = tmp_path / "programs.toml"
    listed.write_text('[[program]]\nname = "s"\nfamily = "x"\nfunction = "spins.py:spin"\n')
    result = runner.invoke(app, ["corpus", str(listed), "--out-dir", str(tmp_path / "c"),
                                 "--timeout", "1.5"])
    _one_error(result, "spins.py", "time limit of 1.5 s")


@pytest.mark.parametrize("command", ["measure", "corpus"])
@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_a_timeout_not_above_zero_or_not_finite_is_refused(tmp_path, command, bad):
    (tmp_path / "spins.py").write_text(SPINS)
    listed = tmp_path / "programs.toml"
    listed.write_text('[[program]]\nname = "s"\nfamily = "x"\nfunction = "spins.py:spin"\n')
    args = ([f"{tmp_path}/spins.py:spin", "--out", str(tmp_path / "o.pb")]
            if command == "measure" else [str(listed), "--out-dir", str(tmp_path / "c")])
    result = runner.invoke(app, [command, *args, "--timeout", bad])
    _one_error(result, "--timeout must be a finite number of seconds above 0")
    assert not (tmp_path / "c").exists() and not (tmp_path / "o.pb").exists()


def test_the_time_limit_restores_the_handler_and_an_outer_timer():
    from xlarank.measure import program_time_limit

    def outer(_signum, _frame):
        raise AssertionError("the outer timer fired during the test")

    before = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with pytest.raises(XlarankError, match=r"p.py: ran past the time limit of 0.2 s"):
            with program_time_limit(0.2, "p.py"):
                while True:
                    pass
        assert signal.getsignal(signal.SIGALRM) is outer
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
        with program_time_limit(5, "p.py"):
            pass  # ends in time: nothing raised
        assert signal.getsignal(signal.SIGALRM) is outer
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
