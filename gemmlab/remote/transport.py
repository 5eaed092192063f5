"""One HTTP exchange with the pool (stdlib only), every failure turned into a PoolError that says what to do.

The contract: ``POST {url}/v1/judge`` with ``Authorization: Bearer <token>`` and a JudgeRequest
as JSON; the reply holds the JudgeReport (as ``report``, or its fields at the top level) and
``gpu`` (which of the pool's GPUs ran it), ``queue_wait_s`` (or ``wait_s``) and ``run_s`` (seconds
on the GPU). ``GET {url}/v1/me`` answers the student's limits and
usage. An error reply is JSON with ``error`` (or ``message``); a 429 says when to retry in a
``Retry-After`` header or ``retry_after_s``.
"""
from __future__ import annotations

import http.client
import json
import math
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping

from ..judge.errors import JudgeError
from ..judge.protocol import MAX_REPORT_BYTES, JudgeReport, JudgeRequest
from .errors import PoolAuthError, PoolBusyError, PoolError, PoolRequestError, PoolUnavailableError

#: Largest reply read: a report plus the pool's own fields.
MAX_REPLY_BYTES = MAX_REPORT_BYTES + 65536
#: Largest error body read.
MAX_ERROR_BYTES = 16384
#: The fields the pool adds to a report.
POOL_FIELDS = ("gpu", "queue_wait_s", "wait_s", "run_s")


@dataclass(frozen=True)
class PoolReply:
    """The judge's report and what the pool adds: which of its GPUs ran it, seconds queued and seconds run."""

    report: JudgeReport
    gpu: str = ""
    wait_s: float = math.nan
    run_s: float = math.nan


def checked_url(url: Any) -> str:
    """The pool's base URL without a trailing slash; a PoolRequestError for anything but http(s)://host[:port]."""
    if not isinstance(url, str) or not url.strip():
        raise PoolRequestError("the pool's URL is empty: connect with the URL your instructor gave, "
                               "e.g. gemmlab.connect('https://gpu.example.edu', token).")
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PoolRequestError(f"{url!r:.100} is not a pool URL: it starts with https:// (or http://) and names "
                               "a host, e.g. 'https://gpu.example.edu'.")
    return url.strip().rstrip("/")


def _message(body: bytes) -> str:
    """The error text of a reply body: its JSON ``error``/``message``, or its first line."""
    text = body[:MAX_ERROR_BYTES].decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300] if text else ""
    if isinstance(data, dict):
        for key in ("error", "message", "detail"):
            if isinstance(data.get(key), str):
                return data[key][:500]
    return text[:300]


def _retry_after(headers: Mapping[str, str] | None, body: bytes) -> float | None:
    try:
        data = json.loads(body[:MAX_ERROR_BYTES])
        if isinstance(data, dict) and isinstance(data.get("retry_after_s"), (int, float)):
            return max(float(data["retry_after_s"]), 0.0)
    except ValueError:
        pass
    value = (headers or {}).get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def http_error(status: int, body: bytes, headers: Mapping[str, str] | None, url: str) -> PoolError:
    """The PoolError for an HTTP error reply, with the pool's own words and what to do."""
    said = _message(body)
    said = f" The pool says: {said}" if said else ""
    if status in (401, 403):
        return PoolAuthError(f"the pool at {url} refused your token (HTTP {status}): it is unknown, expired or "
                             f"mistyped.{said} Ask your instructor for a current token, then "
                             "gemmlab.connect(url, token) again.")
    if status == 429:
        wait = _retry_after(headers, body)
        when = f"retry in {math.ceil(wait)} s" if wait is not None else "retry in a minute"
        return PoolBusyError(f"you reached one of your limits on the pool (jobs at once or GPU-seconds per hour): "
                             f"{when}.{said}", wait)
    if status == 413:
        return PoolRequestError(f"the pool refused the request as too large (HTTP 413).{said} Check fewer shapes "
                                "at once, or a shorter kernel source.")
    if 400 <= status < 500:
        return PoolRequestError(f"the pool refused the request (HTTP {status}).{said}")
    return PoolUnavailableError(f"the pool at {url} failed (HTTP {status}).{said} Try again in a minute; if it "
                                "keeps failing, tell your instructor.")


def exchange(url: str, path: str, token: str, timeout_s: float, payload: bytes | None = None) -> Any:
    """POST ``payload`` (or GET without one) to ``url + path``, returning the reply's JSON; PoolErrors otherwise."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if payload is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url + path, data=payload, headers=headers,
                                     method="POST" if payload is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(MAX_ERROR_BYTES)
        except (OSError, http.client.HTTPException):
            body = b""
        raise http_error(exc.code, body, exc.headers, url) from None
    except (socket.timeout, TimeoutError):
        raise PoolUnavailableError(f"the pool at {url} did not answer within {timeout_s:g} s: it may be busy or "
                                   "unreachable. Try again, or connect with a longer timeout_s.") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (socket.timeout, TimeoutError)):
            raise PoolUnavailableError(f"the pool at {url} did not answer within {timeout_s:g} s: it may be busy or "
                                       "unreachable. Try again, or connect with a longer timeout_s.") from None
        reason = exc.reason if isinstance(exc.reason, str) else f"{type(exc.reason).__name__}: {exc.reason}"
        raise PoolUnavailableError(f"cannot reach the pool at {url} ({reason}). Check the URL and your network; "
                                   "if they are right, the pool may be down: tell your instructor.") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise PoolUnavailableError(f"the connection to the pool at {url} broke ({type(exc).__name__}: "
                                   f"{str(exc)[:200]}). Try again.") from None
    if len(body) > MAX_REPLY_BYTES:
        raise PoolUnavailableError(f"the pool's answer is larger than {MAX_REPLY_BYTES:,} bytes; it was not read.")
    try:
        return json.loads(body)
    except ValueError:
        raise PoolUnavailableError(f"the pool at {url} answered something that is not JSON (it began "
                                   f"{body[:80]!r}): is the URL the pool's?") from None


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def post_judge(url: str, token: str, request: JudgeRequest, timeout_s: float) -> PoolReply:
    """Send one request to ``{url}/v1/judge`` and read the report and the pool's fields."""
    data = exchange(url, "/v1/judge", token, timeout_s, request.to_json().encode())
    if not isinstance(data, dict):
        raise PoolUnavailableError(f"the pool at {url} answered a JSON {type(data).__name__}, not a report.")
    extra = {k: data.pop(k) for k in POOL_FIELDS if k in data}
    try:
        report = JudgeReport.from_dict(data["report"] if set(data) == {"report"} else data)
    except JudgeError as exc:
        raise PoolUnavailableError(f"the pool at {url} answered something that is not a judge report ({exc}).") \
            from None
    gpu = extra.get("gpu")
    return PoolReply(report, gpu if isinstance(gpu, str) else "",
                     _seconds(extra.get("queue_wait_s", extra.get("wait_s"))), _seconds(extra.get("run_s")))


__all__ = ["MAX_ERROR_BYTES", "MAX_REPLY_BYTES", "POOL_FIELDS", "PoolReply", "checked_url", "exchange", "http_error",
           "post_judge"]
