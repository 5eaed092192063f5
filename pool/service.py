"""The HTTP service students' notebooks talk to: authenticate, limit, queue fairly, judge, answer.

Endpoints (JSON in and out):

- ``POST /v1/judge`` with ``Authorization: Bearer <token>`` and a ``gemmlab.judge.JudgeRequest``
  as the body: waits for the judgement and answers ``{"report": <JudgeReport>, "gpu": "<host>
  gpu <i>", "queue_wait_s": s, "run_s": s}``. Refusals: 401 (token), 413 (size), 400
  (malformed request, with the judge's reason), 429 (a limit; ``Retry-After`` and
  ``retry_after_s`` say when), 503 (shutting down). Every error body is ``{"error": "..."}``.
- ``GET /v1/me``: the student's limits and usage, and when the token expires.
- ``GET /v1/health``: the GPUs and the queue's length (no token needed, no student data).

Why tornado: it comes with JupyterLab, and a request waiting for its judgement costs a
coroutine, not a thread; the judges themselves run in the scheduler's threads.
"""
from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
from dataclasses import dataclass
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web

from gemmlab.judge import JudgeError, JudgeRequest

from .auth import Authenticator
from .errors import LimitExceeded, PoolError
from .hub_auth import HubUsers
from .limits import UsageLedger
from .scheduler import FairScheduler, Job, JobResult

API_VERSION = "1"
#: Bodies up to this many bytes are read and refused with a clear 413; larger ones are cut off by the server.
BODY_READ_BYTES = 4 << 20


@dataclass
class Pool:
    """What the handlers share: who may ask, their limits and usage, and the queue in front of the GPUs."""

    auth: Authenticator | HubUsers   #: roster tokens, or JupyterHub tokens (and roster tokens beside them)
    ledger: UsageLedger
    scheduler: FairScheduler

    def close(self) -> None:
        self.scheduler.close()
        self.scheduler.executor.close()


class _Handler(tornado.web.RequestHandler):
    pool: Pool

    def initialize(self, pool: Pool) -> None:
        self.pool = pool

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    def reply(self, status: int, body: dict[str, Any]) -> None:
        self.set_status(status)
        self.finish(json.dumps(body))

    def fail(self, exc: PoolError) -> None:
        body: dict[str, Any] = {"error": str(exc)}
        if isinstance(exc, LimitExceeded):
            body["retry_after_s"] = round(exc.retry_after_s, 1)
            self.set_header("Retry-After", str(max(1, round(exc.retry_after_s))))
        if exc.status == 401:
            self.set_header("WWW-Authenticate", 'Bearer realm="gemmlab pool"')
        self.reply(exc.status, body)

    async def grant(self) -> Any:
        """Who is asking (a pool.tokens.Grant), asked in a thread: a Hub login is checked with a call to the Hub."""
        header = self.request.headers.get("Authorization")
        return await asyncio.get_running_loop().run_in_executor(None, self.pool.auth.authenticate, header)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        reason = {404: "no such endpoint: the pool serves POST /v1/judge, GET /v1/me and GET /v1/health.",
                  405: "this endpoint does not take that method."}.get(status_code, self._reason)
        self.finish(json.dumps({"error": reason}))


class NotFoundHandler(_Handler):
    def prepare(self) -> None:
        raise tornado.web.HTTPError(404)


class JudgeHandler(_Handler):
    def initialize(self, pool: Pool) -> None:
        super().initialize(pool)
        self._job: Job | None = None
        self._gone = False  # the client hung up: nobody reads the answer

    async def post(self) -> None:
        pool = self.pool
        try:
            grant = await self.grant()
            pool.ledger.limits.check_size(len(self.request.body))
            try:
                request = JudgeRequest.from_json(self.request.body)
            except JudgeError as exc:
                raise PoolError(f"the request was refused: {exc}") from None
            pool.ledger.admit(grant.student, action=request.action)
        except PoolError as exc:
            self.fail(exc)
            return
        try:
            job = pool.scheduler.submit(grant.student, request)
        except RuntimeError as exc:
            pool.ledger.finish(grant.student, 0.0, action=request.action)
            self.reply(503, {"error": str(exc)})
            return
        self._job = job
        job.future.add_done_callback(lambda f: pool.ledger.finish(
            grant.student, 0.0 if f.cancelled() else f.result().run_s, action=request.action))
        try:
            result: JobResult = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            if not self._gone:
                self.reply(503, {"error": "the pool shut down before this request ran."})
            return
        if not self._gone:
            self.reply(200, result.to_dict())

    def on_connection_close(self) -> None:
        self._gone = True
        if self._job is not None:
            self.pool.scheduler.cancel(self._job)  # still queued: nobody is waiting for it any more


class MeHandler(_Handler):
    async def get(self) -> None:
        try:
            grant = await self.grant()
        except PoolError as exc:
            self.fail(exc)
            return
        self.reply(200, {"student": grant.student, "token_expires": grant.expires_text,
                         "limits": self.pool.ledger.limits.to_dict(), "usage": self.pool.ledger.usage(grant.student)})


class HealthHandler(_Handler):
    def get(self) -> None:
        self.reply(200, {"ok": True, "api": API_VERSION,
                         "gpus": self.pool.scheduler.labels, **self.pool.scheduler.stats()})


def make_app(pool: Pool, prefix: str = "/") -> tornado.web.Application:
    """The endpoints under ``prefix`` (a Hub service is reached through the Hub's proxy at
    ``/services/<name>/``, which passes the whole path on) and under ``/`` (direct)."""
    under = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    prefixes = sorted({"/", under})
    return tornado.web.Application([
        (rf"{re.escape(p)}v1/{name}", handler, {"pool": pool}) for p in prefixes
        for name, handler in (("judge", JudgeHandler), ("me", MeHandler), ("health", HealthHandler))
    ], default_handler_class=NotFoundHandler, default_handler_args={"pool": pool})


class RunningService:
    """The service on its own thread and event loop (tests, benchmarks); ``url`` is where it listens."""

    def __init__(self, pool: Pool, host: str = "127.0.0.1", port: int = 0, prefix: str = "/") -> None:
        self.pool, self.prefix = pool, prefix
        sockets = tornado.netutil.bind_sockets(port, host)
        self.port = sockets[0].getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(sockets,), name="pool-http", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _serve(self, sockets: list[Any]) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = tornado.httpserver.HTTPServer(make_app(self.pool, self.prefix), max_body_size=BODY_READ_BYTES)
        self._server.add_sockets(sockets)
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        """Stop listening, cancel queued jobs, wait for running ones, release the executor."""
        self._loop.call_soon_threadsafe(self._server.stop)
        self.pool.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def __enter__(self) -> "RunningService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(pool: Pool, host: str, port: int, prefix: str = "/") -> None:
    """Serve on ``host:port`` until SIGINT or SIGTERM (``python -m pool serve``); running judges finish first."""
    async def main() -> None:
        server = tornado.httpserver.HTTPServer(make_app(pool, prefix), max_body_size=BODY_READ_BYTES)
        server.listen(port, address=host)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            server.stop()

    try:
        asyncio.run(main())
    finally:
        pool.close()


__all__ = ["API_VERSION", "BODY_READ_BYTES", "Pool", "RunningService", "make_app", "serve_forever"]
