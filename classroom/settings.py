"""One class's settings (``class.json`` in the class folder) and the folders it lives in.

Why a folder per class: everything a running class keeps (the Hub's database and secrets, each
student's notebooks, their hand-ins, their feedback, the nbgrader course with its gradebook) sits
under one folder an instructor can back up, move or delete. :class:`ClassDir` names every path;
:class:`ClassSettings` is what ``python -m classroom start`` was told.

The layout (``<class>`` is the folder given to ``start``):

| path | what | who may read it |
|---|---|---|
| ``class.json`` | these settings | the instructor |
| ``hub/`` (0700) | the Hub's database, cookie secret, proxy token, service token | the Hub |
| ``accounts.json`` (0600), ``passwords.csv`` (0600) | hashed passwords / the first passwords to hand out (local logins) | the Hub / the instructor |
| ``people.json`` | Hub name -> LMS identity, from LTI launches | the instructor |
| ``course/`` | the nbgrader course: ``solutions/``, ``course/`` (release), ``autograder/`` (gradebook, hand-ins, grades) | the instructor |
| ``exchange/<course_id>/outbound/`` | released assignments (nbgrader's exchange) | every student, read-only |
| ``exchange/<course_id>/inbound/`` | hand-ins gathered for collecting (``python -m classroom collect``) | the instructor |
| ``handins/<user>/`` | one student's hand-ins: their server sees it as the exchange's inbound folder | that student |
| ``feedback/<user>/`` | one student's feedback: their server sees it as the exchange's feedback folder | that student, read-only |
| ``home/<user>/`` | one user's notebooks (their JupyterLab's folder) | that user |
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: A Hub user name the class accepts: what nbgrader, file names and JupyterHub take without escaping.
USER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SETTINGS_FILE = "class.json"
AUTH_KINDS = ("local", "lti")
POOL_KINDS = ("gpu", "off")
#: How the Hub starts the pool service: the Python arguments before ``serve`` (this repository's ``pool``).
POOL_PROGRAM = ["-m", "pool"]


class ClassError(ValueError):
    """The class's settings or folder are not usable; the message says what to change."""


def check_user_name(name: str, what: str = "user") -> str:
    if not isinstance(name, str) or not USER_NAME.match(name):
        raise ClassError(f"{what} name {name!r:.70} is not usable on the Hub: lower-case letters, digits and "
                         ". _ - (at most 64, starting with a letter or digit).")
    return name


@dataclass
class LtiSettings:
    """The LMS's registration of the class's Hub as an LTI 1.3 tool (what the LMS shows when you add it)."""

    issuer: str                   #: the platform's issuer id (e.g. https://canvas.instructure.com)
    client_id: str                #: the tool's client id on the platform
    authorize_url: str            #: the platform's OIDC authorization endpoint
    jwks_url: str                 #: the platform's public keys
    token_url: str = ""           #: the platform's OAuth 2 token endpoint (grades back through AGS); '' = no AGS
    deployment_id: str = ""       #: '' accepts any deployment of the tool
    context_id: str = ""          #: the LMS course whose launches are accepted ('' = any, then it is recorded)
    username_key: str = "sub"     #: the id_token claim that becomes the Hub name (``sub`` is stable and private)


