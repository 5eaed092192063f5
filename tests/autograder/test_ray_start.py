"""A local Ray cluster that misses Ray's fixed 30 s raylet registration on a loaded host is started again,
not the class's grading lost; any other failure is the run's at once."""
from __future__ import annotations

import pytest

from autograder.schedule import RAY_START_ATTEMPTS, start_ray

TIMED_OUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                      "failed to startup or the GCS has become overloaded.")


def _init_failing(times: int, error: Exception = TIMED_OUT):
    calls = {"init": 0, "shutdown": 0}

    def init() -> None:
        calls["init"] += 1
        if calls["init"] <= times:
            raise error

    def shutdown() -> None:
        calls["shutdown"] += 1

    return init, shutdown, calls


def test_a_slow_start_is_tried_again_after_a_shutdown() -> None:
    init, shutdown, calls = _init_failing(RAY_START_ATTEMPTS - 1)
    start_ray(init, shutdown)
    assert calls == {"init": RAY_START_ATTEMPTS, "shutdown": RAY_START_ATTEMPTS - 1}


def test_a_start_that_never_comes_is_the_runs_failure() -> None:
    init, shutdown, calls = _init_failing(RAY_START_ATTEMPTS)
    with pytest.raises(Exception, match="timed out during startup"):
        start_ray(init, shutdown)
    assert calls["init"] == RAY_START_ATTEMPTS


def test_another_failure_is_not_retried() -> None:
    init, shutdown, calls = _init_failing(1, ValueError("bad address"))
    with pytest.raises(ValueError, match="bad address"):
        start_ray(init, shutdown)
    assert calls == {"init": 1, "shutdown": 0}
