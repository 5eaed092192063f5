"""JupyterHub's configuration for a class: ``jupyterhub -f classroom/jupyterhub_config.py`` with
``GEMMLAB_CLASS_DIR`` naming the class folder (``python -m classroom start`` does both).

Everything comes from the class's ``class.json`` (classroom/settings.py): who logs in and how
(classroom/authenticators.py), where each server runs (classroom/spawner.py), the GPU pool as a
Hub service whose users are the Hub's (pool/hub_auth.py), and the scopes that let a student's
server token reach the pool and nothing more.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from classroom.settings import ClassDir  # noqa: E402

c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file

where = ClassDir(os.environ["GEMMLAB_CLASS_DIR"])
settings = where.load()
where = ClassDir(where.root, settings.course_id)
venv_bin = Path(sys.executable).parent
POOL = "gpu-pool"

c.JupyterHub.bind_url = f"http://{settings.ip}:{settings.port}"
# The Hub's own API and the proxy's API: on this host only, at the two ports after the Hub's.
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{settings.port + 1}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.port + 2}"
c.JupyterHub.db_url = f"sqlite:///{where.hub / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(where.hub / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(where.hub / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(where.hub / "proxy.pid")
c.ConfigurableHTTPProxy.auth_token = (where.hub / "proxy_token").read_text().strip()
chp = os.environ.get("GEMMLAB_CHP") or str(venv_bin.parent / "chp" / "node_modules" / ".bin" / "configurable-http-proxy")
if Path(chp).exists():
    c.ConfigurableHTTPProxy.command = [chp]
c.JupyterHub.cleanup_servers = True

# Who logs in, and in which group.
c.Authenticator.manage_groups = True
if settings.auth == "local":
    c.JupyterHub.authenticator_class = "classroom.authenticators.ClassPasswordAuthenticator"
    c.ClassPasswordAuthenticator.class_dir = str(where.root)
    c.Authenticator.allowed_users = set(settings.students) | set(settings.instructors)
else:
    lti = settings.lti
    c.JupyterHub.authenticator_class = "classroom.authenticators.ClassLTI13Authenticator"
    c.ClassLTI13Authenticator.class_dir = str(where.root)
    c.ClassLTI13Authenticator.issuer = lti.issuer
    c.ClassLTI13Authenticator.client_id = {lti.client_id}
    c.ClassLTI13Authenticator.authorize_url = lti.authorize_url
    c.ClassLTI13Authenticator.jwks_endpoint = lti.jwks_url
    c.ClassLTI13Authenticator.username_key = lti.username_key
    c.ClassLTI13Authenticator.context_id = lti.context_id
    c.ClassLTI13Authenticator.deployment_id = lti.deployment_id
    c.ClassLTI13Authenticator.uri_scheme = "https" if settings.ip not in ("127.0.0.1", "localhost") else "auto"
    c.Authenticator.allow_all = True   # whoever the LMS launches from the class's course (checked per launch)

# Where each server runs.
c.JupyterHub.spawner_class = "classroom.spawner.ClassSpawner"
c.ClassSpawner.class_dir = str(where.root)
c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180

# The GPU pool as a Hub service: students' servers reach it with their own token, which holds this scope.
if settings.pool != "off":
    pool_url = f"http://127.0.0.1:{settings.pool_port}"
    c.ClassSpawner.pool_url = f"http://127.0.0.1:{settings.port}/services/{POOL}"
    c.JupyterHub.services = [{
        "name": POOL, "url": pool_url, "display": False, "oauth_no_confirm": True,
        "command": settings.pool_command(sys.executable, "--host", "127.0.0.1", "--port", str(settings.pool_port)),
        "cwd": str(HERE.parent),
        "environment": {"PATH": os.environ.get("PATH", os.defpath), "CUTE_DSL_ARCH": os.environ.get("CUTE_DSL_ARCH", "sm_90a")},
    }]
    # Every Hub user is a member of the class (only they can log in): the default role grants the pool.
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", f"access:services!service={POOL}"]}]
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", f"access:services!service={POOL}"]
