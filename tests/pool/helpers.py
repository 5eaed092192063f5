"""What the pool's tests share: a class (roster and tokens), requests the fake judge understands, an HTTP client."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from gemmlab.judge import JudgeReport, JudgeRequest, KernelSpec
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend
from gemmlab.judge.protocol import EXCLUSIVE_ACTIONS
from pool.tokens import TokenStore
from tests.support import KERNELS

STUDENTS = ("alice", "bob", "carol")


def request(name: str = "gemm_naive", action: str = "check") -> JudgeRequest:
    """planted_naive.cu renamed to ``name``: the fake judge reads the kernel's behaviour from the name's ending."""
    source = (KERNELS / "planted_naive.cu").read_text().replace("gemm_naive", name)
    spec = KernelSpec(source, name, "tn", ("cdiv(N, T)", "cdiv(M, T)", "1"), ("T", "T", "1"), constants={"T": 16})
    return JudgeRequest(spec, action=action, shapes=[(128, 128, 64)], shape=(256, 256, 64))


@dataclass
class Klass:
    roster: Path
    store: Path
    tokens: dict[str, str]      # valid tokens
    expired: str                # dave's, expired an hour ago


def make_class(folder: Path) -> Klass:
    """A roster of alice, bob, carol and dave; valid tokens for the first three, an expired one for dave."""
    roster = folder / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(f"{s},{s.title()},X,{s}@uni\n" for s in STUDENTS)
                      + "dave,Dave,X,dave@uni\n")
    store_path = folder / "roster.tokens.json"
    store = TokenStore()
    tokens = {t.student: t.token for t in store.issue(STUDENTS, 3600.0)}
    expired = store.issue(["dave"], 3600.0, now=time.time() - 7200.0)[0].token
    store.save(store_path)
    return Klass(roster, store_path, tokens, expired)


def call(url: str, path: str, body: bytes | str | None = None, token: str | None = None,
         headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict[str, Any], Any]:
    """(status, JSON body, headers: case-insensitive) of one HTTP call; error statuses are returned, not raised."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url + path, data=data, method="POST" if data is not None else "GET")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else {}, exc.headers


class ScriptedExecutor:
    """An in-process executor for scheduling tests: judges with FakeBackend in this process after ``delay_s``,
    and records the order jobs start in and how many ran at once (per action)."""

    def __init__(self, gpus: Sequence[str] = ("test gpu 0",), delay_s: float = 0.05) -> None:
        self._gpus = list(gpus)
        self.delay_s = delay_s
        self.started: list[str] = []
        self.running: dict[str, int] = {"check": 0, "bench": 0, "profile": 0, "trace": 0}
        self.most: dict[str, int] = {"check": 0, "bench": 0, "profile": 0, "trace": 0}
        self.exclusive: dict[int, int] = {}          # per GPU: timings and profiles running now
        self.most_exclusive: dict[int, int] = {}     # per GPU: the most that ever ran at once
        self._lock = threading.Lock()

    def gpus(self) -> list[str]:
        return list(self._gpus)

    def run(self, gpu: int, request: JudgeRequest, timeout_s: float) -> JudgeReport:
        with self._lock:
            self.started.append(request.spec.name)
            self.running[request.action] += 1
            self.most[request.action] = max(self.most[request.action], self.running[request.action])
            if request.action in EXCLUSIVE_ACTIONS:
                self.exclusive[gpu] = self.exclusive.get(gpu, 0) + 1
                self.most_exclusive[gpu] = max(self.most_exclusive.get(gpu, 0), self.exclusive[gpu])
        try:
            time.sleep(self.delay_s)
            if request.spec.name.endswith("_broken"):
                raise RuntimeError("the worker's host went away")
            return judge(request, FakeBackend())
        finally:
            with self._lock:
                self.running[request.action] -= 1
                if request.action in EXCLUSIVE_ACTIONS:
                    self.exclusive[gpu] -= 1

    def close(self) -> None:
        pass
