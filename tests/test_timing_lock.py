"""gemmlab.timing_lock: graders sharing one GPU take turns timing; nobody can block the others for long."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gemmlab.timing_lock import ENV_PATH, exclusive_timing, lock_file_for


def test_without_a_configured_lock_nothing_waits(monkeypatch) -> None:
    monkeypatch.delenv(ENV_PATH, raising=False)
    with exclusive_timing() as got:
        assert got is False


def test_a_missing_lock_file_is_not_an_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV_PATH, str(tmp_path / "gone.lock"))
    with exclusive_timing() as got:
        assert got is False


def test_one_holder_at_a_time_and_a_bounded_wait(monkeypatch, tmp_path) -> None:
    lock = lock_file_for("0", tmp_path)
    assert oct(os.stat(lock).st_mode & 0o777) == "0o644"          # readable by the sandbox's nobody
    assert lock_file_for("0", tmp_path) == lock                    # every worker of GPU 0 gets the same file
    assert lock_file_for("1", tmp_path) != lock
    monkeypatch.setenv(ENV_PATH, lock)
    with exclusive_timing() as first:
        assert first is True
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="timing without it"):
            with exclusive_timing(wait_s=0.3) as second:           # a second open file: flock excludes it
                assert second is False
        assert 0.25 <= time.monotonic() - t0 < 5
    with exclusive_timing(wait_s=0.3) as again:                    # released at the end of the block
        assert again is True


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
    i = cmd.index(lock)
    assert cmd[i - 1] == "--ro-bind" and cmd[i + 1] == lock
    assert cmd.index("--tmpfs") < i                                # bound after /tmp is replaced
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
    probe = ("import os\nfrom gemmlab.timing_lock import exclusive_timing\n"
             "with exclusive_timing(wait_s=5) as got:\n    print('acquired', got)\n"
             "try:\n    open(os.environ['GEMMLAB_TIMING_LOCK'], 'w')\n    print('written')\n"
             "except OSError:\n    print('write refused')\n")
    done = subprocess.run(sandbox.bwrap_prefix(spec) + [sys.executable, "-c", probe],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["acquired True", "write refused"], done.stdout