@dataclass
class ClassSettings:
    """What ``python -m classroom start`` was told; saved as ``class.json``."""

    students: list[str]
    instructors: list[str]
    course_id: str = "gemmlab"
    ip: str = "127.0.0.1"
    port: int = 8000
    auth: str = "local"
    lti: LtiSettings | None = None
    pool: str = "gpu"                 #: the GPU pool as a Hub service on this host's GPUs, or none
    pool_port: int = 8765
    pool_args: list[str] = field(default_factory=list)   #: more `python -m pool serve` options (limits, --ray ...)
    pool_program: list[str] = field(default_factory=lambda: list(POOL_PROGRAM))  #: Python's arguments before `serve`
    student_memory_mb: int = 8192     #: a student's /tmp and /dev/shm together (tmpfs, counted as memory)

    def __post_init__(self) -> None:
        for name in self.students:
            check_user_name(name, "student")
        for name in self.instructors:
            check_user_name(name, "instructor")
        if not self.instructors and self.auth == "local":
            raise ClassError("a class needs at least one instructor (--instructor NAME); with LTI logins the "
                             "LMS's roles name them.")
        both = sorted(set(self.students) & set(self.instructors))
        if both:
            raise ClassError(f"{', '.join(both)} cannot be both a student and an instructor.")
        if self.auth not in AUTH_KINDS:
            raise ClassError(f"auth must be one of {', '.join(AUTH_KINDS)}, not {self.auth!r}.")
        if self.auth == "lti" and self.lti is None:
            raise ClassError("LTI logins need the LMS's registration: --lti lti.json (the README's \"Run a class\" "
                             "section says what it holds).")
        if self.pool not in POOL_KINDS:
            raise ClassError(f"pool must be one of {', '.join(POOL_KINDS)}, not {self.pool!r}.")
        if not self.pool_program or not all(isinstance(a, str) and a for a in self.pool_program):
            raise ClassError(f"pool_program must be the Python arguments that start the pool service before `serve` "
                             f"(default {POOL_PROGRAM}), not {self.pool_program!r}.")
        if not re.match(r"^[A-Za-z0-9_-]{1,64}$", self.course_id):
            raise ClassError(f"course id {self.course_id!r} must be letters, digits, _ and - only.")

    def role(self, user: str) -> str:
        return "instructor" if user in self.instructors else "student"

    def pool_command(self, python: str, *options: str) -> list[str]:
        """The pool service's command line as the Hub runs it, with ``options`` (``--port``, or ``--check``)
        before ``pool_args``; without ``--ray`` there, the pool judges on this host's GPUs (``--ray off``)."""
        ray = [] if "--ray" in self.pool_args else ["--ray", "off"]
        return [python, *self.pool_program, "serve", "--hub", *options, *ray, *self.pool_args]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClassSettings":
        lti = data.get("lti")
        try:
            return cls(**{**data, "lti": LtiSettings(**lti) if lti else None})
        except TypeError as exc:
            raise ClassError(f"{SETTINGS_FILE} does not hold a class's settings ({exc}).") from None


class ClassDir:
    """Every path of one class folder (see the module's table)."""

    def __init__(self, root: str | Path, course_id: str = "gemmlab") -> None:
        self.root = Path(root).resolve()
        self.course_id = course_id
        self.settings_file = self.root / SETTINGS_FILE
        self.hub = self.root / "hub"
        self.accounts = self.root / "accounts.json"
        self.passwords = self.root / "passwords.csv"
        self.people = self.root / "people.json"
        self.course = self.root / "course"
        self.exchange = self.root / "exchange"
        self.outbound = self.exchange / course_id / "outbound"
        self.inbound = self.exchange / course_id / "inbound"
        self.exchange_feedback = self.exchange / course_id / "feedback"
        self.config = self.root / "config"

    def home(self, user: str) -> Path:
        return self.root / "home" / check_user_name(user)

    def handins(self, user: str) -> Path:
        return self.root / "handins" / check_user_name(user)

    def feedback(self, user: str) -> Path:
        return self.root / "feedback" / check_user_name(user)

    def students_with_handins(self) -> list[str]:
        folder = self.root / "handins"
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.is_symlink()) if folder.is_dir() else []

    def load(self) -> ClassSettings:
        try:
            data = json.loads(self.settings_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ClassError(f"{self.root} is not a class folder (no {SETTINGS_FILE}): start one with "
                             "`python -m classroom start FOLDER --roster roster.csv --instructor NAME`.") from None
        except (OSError, ValueError) as exc:
            raise ClassError(f"cannot read {self.settings_file}: {exc}") from None
        return ClassSettings.from_dict(data)


__all__ = ["AUTH_KINDS", "ClassDir", "ClassError", "ClassSettings", "LtiSettings", "POOL_KINDS", "USER_NAME",
           "check_user_name"]
