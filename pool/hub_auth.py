"""Who is asking, when the pool runs as a JupyterHub service: the student's Hub token, checked by the Hub.

Why the Hub: on a class's JupyterHub every student's JupyterLab already carries a token of
their own (``JUPYTERHUB_API_TOKEN``, issued by the Hub for their server), so nobody has a pool
token to copy. The pool hands whatever follows ``Bearer`` to the Hub's API (``GET
/hub/api/user``, through ``jupyterhub.services.auth.HubAuth``), which answers with the token's
owner and scopes; the pool serves only tokens that hold ``access:services!service=<its
name>`` (classroom grants it to every Hub user through the Hub's default ``user`` role). Limits key on
the Hub user's name.

Roster tokens (``gp1_...``, :mod:`pool.tokens`) keep working beside it when a roster is given,
so one pool can serve the Hub's students and people without a Hub login.
"""
from __future__ import annotations

import math
import os
from typing import Any, Protocol

from .errors import AuthError, PoolError, Unavailable
from .tokens import TOKEN_PREFIX, Grant

#: Seconds the Hub's answer about one token is reused: a token the Hub revoked stops working within this.
CACHE_S = 60
#: The variables the Hub sets for a service it starts (``c.JupyterHub.services`` with a ``command``).
HUB_ENV = ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_NAME")


class RosterAuth(Protocol):
    def students(self) -> frozenset[str]: ...

    def authenticate(self, header: str | None, now: float | None = None) -> Grant: ...


class HubUsers:
    """Turns a request's ``Authorization: Bearer <Hub token>`` into a :class:`Grant` for the token's Hub user.

    ``hub_auth`` is a ``jupyterhub.services.auth.HubAuth`` (anything with ``user_for_token(token,
    sync=True)``, ``check_scopes(scopes, model)`` and ``access_scopes``); ``roster`` the roster's
    authenticator for ``gp1_`` tokens, or None.
    """

    def __init__(self, hub_auth: Any, roster: RosterAuth | None = None) -> None:
        self.hub_auth = hub_auth
        self.roster = roster
        if not getattr(hub_auth, "access_scopes", None):
            raise PoolError("the Hub gave this service no access scope (JUPYTERHUB_SERVICE_NAME is unset): "
                            "start the pool from the Hub's configuration (c.JupyterHub.services) or set it.")

    def students(self) -> frozenset[str]:
        """The roster's students (Hub users are whoever the Hub lets in: not listed here)."""
        return self.roster.students() if self.roster is not None else frozenset()

    def authenticate(self, header: str | None, now: float | None = None) -> Grant:
        if not header:
            raise AuthError("no token: in the class's JupyterLab the pool takes your Hub login by itself "
                            "(JUPYTERHUB_API_TOKEN); elsewhere send 'Authorization: Bearer <token>' with the token "
                            "your instructor gave you.")
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() not in ("bearer", "token") or not token:
            raise AuthError("the Authorization header must be 'Bearer <token>'.")
        if token.startswith(TOKEN_PREFIX + "_"):
            if self.roster is None:
                raise AuthError("this pool serves the class's JupyterHub users only: open your notebook in the "
                                "class's JupyterLab, where no token is needed.")
            return self.roster.authenticate(header, now)
        try:
            model = self.hub_auth.user_for_token(token, sync=True)
        except Exception as exc:  # the Hub is down or answered an error: not the student's fault
            raise Unavailable(f"the pool could not ask the Hub who you are ({type(exc).__name__}); try again in a "
                            "minute, and tell your instructor if it keeps failing.") from None
        if not model or not model.get("name"):
            raise AuthError("the Hub does not know this token (it expired when your server stopped, or it is "
                            "not a Hub token): restart your server from the Hub's home page and run the cell again.")
        if model.get("kind", "user") != "user":
            raise AuthError("only students' and instructors' tokens are served, not a service's.")
        if not self.hub_auth.check_scopes(self.hub_auth.access_scopes, model):
            raise AuthError(f"your Hub login ({model['name']}) may not use this pool: ask your instructor to add "
                            "you to the class (the Hub's 'students' or 'instructors' group).")
        return Grant(str(model["name"]), math.inf)


def hub_auth_from_env(env: dict[str, str] | None = None, cache_s: float = CACHE_S) -> Any:
    """The ``HubAuth`` of a service the Hub started, from the variables it set; a PoolError naming what is missing."""
    env = dict(os.environ if env is None else env)
    missing = [k for k in HUB_ENV if not env.get(k)]
    if missing:
        raise PoolError(f"--hub needs {', '.join(missing)} in the environment: JupyterHub sets them for a service "
                        "it starts (classroom/jupyterhub_config.py registers the pool that way).")
    try:
        from jupyterhub.services.auth import HubAuth
    except ImportError:
        raise PoolError("--hub needs JupyterHub: pip install -e '.[class]'.") from None
    return HubAuth(api_url=env["JUPYTERHUB_API_URL"], api_token=env["JUPYTERHUB_API_TOKEN"],
                   access_scopes={f"access:services!service={env['JUPYTERHUB_SERVICE_NAME']}"},
                   cache_max_age=int(cache_s))


__all__ = ["CACHE_S", "HUB_ENV", "HubUsers", "hub_auth_from_env"]
