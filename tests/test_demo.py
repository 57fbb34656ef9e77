"""make demo as a user sees it: on a terminal each step is named as it starts while the
log keeps every line, off a terminal only the table, and a second run keeps the first
run's log (DEMO_LOG.prev). Run against stand-ins for make's pipeline and xlarank, so it
takes a second, not the demo's minutes."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def stand_ins(tmp_path: Path) -> list[str]:
    """make arguments that point the demo at fake steps: a VENV whose xlarank only says
    what it was asked, a pipeline (MAKE) that prints two steps and their detail."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").write_text("")
    xlarank = venv / "bin" / "xlarank"
    xlarank.write_text("#!/bin/sh\necho \"table of $*\"\n")
    pipeline = tmp_path / "pipeline"
    pipeline.write_text(f"#!/bin/sh\necho '{xlarank} featurize data --collection tile-xla "
                        f"\\\\'\necho '    --split train --out f.parquet'\n"
                        f"echo 'featurize detail line'\necho '{xlarank} train f.parquet'\n"
                        "echo 'train detail line'\n")
    for script in (xlarank, pipeline):
        script.chmod(0o755)
    data = tmp_path / "demo-data"
    data.mkdir()
    (data / "synth.json").write_text("{}")
    os.utime(data / "synth.json", (2**31, 2**31))  # newer than data/synth/: not remade
    return ["-s", "--no-print-directory", "demo", f"VENV={venv}", f"MAKE={pipeline}",
            f"DEMO_DATA={data}", f"DEMO_LOG={tmp_path / 'demo.log'}"]


def on_a_terminal(args: list[str], marks: dict[bytes, float] | None = None) -> str:
    """What make prints on a terminal; ``marks``: bytes -> filled with the seconds after
    the start at which each first appeared."""
    import time

    main, sub = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen(["make", *args], cwd=ROOT, stdout=sub, stderr=sub)
    os.close(sub)
    out = b""
    while True:
        try:
            piece = os.read(main, 4096)
        except OSError:
            break
        if not piece:
            break
        out += piece
        for mark in marks or {}:
            if mark in out and marks[mark] is None:
                marks[mark] = time.monotonic() - started
    assert proc.wait(timeout=60) == 0, out.decode()
    os.close(main)
    return out.decode().replace("\r\n", "\n")


def test_the_demo_names_each_step_as_it_starts_on_a_terminal(tmp_path):
    shown = on_a_terminal(stand_ins(tmp_path))
    assert "step: featurize data --collection tile-xla\n" in shown
    assert "step: train f.parquet\n" in shown
    assert "detail line" not in shown
    assert "table of compare" in shown and "demo finished" in shown
    log = (tmp_path / "demo.log").read_text()
    assert "featurize detail line" in log and "train detail line" in log


@pytest.mark.slow  # runs make's step filter through a shell with timed pauses
def test_a_step_is_named_when_it_starts_not_when_the_pipeline_ends(tmp_path):
    """The filter reads line by line: the first step's name shows while the pipeline
    still runs (mawk's block reads held every name back to the end)."""
    import time

    args = stand_ins(tmp_path)
    pipeline = tmp_path / "pipeline"
    lines = pipeline.read_text().splitlines()
    pipeline.write_text("\n".join(lines[:4] + ["sleep 3"] + lines[4:]) + "\n")
    marks: dict[bytes, float | None] = {b"step: featurize": None}
    started = time.monotonic()
    on_a_terminal(args, marks)
    assert marks[b"step: featurize"] is not None and marks[b"step: featurize"] < 2.5, marks
    assert time.monotonic() - started >= 3  # the pipeline did run on after it


def test_off_a_terminal_the_demo_prints_the_table_only(tmp_path):
    result = subprocess.run(["make", *stand_ins(tmp_path)], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step:" not in result.stdout and "table of compare" in result.stdout


def test_a_second_demo_keeps_the_first_runs_log(tmp_path):
    args = stand_ins(tmp_path)
    (tmp_path / "demo.log").write_text("the first run's log\n")
    subprocess.run(["make", *args], cwd=ROOT, capture_output=True, timeout=60, check=True)
    assert (tmp_path / "demo.log.prev").read_text() == "the first run's log\n"
    assert "detail line" in (tmp_path / "demo.log").read_text()


def test_a_failed_step_fails_the_demo_and_shows_the_log_end(tmp_path):
    args = stand_ins(tmp_path)
    pipeline = tmp_path / "pipeline"
    pipeline.write_text(pipeline.read_text() + "echo 'the step failed here'\nexit 3\n")
    result = subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "the step failed here" in result.stdout and "demo failed (exit 3)" in result.stdout


def test_the_demo_prints_the_table_and_names_its_log():
    text = (ROOT / "Makefile").read_text()
    demo = text[text.index("\ndemo:"):text.index("\n# A scheduler")]
    assert "DEMO_LOG" in demo and "tee $(DEMO_LOG)" in demo
    assert "compare" in demo
