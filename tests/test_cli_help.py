"""What a new user meets first: help texts with plain metavars, literal brackets and only
options that exist, and output off a terminal that is not wrapped."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import (
    run,
)
from xlarank.cli import app


def command_names() -> list[str]:
    import typer.main

    return sorted(typer.main.get_command(app).commands)


WIDE = {"COLUMNS": "400", "TERMINAL_WIDTH": "400"}


@pytest.mark.parametrize("command", ["", *command_names()])
def test_help_shows_plain_metavars_and_only_options_that_exist(command):
    import typer.main

    group = typer.main.get_command(app)
    result = run(*([command] if command else []), "--help", env=WIDE)
    assert result.exit_code == 0, result.output
    text = result.output
    assert not re.search(r"<(path|str|int|bool|float|list\[)", text), text
    assert not re.search(r"\{[a-z_]+\}", text.splitlines()[1] if text else ""), text
    target = group.commands[command] if command else group

    def options(of) -> set[str]:
        return {o for p in of.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}

    known = {"--help", "--version", "--verbose", *options(target)}
    # An option of another command is fine where that command is named beside it
    # ("featurize with them by --gnn-weights"); the root lists every command.
    for name, other in group.commands.items():
        if not command or re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            known |= options(other)
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))
    assert mentioned <= known, sorted(mentioned - known)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    for param in target.params:
        if param.param_type_name == "argument":
            assert param.name.upper() in usage, usage


@pytest.mark.parametrize("command, literal", [
    ("gnn-train", "pip install 'xlarank[gnn]'"),
    ("rank-graph", "pip install 'xlarank[gnn]'"),
    ("specs", "feature or booster [both]"),
    ("featurize", "[features/frames/<spec name>]"),
    ("train", "[the packaged default of the frame's collection]"),
])
def test_brackets_in_help_are_shown_literally(command, literal):
    result = run(command, "--help", env=WIDE)
    flat = " ".join(result.output.split())
    assert " ".join(literal.split()) in flat, result.output


def test_submit_help_does_not_mention_workers():
    assert "--workers" not in run("submit", "--help", env=WIDE).output


def test_output_off_a_terminal_is_not_wrapped(tmp_path):
    long_dir = tmp_path / ("a-rather-long-folder-name-" * 4) / "synth"
    result = subprocess.run([sys.executable, "-m", "xlarank", "synth", str(long_dir),
                             "--preset", "tiny"], capture_output=True, text=True, check=True,
                            env={**_env(), "COLUMNS": ""})
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80, result.stdout
    assert result.stderr == "", "no progress bar off a terminal"


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
