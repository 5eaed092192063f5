"""gemmlab.timing.timing_lock: graders sharing one GPU take turns timing, checks share the GPU but never
with a timing, a waiting timing is not starved by checks, and nobody can block the others for long."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gemmlab.timing import timing_lock
from gemmlab.timing.timing_lock import (
    ENV_PATH, TURN_SUFFIX, compiling, exclusive_timing, lock_file_for, shared_gpu_work,
)

_HOLD = """
import sys, time
from gemmlab.timing.timing_lock import exclusive_timing, shared_gpu_work
block = exclusive_timing if sys.argv[1] == "ex" else shared_gpu_work
with block(wait_s=float(sys.argv[2])) as got:
    print("got" if got else "gave up", time.monotonic(), flush=True)
    time.sleep(float(sys.argv[3]))
print("done", time.monotonic(), flush=True)
"""


@pytest.fixture(autouse=True)
def _fresh_process_state():
    timing_lock.start_fresh()
    yield
    timing_lock.start_fresh()


@pytest.fixture
def lock(monkeypatch, tmp_path) -> str:
    """GPU 0's lock files, configured for this process as the grader does for a sandbox."""
    lock = lock_file_for("0", tmp_path)
    monkeypatch.setenv(ENV_PATH, lock)
    return lock


def _holder(lock: str, mode: str, hold_s: float, wait_s: float = 30) -> subprocess.Popen:
    env = dict(os.environ, **{ENV_PATH: lock})
    return subprocess.Popen([sys.executable, "-c", _HOLD, mode, str(wait_s), str(hold_s)], env=env,
                            stdout=subprocess.PIPE, text=True)


def _line(proc: subprocess.Popen) -> tuple[str, float]:
    word, stamp = proc.stdout.readline().rsplit(" ", 1)
    return word, float(stamp)


def test_without_a_configured_lock_nothing_waits(monkeypatch) -> None:
    monkeypatch.delenv(ENV_PATH, raising=False)
    with exclusive_timing() as got:
        assert got is False


def test_a_missing_lock_file_is_not_an_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV_PATH, str(tmp_path / "gone.lock"))
    with exclusive_timing() as got:
        assert got is False


def test_one_timing_at_a_time_and_bounded_waits(monkeypatch, tmp_path) -> None:
    lock = lock_file_for("0", tmp_path)
    for path in (lock, lock + TURN_SUFFIX):
        assert oct(os.stat(path).st_mode & 0o777) == "0o644"       # readable by the sandbox's nobody
    assert lock_file_for("0", tmp_path) == lock                    # every worker of GPU 0 gets the same file
    assert lock_file_for("1", tmp_path) != lock
    monkeypatch.setenv(ENV_PATH, lock)
    monkeypatch.setenv("GEMMLAB_TIMING_LOCK_WAIT", "0.4")          # per wait; 3 x 0.4 s of waits in all
    other = _holder(lock, "ex", hold_s=60)      # held throughout; stopped below, so nothing waits it out
    try:
        assert _line(other)[0] == "got"
        spent = []
        for _ in range(4):
            t0 = time.monotonic()
            with pytest.warns(RuntimeWarning, match="timing without it"):
                with exclusive_timing() as got:
                    assert got is False
            spent.append(time.monotonic() - t0)
        # each wait is bounded by the limit (far below the holder's 60 s; a busy machine only lengthens it)
        assert all(0.35 <= s < 30 for s in spent[:3]), spent
        assert spent[3] < 0.35, spent                              # the process's total is used up: no more waiting
    finally:
        other.kill()
        other.wait(timeout=30)
    with exclusive_timing() as again:                              # free again: still taken when free
        assert again is True
        with shared_gpu_work() as nested:                          # nested in one process: no self-deadlock
            assert nested is True


