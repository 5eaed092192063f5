"""How people log in to the class's Hub: a password the instructor handed out, or a launch from the LMS (LTI 1.3).

Both put each user in exactly one of the Hub's groups, ``students`` or ``instructors``
(``Authenticator.manage_groups``): the group decides the server a user gets (classroom/spawner.py)
(the GPU pool is every Hub user's, through the Hub's default ``user`` role: classroom/jupyterhub_config.py).

- :class:`ClassPasswordAuthenticator`: the roster's users with the passwords of ``accounts.json``
  (classroom/accounts.py); the role is the roster's.
- :class:`ClassLTI13Authenticator`: ``jupyterhub-ltiauthenticator``'s LTI 1.3 login (the platform's
  signed id_token, checked against its JWKS, with state and nonce), plus what a class needs from
  the launch: the course (the ``context`` claim must be the class's course when one is set; a
  launch from another course is refused), the role (membership roles Instructor or Teaching
  Assistant make an instructor, Learner a student; institution roles count for nothing, and a
  launch with neither is refused), and, for grades going back, the person's LMS identity
  (``people.json``) and the course's Assignment and Grade Services endpoint (``lti_ags.json``).
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from jupyterhub.auth import Authenticator
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.error import LoginError
from traitlets import Unicode

from pool.tokens import write_private

from .accounts import Accounts
from .settings import USER_NAME, ClassDir

ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
CUSTOM_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/custom"
LIS_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/lis"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
#: Context roles that make an instructor (a teaching assistant is a sub-role of Instructor in LIS v2).
INSTRUCTOR_ROLES = (MEMBERSHIP + "Instructor", "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant")
STUDENT_ROLES = (MEMBERSHIP + "Learner",)

_files_lock = threading.Lock()


class ClassPasswordAuthenticator(Authenticator):
    """The roster's users, each with the password the instructor handed out (classroom/accounts.py)."""

    class_dir = Unicode(config=True, help="The class folder.")

    async def authenticate(self, handler: Any, data: dict[str, str]) -> dict[str, Any] | None:
        where = ClassDir(self.class_dir)
        settings = where.load()
        name = (data.get("username") or "").strip().lower()
        if not Accounts.load(where.accounts).verify(name, data.get("password") or ""):
            return None
        if name not in settings.students and name not in settings.instructors:
            return None
        return {"name": name, "groups": ["instructors" if name in settings.instructors else "students"]}


def role_of(roles: list[str]) -> str | None:
    """``instructors`` or ``students`` from an LTI launch's roles (context roles only), or None."""
    roles = [r for r in roles if isinstance(r, str)]
    if any(r in INSTRUCTOR_ROLES for r in roles):
        return "instructors"
    if any(r in STUDENT_ROLES for r in roles):
        return "students"
    return None


def hub_name(value: str) -> str:
    """The Hub name for an LMS user id: the id itself when the Hub and file names take it, else a stable digest."""
    name = value.strip().lower()
    return name if USER_NAME.match(name) else "lti-" + hashlib.sha256(value.encode()).hexdigest()[:16]


def _update_json(path: Path, key: str, value: dict[str, Any]) -> None:
    with _files_lock:
        data = json.loads(path.read_text()) if path.exists() else {}
        if data.get(key) != value:
            data[key] = value
            write_private(path, json.dumps(data, indent=1, sort_keys=True))


class ClassLTI13Authenticator(LTI13Authenticator):
    """LTI 1.3 logins from the class's LMS: course and role from the launch (see the module's docstring)."""

    class_dir = Unicode(config=True, help="The class folder.")
    context_id = Unicode("", config=True, help="The LMS course whose launches are accepted ('' = any).")
    deployment_id = Unicode("", config=True, help="The tool's deployment on the platform ('' = any).")

    async def authenticate(self, handler: Any, data: dict[str, Any] | None = None) -> dict[str, Any]:
        claims = data or {}
        if self.deployment_id and claims.get(DEPLOYMENT_CLAIM) != self.deployment_id:
            raise LoginError("this launch comes from another deployment of the tool than the class's.")
        context = claims.get(CONTEXT_CLAIM) or {}
        if self.context_id and context.get("id") != self.context_id:
            raise LoginError(f"this launch comes from the course {context.get('title') or context.get('id')!r}, "
                             "not from the class's course in the LMS: open the class from its own course page.")
        group = role_of(list(claims.get(ROLES_CLAIM) or []))
        if group is None:
            raise LoginError("the LMS launched you with neither a Learner nor an Instructor role in this course; "
                             "ask the course's instructor to enrol you.")
        name = hub_name(self.get_username(claims))
        where = ClassDir(self.class_dir)
        custom, lis = claims.get(CUSTOM_CLAIM) or {}, claims.get(LIS_CLAIM) or {}
        _update_json(where.people, name, {k: v for k, v in {
            "name": claims.get("name", ""), "email": claims.get("email", ""), "sub": claims.get("sub", ""),
            "lms_user_id": str(custom.get("lms_user_id", "")), "sis_user_id": lis.get("person_sourcedid", ""),
            "role": group[:-1]}.items() if v})
        ags = claims.get(AGS_CLAIM)
        if isinstance(ags, dict) and ags.get("lineitems"):
            _update_json(where.root / "lti_ags.json", str(context.get("id", "")),
                         {"lineitems": ags["lineitems"], "scope": list(ags.get("scope") or [])})
        return {"name": name, "groups": [group], "auth_state": None}


__all__ = ["ClassLTI13Authenticator", "ClassPasswordAuthenticator", "INSTRUCTOR_ROLES", "STUDENT_ROLES", "hub_name",
           "role_of"]
