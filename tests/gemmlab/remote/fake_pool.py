"""A stand-in for the pool's HTTP service: the same contract, answered in this process by a judge backend.

Tokens pick the behaviour: ``good`` is judged; ``expired`` gets 401, ``busy`` 429 with Retry-After,
``broken`` 500, ``garbled`` a 200 that is not JSON, ``slow`` an answer after 3 s. Every request
body the service received is kept in ``requests`` (as parsed JudgeRequests).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from gemmlab.judge import JudgeError, JudgeReport, JudgeRequest
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend

#: What the fake judge calls its device (tests.support.fake_judge.FakeBackend.DEVICE).
GPU = FakeBackend.DEVICE


class FakePool:
    """``with FakePool() as pool: pool.url``; ``judge_with`` replaces the in-process fake judge.

    ``nested`` answers as ``pool.service`` does (``{"report": ..., "gpu": ..., "queue_wait_s": ...}``),
    else with the report's fields at the top level beside ``gpu``, ``wait_s`` and ``run_s``.
    """

    def __init__(self, judge_with: Callable[[JudgeRequest], JudgeReport] | None = None, nested: bool = True) -> None:
        self.requests: list[JudgeRequest] = []
        self.nested = nested
        self.judge_with = judge_with or (lambda request: judge(request, FakeBackend()))
        pool = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _token_refused(self) -> bool:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if token == "expired":
                    self._answer(401, json.dumps({"error": "token expired on 2024-01-31"}).encode())
                elif token == "busy":
                    self._answer(429, json.dumps({"error": "2 jobs already running"}).encode(), {"Retry-After": "17"})
                elif token == "broken":
                    self._answer(500, b"Internal Server Error")
                elif token == "garbled":
                    self._answer(200, b"<html>hello</html>")
                elif token == "slow":
                    time.sleep(3)
                    try:
                        self._answer(200, b"{}")
                    except BrokenPipeError:  # the client gave up first, as it should
                        pass
                elif token == "good":
                    return False
                else:
                    self._answer(401, b'{"error": "unknown token"}')
                return True

            def do_GET(self) -> None:
                if not self._token_refused():
                    self._answer(200, json.dumps({"student": "ada", "jobs": 2, "gpu_s_per_hour": 120}).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self._token_refused():
                    return
                try:
                    request = JudgeRequest.from_json(raw)
                except JudgeError as exc:
                    self._answer(400, json.dumps({"error": str(exc)}).encode())
                    return
                pool.requests.append(request)
                report = pool.judge_with(request).to_dict()
                if pool.nested:
                    reply = {"report": report, "gpu": "host-1 gpu 0", "queue_wait_s": 0.25, "run_s": 1.5}
                else:
                    reply = {**report, "gpu": "host-1 gpu 0", "wait_s": 0.25, "run_s": 1.5}
                self._answer(200, json.dumps(reply).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakePool":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
