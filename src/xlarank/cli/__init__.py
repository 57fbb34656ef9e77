"""The ``xlarank`` command line (typer): parse options, call the library, show progress
and results.

train, evaluate, compare, tune and report each call one library function
(`train_from_specs`, `evaluate_model`, `compare_runs`, `tune_spec_file`,
`report_from_paths`); synth, gnn-train, score, submit, rank-graph and suggest call their stage's
functions, after listing the files a progress bar counts; featurize resolves its spec
and plans its frames (`resolve_feature_spec`, `frame_jobs`), then featurizes each with its
own progress bar. Progress goes to stderr, results to stdout, and
every `XlarankError` becomes one ``error:`` line on stderr and exit code 2. Every command
that writes passes its outputs and inputs to `check_outputs` first, before any work, so
no input is ever overwritten. The root
``--verbose`` flag travels in the typer context (``ctx.obj``), not in module state.

Modules: app (the root app and its options), common (errors, progress, tables, shared
options), console (the rich consoles, made at a command's first output), then one per
command group, each importing `app` from app: data, training, results, scoring. Start-up
imports typer and these alone: a command imports what its work needs in its body, and
help is click's plain text (no rich), so `xlarank --help` costs less than `import numpy`.
"""

from __future__ import annotations

from xlarank.cli.app import app, main

# Each command module registers its commands on `app` as it is imported; the order here is
# the order of `xlarank --help`.
from xlarank.cli import data, training, results, scoring  # noqa: F401  # isort: skip

__all__ = ["app", "main"]
