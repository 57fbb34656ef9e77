"""Measure a JAX program's layout configs on the local XLA backend (needs jax:
``xlarank[gnn]``).

`measure_program` traces the program (`xlarank.measure.trace`), draws candidate configs
shaped as real ones (`xlarank.measure.configs`), compiles each with its layout constraints,
checks that its output equals the unconstrained program's, and times it; it writes the
official ``ModuleTuningData`` record that `xlarank import` reads, with a sidecar manifest
(`xlarank.measure.record`).

Noise control: every config is compiled and run ``warmup`` times before any timing; then
``rounds`` rounds time every config once each, in a shuffled order of their own, each
timing one untimed call and then the least of ``repeats`` calls. A config's runtime is
the median of its rounds. The noise ceiling comes from two independent halves of the
rounds (even and odd): the Kendall tau between their runtimes (``repeat_tau``, the most
any ranking of these configs can agree with a second measurement), the median gap
between them (``noise_ns``) and the share of configs within that gap of the best.

A killed run keeps every timing in a partial log beside the record; ``resume`` goes on
from it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import importlib.util
import json
import math
import os
import platform
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlarank.atomic import atomic_path, check_output, write_text_atomic
from xlarank.compat import jax_module
from xlarank.data.xla.records import MAX_CANDIDATE_BYTES
from xlarank.errors import XlarankError
from xlarank.measure.configs import Config, draw_configs, free_config, node_layouts
from xlarank.measure.record import (
    config_key,
    module_fingerprint,
    module_tuning_data,
    partial_path,
    read_record_configs,
    sidecar_path,
)
from xlarank.measure.trace import first_line
from xlarank.threads import available_cores

# jax, imported on first use (`xlarank.compat`): this module loads without it.
jax = jax_module("jax", "measuring layout configs")
GENERATOR = "xlarank measure"
# An output may differ from the unconstrained program's by this share of its largest
# magnitude: layouts change the order of a product's or convolution's sums, not its math.
TOLERANCE = 1e-3
MIN_CONFIGS = 2
MAX_CONFIGS = 100_000
# Every count that sizes the timing is bounded: 1,000 rounds (or timed calls, or warm-up
# calls) per config is far past what any noise needs; a larger number is a typo that
# would time for days.
MAX_ROUNDS = 1000
# --timeout: a week. A longer limit is no limit, and past about 2**31 s the alarm's
# timestamp overflows the platform's time_t.
MAX_TIMEOUT = 7 * 24 * 3600


@dataclass
class Settings:
    """How a program is measured: configs drawn (``configs``, ``seed``), warm-up calls per
    config, rounds, timed calls per round (``repeats``), the output tolerance."""

    configs: int = 150
    seed: int = 0
    warmup: int = 2
    rounds: int = 4
    repeats: int = 3
    # More rounds where needed: while the repeat tau is under ``target_repeat_tau``, another
    # round is timed, up to ``max_rounds`` (None: exactly ``rounds``).
    target_repeat_tau: float | None = None
    max_rounds: int | None = None
    tolerance: float = TOLERANCE
    # Configs compile on this many threads (compiling needs no quiet); None: the cores this
    # process may use.
    compile_workers: int | None = None
    # The one CPU the timing thread is pinned to while it times (None: not pinned).
    timing_cpu: int | None = None

    def check(self) -> None:
        if not MIN_CONFIGS <= self.configs <= MAX_CONFIGS:
            raise XlarankError(f"--configs must lie in {MIN_CONFIGS}..{MAX_CONFIGS:,}, "
                               f"not {self.configs}")
        for name, low, high in (("seed", 0, 2**32 - 1), ("warmup", 0, MAX_ROUNDS),
                                ("rounds", 1, MAX_ROUNDS), ("repeats", 1, MAX_ROUNDS)):
            value = getattr(self, name)
            if not low <= value <= high:
                raise XlarankError(f"--{name} must lie in {low}..{high}, not {value}")
        if not 0 < self.tolerance < 1:
            raise XlarankError(f"--tolerance must lie between 0 and 1, not {self.tolerance}")
        if self.max_rounds is not None and not self.rounds <= self.max_rounds <= MAX_ROUNDS:
            raise XlarankError(f"--max-rounds must lie in {self.rounds}..{MAX_ROUNDS}, not "
                               f"{self.max_rounds}")
        if self.compile_workers is not None and not 1 <= self.compile_workers <= 256:
            raise XlarankError(f"--compile-workers must lie in 1..256, not "
                               f"{self.compile_workers}")
        cpus = _cpus()
        if self.timing_cpu is not None and cpus is not None and self.timing_cpu not in cpus:
            raise XlarankError(f"--timing-cpu {self.timing_cpu}: this process may run on "
                               f"CPUs {', '.join(map(str, sorted(cpus)))} only")


def _cpus() -> set[int] | None:
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


@contextlib.contextmanager
def _pinned(cpu: int | None):
    """The calling thread held to ``cpu`` (XLA runs a single-threaded program on the
    calling thread), and let go after."""
    if cpu is None or _cpus() is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def check_timeout(seconds: float) -> None:
    """XlarankError unless ``seconds`` is a number above 0 and at most `MAX_TIMEOUT`."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not 0 < seconds <= MAX_TIMEOUT:  # NaN fails the comparison too
        raise XlarankError(f"--timeout must be a finite number of seconds above 0, at most "
                           f"{MAX_TIMEOUT:,} (7 days), not {seconds}")


class _OutOfTime(BaseException):
    """Raised by the alarm inside a program that ran past its limit: a BaseException, so
    that the ``except Exception`` around the program's own code (`load_program`,
    `TracedProgram`) does not take it for the program's failure."""


@contextlib.contextmanager
def program_time_limit(seconds: float | None, program: str):
    """At most ``seconds`` (None: no limit) for what runs inside: a program that runs
    longer (``while True: pass``) is ended with an XlarankError naming ``program`` and
    the limit. SIGALRM in the main thread, the previous handler and timer restored after.
    Elsewhere (another thread, where signals cannot be handled, or a platform without
    SIGALRM) there is no limit. Python code is stopped between two bytecodes; a call
    into XLA ends first. Each config compiles in a worker thread the alarm does not stop:
    the limit stops the waiting for it."""
    if seconds is None:
        yield
        return
    check_timeout(seconds)
    if not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(_signum, _frame):
        raise _OutOfTime

    before_handler = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    before_delay, before_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _OutOfTime:
        raise XlarankError(f"{program}: ran past the time limit of {seconds:g} s "
                           "(--timeout)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before_handler)
        if before_delay:  # an outer timer goes on, less the time spent here
            left = before_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), before_interval)


@dataclass
class Measurement:
    """A measured program: its configs, runtimes (int ns, None for a failed config), the
    per-round timings float64 (rounds, configs), NaN where not timed, and the noise."""

    record: Path
    configs: list[Config]
    runtimes_ns: list[int | None]
    per_round_ns: np.ndarray
    errors: dict[int, str]
    noise: dict
    manifest: dict = field(repr=False)


def load_program(spec: str, inputs: str | None = None) -> tuple[Callable, tuple, str]:
    """``PATH.py:FUNCTION`` loaded: the function, its example inputs (what the function
    ``inputs`` of the same file, by default ``FUNCTION_inputs``, returns) and a name.

    This runs the file's code: name only programs you would run yourself.
    """
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise XlarankError(f"{spec!r}: give the program as PATH.py:FUNCTION")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise XlarankError(f"{path}: no such Python file")
    module_name = f"xlarank_program_{abs(hash(str(path.resolve())))}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader)
    try:
        loader.loader.exec_module(module)
    except SystemExit as exc:  # sys.exit() in the file must not end xlarank silently
        raise XlarankError(f"{path}: the program file exited (SystemExit {exc.code}) "
                           "while loading") from None
    except Exception as exc:  # the user's file may raise anything as it loads
        raise XlarankError(f"{path}: does not load ({type(exc).__name__}: "
                           f"{first_line(exc)})") from None
    inputs_name = inputs or f"{name}_inputs"
    fn = getattr(module, name, None)
    make_inputs = getattr(module, inputs_name, None)
    if not callable(fn):
        raise XlarankError(f"{path}: has no function {name!r}")
    if not callable(make_inputs):
        raise XlarankError(f"{path}: has no function {inputs_name!r} making {name}'s inputs")
    try:
        args = make_inputs()
    except SystemExit as exc:
        raise XlarankError(f"{path}: the program file exited (SystemExit {exc.code}) in "
                           f"{inputs_name}()") from None
    except Exception as exc:
        raise XlarankError(f"{path}: {inputs_name}() raised {type(exc).__name__}: "
                           f"{first_line(exc)}") from None
    if not isinstance(args, tuple | list):
        raise XlarankError(f"{path}: {inputs_name}() must return a tuple of {name}'s "
                           f"arguments, not {type(args).__name__}")
    return fn, tuple(args), name


