"""The bubblewrap command line that confines one submission's notebook kernel.

What the kernel sees: the system read-only (``/usr``, ``/etc``, ``/lib*``, the Python
installation, the virtual environment, the ``gemmlab`` package), a private scratch directory
(the only writable place, also its ``HOME``, cache and current directory), a fresh ``/tmp``,
its own PID, network, IPC and user namespaces (no network at all; it runs as ``nobody``), and
the GPU device nodes and, for a GPU job, that GPU's lock files (read-only; through them the
kernels sharing a GPU keep timings apart from other GPU work: gemmlab.timing_lock). It does not
see the repository (``solutions/``, ``autograder/`` with the gradebook and other submissions,
``tests/``, ``.git``), anyone's home directory, or other processes. ``--die-with-parent`` and
the PID namespace mean that killing the ``bwrap`` process ends every process the submission
started.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.timing_lock import ENV_PATH as TIMING_LOCK_ENV, TURN_SUFFIX, lock_file_for

#: gemmlab, the only part of the repository the kernel may read.
GEMMLAB_DIR = Path(__file__).resolve().parents[2] / "gemmlab"
SYSTEM_DIRS = ("/usr", "/etc", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


@dataclass
class SandboxSpec:
    """Where one kernel runs. ``gpu`` is the index placed in CUDA_VISIBLE_DEVICES (None: no GPU)."""

    scratch: Path                       # private, writable; the kernel's cwd and HOME
    run_dir: Path                       # connection file and IPC sockets (writable, holds nothing secret)
    gpu: str | None = None
    extra_ro: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    as_nobody: bool = True


def python_dirs() -> list[str]:
    """The Python installation and environment the kernel needs to import torch, gemmlab..."""
    dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else ""
    if user_site and os.path.isdir(user_site):
        dirs.add(user_site)
    out = []
    for d in sorted(dirs) + _site_roots():
        if not any(d.startswith(s + "/") or d == s for s in SYSTEM_DIRS) and d not in out:
            out.append(d)
    return out


def extra_site_dirs() -> list[str]:
    """Import folders on ``sys.path`` outside the environment (``PYTHONPATH=/tmp/site``, where a
    GPU node without network installs carried wheels): the kernel needs them on its PYTHONPATH.

    Only folders inside a site root (a folder holding installed ``*.dist-info``) count, and
    never the repository or a folder around it, which hold solutions and the gradebook."""
    repo = str(GEMMLAB_DIR.parent)
    env = {sys.prefix, sys.base_prefix}
    found = []
    for entry in sys.path:
        d = os.path.realpath(entry) if entry else ""
        if not d or not os.path.isdir(d) or d in found:
            continue
        if d == repo or d.startswith(repo + "/") or repo.startswith(d.rstrip("/") + "/"):
            continue
        if not any(d == e or d.startswith(e + "/") for e in env):
            found.append(d)
    roots = [d for d in found if glob.glob(os.path.join(glob.escape(d), "*.dist-info"))]
    return [d for d in found if any(d == r or d.startswith(r + "/") for r in roots)]


def _site_roots() -> list[str]:
    """The folders of :func:`extra_site_dirs` to bind: those not inside another one."""
    dirs = extra_site_dirs()
    return [d for d in dirs if not any(d.startswith(o + "/") for o in dirs if o != d)]


def gpu_device_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri"))


def bwrap_prefix(spec: SandboxSpec) -> list[str]:
    """``bwrap ... --`` arguments; the kernel command follows them."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: `apt-get install -y bubblewrap` (Debian/Ubuntu), or unpack "
            "the .deb with `dpkg -x` and put its bwrap on PATH; pass --no-sandbox only for trusted notebooks.")
    cmd = [bwrap]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    # The fresh /tmp first: bwrap applies mounts in order, so a venv or checkout that lives
    # under /tmp (a CI clone) is bound on top of it instead of being hidden by it.
    cmd += ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for d in python_dirs() + [str(GEMMLAB_DIR)] + list(spec.extra_ro):
        cmd += ["--ro-bind", d, d]
    lock = timing_lock(spec)
    if lock:  # read-only: a kernel can take the locks (flock) but not replace or remove the files
        for path in (lock, lock + TURN_SUFFIX):
            cmd += ["--ro-bind", path, path]
    for node in gpu_device_nodes():
        cmd += ["--dev-bind", node, node]
    cmd += ["--bind", str(spec.scratch), str(spec.scratch), "--bind", str(spec.run_dir), str(spec.run_dir)]
    cmd += ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if spec.as_nobody:
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    cmd += ["--chdir", str(spec.scratch)]
    for key, value in sandbox_env(spec).items():
        cmd += ["--setenv", key, value]
    # ipykernel exits when its parent looks dead; inside the PID namespace its parent is PID 1.
    cmd += ["--unsetenv", "JPY_PARENT_PID", "--"]
    return cmd


def sandbox_env(spec: SandboxSpec) -> dict[str, str]:
    """Environment of the kernel: caches and HOME in scratch, one GPU, grading mode on."""
    scratch = str(spec.scratch)
    env = {
        "HOME": scratch, "TMPDIR": "/tmp", "XDG_CACHE_HOME": f"{scratch}/.cache",
        "GEMMLAB_CACHE": f"{scratch}/.cache/gemmlab", "MPLCONFIGDIR": f"{scratch}/.cache/matplotlib",
        "IPYTHONDIR": f"{scratch}/.ipython", "JUPYTER_RUNTIME_DIR": str(spec.run_dir),
        "PYTHONPATH": os.pathsep.join([str(GEMMLAB_DIR.parent), *extra_site_dirs()]), "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_VISIBLE_DEVICES": spec.gpu if spec.gpu is not None else "",
        "GEMMLAB_GRADING": "1", "CUTE_DSL_ARCH": os.environ.get("CUTE_DSL_ARCH", "sm_90a"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    lock = timing_lock(spec)
    if lock:
        env[TIMING_LOCK_ENV] = lock
    env.update(spec.env)
    return env


def timing_lock(spec: SandboxSpec) -> str | None:
    """The lock file (and its ``.turn`` twin) that keeps timings on this job's GPU apart from other
    graded GPU work (gemmlab.timing_lock); None for a CPU job."""
    return lock_file_for(spec.gpu) if spec.gpu not in (None, "") else None


@functools.lru_cache(maxsize=1)
def check_bwrap() -> str:
    """'' when bwrap can build our sandbox here, else the reason it cannot."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (apt-get install -y bubblewrap)"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gemmlab-bwrap-") as tmp:
        spec = SandboxSpec(Path(tmp), Path(tmp))
        try:
            proc = subprocess.run(bwrap_prefix(spec) + [sys.executable, "-c", "print('ok')"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != "ok":
            return f"bwrap cannot create namespaces here: {proc.stderr.strip()[:300]}"
    return ""
