"""Grades back to the LMS through LTI Assignment and Grade Services (AGS) 2.0, where the platform offers it.

How: the tool (the class's Hub) holds an RSA key (``hub/lti_tool_key.json``; its public half,
``lti_tool_jwks.json``, is what the LMS's tool registration asks for). It signs a client
assertion (RFC 7523) and trades it at the platform's token endpoint for an access token with the
AGS scopes (the client-credentials grant of the IMS Security Framework), finds the course's line
item for the assignment (``resourceId`` = the assignment's name) or creates it, and posts one score
per student (``userId`` = the LTI ``sub`` of their launch, ``FullyGraded``). The course's line-item
URL comes from the students' launches (``lti_ags.json``, classroom/authenticators.py); a class whose
platform sent no AGS claim gets the CSV exports only.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from pool.tokens import write_private

from .settings import ClassDir, LtiSettings

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
TIMEOUT_S = 30


class AgsError(RuntimeError):
    """The platform refused or did not answer; the message names the step and the platform's words."""


def tool_key(where: ClassDir) -> Any:
    """The tool's RSA key (made on first use); its public JWKS is written to ``lti_tool_jwks.json``."""
    from joserfc.jwk import RSAKey

    path = where.hub / "lti_tool_key.json"
    if path.exists():
        key = RSAKey.import_key(json.loads(path.read_text()))
    else:
        key = RSAKey.generate_key(2048, parameters={"kid": uuid.uuid4().hex, "use": "sig", "alg": "RS256"})
        write_private(path, json.dumps(key.as_dict(private=True)))
    public = where.root / "lti_tool_jwks.json"
    jwks = json.dumps({"keys": [key.as_dict(private=False)]}, indent=1)
    if not public.exists() or public.read_text() != jwks:
        public.write_text(jwks)
    return key


def _call(method: str, url: str, what: str, headers: dict[str, str], body: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            text = reply.read(1 << 20)
    except urllib.error.HTTPError as exc:
        said = exc.read(2000).decode("utf-8", "replace").strip()
        raise AgsError(f"{what}: the platform answered HTTP {exc.code} ({said[:300] or exc.reason})") from None
    except (OSError, urllib.error.URLError) as exc:
        raise AgsError(f"{what}: the platform at {url} did not answer ({exc})") from None
    return json.loads(text) if text.strip() else None


@dataclass
class AgsClient:
    """One platform's AGS, for the tool registered as ``lti.client_id``."""

    lti: LtiSettings
    key: Any

    def access_token(self) -> str:
        from joserfc import jwt

        now = int(time.time())
        assertion = jwt.encode({"alg": "RS256", "kid": self.key.kid},
                               {"iss": self.lti.client_id, "sub": self.lti.client_id, "aud": self.lti.token_url,
                                "iat": now, "exp": now + 300, "jti": uuid.uuid4().hex}, self.key)
        form = urllib.parse.urlencode({
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion, "scope": f"{SCOPE_LINEITEM} {SCOPE_SCORE}"}).encode()
        answer = _call("POST", self.lti.token_url, "asking for an AGS access token",
                       {"Content-Type": "application/x-www-form-urlencoded"}, form)
        if not isinstance(answer, dict) or not answer.get("access_token"):
            raise AgsError("the platform's token endpoint answered without an access_token.")
        return str(answer["access_token"])

    def lineitem(self, token: str, lineitems_url: str, assignment: str, max_score: float) -> str:
        """The URL of the course's line item for ``assignment`` (created when missing)."""
        auth = {"Authorization": f"Bearer {token}"}
        items = _call("GET", lineitems_url, "listing the course's line items", {**auth, "Accept": LINEITEMS_TYPE})
        for item in items or []:
            if item.get("resourceId") == assignment or item.get("label") == assignment:
                return str(item["id"])
        made = _call("POST", lineitems_url, f"creating the line item {assignment}",
                     {**auth, "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
                     json.dumps({"label": assignment, "resourceId": assignment, "scoreMaximum": max_score}).encode())
        return str(made["id"])

    def post_score(self, token: str, lineitem_url: str, user_id: str, score: float, max_score: float) -> None:
        parts = urllib.parse.urlsplit(lineitem_url)
        url = urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))
        body = {"userId": user_id, "scoreGiven": score, "scoreMaximum": max_score, "activityProgress": "Completed",
                "gradingProgress": "FullyGraded", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
        _call("POST", url, f"posting {user_id}'s score", {"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE},
              json.dumps(body).encode())


def send_grades(where: ClassDir, assignment: str, scores: list[Any]) -> list[str]:
    """Post ``scores`` (autograder.reports.lms_export.Score of ``assignment``) to every course that launched the class
    with AGS; returns one line per course. Students without a launch (no LTI ``sub``) are named, not sent."""
    settings = where.load()
    courses_file = where.root / "lti_ags.json"
    if settings.lti is None or not settings.lti.token_url or not courses_file.exists():
        return []
    people = json.loads(where.people.read_text()) if where.people.exists() else {}
    client = AgsClient(settings.lti, tool_key(where))
    token = client.access_token()
    lines = []
    for context, ags in sorted(json.loads(courses_file.read_text()).items()):
        mine = [s for s in scores if s.assignment == assignment]
        if not mine:
            continue
        item = client.lineitem(token, ags["lineitems"], assignment, max(s.max_score for s in mine))
        sent, missing = 0, []
        for s in mine:
            sub = people.get(s.student, {}).get("sub")
            if not sub:
                missing.append(s.student)
                continue
            client.post_score(token, item, sub, s.score, s.max_score)
            sent += 1
        lines.append(f"LTI AGS, course {context}: {sent} score(s) of {assignment} sent"
                     + (f"; no LMS launch for {', '.join(missing)} (not sent)" if missing else ""))
    return lines


__all__ = ["AgsClient", "AgsError", "send_grades", "tool_key"]