def test_waits_that_succeed_cost_nothing_of_the_budget(lock: str, monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_TIMING_LOCK_WAIT", "1")           # a total of 3 s for waits that run out
    for _ in range(5):                                             # ~4 s of waits that succeed: not counted
        timing = _holder(lock, "ex", hold_s=0.8)
        assert _line(timing)[0] == "got"
        with shared_gpu_work() as got:
            assert got is True
        timing.wait(timeout=30)
    assert timing_lock.waited_seconds() == 0.0


def test_checks_share_the_gpu_but_not_with_a_timing(lock: str) -> None:
    reader = _holder(lock, "sh", hold_s=6)
    try:
        word, got_at = _line(reader)                               # the reader's clock is this one (monotonic)
        assert word == "got"
        with shared_gpu_work(wait_s=30) as got:                    # two checks at once
            assert got is True
            shared_at = time.monotonic()
        with exclusive_timing(wait_s=60) as got:                   # a timing waits for the running check
            assert got is True
            exclusive_at = time.monotonic()
        assert _line(reader)[0] == "done"
        # the reader held from got_at for at least 6 s: the check got in before, the timing only after (ordered by
        # the clock both processes read, so a busy machine cannot change the verdict)
        assert shared_at < got_at + 6 <= exclusive_at, (shared_at, got_at, exclusive_at)
    finally:
        reader.kill()


def test_a_waiting_timing_is_not_starved_by_new_checks(lock: str) -> None:
    first = _holder(lock, "sh", hold_s=1.5)
    try:
        assert _line(first)[0] == "got"
        timing = _holder(lock, "ex", hold_s=1.0)
        time.sleep(0.4)                                            # the timing now waits for the first check
        with shared_gpu_work(wait_s=10) as got:                    # a new check queues behind the timing
            assert got is True
            entered = time.monotonic()
        word, started = _line(timing)
        assert word == "got" and entered >= started + 0.9, (started, entered)
    finally:
        first.kill()


def test_a_killed_holder_releases_the_lock(monkeypatch, tmp_path) -> None:
    lock = lock_file_for("0", tmp_path)
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", lock],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv(ENV_PATH, lock)
        with pytest.warns(RuntimeWarning):
            with exclusive_timing(wait_s=0.2) as got:
                assert got is False
        holder.kill()
        holder.wait(timeout=10)
        with exclusive_timing(wait_s=5) as got:
            assert got is True
    finally:
        holder.kill()


def test_gpu_jobs_get_their_gpus_lock_read_only_in_the_sandbox(tmp_path, monkeypatch) -> None:
    from autograder.harness import sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/bwrap")
    spec = sandbox.SandboxSpec(tmp_path / "s", tmp_path / "r", gpu="1")
    env = sandbox.sandbox_env(spec)
    lock = env[ENV_PATH]
    assert lock.endswith("gpu1.lock") and os.path.exists(lock)
    cmd = sandbox.bwrap_prefix(spec)
    for path in (lock, lock + TURN_SUFFIX):
        i = cmd.index(path)
        assert cmd[i - 1] == "--ro-bind" and cmd[i + 1] == path
        assert cmd.index("--tmpfs") < i                            # bound after /tmp is replaced
    cpu_only = sandbox.SandboxSpec(tmp_path / "s", tmp_path / "r", gpu=None)
    assert ENV_PATH not in sandbox.sandbox_env(cpu_only)
    assert not any(a.endswith(".lock") for a in sandbox.bwrap_prefix(cpu_only))


def test_inside_the_real_sandbox_the_lock_can_be_taken_but_not_written(tmp_path) -> None:
    from autograder.harness import sandbox

    why = sandbox.check_bwrap()
    if why and os.environ.get("GEMMLAB_CI") != "1":
        pytest.skip(f"no usable bubblewrap: {why}")
    (tmp_path / "s").mkdir()
    (tmp_path / "r").mkdir()
    spec = sandbox.SandboxSpec(tmp_path / "s", tmp_path / "r", gpu="0")
    probe = ("import os\nfrom gemmlab.timing.timing_lock import exclusive_timing, shared_gpu_work\n"
             "with exclusive_timing(wait_s=5) as got:\n    print('acquired', got)\n"
             "with shared_gpu_work(wait_s=5) as got:\n    print('shared', got)\n"
             "try:\n    open(os.environ['GEMMLAB_TIMING_LOCK'], 'w')\n    print('written')\n"
             "except OSError:\n    print('write refused')\n")
    done = subprocess.run(sandbox.bwrap_prefix(spec) + [sys.executable, "-c", probe],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["acquired True", "shared True", "write refused"], done.stdout


def test_a_check_hands_the_gpu_back_while_it_compiles(lock: str) -> None:
    with shared_gpu_work(wait_s=5) as got:
        assert got is True
        with compiling():                                          # a timing may run during the compile
            timing = _holder(lock, "ex", hold_s=0.5, wait_s=5)
            assert _line(timing)[0] == "got"
        assert _line(timing)[0] == "done"                          # the check waited for it to finish
        other = _holder(lock, "ex", hold_s=0, wait_s=0.3)          # and holds the GPU again afterwards
        assert _line(other)[0] == "gave up"
        other.wait(timeout=30)
    with compiling():                                              # outside any hold: nothing to do
        pass
