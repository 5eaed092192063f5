"""Which pool, if any, this notebook's checks and timings go to: ``connect``, ``disconnect``, the environment.

Why one setting: a student without a GPU connects once (``gemmlab.connect(url, token)``, or
``GEMMLAB_POOL`` and ``GEMMLAB_POOL_TOKEN`` in the environment) and every ``check_gemm`` and
``bench_gemm`` then runs on the class's GPU pool; nothing else in the notebook changes. In a class's
JupyterLab started by JupyterHub (classroom/), ``GEMMLAB_POOL`` is set for the student and the token is
the Hub's own token of their server (``JUPYTERHUB_API_TOKEN``), which the pool checks with the Hub:
there is no token to copy. A machine
with a usable GPU keeps using its own, and without a connection everything runs as before.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

from gemmlab.results import BenchResult, CheckResult, CopyResult, CopyTiming
from gemmlab.running.gpu import has_gpu
from gemmlab.checking.integrity import grading_mode
from gemmlab import offload
from ..judge.protocol import JudgeRequest
from .errors import PoolAuthError
from .copy import remote_copy_bench, remote_copy_check
from .gemm import remote_bench, remote_check
from .transport import PoolReply, checked_url, exchange, post_judge

#: The pool's URL and the student's token, read when no explicit connection was made.
URL_ENV = "GEMMLAB_POOL"
TOKEN_ENV = "GEMMLAB_POOL_TOKEN"
#: The token JupyterHub gives each student's server; used when no pool token is set (a Hub-served pool).
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
#: Seconds a request may take, queueing included, before the client gives up.
DEFAULT_TIMEOUT_S = 600.0


class Pool:
    """A connection to the class's GPU pool: the URL and the student's token (never printed)."""

    def __init__(self, url: str, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = checked_url(url)
        if not isinstance(token, str) or not token.strip() or any(c.isspace() for c in token.strip()):
            raise PoolAuthError("the pool token is empty or has spaces in it: paste the token your instructor "
                                "gave you, e.g. gemmlab.connect(url, 'abc123...').")
        self._token = token.strip()
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise PoolAuthError(f"timeout_s is a number of seconds above 0, not {timeout_s!r:.30}.")
        self.timeout_s = float(timeout_s)

    def __repr__(self) -> str:
        return f"<gemmlab GPU pool at {self.url}>"

    def account(self) -> Any:
        """The pool's answer to ``GET /v1/me``: this student's limits and usage (also checks the token)."""
        return exchange(self.url, "/v1/me", self._token, min(self.timeout_s, 30.0))

    def judge(self, request: JudgeRequest) -> PoolReply:
        """Send one judge request and return the report with the GPU, queue wait and run seconds."""
        return post_judge(self.url, self._token, request, self.timeout_s)

    def check_gemm(self, fn: Callable[..., Any], convention: str, dtype: Any, out_dtype: Any,
                   shapes: Sequence[tuple[int, int, int]], alpha: float, beta: float, tile: tuple[int, int],
                   **options: Any) -> CheckResult:
        """:func:`gemmlab.check_gemm` on the pool (``options``: atol, rtol, seed, timeout_s, pad, offset)."""
        return remote_check(self, fn, convention, dtype, out_dtype, shapes, alpha, beta, tile, **options)

    def bench_gemm(self, fn: Callable[..., Any], shape: tuple[int, int, int], convention: str, dtype: Any,
                   out_dtype: Any, alpha: float, beta: float, label: str, **options: Any) -> BenchResult:
        """:func:`gemmlab.bench_gemm` on the pool (``options``: timeout_s, rounds, flush_l2)."""
        return remote_bench(self, fn, shape, convention, dtype, out_dtype, alpha, beta, label, **options)

    def check_copy(self, fn: Callable[..., Any], shapes: Sequence[tuple[int, int]], dtype: Any, transpose: bool = False,
                   who: bool = False, timeout_s: float | None = None) -> CopyResult:
        """:func:`gemmlab.check_copy` on the pool."""
        return remote_copy_check(self, fn, shapes, dtype, transpose, who, timeout_s)

    def bench_copy(self, fn: Callable[..., Any], shape: tuple[int, int], dtype: Any, transpose: bool = False,
                   timeout_s: float | None = None) -> CopyTiming:
        """:func:`gemmlab.bench_copy` on the pool."""
        return remote_copy_bench(self, fn, shape, dtype, transpose, timeout_s)


_LOCK = threading.Lock()
_connected: Pool | None = None
_disconnected = False   # disconnect() also turns off the environment's pool until the next connect()
_from_env: Pool | None = None


def forget() -> None:
    """Forget this process's ``connect()`` and ``disconnect()``: the environment (``GEMMLAB_POOL``) decides again,
    as in a fresh kernel. For tests and for a notebook that starts over."""
    global _connected, _disconnected
    _connected, _disconnected = None, False


def connect(url: str | None = None, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
            verify: bool = True) -> Pool:
    """Send this notebook's ``check_gemm`` and ``bench_gemm`` to the GPU pool at ``url`` (default: ``GEMMLAB_POOL``).

    ``token`` defaults to ``GEMMLAB_POOL_TOKEN``. ``verify`` asks the pool at once whether the
    token is good, so a wrong one fails here and not at the first check. Kernels still compile
    here; only their launches (source, options and geometry) cross, never data or Python.
    """
    global _connected, _disconnected
    url = os.environ.get(URL_ENV, "") if url is None else url
    token = _env_token() if token is None else token
    if not token:
        raise PoolAuthError(f"no pool token: pass it, gemmlab.connect(url, token), or set {TOKEN_ENV} (in the "
                            "class's JupyterHub none is needed).")
    pool = Pool(url, token, timeout_s)
    if verify:
        pool.account()
    with _LOCK:
        _connected, _disconnected = pool, False
    return pool


def _env_token() -> str:
    """The pool token of the environment: ``GEMMLAB_POOL_TOKEN``, else the JupyterHub server's own token."""
    return os.environ.get(TOKEN_ENV, "").strip() or os.environ.get(HUB_TOKEN_ENV, "").strip()


def disconnect() -> None:
    """Run checks and timings here again (and ignore ``GEMMLAB_POOL`` until the next :func:`connect`)."""
    global _connected, _disconnected
    with _LOCK:
        _connected, _disconnected = None, True


def current() -> Pool | None:
    """The pool in use: the last :func:`connect`, else the environment's (``GEMMLAB_POOL``), else None."""
    global _from_env
    with _LOCK:
        if _connected is not None or _disconnected:
            return _connected
        url, token = os.environ.get(URL_ENV, ""), _env_token()
        if not url:
            return None
        if not token:
            raise PoolAuthError(f"{URL_ENV} is set but {TOKEN_ENV} is not: set it to the token your instructor "
                                f"gave you, or unset {URL_ENV} to run here.")
        if _from_env is None or (_from_env.url, _from_env._token) != (checked_url(url), token.strip()):
            _from_env = Pool(url, token)
        return _from_env


def pool_for_work() -> Pool | None:
    """The pool that runs a check or timing now: :func:`current` on a machine without a usable GPU, else None.

    Never in the course's grader (``GEMMLAB_GRADING=1``): a grade comes from the grader's own GPU,
    not from a service a hand-in connected to.
    """
    return None if has_gpu() or grading_mode() else current()


offload.register("pool", pool_for_work)   # check_gemm and the others find the pool through gemmlab.offload


__all__ = ["DEFAULT_TIMEOUT_S", "HUB_TOKEN_ENV", "Pool", "TOKEN_ENV", "URL_ENV", "connect", "current", "disconnect",
           "forget", "pool_for_work"]
