"""The bubblewrap command line that confines one submission's notebook kernel.

What the kernel sees: the system read-only (``/usr``, ``/etc``, ``/lib*``, the Python
installation, the virtual environment, the ``gemmlab`` package); its own PID, network, IPC and
UTS namespaces (no network at all); the GPU device nodes and, for a GPU job, that GPU's lock
files (read-only; through them the kernels sharing a GPU keep timings apart from other GPU work:
gemmlab.timing.timing_lock). It does not see the repository (``solutions/``, ``autograder/`` with the
gradebook and other submissions, ``tests/``, ``.git``), anyone's home directory, or other
processes. ``--die-with-parent`` and the PID namespace mean that killing the ``bwrap`` process
ends every process the submission started.

What it may write: three size-limited tmpfs mounts made fresh for every kernel start (the
scratch folder, which is its cwd, ``HOME`` and caches; ``/tmp``; ``/dev/shm``), and the run
folder only while it starts (to create its sockets; kernel.SandboxedKernel then closes it and
empties it before every start). Nothing it writes outlives
the kernel, so no file a submission writes (an IPython startup file, a ``.pth`` file, a
``sitecustomize``, a module shadowing an installed one) is there when the next kernel starts.
Files in those mounts are memory: :func:`private_mounts` names them so the kernel's memory
limit counts them.

Who it runs as: a grader running as root drops the kernel to the real uid ``nobody`` with no
capabilities (``setpriv`` inside the sandbox), so root-only files (``/etc/shadow``) stay
unreadable; a grader running as an ordinary user maps the kernel to ``nobody`` in a user
namespace (the kernel then has that user's rights on the read-only system folders).

Its environment: only :data:`PASSED_THROUGH` from the grader's environment, plus the settings
of :func:`sandbox_env`; nothing else of the instructor's environment reaches it.

Its compile cache starts empty at every kernel start (in scratch), unless the grader is told, by
:data:`CACHE_SEED_ENV`, to bind a folder of compiled kernels read-only as a second layer
(``gemmlab.compiling.cache.READONLY_ENV``). Off by default, and only for trusted hand-ins (the test suite, which
plants its own): every kernel could list and load every kernel in that folder, so a cache that ever
compiled the solutions, or another student's hand-in, would give them away (docs/THREAT_MODEL.md).
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

from gemmlab.compiling.cache import READONLY_ENV as CACHE_READONLY_ENV
from gemmlab.timing.timing_lock import ENV_PATH as TIMING_LOCK_ENV, TURN_SUFFIX, lock_file_for

#: gemmlab, the only part of the repository the kernel may read.
GEMMLAB_DIR = Path(__file__).resolve().parents[2] / "gemmlab"
SYSTEM_DIRS = ("/usr", "/etc", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt")
#: The uid and gid a submission runs as (``nobody``/``nogroup`` on Debian and Ubuntu).
SANDBOX_UID = 65534
#: Sizes of the kernel's writable tmpfs mounts: its disk quota, counted in its memory limit too.
SCRATCH_BYTES = 4 << 30
TMP_BYTES = 1 << 30
SHM_BYTES = 1 << 30
#: The only variables of the grader's environment the kernel gets (paths to the system's CUDA,
#: locale, thread counts, gemmlab's own tuning); everything else (tokens, keys, Ray and cloud
#: settings, PYTHONSTARTUP...) stays outside.
PASSED_THROUGH = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH",
    "CUDA_HOME", "CUDA_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "GEMMLAB_ARCH", "GEMMLAB_COMPILE_JOBS", "GEMMLAB_COMPILE_TIMEOUT", "GEMMLAB_TIMING_LOCK_WAIT",
    "GEMMLAB_HIDE_GPU",
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


#: The grader's setting (a folder) that seeds every kernel's compile cache read-only. Unset by default:
#: see :func:`cache_seed`.
CACHE_SEED_ENV = "GEMMLAB_GRADER_CACHE_SEED"


def cache_seed() -> str | None:
    """The folder :data:`CACHE_SEED_ENV` names in the grader's environment (None when unset or not a folder).

    Only for hand-ins the grader trusts: a seed is readable by every kernel it is bound into, so it must
    hold nothing a student may not see (never a cache that compiled solutions or other students' work)."""
    folder = os.environ.get(CACHE_SEED_ENV, "")
    if not folder or not os.path.isdir(folder):
        return None
    seed, repo = os.path.realpath(folder), str(GEMMLAB_DIR.parent)
    if repo == seed or repo.startswith(seed.rstrip("/") + "/"):
        raise SandboxUnavailable(f"{CACHE_SEED_ENV}={folder} holds the repository (solutions, tests, the gradebook): "
                                 "name a folder that holds only a compile cache, or unset it")
    return seed


@dataclass
class SandboxSpec:
    """Where one kernel runs. ``gpu`` is the index placed in CUDA_VISIBLE_DEVICES (None: no GPU).

    ``scratch`` names the kernel's cwd and HOME; inside the sandbox it is a fresh tmpfs of
    ``scratch_bytes``, so the folder of that name outside stays empty."""

    scratch: Path
    run_dir: Path                       # connection file and IPC sockets (writable while the kernel starts)
    gpu: str | None = None
    extra_ro: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    as_nobody: bool = True
    scratch_bytes: int = SCRATCH_BYTES
    tmp_bytes: int = TMP_BYTES
    shm_bytes: int = SHM_BYTES
    #: A folder of compiled kernels bound read-only as the second layer of the kernel's compile cache.
    cache_seed: str | None = field(default_factory=cache_seed)


def python_dirs() -> list[str]:
    """The Python installation and environment the kernel needs to import torch, gemmlab...
    (the grader's user site-packages too, read-only: the kernel's own, under its HOME, is off)."""
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


def drops_privileges(spec: SandboxSpec) -> bool:
    """Whether the kernel's uid is changed for real (grader running as root) rather than mapped
    in a user namespace (a mapped uid keeps the grader's rights on every file it can see)."""
    return spec.as_nobody and os.geteuid() == 0


def private_mounts(spec: SandboxSpec) -> dict[str, int]:
    """The kernel's writable tmpfs mounts (path inside the sandbox -> size in bytes). Their
    files are memory: the kernel's memory use counts what is in them."""
    return {"/tmp": spec.tmp_bytes, "/dev/shm": spec.shm_bytes, str(spec.scratch): spec.scratch_bytes}


def bwrap_prefix(spec: SandboxSpec) -> list[str]:
    """``bwrap ... --`` arguments (and the privilege drop); the kernel command follows them."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: `apt-get install -y bubblewrap` (Debian/Ubuntu), or unpack "
            "the .deb with `dpkg -x` and put its bwrap on PATH; pass --no-sandbox only for trusted notebooks.")
    cmd = [bwrap]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    cmd += ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc"]
    # The fresh /tmp first: bwrap applies mounts in order, so a venv or checkout that lives
    # under /tmp (a CI clone) is bound on top of it instead of being hidden by it.
    for path, size in private_mounts(spec).items():
        if path != str(spec.scratch):
            cmd += ["--perms", "01777", "--size", str(size), "--tmpfs", path]
    bound = python_dirs() + [str(GEMMLAB_DIR)] + list(spec.extra_ro) + ([spec.cache_seed] if spec.cache_seed else [])
    lock = timing_lock(spec)
    locks = [lock, lock + TURN_SUFFIX] if lock else []
    cmd += _searchable_parents(bound + locks + [str(spec.run_dir), str(spec.scratch)])
    for d in bound:
        cmd += ["--ro-bind", d, d]
    for path in locks:  # read-only: a kernel can take the locks (flock) but not replace or remove the files
        cmd += ["--ro-bind", path, path]
    for node in gpu_device_nodes():
        cmd += ["--dev-bind", node, node]
    # Scratch last, so that no bind (a run folder around it) hides it.
    cmd += ["--bind", str(spec.run_dir), str(spec.run_dir),
            "--perms", "01777", "--size", str(spec.scratch_bytes), "--tmpfs", str(spec.scratch)]
    cmd += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    # Root's bwrap keeps the capabilities setpriv needs to become nobody; setpriv then drops them all.
    if spec.as_nobody and not drops_privileges(spec):
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
    elif not spec.as_nobody:
        cmd += ["--unshare-user-try", "--cap-drop", "ALL"]
    cmd += ["--chdir", str(spec.scratch), "--clearenv"]
    for key, value in sandbox_env(spec).items():
        cmd += ["--setenv", key, value]
    cmd += ["--"]
    if drops_privileges(spec):
        cmd += [setpriv(), "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID), "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd


def _searchable_parents(paths: list[str]) -> list[str]:
    """``--dir`` arguments that create the folders above ``paths`` readable by everyone: bwrap
    run by root makes them 0700 (as ``/root`` is), which nobody could not pass through."""
    made: list[str] = []
    for path in paths:
        parents = [str(p) for p in reversed(Path(path).parents) if str(p) != "/"]
        made += [p for p in parents if p not in made and not _under_system_dir(p)]
    return [arg for p in made for arg in ("--perms", "0755", "--dir", p)]


def _under_system_dir(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


def setpriv() -> str:
    """util-linux's setpriv, which drops root to nobody inside the sandbox."""
    path = shutil.which("setpriv")
    if path is None or not _under_system_dir(path):
        raise SandboxUnavailable("setpriv (util-linux) is not installed under /usr: the grader runs as root and "
                                 "needs it to run submissions as nobody (`apt-get install -y util-linux`)")
    return path


#: CPU threads each kernel's numeric libraries may start (torch's OpenMP pool, BLAS). Why: unset,
#: each kernel starts one thread per core, and a grading host runs two kernels per notebook and many
#: notebooks at once. Grading needs little CPU parallelism: compiles are single-threaded and the work
#: is on the GPU. (This cap did not cure the slowdown of 12 local workers on one host, 100 s a notebook
#: instead of 35 s; 12 Ray worker processes did not show it, so local workers are now processes too:
#: autograder.schedule.)
KERNEL_THREADS = 2
THREAD_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def sandbox_env(spec: SandboxSpec) -> dict[str, str]:
    """The kernel's whole environment: :data:`PASSED_THROUGH` from the grader's, caches and HOME
    in scratch, Python's user site and startup hooks off, one GPU, grading mode on."""
    scratch = str(spec.scratch)
    env = {key: os.environ[key] for key in PASSED_THROUGH if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({
        "HOME": scratch, "TMPDIR": "/tmp", "XDG_CACHE_HOME": f"{scratch}/.cache",
        "XDG_CONFIG_HOME": f"{scratch}/.config", "GEMMLAB_CACHE": f"{scratch}/.cache/gemmlab",
        "MPLCONFIGDIR": f"{scratch}/.cache/matplotlib", "IPYTHONDIR": f"{scratch}/.ipython",
        "JUPYTER_CONFIG_DIR": f"{scratch}/.jupyter", "JUPYTER_DATA_DIR": f"{scratch}/.local/share/jupyter",
        "JUPYTER_RUNTIME_DIR": f"{scratch}/.local/share/jupyter/runtime",
        "PYTHONPATH": os.pathsep.join([str(GEMMLAB_DIR.parent), *extra_site_dirs()]), "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "CUDA_VISIBLE_DEVICES": spec.gpu if spec.gpu is not None else "",
        "GEMMLAB_GRADING": "1", "CUTE_DSL_ARCH": os.environ.get("CUTE_DSL_ARCH", "sm_90a"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    })
    for key in THREAD_SETTINGS:      # unless the instructor chose (passed through above)
        env.setdefault(key, str(KERNEL_THREADS))
    lock = timing_lock(spec)
    if lock:
        env[TIMING_LOCK_ENV] = lock
    if spec.cache_seed:
        env[CACHE_READONLY_ENV] = spec.cache_seed
    env.update(spec.env)
    return env


def timing_lock(spec: SandboxSpec) -> str | None:
    """The lock file (and its ``.turn`` twin) that keeps timings on this job's GPU apart from other
    graded GPU work (gemmlab.timing.timing_lock); None for a CPU job."""
    return lock_file_for(spec.gpu) if spec.gpu not in (None, "") else None


@functools.lru_cache(maxsize=1)
def check_bwrap() -> str:
    """'' when bwrap can build our sandbox here, else the reason it cannot."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (apt-get install -y bubblewrap)"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gemmlab-bwrap-") as tmp:
        os.chmod(tmp, 0o777)
        spec = SandboxSpec(Path(tmp) / "scratch", Path(tmp), cache_seed=None)
        try:
            proc = subprocess.run(bwrap_prefix(spec) + [sys.executable, "-c", "print('ok')"],
                                  capture_output=True, text=True, timeout=60)
        except SandboxUnavailable as exc:
            return str(exc)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != "ok":
            return f"bwrap cannot create namespaces here: {proc.stderr.strip()[:300]}"
    return ""
