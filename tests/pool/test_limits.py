"""Per-student limits: jobs in flight, GPU-seconds in the last hour, request size; each refusal says when to retry."""
from __future__ import annotations

import pytest

from pool.errors import LimitExceeded, RequestTooLarge
from pool.limits import WINDOW_S, StudentLimits, UsageLedger


def test_jobs_in_flight_are_limited_per_student() -> None:
    ledger = UsageLedger(StudentLimits(concurrent_jobs=2), typical_job_s=4)
    ledger.admit("alice", now=0)
    ledger.admit("alice", now=0)
    with pytest.raises(LimitExceeded, match="at once") as refused:
        ledger.admit("alice", now=0)
    assert refused.value.retry_after_s == 4
    ledger.admit("bob", now=0)  # a classmate is not affected
    ledger.finish("alice", 1.0, now=1)
    ledger.admit("alice", now=1)


def test_gpu_seconds_per_hour_and_when_to_retry() -> None:
    ledger = UsageLedger(StudentLimits(concurrent_jobs=5, gpu_seconds_per_hour=100))
    for now, seconds in ((0, 60.0), (600, 50.0)):
        ledger.admit("alice", now=now)
        ledger.finish("alice", seconds, now=now)
    with pytest.raises(LimitExceeded, match="110 GPU-seconds") as refused:
        ledger.admit("alice", now=1000)
    # Under the limit again once the first job (60 s, at t=0) leaves the hour's window.
    assert refused.value.retry_after_s == pytest.approx(WINDOW_S - 1000)
    assert ledger.usage("alice", now=1000) == {"in_flight": 0, "gpu_seconds_last_hour": 110.0, "profiles_last_hour": 0}
    ledger.admit("alice", now=WINDOW_S + 1)


def test_request_size_is_bounded_by_the_judges_limit() -> None:
    limits = StudentLimits(max_request_bytes=1000)
    limits.check_size(1000)
    with pytest.raises(RequestTooLarge, match="at most 1,000"):
        limits.check_size(1001)
    with pytest.raises(ValueError):
        StudentLimits(max_request_bytes=1 << 30)


def test_a_student_has_one_profile_at_a_time_and_a_few_an_hour() -> None:
    from pool.limits import TYPICAL_PROFILE_S

    ledger = UsageLedger(StudentLimits(concurrent_jobs=5, profiles_per_hour=2))
    ledger.admit("alice", now=0, action="profile")
    with pytest.raises(LimitExceeded, match="already have a profile queued or running") as refused:
        ledger.admit("alice", now=1, action="trace")                    # a timeline is a profile too
    assert refused.value.retry_after_s == TYPICAL_PROFILE_S
    ledger.admit("alice", now=1)                                        # checks are not held up
    ledger.admit("bob", now=1, action="profile")                        # nor classmates
    ledger.finish("alice", 30.0, now=30, action="profile")
    ledger.admit("alice", now=40, action="trace")
    ledger.finish("alice", 20.0, now=60, action="trace")
    with pytest.raises(LimitExceeded, match="2 profiles .* in the last hour, your limit is 2") as refused:
        ledger.admit("alice", now=100, action="profile")
    assert refused.value.retry_after_s == pytest.approx(WINDOW_S - 100)  # when the first one leaves the hour
    assert ledger.usage("alice", now=100)["profiles_last_hour"] == 2
    ledger.admit("alice", now=WINDOW_S + 1, action="profile")


def test_a_profile_that_never_ran_is_not_counted() -> None:
    ledger = UsageLedger(StudentLimits(profiles_per_hour=1))
    ledger.admit("alice", now=0, action="profile")
    ledger.finish("alice", 0.0, now=1, action="profile")                # cancelled while queued
    assert ledger.usage("alice", now=1) == {"in_flight": 0, "gpu_seconds_last_hour": 0, "profiles_last_hour": 0}
    ledger.admit("alice", now=2, action="profile")


def test_a_class_without_profiles() -> None:
    ledger = UsageLedger(StudentLimits(profiles_per_hour=0))
    with pytest.raises(LimitExceeded, match="runs no profiles"):
        ledger.admit("alice", now=0, action="profile")
    ledger.admit("alice", now=0, action="check")
    with pytest.raises(ValueError):
        StudentLimits(profiles_per_hour=-1)
