"""The bubblewrap command line a student's JupyterLab runs in on the class's machine.

What a student's server (and every kernel and terminal it starts) sees: the system read-only
(``/usr``, ``/etc``, ``/lib*``, the Python installation and environment, the ``gemmlab`` package,
the course's nbgrader settings); their own home (read-write: their notebooks); the exchange as
nbgrader expects it, assembled from three binds: the released assignments (read-only, shared),
their own hand-ins folder as the exchange's ``inbound`` (read-write, theirs alone), their own
feedback folder as its ``feedback`` (read-only); a private ``/tmp`` and ``/dev/shm``; the class's
student configuration. It does not see other students' homes, hand-ins or feedback, the
collected hand-ins, the gradebook or the course's solutions, the Hub's folder (database, cookie
secret, tokens), the repository, or any process outside its own PID namespace (so no other
process's environment). No GPU device is visible: students' checks and timings go to the GPU
pool, which shares the GPUs fairly (GEMMLAB_HIDE_GPU=1 says so to gemmlab).

What it shares: the network, because the Hub's proxy reaches the server on a local port and the
server reaches the Hub's API (Jupyter servers and the Hub check tokens on every request). The
pool's Ray ports are not there on one machine: the class's pool runs without Ray (``--ray off``).

Who it runs as: under a root Hub, ``nobody`` with no capabilities (``setpriv``, as the grader's
sandbox does), so root-only files stay closed; under an ordinary user, that user mapped in a user
namespace with no capabilities.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder.harness.sandbox import GEMMLAB_DIR, SANDBOX_UID, SYSTEM_DIRS, SandboxUnavailable, python_dirs, setpriv

#: Size of a student's /tmp and of /dev/shm (tmpfs: memory).
TMP_BYTES = 2 << 30


@dataclass
class StudentBox:
    """One student's sandbox: ``rw`` and ``ro`` map a folder inside (key) to the host folder that is bound there."""

    home: Path
    rw: dict[str, str] = field(default_factory=dict)
    ro: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    tmp_bytes: int = TMP_BYTES
    #: Folders made inside the sandbox open to everyone (mode 1777) and kept nowhere: nbgrader insists
    #: that the exchange's root be writable, though nothing is ever written there.
    open_dirs: list[str] = field(default_factory=list)


def _parents(paths: list[str], open_dirs: tuple[str, ...] = ()) -> list[str]:
    """``--dir`` arguments for the folders above ``paths`` (searchable by everyone: nobody must pass through);
    ``open_dirs`` among them writable by everyone."""
    made: list[str] = []
    for path in paths:
        for parent in reversed(Path(path).parents):
            p = str(parent)
            if p != "/" and p not in made and not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS):
                made.append(p)
    return [a for p in made for a in ("--perms", "01777" if p in open_dirs else "0755", "--dir", p)]


def bwrap_command(box: StudentBox, command: list[str]) -> list[str]:
    """``bwrap ... -- command``: ``command`` (the single-user server) confined to ``box``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `apt-get install -y bubblewrap`. The class "
                                 "runs every student's JupyterLab in it, so that no student reaches another's files.")
    cmd = [bwrap]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    cmd += ["--dev", "/dev", "--proc", "/proc"]
    for path in ("/tmp", "/dev/shm"):
        cmd += ["--perms", "01777", "--size", str(box.tmp_bytes), "--tmpfs", path]
    system = python_dirs() + [str(GEMMLAB_DIR)]
    cmd += _parents(system + list(box.ro) + list(box.rw) + [str(box.home)], tuple(box.open_dirs))
    for d in system:
        cmd += ["--ro-bind", d, d]
    for inside, host in box.ro.items():
        cmd += ["--ro-bind", host, inside]
    for inside, host in {**box.rw, str(box.home): str(box.home)}.items():
        cmd += ["--bind", host, inside]
    cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
            "--new-session", "--chdir", str(box.home), "--clearenv"]
    root = os.geteuid() == 0
    if not root:
        cmd += ["--unshare-user", "--cap-drop", "ALL"]
    for key, value in box.env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--"]
    if root:
        cmd += [setpriv(), "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID), "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + list(command)


__all__ = ["StudentBox", "TMP_BYTES", "bwrap_command"]
