"""Optional dependencies, checked in one place (as LightGBM's ``compat.py`` does).

The base install never needs these, and ``import xlarank`` (so the CLI's ``--help``) never
imports them: this is the one module that imports them (tests/test_optional_imports.py
holds that). Each is imported on first use through one of the functions here, which
return the module or raise `XlarankError` naming the extra to install.

The modules that compute with jax take it once, at their top, as ``from xlarank.compat
import jax, jnp`` (or `jax_module` for a submodule of jax): `LazyModule` stand-ins that
import the module through `require_jax` at their first attribute, so importing those
modules loads no jax and jax still starts with this process's threads.

- jax (``xlarank[gnn]``): training the gnn and gru families' weights, the GNN systems,
  `xlarank measure`.
- dask and distributed (``xlarank[dask]``): the Dask engine.
- optuna (``xlarank[tpe]``): the tuner's TPE strategy (``xlarank suggest --strategy tpe``).
"""

from __future__ import annotations

import importlib
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


class LazyModule:
    """A module of jax imported through `require_jax` (with ``purpose`` in its error) at
    the first attribute read from this stand-in, and kept: ``jnp.zeros`` is
    ``jax.numpy.zeros``."""

    def __init__(self, name: str, purpose: str | None = None):
        self._name = name
        self._purpose = purpose
        self._module = None

    def __getattr__(self, attr: str):
        # Called only for names this object lacks: every name of the module it stands for,
        # but not the dunders that copy, pickle or inspect look for (no jax for those).
        if (attr.startswith("__") and attr != "__version__") or \
                attr in ("_name", "_purpose", "_module"):
            raise AttributeError(attr)
        module = self._module
        if module is None:
            if self._purpose is None:
                require_jax()
            else:
                require_jax(self._purpose)
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<LazyModule {self._name}{'' if self._module is None else ' (imported)'}>"


def jax_module(name: str = "jax", purpose: str | None = None) -> LazyModule:
    """A stand-in for jax or one of its modules (``"jax.experimental.layout"``), imported
    on first use through `require_jax`."""
    if name != "jax" and not name.startswith("jax."):
        raise ValueError(f"{name}: not a module of jax")
    return LazyModule(name, purpose)


# jax and jax.numpy, imported on first use (what a module of the gnn extra takes at its
# top).
jax = jax_module("jax")
jnp = jax_module("jax.numpy")


def require_dask():
    """distributed (Dask's scheduler and client), for the Dask engine."""
    try:
        import distributed
    except ImportError:
        raise XlarankError("the Dask engine needs the dask extra: pip install 'xlarank[dask]'") \
            from None
    return distributed


def require_dask_array():
    """(dask, dask.array), for the Dask engine's training arrays (distributed with them)."""
    require_dask()
    import dask
    import dask.array

    return dask, dask.array


def require_optuna(purpose: str = "the tpe strategy"):
    """optuna, for Optuna's TPE sampler."""
    try:
        import optuna
    except ImportError:
        raise XlarankError(f"{purpose} needs optuna: pip install 'xlarank[tpe]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna
