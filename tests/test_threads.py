"""Thread counts: chosen from --threads or the cores shared among make's jobs, applied to
Numba, the boosters at fit and predict, and the local worker processes."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from xlarank import engine, threads
from xlarank.errors import SpecError
from xlarank.rank.boosters import BOOSTERS, get_library
from xlarank.rank.spec import load_ranker_spec


@pytest.fixture(autouse=True)
def _restore_threads(tmp_path, monkeypatch):
    """Each test chooses its own count, in a jobs folder of its own (other xlarank
    commands running on the machine are not counted); the process's is put back after."""
    before = threads._chosen, threads._registered, numba.get_num_threads()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    threads._registered = None
    # Other programs' load (another developer's job) is not these tests' subject, except
    # where a test asks for it.
    monkeypatch.setenv(threads.LOAD_ENV, "0")
    monkeypatch.setattr(threads, "_load", None)
    monkeypatch.setattr(threads, "_counters", None)
    monkeypatch.setattr(threads, "_own_at", threads._own_at)
    yield
    threads._chosen, threads._registered = before[0], before[1]
    numba.set_num_threads(before[2])


def _dead_pid() -> int:
    """A pid no process has: that of a child that has exited."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_running_jobs_count_live_pid_files_and_drop_dead_ones(tmp_path):
    import os

    assert threads.running_jobs() == 0  # no folder yet
    threads.use_threads(None)  # registers this process
    folder = threads.jobs_dir()
    assert folder.parent == tmp_path and (folder / str(os.getpid())).exists()
    dead = _dead_pid()
    (folder / str(dead)).touch()
    (folder / str(os.getppid())).touch()
    assert threads.running_jobs() == 2
    assert not (folder / str(dead)).exists()


def test_threads_are_shared_with_jobs_that_start_later(monkeypatch):
    import os

    monkeypatch.setattr(threads, "available_cores", lambda: 4)
    monkeypatch.setenv("MAKEFLAGS", "")
    assert threads.use_threads(None) == 4
    (threads.jobs_dir() / str(os.getppid())).touch()  # a second job starts
    assert threads.chosen_threads() == 2
    assert threads.use_threads(3) == 3 and threads.chosen_threads() == 3  # --threads wins


@pytest.mark.parametrize("flags, jobs", [
    ("", 1), ("s", 1), (" -j2 --jobserver-auth=3,4", 2), ("s -j2 --jobserver-auth=3,4", 2),
    ("k -j16 --jobserver-auth=fifo:/tmp/x", 16), ("-j3", 3), ("--no-print-directory", 1),
    ("-k --jobs-not", 1),
])
def test_make_jobs_are_read_from_makeflags(flags, jobs):
    assert threads.make_jobs(flags) == jobs


def test_make_without_a_job_limit_counts_one_job_per_core(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 6)
    assert threads.make_jobs(" -j") == 6


@pytest.mark.parametrize("cores, makeflags, expected", [
    (2, "", 2), (2, " -j2 --jobserver-auth=3,4", 1), (8, " -j2", 4), (2, " -j4", 1),
    (1, "", 1), (16, " -j3", 5),
])
def test_default_threads_share_the_cores_among_makes_jobs(monkeypatch, cores, makeflags,
                                                           expected):
    monkeypatch.setattr(threads, "available_cores", lambda: cores)
    monkeypatch.setenv("MAKEFLAGS", makeflags)
    assert threads.default_threads() == expected


def test_use_threads_sets_numba_and_what_the_boosters_get(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", "")
    assert threads.use_threads(1) == 1
    assert numba.get_num_threads() == 1 and threads.chosen_threads() == 1
    assert threads.use_threads(0) == threads.default_threads()
    assert threads.chosen_threads() == threads.default_threads()
    monkeypatch.setenv("MAKEFLAGS", " -j64")
    assert threads.use_threads(None) == 1 and numba.get_num_threads() == 1


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_boosters_train_on_the_chosen_count(repo_specs, library):
    spec = load_ranker_spec(repo_specs.models("tile-xla" if library == "lightgbm"
                                              else "baseline"))
    adapter = get_library(library)
    key = "num_threads" if library == "lightgbm" else "nthread"
    threads.use_threads(1)
    assert adapter.params(spec, 0)[key] == 1
    assert adapter.params(spec, 3)[key] == 3


def test_sklearn_runs_its_openmp_threads_on_the_chosen_count():
    from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: F401 (loads OpenMP)
    from threadpoolctl import threadpool_info

    threads.use_threads(1)
    with BOOSTERS["sklearn"]._threads(None):
        counts = {pool["num_threads"] for pool in threadpool_info()
                  if pool["user_api"] == "openmp"}
    assert counts == {1}


@pytest.mark.parametrize("library, key", [
    ("lightgbm", "num_threads"), ("lightgbm", "num_thread"), ("lightgbm", "nthread"),
    ("lightgbm", "n_jobs"), ("xgboost", "nthread"), ("xgboost", "n_jobs"),
])
def test_specs_may_not_set_threads(tmp_path, library, key):
    path = tmp_path / "spec.toml"
    objective = "" if library == "lightgbm" else 'objective = "rank:ndcg"\n'
    path.write_text(f'features = "default"\nlibrary = "{library}"\n{objective}'
                    f"[params]\n{key} = 2\n")
    with pytest.raises(SpecError, match=rf"may not set {key}; threads are chosen per run"):
        load_ranker_spec(path)


def test_model_files_do_not_depend_on_the_thread_count(frames, repo_specs, tmp_path):
    from conftest import small
    from xlarank.frame import read_frame
    from xlarank.rank.train import train_ranker

    table, meta = read_frame(frames["default", "tile-xla", "train"])
    spec = small(load_ranker_spec(repo_specs.models("tile-xla")))
    files = []
    for count in (1, 2):
        threads.use_threads(count)
        train_ranker(table, meta, spec).save(tmp_path / str(count))
        files.append((tmp_path / str(count) / "model.txt").read_bytes())
    assert files[0] == files[1]
    assert b"[num_threads: 0]" in files[0]


def _worker_threads(_item: int) -> tuple[int, int]:
    import os

    return os.getpid(), numba.get_num_threads()


# slow: two process pools (test_results_keep_input_order_in_the_pool starts one fast)
@pytest.mark.slow
def test_local_pool_is_kept_and_its_workers_share_the_threads(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 4)
    threads.use_threads(4)
    try:
        first = list(engine.map_ordered(_worker_threads, range(6), workers=2))
        pool = engine._pool
        second = list(engine.map_ordered(_worker_threads, range(6), workers=2))
        assert engine._pool is pool  # kept between calls
        # 4 threads / 2 workers, within the machine's Numba pool
        assert {count for _, count in first + second} == {min(2, numba.config.NUMBA_NUM_THREADS)}
        assert {pid for pid, _ in second} <= {pid for pid, _ in first}
        threads.use_threads(2)
        third = list(engine.map_ordered(_worker_threads, range(4), workers=2))
        assert engine._pool is not pool and {count for _, count in third} == {1}
    finally:
        engine.shutdown_pool()
    assert engine._pool is None


def test_results_keep_input_order_in_the_pool():
    try:
        out = list(engine.map_ordered(np.square, [3, 1, 2, 5], workers=2))
    finally:
        engine.shutdown_pool()
    assert out == [9, 1, 4, 25]


# ---------------------------------------------------------------- other programs' load

def fake_proc_stat(path, cpus: dict[int, tuple[int, int]]) -> None:
    """A /proc/stat whose cores have the given (busy, idle) clock ticks."""
    busy_all = sum(b for b, _ in cpus.values())
    idle_all = sum(i for _, i in cpus.values())
    lines = [f"cpu  {busy_all} 0 0 {idle_all} 0 0 0 0 0 0"]
    lines += [f"cpu{n} {b // 2} 0 {b - b // 2} {i} 0 0 0 0 0 0" for n, (b, i) in cpus.items()]
    path.write_text("\n".join(lines) + "\nintr 12345\nctxt 678\n")


def test_busy_seconds_sum_the_cores_this_process_may_run_on(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    fake_proc_stat(stat, {0: (300, 900), 1: (500, 100), 2: (10_000, 0)})
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(threads.os, "sysconf", lambda name: 100)
    assert threads._busy_seconds(str(stat)) == pytest.approx(8.0)  # core 2 is not ours


def test_other_load_is_busy_time_less_this_process_and_cached(monkeypatch):
    clock = {"busy": 100.0, "own": 10.0}
    reads = []

    def busy(path=None):
        reads.append(clock["busy"])
        return clock["busy"]

    monkeypatch.setattr(threads, "_busy_seconds", busy)
    monkeypatch.setattr(threads, "_own_seconds", lambda: clock["own"])
    monkeypatch.setattr(threads, "_jobs_seconds", dict)
    monkeypatch.setattr(threads, "_counters", (0.0, 100.0, 10.0, {}))
    # Over 1.5 s the cores were busy 2.7 s, 0.6 of them this process's: 1.4 cores others'.
    clock.update(busy=102.7, own=10.6)
    assert threads.other_load(now=1.5) == pytest.approx(1.4)
    clock.update(busy=200.0, own=10.6)
    assert threads.other_load(now=2.0) == pytest.approx(1.4)  # within LOAD_TTL: no reading
    assert len(reads) == 1
    # This process alone busy: nothing is others'.
    clock.update(busy=201.0, own=11.6)
    monkeypatch.setattr(threads, "_counters", (2.0, 200.0, 10.6, {}))
    assert threads.other_load(now=3.0) == 0.0


def test_other_load_waits_a_short_window_when_no_recent_reading(monkeypatch):
    slept = []
    values = iter([50.0, 50.1])
    monkeypatch.setattr(threads, "_busy_seconds", lambda path=None: next(values))
    monkeypatch.setattr(threads, "_own_seconds", lambda: 1.0)
    monkeypatch.setattr(threads, "_jobs_seconds", dict)
    monkeypatch.setattr(threads.time, "sleep", slept.append)
    monkeypatch.setattr(threads.time, "monotonic", lambda: 100.0 + sum(slept))
    assert threads.other_load() == pytest.approx(1.0)  # 0.1 s busy in a 0.1 s window
    assert slept == [threads.LOAD_WINDOW]


def test_other_xlarank_jobs_are_not_counted_as_load(monkeypatch):
    """They are shared with by `running_jobs`: counted as load too, a job starting beside
    one that holds all cores would get a single thread."""
    clock = {"busy": 100.0, "jobs": {4242: 50.0, 4343: 7.0}}
    monkeypatch.setattr(threads, "_busy_seconds", lambda path=None: clock["busy"])
    monkeypatch.setattr(threads, "_own_seconds", lambda: 0.0)
    monkeypatch.setattr(threads, "_jobs_seconds", lambda: dict(clock["jobs"]))
    monkeypatch.setattr(threads, "_counters", (0.0, 100.0, 0.0, {4242: 44.0}))
    # Over 2 s: 14 busy seconds, 6 of them job 4242's; job 4343 started since (counted).
    clock["busy"] = 114.0
    assert threads.other_load(now=2.0) == pytest.approx(4.0)


def test_jobs_cpu_seconds_are_read_from_proc(monkeypatch):
    import os
    import subprocess
    import sys

    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc here")
    # Spins until it has used 0.3 CPU seconds, says so, then sleeps.
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile time.process_time() < 0.3: pass\n"
         "print('spun', flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spun"
        monkeypatch.setattr(threads, "_job_pids", lambda: [spinner.pid, os.getpid()])
        found = threads._jobs_seconds()
        assert set(found) == {spinner.pid} and 0.29 <= found[spinner.pid] <= 3
    finally:
        spinner.kill()
        spinner.wait()


def test_without_proc_the_load_average_is_used_and_without_it_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(threads, "PROC_STAT", str(tmp_path / "no-proc" / "stat"))
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.75, 0.5, 0.1))
    # Over the last 2 s this process used 1 CPU second: half a core of the load is ours.
    monkeypatch.setattr(threads, "_own_at", (1.0, 3.0))
    monkeypatch.setattr(threads, "_own_seconds", lambda: 4.0)
    assert threads.other_load(now=3.0) == 1.25
    monkeypatch.setattr(threads, "_load", None)
    monkeypatch.delattr(threads.os, "getloadavg")
    assert threads.other_load(now=5.0) == 0.0


def test_missing_proc_stat_reads_as_none(tmp_path):
    assert threads._busy_seconds(str(tmp_path / "missing")) is None
    (tmp_path / "garbage").write_bytes(b"cpu x y z\n\xff\x00")
    assert threads._busy_seconds(str(tmp_path / "garbage")) is None


@pytest.mark.parametrize("cores, load, jobs, expected", [
    (2, 0.0, 1, 2), (2, 0.3, 1, 2), (2, 1.0, 1, 1), (2, 1.9, 1, 1), (2, 40.0, 1, 1),
    (8, 3.0, 1, 5), (8, 0.0, 2, 4), (8, 6.0, 2, 2), (1, 5.0, 1, 1),
])
def test_threads_back_off_for_other_programs_load(monkeypatch, cores, load, jobs, expected):
    monkeypatch.setenv(threads.LOAD_ENV, "1")
    monkeypatch.setenv("MAKEFLAGS", f" -j{jobs}")
    monkeypatch.setattr(threads, "available_cores", lambda: cores)
    monkeypatch.setattr(threads, "other_load", lambda now=None: load)
    assert threads.default_threads() == expected
    assert threads.default_threads(load=False) == cores // jobs
    monkeypatch.setenv(threads.LOAD_ENV, "0")
    assert threads.default_threads() == cores // jobs


def test_the_count_is_taken_again_at_each_fit(monkeypatch, repo_specs):
    """A neighbour that starts after the command gets its cores back at the next fit."""
    monkeypatch.setenv(threads.LOAD_ENV, "1")
    monkeypatch.setenv("MAKEFLAGS", "")
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    load = {"now": 0.0}
    monkeypatch.setattr(threads, "other_load", lambda now=None: load["now"])
    threads.use_threads(None)
    spec = load_ranker_spec(repo_specs.models("tile-xla"))
    adapter = get_library("lightgbm")
    assert adapter.params(spec, 0)["num_threads"] == 2
    load["now"] = 2.0
    assert adapter.params(spec, 0)["num_threads"] == 1
    assert threads.use_threads(2) == 2 and adapter.params(spec, 0)["num_threads"] == 2


def test_a_real_busy_neighbour_is_seen(monkeypatch):
    """A process spinning on one core reads as about one core of load."""
    import subprocess
    import sys
    import time

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        monkeypatch.setattr(threads, "_counters", None)
        if threads._busy_seconds() is None:
            pytest.skip("no /proc/stat here")
        assert threads.other_load() >= 0.6
    finally:
        spinner.kill()
        spinner.wait()


# ---------------------------------------------------------------- a hostile jobs folder

@pytest.fixture
def places(tmp_path, monkeypatch):
    """The three places the jobs folder may go, all inside this test's folder."""
    import tempfile

    for name in ("run", "tmp", "home"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    name = f"xlarank-jobs-{threads._uid()}"
    return [tmp_path / "run" / name, tmp_path / "tmp" / name,
            tmp_path / "home" / ".cache" / "xlarank" / name]


def precious_folder(tmp_path):
    """A folder of someone's own files, one of them named like a dead pid."""
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    (folder / str(_dead_pid())).write_text("not a pid file")
    return folder


def make_hostile(kind: str, folder, tmp_path, monkeypatch) -> None:
    import os

    if kind == "a regular file":
        folder.write_text("someone else's")
    elif kind == "a symlink to a folder of ours":
        folder.symlink_to(precious_folder(tmp_path))
    elif kind == "a dangling symlink":
        folder.symlink_to(tmp_path / "nowhere")
    elif kind == "a folder others may write in":
        folder.mkdir(mode=0o777)
        folder.chmod(0o777)
        for pid in (1, os.getppid()):  # live pids, to starve us of threads
            (folder / str(pid)).touch()
    elif kind == "another user's folder":
        if os.geteuid() != 0:
            pytest.skip("making a folder another user owns needs root")
        folder.mkdir(mode=0o700)
        (folder / "1").touch()
        os.chown(folder, 65534, 65534)
    elif kind == "an unwritable folder":
        folder.mkdir(mode=0o500)
        real_access = os.access
        # root writes anywhere: the folder is what access() says of it
        monkeypatch.setattr(threads.os, "access",
                            lambda path, mode, **kw: False if str(path) == str(folder)
                            else real_access(path, mode, **kw))


HOSTILE = ["a regular file", "a symlink to a folder of ours", "a dangling symlink",
           "a folder others may write in", "another user's folder", "an unwritable folder"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_jobs_folder_is_passed_over_for_the_next_place(places, tmp_path,
                                                                monkeypatch, kind):
    import os

    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setenv("MAKEFLAGS", "")
    make_hostile(kind, places[0], tmp_path, monkeypatch)
    before = {p: os.lstat(p).st_mode for p in tmp_path.rglob("*") if "tmp" not in p.parts}
    precious = sorted(p.name for p in (tmp_path / "precious").iterdir()) \
        if (tmp_path / "precious").exists() else None
    assert threads.use_threads(None) == 2  # its live pid files are not counted
    assert threads.jobs_dir() == places[1]
    assert (places[1] / str(os.getpid())).is_file() and threads.running_jobs() == 1
    assert {p: os.lstat(p).st_mode for p in before} == before
    if precious is not None:  # the dead-pid cleanup never reached our own files
        assert sorted(p.name for p in (tmp_path / "precious").iterdir()) == precious
        assert (tmp_path / "precious" / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("kind", HOSTILE)
def test_with_every_place_hostile_the_registry_is_skipped(places, tmp_path, monkeypatch,
                                                         kind):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setenv("MAKEFLAGS", "")
    for i, folder in enumerate(places):
        folder.parent.mkdir(parents=True, exist_ok=True)
        target = tmp_path / f"own{i}"
        target.mkdir()
        make_hostile(kind, folder, target, monkeypatch)
    assert threads.use_threads(None) == 2
    assert threads._registered is None and threads.jobs_dir() is None
    assert threads.running_jobs() == 0 and threads.chosen_threads() == 2


def test_garbage_in_the_jobs_folder_is_left_alone_and_not_counted(places):
    import os

    threads.use_threads(None)
    folder = threads.jobs_dir()
    assert folder == places[0]
    dead = _dead_pid()
    garbage = ["abc", "12x", "0", "007", "99999999999999999999", "4194305", "\u0663",
               ".hidden", "-1"]
    for name in garbage:
        (folder / name).write_text("junk")
    (folder / "1").mkdir()  # a folder named by a live pid
    # A link named by another live pid: the parent's, or where the parent is init (a run
    # started detached, whose parent is pid 1, named above) a sleeping child's.
    sleeper = None
    if os.getppid() <= 2:
        import subprocess
        import sys

        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    live = str(os.getppid() if sleeper is None else sleeper.pid)
    (folder / live).symlink_to("/etc/hostname")
    os.mkfifo(folder / "2")
    (folder / str(dead)).write_text("")
    try:
        assert threads.running_jobs() == 1  # this process only
        assert not (folder / str(dead)).exists()  # a dead job's file is cleaned up
        left = {p.name for p in folder.iterdir()}
        assert left == {*garbage, "1", "2", live, str(os.getpid())}
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()


@pytest.mark.parametrize("kind", [*HOSTILE, "garbage pid files"])
def test_commands_run_whatever_the_jobs_folder_holds(places, tmp_path, monkeypatch, frames,
                                                     kind):
    from typer.testing import CliRunner

    from xlarank.cli import app

    for i, folder in enumerate(places):
        folder.parent.mkdir(parents=True, exist_ok=True)
        if kind == "garbage pid files":
            folder.mkdir(mode=0o700)
            for name in ("99999999999999999999", "x", "0"):
                (folder / name).write_text("junk")
        else:
            target = tmp_path / f"own{i}"
            target.mkdir()
            make_hostile(kind, folder, target, monkeypatch)
    result = CliRunner().invoke(app, ["evaluate", str(frames["default", "tile-xla", "train"]),
                                      "--random"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "Traceback" not in result.output and "slowdown" in result.output


def test_a_window_opened_at_the_start_is_waited_out_only_in_part(monkeypatch):
    # start_load_window's reading opens the window; other_load then sleeps only the rest.
    monkeypatch.setattr(threads, "_counters", None)
    monkeypatch.setattr(threads, "_load", None)
    busy = iter([100.0, 100.0, 100.2])
    monkeypatch.setattr(threads, "_busy_seconds", lambda: next(busy))
    monkeypatch.setattr(threads, "_own_seconds", lambda: 0.0)
    monkeypatch.setattr(threads, "_jobs_seconds", lambda: {})
    clock = iter([10.0, 10.04, 10.1])
    monkeypatch.setattr(threads.time, "monotonic", lambda: next(clock))
    slept: list[float] = []
    monkeypatch.setattr(threads.time, "sleep", slept.append)
    threads.start_load_window()
    assert threads.other_load() == pytest.approx(2.0)  # 0.2 s busy over the 0.1 s window
    assert slept == [pytest.approx(threads.LOAD_WINDOW - 0.04)]
