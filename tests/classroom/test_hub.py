"""A class on this machine, through its real JupyterHub (6), proxy and pool (the fake judge: no GPU here).

Students log in with the passwords ``start`` issued, their servers start in their sandboxes, and code
runs in their kernels as in JupyterLab: a check goes to the pool with no token set (the server's Hub
token), the pool's limits key on the Hub user, and a hostile student's kernel reaches nothing of anyone
else's: not a classmate's files, hand-ins or feedback, not the collected hand-ins, the gradebook, the
solutions or the Hub's secrets, not another process's environment.
"""
from __future__ import annotations

import json
from typing import Iterator

import pytest

from tests.classroom.running import RunningClass, require_class_tools, running_class
from tests.classroom.work import CHECK, HOSTILE

pytest.importorskip("jupyterhub", reason="the `class` extra: pip install -e '.[class]'")
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def klass(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningClass]:
    require_class_tools()
    root = tmp_path_factory.mktemp("hub") / "class"
    with running_class(root, ["alice", "bob"], ["teacher"]) as running:
        yield running


def test_a_wrong_password_or_a_stranger_cannot_log_in(klass: RunningClass) -> None:
    from tests.classroom.running import HubUser

    with pytest.raises(PermissionError):
        HubUser(klass, "alice").login(klass.passwords["bob"])
    with pytest.raises(PermissionError):
        HubUser(klass, "mallory").login(klass.passwords["alice"])


def test_a_student_without_a_gpu_checks_through_the_pool_with_no_token(klass: RunningClass) -> None:
    alice = klass.login("alice")
    alice.start_server()
    out = alice.run(CHECK, timeout=240)
    assert not out["error"], out
    assert "token set: False gpu: False" in out["stdout"] and "passed: True" in out["stdout"], out
    assert "me: alice" in out["stdout"], out


def _pool_service_token(klass: RunningClass) -> str:
    """The Hub's token of the pool service, read from the pool's process (this test runs as the Hub's user)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "serve" in cmd and "--hub" in cmd and str(klass.pool_port) in cmd:
            return proc.environ()["JUPYTERHUB_API_TOKEN"]
    raise AssertionError(f"no pool process on port {klass.pool_port}")


def test_a_hostile_student_reaches_nothing_of_anyone_else(klass: RunningClass) -> None:
    from classroom.prepare import REPO

    bob = klass.login("bob")
    bob.start_server()
    alice = klass.login("alice")
    alice.start_server()
    (klass.root / "handins" / "bob" / "bob+02+2026+x").mkdir(parents=True, exist_ok=True)
    (klass.root / "exchange" / "gemmlab" / "inbound" / "bob+02+2026+y").mkdir(parents=True, exist_ok=True)
    out = alice.run(HOSTILE.format(root=str(klass.root), course="gemmlab", repo=str(REPO)))
    assert not out["error"], out
    seen = json.loads(out["stdout"])
    leaks = {k: v for k, v in seen["tried"].items() if v.startswith("READ") and v != "READ []"}
    assert not leaks, leaks
    assert seen["inbound"] == [], "alice's inbound is her own hand-ins folder, empty so far"
    secrets = {(klass.root / "hub" / "proxy_token").read_text().strip(),
               (klass.root / "hub" / "jupyterhub_cookie_secret").read_bytes().hex()}
    secrets.add(_pool_service_token(klass))
    assert not secrets & set(seen["env"].values()), "a Hub secret is in the student's environment"
    assert seen["env"]["JUPYTERHUB_USER"] == "alice" and seen["env"]["GEMMLAB_HIDE_GPU"] == "1"


@pytest.mark.gpu
def test_a_student_without_a_gpu_checks_on_the_classs_gpu(tmp_path) -> None:
    """The same check with the pool on this host's GPU (sandboxed judges): the student's sandbox sees no GPU."""
    require_class_tools()
    with running_class(tmp_path / "class", ["alice"], ["teacher"], pool="gpu") as klass:
        alice = klass.login("alice")
        alice.start_server()
        out = alice.run(CHECK, timeout=600)
        assert not out["error"], out
        assert "token set: False gpu: False" in out["stdout"] and "passed: True" in out["stdout"], out
