"""The sandbox leaks nothing, in a real bubblewrap sandbox on CPU: the kernel's environment is an
allow-list, root-only files stay unreadable, every writable place has a size limit and counts as
memory, nothing a kernel writes is there when the next one starts, copy-on-write pages count
once, and a kernel that cannot start (or stops answering) says why within seconds."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autograder.harness import kernel as kernel_mod
from autograder.harness import sandbox as sb
from autograder.harness.kernel import KernelStartError, SandboxedKernel, memory_in_use
from autograder.records import Limits

pytestmark = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                reason=f"no usable bubblewrap: {sb.check_bwrap()}")

MiB = 1 << 20


def _kernel(tmp_path: Path, limits: Limits = Limits(), **kw) -> SandboxedKernel:
    k = SandboxedKernel(tmp_path / "scratch", tmp_path / "run", None, limits, **kw)
    k.start()
    return k


def _value(k: SandboxedKernel, code: str, timeout_s: float = 60):
    """What ``code`` prints as its last line, read as JSON."""
    run = k.execute(code, timeout_s)
    assert run.status == "ok", (run.status, run.ename, run.evalue, run.message)
    text = "".join(o.get("text", "") for o in run.outputs if o.get("output_type") == "stream")
    return json.loads(text.strip().splitlines()[-1])


def _sandboxed(tmp_path: Path, code: str, **spec_kw) -> subprocess.CompletedProcess:
    scratch, run = tmp_path / "scratch", tmp_path / "run"
    run.mkdir(exist_ok=True)
    os.chmod(run, 0o777)
    cmd = sb.bwrap_prefix(sb.SandboxSpec(scratch, run, **spec_kw)) + [sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------- environment and identity
def test_the_instructors_environment_does_not_reach_the_kernel(tmp_path: Path, monkeypatch) -> None:
    startup = tmp_path / "startup.py"
    startup.write_text("import builtins; builtins.PWNED = 'PYTHONSTARTUP'\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(startup, 0o644)
    monkeypatch.setenv("GRADER_API_TOKEN", "instructor-secret")
    monkeypatch.setenv("PYTHONSTARTUP", str(startup))
    monkeypatch.setenv("PYTHONINSPECT", "1")
    k = _kernel(tmp_path)
    try:
        seen = _value(k, "import builtins, json, os\n"
                         "print(json.dumps([dict(os.environ), getattr(builtins, 'PWNED', None)]))")
    finally:
        k.kill()
    env, pwned = seen
    assert pwned is None, "PYTHONSTARTUP from the grader's environment ran in the kernel"
    assert "instructor-secret" not in json.dumps(env)
    allowed = set(sb.sandbox_env(sb.SandboxSpec(tmp_path / "scratch", tmp_path / "run")))
    # ipykernel adds its own display settings (CLICOLOR, TERM, PAGER...); none of them is the grader's.
    added = {name for name in env if name not in allowed and name != "PWD"}
    assert not added & set(os.environ) - {"TERM", "PAGER", "GIT_PAGER", "CLICOLOR", "CLICOLOR_FORCE",
                                          "FORCE_COLOR", "PYDEVD_USE_FRAME_EVAL"}, added


def test_the_environment_is_the_allow_list_and_the_settings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("RAY_ADDRESS", "ray://grader:10001")
    monkeypatch.setenv("GEMMLAB_COMPILE_JOBS", "3")
    env = sb.sandbox_env(sb.SandboxSpec(tmp_path / "s", tmp_path / "r"))
    assert "AWS_SECRET_ACCESS_KEY" not in env and "RAY_ADDRESS" not in env
    assert env["GEMMLAB_COMPILE_JOBS"] == "3", "gemmlab's own settings pass"
    assert env["PYTHONNOUSERSITE"] == "1"
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    env = sb.sandbox_env(sb.SandboxSpec(tmp_path / "s", tmp_path / "r"))
    assert env["OMP_NUM_THREADS"] == str(sb.KERNEL_THREADS), "a kernel starts few threads unless told otherwise"
    assert env["MKL_NUM_THREADS"] == "4", "the instructor's thread setting wins"
    cmd = sb.bwrap_prefix(sb.SandboxSpec(tmp_path / "s", tmp_path / "r"))
    assert "--clearenv" in cmd and cmd.index("--clearenv") < cmd.index("--setenv")


def test_the_student_cannot_read_root_only_files(tmp_path: Path) -> None:
    probe = ("import json, os\n"
             "try:\n    open('/etc/shadow').read(1); shadow = 'read'\n"
             "except OSError as e:\n    shadow = type(e).__name__\n"
             "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
             "print(json.dumps({'uid': os.getuid(), 'euid': os.geteuid(), 'shadow': shadow, 'caps': caps}))")
    done = _sandboxed(tmp_path, probe)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["shadow"] == "PermissionError", f"/etc/shadow was readable in the sandbox: {seen}"
    assert seen["uid"] == seen["euid"] == sb.SANDBOX_UID
    assert int(seen["caps"], 16) == 0, "the kernel kept capabilities"


def test_a_sandboxed_kernel_runs_as_nobody_outside_too(tmp_path: Path) -> None:
    """Not only inside: the kernel process's real uid on the host is nobody's (a mapped root is root)."""
    k = _kernel(tmp_path)
    try:
        assert _value(k, "import os; print(os.getuid())") == sb.SANDBOX_UID
        procs = psutil.Process(k.pid).children(recursive=True)
        pythons = [p for p in procs if p.name().startswith("python")]
        assert pythons, [p.cmdline() for p in procs]
        if os.geteuid() == 0:
            assert all(p.uids().real == sb.SANDBOX_UID for p in pythons), [p.uids() for p in pythons]
        else:
            assert all(p.uids().real == os.getuid() for p in pythons)
    finally:
        k.kill()


# --------------------------------------------------------------------------- disk quota and memory
@pytest.mark.parametrize("where", ["scratch", "/tmp", "/dev/shm"])
def test_every_writable_place_has_a_size_limit(tmp_path: Path, where: str) -> None:
    path = str(tmp_path / "scratch") if where == "scratch" else where
    probe = ("import errno, json, sys\n"
             "path = sys.argv[1] + '/fill'\n"
             "try:\n"
             "    with open(path, 'wb') as f:\n"
             "        for _ in range(64):\n            f.write(b'x' * (1 << 20)); f.flush()\n"
             "    print(json.dumps('wrote 64 MiB'))\n"
             "except OSError as e:\n    print(json.dumps(errno.errorcode.get(e.errno, str(e))))\n")
    scratch, run = tmp_path / "scratch", tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o777)
    spec = sb.SandboxSpec(scratch, run, scratch_bytes=8 * MiB, tmp_bytes=8 * MiB, shm_bytes=8 * MiB)
    done = subprocess.run(sb.bwrap_prefix(spec) + [sys.executable, "-c", probe, path],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == "ENOSPC", f"{where} took more than its quota"


def test_the_default_sandbox_gives_every_tmpfs_a_size(tmp_path: Path) -> None:
    cmd = sb.bwrap_prefix(sb.SandboxSpec(tmp_path / "s", tmp_path / "r"))
    mounts = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--tmpfs"]
    assert sorted(mounts) == sorted(sb.private_mounts(sb.SandboxSpec(tmp_path / "s", tmp_path / "r")))
    for i, a in enumerate(cmd):
        if a == "--tmpfs":
            assert cmd[i - 2] == "--size" and 0 < int(cmd[i - 1]) <= 64 << 30


def test_files_in_tmp_count_in_the_memory_limit(tmp_path: Path) -> None:
    k = _kernel(tmp_path, Limits(memory_bytes=500 * MiB))
    try:
        run = k.execute("with open('/tmp/blob', 'wb') as f:\n"
                        "    for _ in range(700):\n        f.write(b'x' * (1 << 20))\n"
                        "import time; time.sleep(10)", timeout_s=60)
    finally:
        k.kill()
    assert run.status == "memory", (run.status, run.message)
    assert "files it wrote" in run.message


def test_copy_on_write_pages_count_once(tmp_path: Path) -> None:
    """Six forks of a process holding 200 MiB: RSS summed says 1.4 GiB, the memory really used is ~200 MiB."""
    code = ("import os, time\nblob = bytearray(200 << 20)\nfor i in range(0, len(blob), 4096): blob[i] = 1\n"
            "for _ in range(6):\n    if os.fork() == 0:\n        time.sleep(60); os._exit(0)\n"
            "print('ready', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        tree = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
        assert len(tree) == 7
        rss = sum(p.memory_info().rss for p in tree)
        used = memory_in_use(proc.pid, [])
        assert rss > 1200 * MiB, "the forks share their pages, which RSS counts in every one of them"
        assert 200 * MiB < used < 450 * MiB, f"{used / MiB:.0f} MiB counted for 200 MiB shared by 7 processes"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the run folder is closed where the grader runs as root")
def test_a_running_kernel_cannot_write_into_its_run_folder(tmp_path: Path) -> None:
    """The run folder lies on the grader's disk, outside every quota: once the kernel runs, it is closed."""
    k = _kernel(tmp_path)
    try:
        seen = _value(k, "import json, os\nfrom ipykernel import get_connection_file\n"
                         "conn = get_connection_file(); tried = {}\n"
                         "for path, mode in ((os.path.join(os.path.dirname(conn), 'fill'), 'wb'), (conn, 'ab')):\n"
                         "    try:\n        open(path, mode).write(b'x'); tried[path] = 'written'\n"
                         "    except OSError as e:\n        tried[path] = type(e).__name__\n"
                         "print(json.dumps([os.path.dirname(conn), tried]))")
        assert k.execute("1 + 1", 30).status == "ok", "the kernel still answers through its sockets"
    finally:
        k.kill()
    run_dir, tried = seen
    assert run_dir == str(tmp_path / "run")
    assert set(tried.values()) == {"PermissionError"}, tried


