"""Per-student limits: jobs in flight, GPU-seconds per hour, profiles, request size.

Why a ledger: a class shares a few GPUs, so no student may hold more than ``concurrent_jobs``
of the queue at once, nor more than ``gpu_seconds_per_hour`` of GPU time in any hour. A job's
GPU-seconds are the seconds its judge held a GPU slot, charged when it ends (a kernel that hangs
until its limit costs its author those seconds, nobody else). A refused request says when to
retry: when a slot frees (a job's typical length) or when enough of the last hour's use expires.

Profiles (an Nsight Compute readout, a timeline: gemmlab.judge's ``profile`` and ``trace``) have limits
of their own besides: each holds its GPU alone for tens of seconds (ncu replays the kernel pass by
pass), so a student may have one at a time and ``profiles_per_hour`` in any hour, counted when admitted.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from gemmlab.judge.protocol import MAX_REQUEST_BYTES, PROFILE_ACTIONS

from .errors import LimitExceeded, RequestTooLarge

WINDOW_S = 3600.0
#: Seconds a profile typically takes (ncu's start, the replays, the power burst): when to retry after one in flight.
TYPICAL_PROFILE_S = 60.0


@dataclass(frozen=True)
class StudentLimits:
    """What each student may use; the same for everyone in the class."""

    concurrent_jobs: int = 2
    gpu_seconds_per_hour: float = 900.0   #: about six passes through 05's tests an hour (pool/README.md)
    max_request_bytes: int = MAX_REQUEST_BYTES
    profiles_per_hour: int = 12           #: readouts and timelines; each holds a GPU alone (pool/README.md)

    def __post_init__(self) -> None:
        if self.concurrent_jobs < 1 or self.gpu_seconds_per_hour <= 0:
            raise ValueError("concurrent_jobs must be at least 1 and gpu_seconds_per_hour above 0.")
        if self.profiles_per_hour < 0:
            raise ValueError("profiles_per_hour must be 0 (no profiles) or more.")
        if not 0 < self.max_request_bytes <= MAX_REQUEST_BYTES:
            raise ValueError(f"max_request_bytes must be from 1 to the judge's {MAX_REQUEST_BYTES:,}.")

    def check_size(self, nbytes: int) -> None:
        if nbytes > self.max_request_bytes:
            raise RequestTooLarge(f"the request is {nbytes:,} bytes; the pool accepts at most "
                                  f"{self.max_request_bytes:,} (the kernel source and its launch, no data).")

    def to_dict(self) -> dict[str, Any]:
        return {"concurrent_jobs": self.concurrent_jobs, "gpu_seconds_per_hour": self.gpu_seconds_per_hour,
                "max_request_bytes": self.max_request_bytes, "profiles_per_hour": self.profiles_per_hour}


class _Usage:
    def __init__(self) -> None:
        self.in_flight = 0
        self.spent: deque[tuple[float, float]] = deque()   # (when the job ended, GPU-seconds)
        self.profiling = 0
        self.profiles: deque[float] = deque()               # when each profile of the last hour was admitted

    def expire(self, now: float) -> None:
        while self.spent and self.spent[0][0] <= now - WINDOW_S:
            self.spent.popleft()
        while self.profiles and self.profiles[0] <= now - WINDOW_S:
            self.profiles.popleft()

    def last_hour(self) -> float:
        return sum(s for _, s in self.spent)


class UsageLedger:
    """Admits a student's job when it fits their limits, and charges its GPU-seconds when it ends (thread-safe)."""

    def __init__(self, limits: StudentLimits, typical_job_s: float = 5.0) -> None:
        self.limits = limits
        self.typical_job_s = typical_job_s
        self._usage: dict[str, _Usage] = {}
        self._lock = threading.Lock()

    def admit(self, student: str, now: float | None = None, action: str = "check") -> None:
        """Count one more job in flight for ``student`` (a profile too when ``action`` is one), or raise
        LimitExceeded with when to retry."""
        now = time.time() if now is None else now
        with self._lock:
            usage = self._usage.setdefault(student, _Usage())
            usage.expire(now)
            if usage.in_flight >= self.limits.concurrent_jobs:
                raise LimitExceeded(f"you already have {usage.in_flight} request(s) queued or running, the most "
                                    f"allowed at once ({self.limits.concurrent_jobs}): wait for one to finish.",
                                    self.typical_job_s)
            used = usage.last_hour()
            if used >= self.limits.gpu_seconds_per_hour:
                retry = self._seconds_until_below(usage, now)
                raise LimitExceeded(f"you used {used:.0f} GPU-seconds in the last hour, your limit is "
                                    f"{self.limits.gpu_seconds_per_hour:g}: try again in {retry:.0f} s.", retry)
            if action in PROFILE_ACTIONS:
                self._admit_profile(usage, now)
            usage.in_flight += 1

    def _admit_profile(self, usage: _Usage, now: float) -> None:
        if self.limits.profiles_per_hour == 0:
            raise LimitExceeded("this class's pool runs no profiles (readouts, timelines); checks and timings run "
                                "as usual.", WINDOW_S)
        if usage.profiling:
            raise LimitExceeded("you already have a profile queued or running, and a profile holds its GPU alone: "
                                "wait for it to finish.", TYPICAL_PROFILE_S)
        if len(usage.profiles) >= self.limits.profiles_per_hour:
            retry = max(1.0, usage.profiles[0] + WINDOW_S - now)
            raise LimitExceeded(f"you ran {len(usage.profiles)} profiles (readouts, timelines) in the last hour, your "
                                f"limit is {self.limits.profiles_per_hour}: try again in {retry:.0f} s.", retry)
        usage.profiling += 1
        usage.profiles.append(now)

    def _seconds_until_below(self, usage: _Usage, now: float) -> float:
        over = usage.last_hour() - self.limits.gpu_seconds_per_hour
        for ended, seconds in usage.spent:
            over -= seconds
            if over < 0:
                return max(1.0, ended + WINDOW_S - now)
        return 1.0

    def finish(self, student: str, gpu_seconds: float, now: float | None = None, action: str = "check") -> None:
        """The job ended (or never ran: ``gpu_seconds`` 0); free its slot and charge its time. A profile that never
        ran is not counted against the hour's profiles."""
        now = time.time() if now is None else now
        with self._lock:
            usage = self._usage.setdefault(student, _Usage())
            usage.in_flight = max(0, usage.in_flight - 1)
            if action in PROFILE_ACTIONS:
                usage.profiling = max(0, usage.profiling - 1)
                if gpu_seconds <= 0 and usage.profiles:
                    usage.profiles.pop()
            if gpu_seconds > 0:
                usage.spent.append((now, float(gpu_seconds)))
            usage.expire(now)

    def usage(self, student: str, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        with self._lock:
            usage = self._usage.setdefault(student, _Usage())
            usage.expire(now)
            return {"in_flight": usage.in_flight, "gpu_seconds_last_hour": round(usage.last_hour(), 3),
                    "profiles_last_hour": len(usage.profiles)}


__all__ = ["StudentLimits", "TYPICAL_PROFILE_S", "UsageLedger", "WINDOW_S"]