def noise_ceiling(per_round_ns: np.ndarray) -> dict:
    """The repeat noise of a measurement, per_round_ns float64 (rounds, configs) with NaN
    for configs never timed: ``repeat_tau`` (Kendall tau between the even and the odd
    rounds' medians; None under 2 rounds or 3 timed configs), ``noise_ns`` (their median
    absolute gap), ``within_noise`` (share of timed configs within noise_ns of the best)
    and ``spread`` (slowest over fastest runtime)."""
    from xlarank.metrics import kendall_tau

    timed = ~np.isnan(per_round_ns).any(axis=0)
    runtime = np.median(per_round_ns[:, timed], axis=0)
    out: dict = {"timed_configs": int(timed.sum()), "repeat_tau": None, "noise_ns": None,
                 "within_noise": None, "spread": None}
    if timed.sum() == 0:
        return out
    out["spread"] = float(runtime.max() / runtime.min())
    if per_round_ns.shape[0] >= 2:
        even = np.median(per_round_ns[0::2][:, timed], axis=0)
        odd = np.median(per_round_ns[1::2][:, timed], axis=0)
        noise = float(np.median(np.abs(even - odd)))
        out["noise_ns"] = noise
        out["within_noise"] = float(np.mean(runtime <= runtime.min() + noise))
        if timed.sum() >= 3:
            tau = kendall_tau(-even, odd)
            out["repeat_tau"] = None if math.isnan(tau) else float(tau)
    return out


def _machine() -> dict:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    device = jax.devices()[0]
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu": model, "cpu_count": os.cpu_count(), "affinity": affinity,
            "platform": platform.platform(), "python": platform.python_version(),
            "backend": jax.default_backend(), "device": device.device_kind,
            "jax": jax.__version__, "jaxlib": _version("jaxlib"),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _outputs(value) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(value)]


def _finite(a: np.ndarray) -> np.ndarray:
    """Where ``a`` is finite (every element of an integer or boolean output)."""
    if a.dtype.kind in "biu":
        return np.ones(a.shape, dtype=bool)
    return np.isfinite(a)


def _mismatch(out: list[np.ndarray], ref: list[np.ndarray], tolerance: float) -> str | None:
    """Why ``out`` is not the reference output within ``tolerance``, or None."""
    if len(out) != len(ref):
        return "another number of outputs"
    for a, b in zip(out, ref):
        if a.shape != b.shape:
            return f"an output of shape {a.shape}, not {b.shape}"
        finite = _finite(b)
        if not np.all(_finite(a)[finite]):
            return "a non-finite output where the program's is finite"
        scale = float(np.max(np.abs(b[finite]))) if finite.any() else 0.0
        gap = float(np.max(np.abs(a[finite].astype(np.float64) - b[finite]))) \
            if finite.any() else 0.0
        if gap > tolerance * max(scale, np.finfo(np.float32).tiny):
            return f"an output off by {gap:.3g} (largest magnitude {scale:.3g})"
    return None