# --------------------------------------------------------------------------- startup files
STARTUP_ATTACKS = r'''
import json, os, site, sys, pathlib
home = pathlib.Path(os.environ["HOME"])
line = "import builtins; builtins.PWNED = {!r}\n"
planted = {
    pathlib.Path(os.environ["IPYTHONDIR"]) / "profile_default" / "startup" / "00-grades.py": "ipython startup",
    pathlib.Path(os.environ["IPYTHONDIR"]) / "profile_default" / "ipython_kernel_config.py": "ipython config",
    pathlib.Path(os.environ["IPYTHONDIR"]) / "profile_default" / "ipython_config.py": "ipython config",
    pathlib.Path(os.environ["JUPYTER_CONFIG_DIR"]) / "jupyter_config.py": "jupyter config",
    home / ".jupyter" / "ipython_kernel_config.py": "jupyter config in HOME",
    pathlib.Path(site.getusersitepackages()) / "grades.pth": "pth",
    pathlib.Path(site.getusersitepackages()) / "usercustomize.py": "usercustomize",
    pathlib.Path.cwd() / "sitecustomize.py": "sitecustomize",
    pathlib.Path.cwd() / "usercustomize.py": "usercustomize in cwd",
    pathlib.Path.cwd() / "ipykernel_launcher.py": "shadowed launcher",
    pathlib.Path.cwd() / "numpy.py": "shadowed numpy",
    pathlib.Path("/tmp") / "sitecustomize.py": "sitecustomize in /tmp",
    pathlib.Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "sitecustomize.py": "sitecustomize in the run folder",
}
for path, what in planted.items():
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(line.format(what))
print(json.dumps(sorted(str(p) for p in planted)))
'''


