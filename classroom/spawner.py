"""The Hub's spawner for a class on one machine: each student's JupyterLab in its own sandbox, no system users.

Why not JupyterHub's ``LocalProcessSpawner``: it needs a system account per student and root to
switch to it, and its insecure sibling ``SimpleLocalProcessSpawner`` gives no isolation at all.
This one starts the same ``jupyterhub-singleuser`` inside bubblewrap (classroom/sandbox.py), with
the student's home, hand-ins and feedback bound in and nothing of anyone else's, and the same
environment JupyterHub gives any server (``JUPYTERHUB_API_TOKEN`` is that server's own token, which
the GPU pool accepts) plus the class's: ``GEMMLAB_POOL`` (the pool's address: no token to copy),
``GEMMLAB_HIDE_GPU=1``, the student's nbgrader configuration. Nothing else of the Hub's
environment passes (``--clearenv``).

Instructors' servers run as the Hub's own user, unsandboxed, in the course folder (the gradebook,
the formgrader, the release): an instructor is trusted with the class.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from subprocess import Popen

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import random_port
from traitlets import Unicode

from autograder.harness.sandbox import GEMMLAB_DIR

from .prepare import COURSE_CONFIG_FILES, prepare_user
from .sandbox import StudentBox, bwrap_command
from .settings import ClassDir, ClassSettings

#: The variables of the Hub's environment a student's server may get (beyond JupyterHub's own JUPYTERHUB_*).
PASSED = ("LANG", "LC_ALL", "LANGUAGE", "TZ", "CUTE_DSL_ARCH", "GEMMLAB_COMPILE_TIMEOUT", "GEMMLAB_COMPILE_JOBS")


class ClassSpawner(LocalProcessSpawner):
    """A class's spawner: students sandboxed in their own folders; instructors in the course folder."""

    class_dir = Unicode(config=True, help="The class folder (python -m classroom start made it).")
    pool_url = Unicode("", config=True, help="The GPU pool's URL as students' kernels reach it ('' = no pool).")

    def _where(self) -> tuple[ClassDir, ClassSettings]:
        settings = ClassDir(self.class_dir).load()
        return ClassDir(self.class_dir, settings.course_id), settings

    def is_instructor(self) -> bool:
        return "instructors" in {g.name for g in self.user.groups}

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        """USER, HOME and SHELL for a user with no system account (LocalProcessSpawner asks the system)."""
        where, _ = self._where()
        env["USER"] = self.user.name
        env["HOME"] = str(where.home(self.user.name))
        env["SHELL"] = "/bin/bash"
        return env

    def class_env(self, where: ClassDir) -> dict[str, str]:
        """What the class adds to JupyterHub's environment of a server."""
        env = {k: os.environ[k] for k in PASSED if k in os.environ}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        env["PYTHONPATH"] = str(GEMMLAB_DIR.parent)   # gemmlab alone is visible in a student's sandbox
        env.setdefault("CUTE_DSL_ARCH", "sm_90a")
        if self.pool_url:
            env["GEMMLAB_POOL"] = self.pool_url
        role = "instructor" if self.is_instructor() else "student"
        env["JUPYTER_CONFIG_PATH"] = str(where.config / role)
        if role == "student":
            env["GEMMLAB_HIDE_GPU"] = "1"
            env["PYTHONNOUSERSITE"] = "1"
            env["JUPYTERHUB_SINGLEUSER_APP"] = "jupyter_server.serverapp.ServerApp"
        return env

    async def start(self) -> tuple[str, int]:
        """Start the user's server (sandboxed for a student, in the course folder for an instructor); no setuid."""
        where, settings = self._where()
        home = prepare_user(where, self.user.name, self.is_instructor())
        if self.port == 0:
            self.port = random_port()
        env = {**self.get_env(), **self.class_env(where)}
        command = list(self.cmd) + self.get_args()
        if self.is_instructor():
            if os.geteuid() == 0:
                command.append("--allow-root")
            command += [f"--ServerApp.root_dir={where.course}"]
            cwd = str(where.course)
        else:
            command += [f"--ServerApp.root_dir={home}"]
            box = StudentBox(home, env=env,
                             rw={str(where.inbound): str(where.handins(self.user.name))},
                             ro={str(where.outbound): str(where.outbound),
                                 str(where.exchange_feedback): str(where.feedback(self.user.name)),
                                 str(where.config / "student"): str(where.config / "student"),
                                 **{str(f): str(f) for f in COURSE_CONFIG_FILES}},
                             tmp_bytes=(settings.student_memory_mb << 20) // 2,
                             open_dirs=[str(where.exchange), str(where.exchange / settings.course_id)])
            command = bwrap_command(box, command)
            env = {"PATH": env["PATH"]}   # bwrap's own; the server's environment is the box's (--clearenv)
            cwd = "/"
        self.log.info("Spawning %s", " ".join(shlex.quote(s) for s in command[-6:]))
        self.proc = Popen(command, env=env, cwd=cwd, start_new_session=True)
        self.pid = self.proc.pid
        return (self.ip or "127.0.0.1", self.port)


__all__ = ["ClassSpawner", "PASSED"]