class _PartialLog:
    """Timings appended as JSON lines beside the record, so a killed run keeps them. The
    first line names what is measured; a resumed run must match it."""

    def __init__(self, path: Path, header: dict, resume: bool):
        self.path = path
        self.timings: dict[tuple[int, int], float] = {}
        self.errors: dict[int, str] = {}
        if path.exists():
            if not resume:
                raise XlarankError(f"{path}: a partial measurement is there; pass --resume "
                                   "to go on from it, or remove it")
            self._read(header)
        elif resume:
            raise XlarankError(f"{path}: no partial measurement to resume")
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(header) + "\n")
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            self._handle.write("\n")  # a killed run's cut last line stays a line of its own

    def _read(self, header: dict) -> None:
        with open(self.path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        try:
            found = json.loads(lines[0]) if lines else None
            if found != header:
                raise XlarankError(f"{self.path}: it measures another program, configs or "
                                   "settings; remove it to start afresh")
            for line in lines[1:]:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a killed run may be cut short
                if "error" in entry:
                    self.errors[int(entry["config"])] = str(entry["error"])
                else:
                    self.timings[int(entry["round"]), int(entry["config"])] = \
                        float(entry["ns"])
        except (ValueError, KeyError, TypeError) as exc:
            raise XlarankError(f"{self.path}: not a partial measurement ({exc})") from None

    def add(self, entry: dict) -> None:
        self._handle.write(json.dumps(entry) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def measure_program(fn: Callable, inputs: Sequence, out: str | Path, *,
                    name: str | None = None, source: str | None = None,
                    settings: Settings | None = None, resume: bool = False,
                    configs: list[Config] | None = None,
                    on_step: Callable[[str, int], None] | None = None,
                    extra: dict | None = None, traced=None) -> Measurement:
    """Measure ``fn`` on ``inputs`` and write its record to ``out`` (with ``out``'s sidecar).

    ``configs`` replaces the drawn ones (`remeasure`); ``traced``, the program already
    traced from ``fn`` and ``inputs`` (a `TracedProgram`), saves tracing it again.
    ``on_step(phase, total)`` is called once per compiled config ("compile") and per
    timing ("time"). Raises XlarankError for a
    program that does not trace, has no configurable node, or whose default run fails.
    """
    settings = settings or Settings()
    settings.check()
    out = check_output(out, "file")
    check_output(sidecar_path(out), "file")
    name = name or getattr(fn, "__name__", "program")
    from xlarank.measure.trace import TracedProgram

    program = traced if traced is not None else TracedProgram(fn, inputs, name)
    fingerprint = module_fingerprint(program.hlo_module)
    if configs is None:
        configs = draw_configs(program.nodes, settings.configs, settings.seed)
    _check_configs(configs, program)
    # A resumed run must time under what the logged timings were taken under.
    conditions = {"xla_flags": os.environ.get("XLA_FLAGS", ""), "jax": jax.__version__,
                  "backend": jax.default_backend(), "timing_cpu": settings.timing_cpu}
    header = {"generator": GENERATOR, "program": name, "fingerprint": fingerprint,
              "conditions": conditions,
              "configs": [config_key(c) for c in configs],
              "settings": {k: getattr(settings, k) for k in
                           ("seed", "warmup", "rounds", "repeats", "tolerance",
                            "target_repeat_tau", "max_rounds")}}
    pinned = {"timing_cpu": settings.timing_cpu,
              "compile_workers": settings.compile_workers}
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load_before = _load()

    def on_device(a):
        return jax.device_put(np.asarray(a))

    try:
        args = jax.tree_util.tree_map(on_device, list(program.inputs))
        reference = _outputs(jax.jit(program.function(None))(*args))
    except (Exception, SystemExit) as exc:  # the program fails to run: nothing is logged
        raise XlarankError(f"{name}: does not run unconstrained ({type(exc).__name__}: "
                           f"{first_line(exc)})") from None
    if not all(_finite(r).all() for r in reference):
        # Every config would pass the comparison with a NaN output: nothing is checked.
        raise XlarankError(f"{source or name}: {name}'s output (unconstrained) is not "
                           "finite (NaN or inf), so no config's output can be checked "
                           "against it")
    out.parent.mkdir(parents=True, exist_ok=True)
    log = _PartialLog(partial_path(out), header, resume)
    try:
        errors = dict(log.errors)
        lock = threading.Lock()

        def compile_one(i: int):
            exe = None if i in errors else _compiled(program, configs[i], args, reference,
                                                     settings, errors, i, log, lock)
            if on_step:
                with lock:
                    on_step("compile", len(configs))
            return exe

        workers = settings.compile_workers or available_cores()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        try:
            executables = list(pool.map(compile_one, range(len(configs))))
        except BaseException:
            # A kill (Ctrl-C) stops at once: the configs not yet compiled are dropped.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        most = max(settings.rounds, settings.max_rounds or 0)
        per_round = np.full((most, len(configs)), np.nan)
        for (r, i), ns in log.timings.items():
            if r < most and i < len(configs):
                per_round[r, i] = ns
        rounds = settings.rounds
        with _pinned(settings.timing_cpu):
            r = 0
            while r < rounds:
                order = np.random.default_rng([settings.seed, r]).permutation(len(configs))
                for i in order:
                    exe = executables[i]
                    if exe is not None and np.isnan(per_round[r, i]):
                        per_round[r, i] = _time_config(exe, args, settings.repeats)
                        log.add({"round": r, "config": int(i), "ns": per_round[r, i]})
                    if on_step:
                        on_step("time", settings.rounds * len(configs))
                r += 1
                if r == rounds and rounds < most and \
                        _under_target(per_round[:r], settings.target_repeat_tau):
                    rounds += 1
        per_round = per_round[:rounds]
    finally:
        log.close()
    runtimes: list[int | None] = [
        None if i in errors or np.isnan(per_round[:, i]).any()
        else int(round(float(np.median(per_round[:, i])))) for i in range(len(configs))]
    default = next((i for i, c in enumerate(configs) if c == free_config(program.nodes)), None)
    if default is None or runtimes[default] is None:
        raise XlarankError(f"{name}: the default run (no layout constraint) was not "
                           f"measured: {errors.get(default, 'not among the configs')}")
    noise = noise_ceiling(per_round)
    manifest = {
        "generator": GENERATOR, "program": name, "source": source,
        "module": _module_name(program), "fingerprint": fingerprint,
        "configurable_nodes": [
            {"index": n.index, "primitive": n.primitive, "hlo_node": int(pos),
             "shapes": [list(s) if s is not None else None for s in n.shapes]}
            for n, pos in zip(program.nodes, program.hlo_nodes)],
        "configs": len(configs), "measured": sum(r is not None for r in runtimes),
        "default_index": default, "settings": {**header["settings"], **pinned},
        "machine": _machine(), "started": started,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": {"before": load_before, "after": _load()},
        "noise": noise, "errors": {str(k): v for k, v in sorted(errors.items())},
        "per_round_ns": [[None if math.isnan(v) else round(v) for v in row]
                         for row in per_round],
        **(extra or {})}
    _write(out, program, fingerprint, configs, runtimes, default, manifest)
    partial_path(out).unlink(missing_ok=True)
    return Measurement(out, list(configs), runtimes, per_round, errors, noise, manifest)


def _under_target(per_round_ns: np.ndarray, target: float | None) -> bool:
    """Whether the rounds so far agree less than ``target`` (another round is wanted)."""
    if target is None:
        return False
    tau = noise_ceiling(per_round_ns)["repeat_tau"]
    return tau is None or tau < target


def _module_name(program) -> str:
    from xlarank.data.xla.messages import decode

    return decode(memoryview(program.hlo_module), "HloModuleProto").get("name")


def _check_configs(configs: list[Config], program) -> None:
    for i, config in enumerate(configs):
        if len(config) != len(program.nodes):
            raise XlarankError(f"config {i} sets {len(config)} nodes; the program has "
                               f"{len(program.nodes)} configurable nodes")
        for node, tensors in zip(program.nodes, config):
            for t, dims in enumerate(tensors):
                shape = node.shapes[t] if t < len(node.shapes) else None
                if dims and (shape is None or len(set(dims)) != len(dims)
                             or any(not 0 <= d < len(shape) for d in dims)):
                    raise XlarankError(f"config {i}: node {node.index} tensor {t}: layout "
                                       f"{list(dims)} does not fit its shape {shape}")


def _compiled(program, config: Config, args, reference, settings: Settings,
              errors: dict[int, str], index: int, log: _PartialLog, lock: threading.Lock):
    """The config's executable, run ``warmup`` times and checked; None (with the reason in
    ``errors`` and the log) when it fails."""
    try:
        exe = jax.jit(program.function(node_layouts(config, program.nodes))) \
            .lower(*args).compile()
        out = None
        for _ in range(max(settings.warmup, 1)):
            out = exe(*args)
            jax.block_until_ready(out)
        reason = _mismatch(_outputs(out), reference, settings.tolerance)
    except (Exception, SystemExit) as exc:  # XLA refuses some layouts: that config failed
        reason = f"{type(exc).__name__}: {first_line(exc)}"
    if reason is None:
        return exe
    with lock:
        errors[index] = reason
        log.add({"config": index, "error": reason})
    return None


def _time_config(exe, args, repeats: int) -> float:
    """One untimed call, then the least of ``repeats`` timed calls, in ns."""
    ready = jax.block_until_ready  # looked up once, outside the timed calls
    ready(exe(*args))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter_ns()
        ready(exe(*args))
        best = min(best, time.perf_counter_ns() - start)
    return float(best)


def _write(out: Path, program, fingerprint: int, configs, runtimes, default, manifest) -> None:
    record = module_tuning_data(program.hlo_module, fingerprint,
                                [int(p) for p in program.hlo_nodes], configs, runtimes,
                                default)
    with atomic_path(out) as tmp:
        tmp.write_bytes(record)
    write_text_atomic(sidecar_path(out), json.dumps(manifest, indent=1) + "\n")


def remeasure(fn: Callable, inputs: Sequence, record: str | Path, out: str | Path, *,
              count: int, seed: int = 0, name: str | None = None,
              source: str | None = None, settings: Settings | None = None,
              resume: bool = False,
              on_step: Callable[[str, int], None] | None = None) -> Measurement:
    """Measure ``count`` of ``record``'s configs again (drawn with ``seed``, the default run
    always among them) and write them as a new record; its sidecar's ``remeasure`` holds the
    Kendall tau between the stored and the new runtimes of the configs both measured."""
    from xlarank.metrics import kendall_tau

    record = Path(record)
    stored_fingerprint, stored, stored_ns, default = read_record_configs(record)
    if default is None:
        raise XlarankError(f"{record}: the record has no default run")
    if not MIN_CONFIGS <= count:
        raise XlarankError(f"--configs must be at least {MIN_CONFIGS}, not {count}")
    rng = np.random.default_rng(seed)
    others = [i for i in range(len(stored)) if i != default]
    chosen = [default] + sorted(int(i) for i in rng.choice(
        others, size=min(count - 1, len(others)), replace=False))
    settings = settings or Settings()
    from xlarank.measure.trace import TracedProgram

    traced = TracedProgram(fn, inputs, name or getattr(fn, "__name__", "program"))
    fingerprint = module_fingerprint(traced.hlo_module)
    if fingerprint != stored_fingerprint:
        raise XlarankError(f"{record}: measures another program (fingerprint "
                           f"{stored_fingerprint:x}, this program's {fingerprint:x}), or "
                           "the same one lowered by another jax version")
    result = measure_program(fn, inputs, out, name=name, source=source, settings=settings,
                             resume=resume, configs=[stored[i] for i in chosen],
                             on_step=on_step, traced=traced)
    both = [k for k, i in enumerate(chosen)
            if stored_ns[i] is not None and result.runtimes_ns[k] is not None]
    tau = kendall_tau(-np.array([stored_ns[chosen[k]] for k in both], dtype=np.float64),
                      np.array([result.runtimes_ns[k] for k in both], dtype=np.float64)) \
        if len(both) >= 3 else math.nan
    result.manifest["remeasure"] = {"record": str(record), "configs": chosen,
                                    "tau_with_stored": None if math.isnan(tau) else tau}
    write_text_atomic(sidecar_path(out), json.dumps(result.manifest, indent=1) + "\n")
    return result


def candidate_arrays(program, configs: Sequence[Config]) -> dict[str, np.ndarray]:
    """The layout file of a program's candidate configs, unmeasured (runtimes 0), in the
    dataset's format: the graph as `xlarank import` encodes the program's module, and
    node_config_feat float32 (configs, nodes, 18) with -1 where a config fixes nothing."""
    from xlarank.data.xla.encode import encode_module
    from xlarank.data.xla.records import graph_arrays

    feat = np.full((len(configs), len(program.nodes), 18), -1, dtype=np.float32)
    for i, config in enumerate(configs):
        for j, tensors in enumerate(config):
            for t, dims in enumerate(tensors):
                feat[i, j, 6 * t:6 * t + len(dims)] = dims
    return {**graph_arrays(encode_module(memoryview(program.hlo_module), None)),
            "node_config_ids": program.hlo_nodes.copy(), "node_config_feat": feat,
            "config_runtime": np.zeros(len(configs), dtype=np.int64)}


def write_candidates(fn: Callable, inputs: Sequence, out: str | Path, *, count: int,
                     seed: int = 0, name: str | None = None) -> int:
    """Write ``count`` candidate configs of the program (config 0 the compiler's own) as an
    unmeasured layout file ``out`` (.npz) for `xlarank suggest` and `rank-graph`; nothing is
    timed. Returns the number written (fewer where the nodes allow fewer distinct ones)."""
    from xlarank.data.npzwrite import write_npz
    from xlarank.measure.trace import TracedProgram

    if not MIN_CONFIGS <= count <= MAX_CONFIGS:
        raise XlarankError(f"--candidates must lie in {MIN_CONFIGS}..{MAX_CONFIGS:,}, "
                           f"not {count}")
    out = check_output(out, "file")
    program = TracedProgram(fn, inputs, name or getattr(fn, "__name__", "program"))
    need = count * len(program.nodes) * 18 * 4
    if need > MAX_CANDIDATE_BYTES:
        raise XlarankError(f"{count:,} candidates of {len(program.nodes):,} configurable "
                           f"nodes would take {need / 2**30:.1f} GiB; give at most "
                           f"{MAX_CANDIDATE_BYTES // (len(program.nodes) * 72):,}")
    configs = draw_configs(program.nodes, count, seed)
    with atomic_path(out) as tmp:
        write_npz(tmp, candidate_arrays(program, configs))
    return len(configs)


def candidate_configs(program, candidates: str | Path, indices: Sequence[int]
                      ) -> list[Config]:
    """Configs ``indices`` of a candidates file `write_candidates` wrote for this program,
    each tensor's fixed dims read back from its node_config_feat row. XlarankError when
    the file is another program's or an index is not one of its configs."""
    from xlarank.data.graph import LayoutGraph, load_graph

    graph = load_graph(candidates)
    ours = candidate_arrays(program, [])
    if (not isinstance(graph, LayoutGraph)
            or not np.array_equal(graph.node_opcode, ours["node_opcode"])
            or not np.array_equal(graph.node_config_ids, ours["node_config_ids"])
            or not np.array_equal(graph.edge_index, ours["edge_index"])):
        raise XlarankError(f"{candidates}: holds another program's configs (its graph or "
                           "configurable nodes differ from this program's)")
    bad = [i for i in indices if not 0 <= i < graph.n_configs]
    if bad:
        raise XlarankError(f"config index {bad[0]} is not one of {candidates}'s "
                           f"{graph.n_configs} configs")
    configs = []
    for i in indices:
        rows = np.asarray(graph.node_config_feat[i])
        configs.append(tuple(
            tuple(tuple(int(d) for d in row[6 * t:6 * t + 6] if d >= 0)
                  for t in range(len(node.shapes)))
            for node, row in zip(program.nodes, rows)))
    return configs


def measure_candidates(fn: Callable, inputs: Sequence, candidates: str | Path,
                       indices: Sequence[int], out: str | Path, *, name: str | None = None,
                       source: str | None = None, settings: Settings | None = None,
                       resume: bool = False,
                       on_step: Callable[[str, int], None] | None = None
                       ) -> tuple[Measurement, list[tuple[int, int | None]]]:
    """Measure configs ``indices`` of a candidates file (its config 0, the compiler's own,
    always with them: a record needs its default run) and write their record to ``out``.
    Returns the measurement and (candidate index, runtime ns or None) per config."""
    from xlarank.measure.trace import TracedProgram

    program = TracedProgram(fn, inputs, name or getattr(fn, "__name__", "program"))
    chosen = [0] + sorted({int(i) for i in indices} - {0})
    configs = candidate_configs(program, candidates, chosen)
    result = measure_program(fn, inputs, out, name=name, source=source, settings=settings,
                             resume=resume, configs=configs, on_step=on_step,
                             extra={"candidates": str(candidates), "candidate_indices": chosen},
                             traced=program)
    return result, list(zip(chosen, result.runtimes_ns))


__all__ = ["MAX_ROUNDS", "MAX_TIMEOUT", "Measurement", "Settings", "candidate_arrays",
           "check_timeout", "load_program", "measure_candidates", "measure_program",
           "noise_ceiling", "program_time_limit", "remeasure", "write_candidates"]
