"""A small LTI 1.3 platform for tests: what an LMS (Canvas, Moodle, Blackboard...) does for a tool, and nothing more.

It stands in for the platform's side of three IMS specifications, on this machine:

- **LTI 1.3 core launch** (OIDC third-party-initiated login): ``launch_form`` is what the LMS's
  course page posts to the tool's login URL (``iss``, ``login_hint``, ``target_link_uri``,
  ``client_id``, ``lti_message_hint``); ``/auth`` is the platform's authorization endpoint, which
  checks the tool's ``client_id`` and registered ``redirect_uri`` and answers with a form that posts
  a signed ``id_token`` (RS256, claims of an ``LtiResourceLinkRequest``: roles, context, resource
  link, deployment, custom fields, AGS endpoint) and the tool's ``state`` back to the tool;
- **the platform's keys** (``/jwks``), from which the tool checks the id_token's signature;
- **Assignment and Grade Services 2.0** with the IMS Security Framework's client-credentials grant:
  ``/token`` verifies the tool's signed client assertion against the tool's registered public key
  and grants the AGS scopes; ``/courses/<id>/lineitems`` lists and creates line items;
  ``.../lineitems/<n>/scores`` records scores (what the LMS's gradebook would show).

What it leaves out: the LMS's own users, enrolment and UI, dynamic registration, deep linking,
Names and Role Provisioning, refresh of keys, and TLS (it listens on 127.0.0.1 over HTTP, which a real
platform never does). Keys and data live in memory for one test. Built on joserfc (JWS/JWK/JWT).
"""
from __future__ import annotations

import asyncio
import html
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
SCOPES = {"https://purl.imsglobal.org/spec/lti-ags/scope/lineitem", "https://purl.imsglobal.org/spec/lti-ags/scope/score",
          "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"}


@dataclass
class Person:
    sub: str
    name: str
    email: str
    roles: list[str]
    lms_user_id: str


@dataclass
class PlatformState:
    url: str = ""
    client_id: str = "gemmlab-tool"
    deployment_id: str = "dep-1"
    redirect_uris: list[str] = field(default_factory=list)
    tool_jwks: dict[str, Any] = field(default_factory=dict)
    key: Any = None
    people: dict[str, Person] = field(default_factory=dict)
    courses: dict[str, str] = field(default_factory=dict)      # id -> title
    lineitems: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scores: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, set[str]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


class _Base(tornado.web.RequestHandler):
    def initialize(self, state: PlatformState) -> None:
        self.state = state

    def check_xsrf_cookie(self) -> None:
        return

    def refuse(self, status: int, why: str) -> None:
        self.state.refused.append(why)
        self.set_status(status)
        self.finish({"error": why})


class Jwks(_Base):
    def get(self) -> None:
        self.finish({"keys": [self.state.key.as_dict(private=False)]})


class Authorize(_Base):
    """The OIDC authorization endpoint: a signed id_token for the person the login hint names."""

    def get(self) -> None:
        s, arg = self.state, lambda k: self.get_argument(k, "")
        if arg("client_id") != s.client_id:
            return self.refuse(400, "unknown client_id")
        if arg("redirect_uri") not in s.redirect_uris:
            return self.refuse(400, f"redirect_uri {arg('redirect_uri')} is not registered")
        if arg("response_type") != "id_token" or arg("scope") != "openid" or not arg("nonce"):
            return self.refuse(400, "not an OIDC implicit id_token request with a nonce")
        person = s.people.get(arg("login_hint"))
        if person is None:
            return self.refuse(403, "unknown user")
        hint = json.loads(arg("lti_message_hint") or "{}")
        course = hint.get("course", "")
        now = int(time.time())
        claims = {
            "iss": s.url, "aud": s.client_id, "azp": s.client_id, "sub": person.sub, "iat": now, "exp": now + 300,
            "nonce": arg("nonce"), "name": person.name, "email": person.email,
            LTI + "version": "1.3.0", LTI + "message_type": "LtiResourceLinkRequest",
            LTI + "deployment_id": hint.get("deployment", s.deployment_id),
            LTI + "target_link_uri": hint.get("target", ""), LTI + "resource_link": {"id": f"{course}-gemmlab"},
            LTI + "roles": person.roles,
            LTI + "context": {"id": course, "label": course, "title": s.courses.get(course, course),
                              "type": ["http://purl.imsglobal.org/vocab/lis/v2/course#CourseOffering"]},
            LTI + "custom": {"lms_user_id": person.lms_user_id},
            AGS: {"scope": sorted(SCOPES), "lineitems": f"{s.url}/courses/{course}/lineitems"},
        }
        key = s.key if not hint.get("forge") else RSAKey.generate_key(2048, parameters={"kid": s.key.kid})
        token = jwt.encode({"alg": "RS256", "kid": s.key.kid}, claims, key)
        self.set_header("Content-Type", "text/html")
        self.finish(auto_post(arg("redirect_uri"), {"id_token": token, "state": arg("state")}))

    post = get


class Token(_Base):
    """Client credentials with a signed client assertion (RFC 7523) -> a bearer token for the AGS scopes."""

    def post(self) -> None:
        s, arg = self.state, lambda k: self.get_argument(k, "")
        if arg("grant_type") != "client_credentials" or \
                arg("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return self.refuse(400, "unsupported grant")
        try:
            claims = jwt.decode(arg("client_assertion"), KeySet.import_key_set(s.tool_jwks)).claims
        except (JoseError, ValueError) as exc:
            return self.refuse(401, f"client assertion not signed by the tool's registered key ({exc})")
        if claims.get("iss") != s.client_id or claims.get("sub") != s.client_id or claims.get("aud") != f"{s.url}/token" \
                or not claims.get("exp", 0) > time.time():
            return self.refuse(401, "client assertion claims")
        granted = set(arg("scope").split()) & SCOPES
        token = secrets.token_urlsafe(24)
        s.tokens[token] = granted
        self.finish({"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": " ".join(sorted(granted))})


class _Ags(_Base):
    def scopes(self) -> set[str]:
        header = self.request.headers.get("Authorization", "")
        return self.state.tokens.get(header.removeprefix("Bearer ").strip(), set())


class LineItems(_Ags):
    def get(self, course: str) -> None:
        if not self.scopes() & {"https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                                "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"}:
            return self.refuse(401, "no line item scope")
        self.set_header("Content-Type", "application/vnd.ims.lis.v2.lineitemcontainer+json")
        self.finish(json.dumps(self.state.lineitems.get(course, [])))

    def post(self, course: str) -> None:
        if "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem" not in self.scopes():
            return self.refuse(401, "no line item scope")
        item = json.loads(self.request.body)
        items = self.state.lineitems.setdefault(course, [])
        item["id"] = f"{self.state.url}/courses/{course}/lineitems/{len(items) + 1}"
        items.append(item)
        self.set_status(201)
        self.finish(item)


class Scores(_Ags):
    def post(self, course: str, number: str) -> None:
        if "https://purl.imsglobal.org/spec/lti-ags/scope/score" not in self.scopes():
            return self.refuse(401, "no score scope")
        if self.request.headers.get("Content-Type") != "application/vnd.ims.lis.v1.score+json":
            return self.refuse(415, "scores are application/vnd.ims.lis.v1.score+json")
        score = json.loads(self.request.body)
        if not any(p.sub == score.get("userId") for p in self.state.people.values()):
            return self.refuse(422, "unknown userId")
        self.state.scores.append({**score, "lineitem": f"{self.state.url}/courses/{course}/lineitems/{number}"})
        self.set_status(200)
        self.finish({})


def auto_post(url: str, fields: dict[str, str]) -> str:
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
    return (f'<html><body onload="document.forms[0].submit()"><form method="post" action="{html.escape(url)}">'
            f"{inputs}<noscript><button>Continue</button></noscript></form></body></html>")


class Platform:
    """The platform on 127.0.0.1 and a free port, in a thread of its own; ``state`` holds what it saw."""

    def __init__(self) -> None:
        self.state = PlatformState(key=RSAKey.generate_key(2048, parameters={"kid": uuid.uuid4().hex}))
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self.state.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            a = {"state": self.state}
            app = tornado.web.Application([(r"/jwks", Jwks, a), (r"/auth", Authorize, a), (r"/token", Token, a),
                                           (r"/courses/([^/]+)/lineitems", LineItems, a),
                                           (r"/courses/([^/]+)/lineitems/(\d+)/scores", Scores, a)])
            self._server = tornado.httpserver.HTTPServer(app)
            self._server.add_sockets(sockets)
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True, name="lti-platform")
        self._thread.start()
        ready.wait()

    @property
    def url(self) -> str:
        return self.state.url

    def registration(self, context_id: str) -> dict[str, str]:
        """What the LMS shows an admin when the tool is added: the class's ``--lti`` file."""
        return {"issuer": self.url, "client_id": self.state.client_id, "authorize_url": f"{self.url}/auth",
                "jwks_url": f"{self.url}/jwks", "token_url": f"{self.url}/token",
                "deployment_id": self.state.deployment_id, "context_id": context_id}

    def enrol(self, login: str, name: str, role: str) -> Person:
        roles = {"student": [ROLE + "Learner"], "instructor": [ROLE + "Instructor"],
                 "staff": ["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"]}[role]
        person = Person(f"u{uuid.uuid4().hex[:10]}", name, f"{login}@uni.example", roles, str(1000 + len(self.state.people)))
        self.state.people[login] = person
        return person

    def launch_form(self, hub: str, login: str, course: str, **hint: Any) -> dict[str, str]:
        """The login initiation the LMS posts to the tool from a course page."""
        return {"iss": self.url, "login_hint": login, "target_link_uri": f"{hub}/hub/", "client_id": self.state.client_id,
                "lti_message_hint": json.dumps({"course": course, "target": f"{hub}/hub/", **hint})}

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def form_fields(page: str) -> tuple[str, dict[str, str]]:
    """(action, fields) of an auto-posting form page, as a browser would submit it."""
    from html.parser import HTMLParser

    found: dict[str, Any] = {"action": "", "fields": {}}

    class P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "form":
                found["action"] = a.get("action") or ""
            if tag == "input" and a.get("name"):
                found["fields"][a["name"]] = a.get("value") or ""

    P().feed(page)
    return found["action"], found["fields"]


__all__ = ["Platform", "auto_post", "form_fields"]