def test_no_startup_file_a_kernel_writes_is_honoured_by_the_next(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    try:
        planted = _value(k, STARTUP_ATTACKS)
        assert len(planted) == 13
        k.restart()
        seen = _value(k, "import builtins, json, os, numpy\n"
                         "print(json.dumps([getattr(builtins, 'PWNED', None), numpy.__file__,"
                         f" [p for p in {planted!r} if os.path.exists(p)]]))")
    finally:
        k.kill()
    pwned, numpy_file, left = seen
    assert pwned is None, f"a file the previous kernel wrote ran at the next start ({pwned})"
    assert "site-packages" in numpy_file, f"numpy came from {numpy_file}"
    assert left == [], f"files outlived their kernel: {left}"


# --------------------------------------------------------------------------- kernels that cannot start
def test_a_kernel_that_cannot_start_says_why_within_seconds(tmp_path: Path) -> None:
    k = SandboxedKernel(tmp_path / "scratch", tmp_path / "run", None, Limits(startup_s=120),
                        extra_env={"PYTHONHOME": "/nonexistent"})
    t0 = time.monotonic()
    with pytest.raises(KernelStartError) as err:
        k.start()
    assert time.monotonic() - t0 < 60, "the grader waited (120 s) for a kernel that had already exited"
    assert "exited with status" in err.value.reason
    assert "encodings" in err.value.reason or "Fatal Python error" in err.value.reason, err.value.reason


def test_a_kernel_that_stops_answering_is_stopped_within_seconds(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(kernel_mod, "ANSWER_S", 3.0)
    k = _kernel(tmp_path)
    try:
        procs = psutil.Process(k.pid).children(recursive=True)
        for p in procs:
            if p.name().startswith("python"):
                p.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        run = k.execute("1 + 1", timeout_s=120)
        took = time.monotonic() - t0
    finally:
        k.kill()
    assert run.status == "died" and "did not answer" in run.message, (run.status, run.message)
    assert took < 60, "stopped after ANSWER_S (3 s), not at the cell's limit (120 s)"


# --------------------------------------------------------------------------- interrupts
def test_a_kernel_started_where_sigint_is_blocked_can_still_be_interrupted(tmp_path: Path) -> None:
    """Ray runs tasks in threads that block SIGINT, and a child inherits the mask: a kernel started
    there ignored the interrupt, so a cell past its limit cost the whole kernel and what it held."""
    import signal
    import threading

    seen: dict = {}

    def grade_in_a_blocking_thread() -> None:   # the kernel lives as long as the thread that started it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        k = _kernel(tmp_path)
        try:
            seen["set"] = k.execute("kept = 41", 30).status
            seen["loop"] = k.execute("while True:\n    pass", 3).status
            seen["alive"] = k.alive()
            seen["kept"] = _value(k, "print(kept + 1)") if seen["alive"] else None
        finally:
            k.kill()

    t = threading.Thread(target=grade_in_a_blocking_thread)
    t.start()
    t.join()
    assert seen.get("set") == "ok" and seen.get("loop") == "timeout", seen
    assert seen["alive"], "the interrupt did not stop the cell: the kernel had to be killed"
    assert seen["kept"] == 42, "the kernel's earlier state is gone"
