"""Make a class folder ready: its folders with their modes, the course's copy, each user's folders, the configs.

Why modes and owners matter: on one machine the students' servers run in sandboxes
(classroom/sandbox.py) that see only their own folders, and the folders of the class are not
readable by anyone else on the machine (``hub/`` and the accounts are the Hub's secrets). When the
Hub runs as root the students' servers run as ``nobody``, so each student's writable folders
(home, hand-ins) belong to ``nobody`` and everything else to root.
"""
from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from autograder.harness.sandbox import SANDBOX_UID

from .settings import ClassDir, ClassSettings

REPO = Path(__file__).resolve().parent.parent
COURSE_CONFIG = REPO / "autograder" / "nbgrader_config.py"
#: What a student's sandbox sees of the grader: the course's nbgrader settings (Validate) and the metadata
#: vocabulary they import (standard library only). Nothing else of autograder/ is visible to a student.
COURSE_CONFIG_FILES = (COURSE_CONFIG, REPO / "autograder" / "cell_metadata.py")
#: The nbgrader lab plugin students do not get (the formgrader's server extension is off for them too; their
#: sandbox has no gradebook anyway).
INSTRUCTOR_ONLY_PLUGINS = ("@jupyter/nbgrader:create-assignment",)


def _dir(path: Path, mode: int, owner: int | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    if owner is not None and os.geteuid() == 0:
        os.chown(path, owner, owner)
    return path


def students_uid() -> int | None:
    """The uid students' servers run as: ``nobody`` under a root Hub, else the Hub's own (None: no change)."""
    return SANDBOX_UID if os.geteuid() == 0 else None


def prepare_class(where: ClassDir, settings: ClassSettings) -> None:
    """Create the class folder's shared parts (idempotent: an existing course copy is kept as the instructor left it)."""
    _dir(where.root, 0o755)
    _dir(where.hub, 0o700)
    _dir(where.config, 0o755)
    _dir(where.root / "home", 0o711)
    _dir(where.root / "handins", 0o711)
    _dir(where.root / "feedback", 0o711)
    _dir(where.exchange, 0o755)
    _dir(where.outbound, 0o755)
    _dir(where.inbound, 0o700)
    _dir(where.exchange_feedback, 0o700)
    if not where.course.exists():
        _dir(where.course, 0o700)
        for part in ("solutions", "course"):
            shutil.copytree(REPO / part, where.course / part, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    _dir(where.course / "autograder", 0o700)
    secret = where.hub / "proxy_token"
    if not secret.exists():
        secret.write_text(secrets.token_hex(32))
        os.chmod(secret, 0o600)
    write_student_config(where, settings)
    write_instructor_config(where, settings)


def prepare_user(where: ClassDir, user: str, instructor: bool) -> Path:
    """The user's folders (home; a student's hand-ins and feedback too); returns their home."""
    if instructor:
        return _dir(where.home(user), 0o700)
    uid = students_uid()
    home = _dir(where.home(user), 0o700, uid)
    _dir(where.handins(user), 0o700, uid)
    _dir(where.feedback(user), 0o755)
    return home


def write_student_config(where: ClassDir, settings: ClassSettings) -> Path:
    """``config/student/``: the Jupyter and nbgrader configuration every student's server reads (read-only)."""
    folder = _dir(where.config / "student", 0o755)
    (folder / "nbgrader_config.py").write_text(
        "# A student's nbgrader: the course's Validate settings, the class's exchange, their home as the course root.\n"
        "import os\n"
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(COURSE_CONFIG)!r})  # noqa: F821\n"
        "c.CourseDirectory.root = os.environ['HOME']\n"
        "c.CourseDirectory.student_id = os.environ['JUPYTERHUB_USER']  # hand-ins named for the Hub user\n"
        f"c.CourseDirectory.course_id = {settings.course_id!r}\n"
        f"c.Exchange.root = {str(where.exchange)!r}\n"
        "c.CourseDirectory.db_url = 'sqlite:///' + os.path.join(os.environ['HOME'], '.nbgrader-validate.db')\n")
    (folder / "labconfig").mkdir(exist_ok=True)
    (folder / "labconfig" / "page_config.json").write_text(
        '{"disabledExtensions": {' + ", ".join(f'"{p}": true' for p in INSTRUCTOR_ONLY_PLUGINS) + "}}\n")
    (folder / "jupyter_server_config.json").write_text(
        '{"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": false}}}\n')
    for f in folder.rglob("*"):
        os.chmod(f, 0o755 if f.is_dir() else 0o644)
    return folder


def write_instructor_config(where: ClassDir, settings: ClassSettings) -> Path:
    """``config/instructor/``: the instructor's nbgrader (formgrader, release) on the class's course and gradebook."""
    folder = _dir(where.config / "instructor", 0o700)
    (folder / "nbgrader_config.py").write_text(
        "# The instructor's nbgrader: the class's course, gradebook and exchange (python -m classroom writes this).\n"
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(COURSE_CONFIG)!r})  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(where.course)!r}\n"
        f"c.CourseDirectory.course_id = {settings.course_id!r}\n"
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(where.course / 'autograder' / 'gradebook.db')!r}\n"
        f"c.Exchange.root = {str(where.exchange)!r}\n")
    # JupyterHub's servers forbid framing ('none'); the formgrader is a page of the same server framed by
    # JupyterLab, so the instructor's server allows its own pages to frame it ('self'), and no one else.
    (folder / "jupyter_server_config.json").write_text(
        '{"ServerApp": {"tornado_settings": {"headers": {"Content-Security-Policy": "frame-ancestors \'self\'"}}}}\n')
    return folder


__all__ = ["COURSE_CONFIG", "COURSE_CONFIG_FILES", "INSTRUCTOR_ONLY_PLUGINS", "REPO", "prepare_class", "prepare_user",
           "students_uid", "write_instructor_config", "write_student_config"]
