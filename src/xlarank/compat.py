"""Optional dependencies, checked in one place (as LightGBM's ``compat.py`` does).

The base install never needs these, and ``import xlarank`` (so the CLI's ``--help``) never
imports them: each is imported on first use, inside the function that needs it, through
one of the functions here. They return the module, or raise `XlarankError` naming the
extra to install.

- jax (``xlarank[gnn]``): training the gnn and gru families' weights, the GNN systems,
  `xlarank measure`.
- dask and distributed (``xlarank[dask]``): the Dask engine.
- optuna (``xlarank[tpe]``): the tuner's TPE strategy (``xlarank suggest --strategy tpe``).
"""

from __future__ import annotations

import os
import sys

from xlarank.errors import XlarankError


def require_jax(purpose: str = "training embedding weights (gnn, gru)"):
    """jax, imported with its CPU threads set to this process's chosen count
    (`xlarank.threads`): XLA reads them from XLA_FLAGS once, when jax starts, so a count
    chosen after jax started in this process cannot change them."""
    if "jax" not in sys.modules:
        from xlarank.threads import chosen_threads

        flags = os.environ.get("XLA_FLAGS", "")
        # XLA reads a value not starting with -- as the name of a file of flags, and
        # aborts the process (no Python error) when it cannot: words only, since xlarank
        # adds its own flags after the user's.
        if any(not word.startswith("--") for word in flags.split()):
            raise XlarankError(f"XLA_FLAGS={flags!r}: expected --name=value flags "
                               "separated by spaces (unset it for XLA's defaults)")
        if flags.strip():
            _check_xla_flags(flags)
        os.environ["XLA_FLAGS"] = _xla_thread_flags(flags, chosen_threads())
        # jax raises a bare ValueError at import for a truth value it cannot read.
        for name in JAX_SWITCHES:
            value = os.environ.get(name)
            if value is not None and not value.strip():
                os.environ.pop(name)
            elif value is not None and value.strip().lower() not in TRUTH_VALUES:
                raise XlarankError(f"{name}={value!r}: expected 1 or 0 (true or false)")
    try:
        import jax
    except ImportError:
        raise XlarankError(f"{purpose} needs jax: pip install 'xlarank[gnn]' "
                           "(make jax installs it in the virtualenv)") from None
    try:
        jax.devices()
    except RuntimeError as exc:  # JAX_PLATFORMS naming no backend this machine has
        raise XlarankError(f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}: "
                           f"{exc}") from None
    return jax


def _check_xla_flags(flags: str) -> None:
    """Start jax once in a child process with the user's XLA_FLAGS: XLA ends the process
    that reads a flag it does not know (no Python error to catch), so a child takes that
    end, and the fault is an XlarankError here. About a second, only where XLA_FLAGS is
    set."""
    import subprocess

    env = {**os.environ, "XLA_FLAGS": flags}
    try:
        done = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return  # no verdict: the real start says what it says
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if "XLA_FLAGS" in line]
        reason = said[-1].split("] ", 1)[-1] if said else \
            (done.stderr.strip().splitlines() or ["jax did not start"])[-1]
        raise XlarankError(f"XLA_FLAGS={flags!r}: {reason} (unset it for XLA's defaults)")


# jax's switches a user may set (jax reads them when it starts), and the values it takes.
JAX_SWITCHES = ("JAX_ENABLE_X64", "JAX_DISABLE_JIT")
TRUTH_VALUES = ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0")


def _xla_thread_flags(flags: str, threads: int) -> str:
    """XLA_FLAGS with the CPU backend held to ``threads``: one thread turns off Eigen's
    multi-threading and sizes the intra-op pool to 1; more sizes that pool. Flags the user
    set already win."""
    wanted = {"--xla_cpu_multi_thread_eigen": "false" if threads == 1 else "true",
              "intra_op_parallelism_threads": str(threads)}
    given = flags.split()
    for key, value in wanted.items():
        if not any(part.lstrip("-").startswith(key.lstrip("-")) for part in given):
            given.append(f"{key}={value}")
    return " ".join(given)


def require_dask():
    """distributed (Dask's scheduler and client), for the Dask engine."""
    try:
        import distributed
    except ImportError:
        raise XlarankError("the Dask engine needs the dask extra: pip install 'xlarank[dask]'") \
            from None
    return distributed


def require_optuna(purpose: str = "the tpe strategy"):
    """optuna, for Optuna's TPE sampler."""
    try:
        import optuna
    except ImportError:
        raise XlarankError(f"{purpose} needs optuna: pip install 'xlarank[tpe]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna
