"""The pool as a JupyterHub service: a student's Hub token, checked by asking the Hub, names the student.

``AnsweringHub`` stands in for ``jupyterhub.services.auth.HubAuth``'s answers here (a token's owner and
scopes, or None); tests/classroom/test_hub.py runs the same through a real JupyterHub.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

pytest.importorskip("jupyterhub", reason="the `class` extra: pip install -e '.[class]'")

from jupyterhub.services.auth import check_scopes  # noqa: E402
from pool.auth import Authenticator  # noqa: E402
from pool.errors import AuthError, Unavailable  # noqa: E402
from pool.hub_auth import HubUsers, hub_auth_from_env  # noqa: E402
from pool.service import RunningService  # noqa: E402

from .helpers import Klass, call, request  # noqa: E402

SCOPE = "access:services!service=gpu-pool"


class AnsweringHub:
    """What the Hub answers about each token (``models``); counts the questions; raises when ``down``."""

    access_scopes = {SCOPE}

    def __init__(self, models: dict[str, dict[str, Any]]) -> None:
        self.models, self.asked, self.down = models, 0, False

    def user_for_token(self, token: str, sync: bool = True) -> dict[str, Any] | None:
        self.asked += 1
        if self.down:
            raise ConnectionRefusedError("hub down")
        return self.models.get(token)

    def check_scopes(self, required: set[str], model: dict[str, Any]) -> set[str]:
        return check_scopes(required, set(model["scopes"]))


def _hub() -> AnsweringHub:
    return AnsweringHub({
        "tok-alice": {"kind": "user", "name": "alice", "scopes": ["users:activity!user=alice", SCOPE]},
        "tok-eve": {"kind": "user", "name": "eve", "scopes": ["users:activity!user=eve"]},
        "tok-svc": {"kind": "service", "name": "grader", "scopes": [SCOPE]},
        "tok-wide": {"kind": "user", "name": "root", "scopes": ["access:services"]},
    })


def test_a_hub_token_with_the_pools_scope_names_its_user(klass: Klass) -> None:
    users = HubUsers(_hub(), Authenticator(klass.roster, klass.store))
    assert users.authenticate("Bearer tok-alice").student == "alice"
    assert users.authenticate("token tok-wide").student == "root"      # access to every service covers this one
    assert users.authenticate(f"Bearer {klass.tokens['bob']}").student == "bob"   # roster tokens still work


@pytest.mark.parametrize("header, words", [
    (None, "no token"),
    ("Basic abc", "must be 'Bearer"),
    ("Bearer nobody-knows", "does not know this token"),
    ("Bearer tok-eve", "may not use this pool"),
    ("Bearer tok-svc", "not a service"),
])
def test_hub_tokens_that_are_missing_unknown_or_lack_the_scope_get_401(header: str | None, words: str) -> None:
    with pytest.raises(AuthError, match=words):
        HubUsers(_hub()).authenticate(header)


def test_a_roster_token_without_a_roster_is_refused_and_a_silent_hub_is_503(klass: Klass) -> None:
    hub = _hub()
    with pytest.raises(AuthError, match="class's JupyterHub users only"):
        HubUsers(hub).authenticate(f"Bearer {klass.tokens['bob']}")
    assert hub.asked == 0   # a pool token is never shown to the Hub
    hub.down = True
    with pytest.raises(Unavailable) as err:
        HubUsers(hub).authenticate("Bearer tok-alice")
    assert err.value.status == 503


def test_hub_auth_from_the_environment_needs_what_the_hub_sets() -> None:
    with pytest.raises(Exception, match="JUPYTERHUB_API_TOKEN, JUPYTERHUB_SERVICE_NAME"):
        hub_auth_from_env({"JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api"})
    auth = hub_auth_from_env({"JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api", "JUPYTERHUB_API_TOKEN": "t",
                              "JUPYTERHUB_SERVICE_NAME": "gpu-pool"})
    assert auth.access_scopes == {SCOPE} and auth.cache_max_age == 60


def test_the_service_limits_key_on_the_hub_user_and_answers_under_its_prefix(start: Callable[..., RunningService],
                                                                           klass: Klass) -> None:
    service = start(concurrent_jobs=1, prefix="/services/gpu-pool/")
    service.pool.auth = HubUsers(_hub(), Authenticator(klass.roster, klass.store))
    status, body, _ = call(service.url, "/services/gpu-pool/v1/me", token="tok-alice")   # through the Hub's proxy
    assert status == 200 and body["student"] == "alice" and body["token_expires"] == "when your JupyterHub login ends"
    status, body, _ = call(service.url, "/v1/judge", request().to_json(), "tok-alice")
    assert status == 200 and body["report"]["verdict"] == "passed"
    _, me, _ = call(service.url, "/v1/me", token="tok-alice")
    assert me["usage"]["gpu_seconds_last_hour"] > 0
    _, bob, _ = call(service.url, "/v1/me", token=klass.tokens["bob"])
    assert bob["usage"]["gpu_seconds_last_hour"] == 0   # alice's use is hers
    status, body, _ = call(service.url, "/v1/me", token="tok-eve")
    assert status == 401 and "may not use this pool" in body["error"]
