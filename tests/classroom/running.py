"""A class running on this machine for the classroom's tests: ``python -m classroom start`` in a process group
on free ports, logins over HTTP (the Hub's login form, its OAuth into the user's server), and code run in a
user's kernel through the Jupyter server's websocket, as JupyterLab runs it."""
from __future__ import annotations

import asyncio
import contextlib
import csv
import http.cookiejar
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tests.support import ROOT

HUB_START_S = 90
#: The pool service the Hub tests run: `python -m pool serve` with the fake judge (no GPU needed).
FAKE_POOL_SERVICE = ROOT / "tests" / "support" / "fake_pool_service.py"


def require_class_tools() -> None:
    """Skip without bubblewrap or the Hub's proxy (fail instead under CI, where scripts/setup.sh installs both)."""
    import shutil

    import pytest

    from autograder.harness.sandbox import check_bwrap

    chp = Path(sys.executable).parent.parent / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
    why = check_bwrap() or ("" if chp.exists() or shutil.which("configurable-http-proxy") else
                            "configurable-http-proxy is missing: scripts/setup.sh installs it with npm")
    if why:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(why)
SPAWN_S = 240


def free_port_block(n: int = 3) -> int:
    """A port p with p..p+n-1 free (the Hub, its API and the proxy's API use three in a row)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no block of free ports")


@dataclass
class RunningClass:
    root: Path
    url: str
    passwords: dict[str, str]
    log: Path
    proc: subprocess.Popen = field(repr=False)
    pool_port: int = 0

    def login(self, user: str) -> "HubUser":
        return HubUser(self, user).login(self.passwords[user])


def class_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("CUTE_DSL_ARCH", "sm_90a")
    return env


def prepare(root: Path, students: list[str], instructors: list[str], *extra: str,
            pool: str = "fake") -> tuple[int, dict[str, str]]:
    roster = root.parent / f"{root.name}-roster.csv"
    roster.write_text("id\n" + "".join(f"{s}\n" for s in students))
    port = free_port_block(4)
    args = [sys.executable, "-m", "classroom", "start", str(root), "--roster", str(roster), "--port", str(port),
            "--pool-port", str(port + 3), "--pool", "off" if pool == "off" else "gpu",
            *[a for i in instructors for a in ("--instructor", i)], *extra, "--prepare-only"]
    subprocess.run(args, check=True, cwd=ROOT, env=class_env(), capture_output=True, text=True)
    if pool == "fake":   # the class's pool service, with the fake judge in front of a pretend GPU
        settings = json.loads((root / "class.json").read_text())
        settings["pool_program"] = [str(FAKE_POOL_SERVICE)]
        (root / "class.json").write_text(json.dumps(settings, indent=1))
    passwords = {}
    if (root / "passwords.csv").exists():
        passwords = {r["user"]: r["password"] for r in csv.DictReader((root / "passwords.csv").open())}
    return port, passwords


@contextlib.contextmanager
def running_class(root: Path, students: list[str], instructors: list[str], *extra: str,
                  pool: str = "fake") -> Iterator[RunningClass]:
    """The class's Hub (and its pool: tests/support/fake_pool_service.py's fake judge, ``pool="gpu"``: this host's
    GPUs, or ``pool="off"``: none) until the block ends."""
    port, passwords = prepare(root, students, instructors, *extra, pool=pool)
    log = root.parent / f"{root.name}-hub.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "classroom", "start", str(root)], cwd=ROOT, env=class_env(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HUB_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Hub exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{url}/hub/api/", timeout=5):
                    pass
                with urllib.request.urlopen(f"{url}/services/gpu-pool/v1/health", timeout=5):
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Hub did not answer within {HUB_START_S} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield RunningClass(root, url, passwords, log, proc, port + 3)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class HubUser:
    """One user's browser-like session with the Hub: cookies, the login form, their server and its kernels."""

    def __init__(self, klass: RunningClass, name: str) -> None:
        self.klass, self.name = klass, name
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.token = ""

    def _xsrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "_xsrf"), "")

    def open(self, path: str, data: dict[str, str] | bytes | None = None, headers: dict[str, str] | None = None,
             method: str | None = None, timeout: float = 60) -> tuple[int, bytes, str]:
        body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
        req = urllib.request.Request(self.klass.url + path, data=body, headers=headers or {}, method=method)
        try:
            with self.opener.open(req, timeout=timeout) as r:
                return r.status, r.read(), r.geturl()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.geturl()

    def login(self, password: str) -> "HubUser":
        self.open("/hub/login")
        status, body, where = self.open("/hub/login", {"username": self.name, "password": password,
                                                       "_xsrf": self._xsrf()})
        if "/hub/login" in where:
            raise PermissionError(f"{self.name} could not log in (HTTP {status})")
        return self

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        status, raw, _ = self.open(path, data, {"X-XSRFToken": self._xsrf(), "Content-Type": "application/json",
                                                **({"Authorization": f"token {self.token}"} if self.token else {})},
                                   method=method)
        return status, (json.loads(raw) if raw.strip() else None)

    def start_server(self) -> None:
        """Start the user's server and wait for it; afterwards ``token`` reaches it (a token of the user's)."""
        status, model = self.api("POST", f"/hub/api/users/{self.name}/tokens",
                                 {"note": "classroom test", "expires_in": 3600})
        assert status in (200, 201), (status, model)
        self.token = model["token"]
        self.api("POST", f"/hub/api/users/{self.name}/server")
        deadline = time.monotonic() + SPAWN_S
        while time.monotonic() < deadline:
            status, user = self.api("GET", f"/hub/api/users/{self.name}")
            server = (user or {}).get("servers", {}).get("", {})
            if server.get("ready"):
                return
            if status == 200 and not server:
                raise RuntimeError(f"{self.name}'s server stopped:\n{self.klass.log.read_text()[-4000:]}")
            time.sleep(1)
        raise TimeoutError(f"{self.name}'s server did not start in {SPAWN_S} s:\n{self.klass.log.read_text()[-4000:]}")

    def server(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.api(method, f"/user/{self.name}{path}", body)

    def run(self, code: str, timeout: float = 120) -> dict[str, str]:
        """Run ``code`` in a fresh kernel of the user's server; its stdout, stderr and error (ename: evalue)."""
        status, kernel = self.server("POST", "/api/kernels", {"name": "python3"})
        assert status in (200, 201), (status, kernel)
        try:
            return asyncio.run(self._execute(kernel["id"], code, timeout))
        finally:
            self.server("DELETE", f"/api/kernels/{kernel['id']}")

    async def _execute(self, kernel_id: str, code: str, timeout: float) -> dict[str, str]:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        ws_url = self.klass.url.replace("http", "ws", 1) + f"/user/{self.name}/api/kernels/{kernel_id}/channels"
        conn = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"}))
        msg_id = uuid.uuid4().hex
        conn.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": self.name, "session": uuid.uuid4().hex, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        out = {"stdout": "", "stderr": "", "error": ""}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            raw = await asyncio.wait_for(conn.read_message(), timeout=max(1.0, deadline - time.monotonic()))
            if raw is None:
                break
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out[content["name"]] += content["text"]
            elif kind == "error":
                out["error"] = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                break
        conn.close()
        return out
