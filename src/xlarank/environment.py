"""The thread variables that Numba and OpenMP read once, when they load, screened before
they do: imported by ``import xlarank`` itself, so it holds nothing but this (the standard
library's os and sys), and `xlarank.threads` refuses what it took out."""

from __future__ import annotations

import os
import sys

# Thread counts the libraries under xlarank read from the environment once, when they
# load: Numba (its pool's size, and so the most `use_threads` can give it) and the OpenMP
# runtime of the boosters. xlarank chooses its counts itself, so a valid value changes
# nothing; an invalid one would make Numba raise (0, negative), start a pool it cannot
# (huge), or warn, and libgomp print its own complaint. `screen_environment` takes an
# invalid one out of the environment before they load, and `use_threads` refuses it.
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
# More threads than any machine xlarank runs on has cores: a typo, not a choice.
MAX_THREADS = 1024
# The names the same libraries take (Numba raises for an unknown threading layer at its
# first parallel kernel; libgomp prints a complaint for an unknown wait policy).
CHOICES = {"NUMBA_THREADING_LAYER": ("default", "safe", "threadsafe", "forksafe", "omp",
                                     "tbb", "workqueue"),
           "OMP_WAIT_POLICY": ("active", "passive")}
# {variable: its refused value}, found by `screen_environment`.
_refused: dict[str, str] = {}


def _thread_count_fault(name: str, value: str) -> str | None:
    """Why ``value`` is no thread count for ``name`` (None: it is one). OpenMP takes a
    comma-separated list, a count per nesting level."""
    parts = value.split(",") if name == "OMP_NUM_THREADS" else [value]
    for part in parts:
        part = part.strip()
        if not part.isdigit() or not part.isascii():
            return "expected a whole number of threads (or unset it: xlarank chooses)"
        if len(part) > len(str(MAX_THREADS)) or not 1 <= int(part) <= MAX_THREADS:
            return f"expected a thread count in 1..{MAX_THREADS} (or unset it: xlarank chooses)"
    return None


def screen_environment(environ=None) -> dict[str, str]:
    """Take the thread variables (`THREAD_VARIABLES`, `CHOICES`) that hold no
    valid value out of ``environ`` (os.environ) before Numba or OpenMP reads them, and
    remember them for `check_environment`: an empty one is as if unset. Returns the
    refused ones, {name: why}."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    dropped = []
    for name in (*THREAD_VARIABLES, *CHOICES):
        value = environ.get(name)
        if value is None:
            continue
        if not value.strip():
            environ.pop(name)
            dropped.append(name)
            continue
        if name in CHOICES:
            fault = (None if value.strip().lower() in CHOICES[name] else
                     f"expected one of {', '.join(CHOICES[name])} (or unset it)")
        else:
            fault = _thread_count_fault(name, value)
        if fault is not None:
            found[name] = f"{name}={value!r}: {fault}"
            environ.pop(name)
            dropped.append(name)
    if environ is os.environ:
        _refused.update(found)
        if "numba" in sys.modules and any(n.startswith("NUMBA_") for n in dropped):
            # Numba read them when it was imported: read again, without them.
            from numba.core import config

            config.reload_config()
    return found
