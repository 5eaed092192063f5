"""The pool on Ray: one actor per GPU behind the same service (one slow test starts a local Ray with a fake GPU)."""
from __future__ import annotations

import os

import pytest

from gemmlab.judge import JudgeReport
from pool.errors import PoolError
from pool.ray_pool import AUTH_MODE_ENV, require_ray_auth
from tests.support.fake_judge import fake_judge_command

from .helpers import Klass, call, request


def test_joining_a_cluster_without_ray_token_authentication_is_refused(monkeypatch) -> None:
    monkeypatch.delenv(AUTH_MODE_ENV, raising=False)
    with pytest.raises(PoolError, match="token authentication is off"):
        require_ray_auth(starting_local=False)
    monkeypatch.setenv(AUTH_MODE_ENV, "disabled")
    with pytest.raises(PoolError, match="RAY_AUTH_MODE=disabled"):
        require_ray_auth(starting_local=True)
    monkeypatch.delenv(AUTH_MODE_ENV)
    require_ray_auth(starting_local=True)
    assert os.environ[AUTH_MODE_ENV] == "token"


@pytest.mark.slow
def test_checks_and_timings_run_on_ray_gpu_actors(start, klass: Klass, monkeypatch) -> None:
    pytest.importorskip("ray", reason="pip install -e '.[grade]'")
    from pool.ray_pool import RayExecutor
    from pool.worker import sandbox_problem

    monkeypatch.delenv(AUTH_MODE_ENV, raising=False)
    executor = RayExecutor(None, not sandbox_problem(), 4096, slots_per_gpu=2,
                           init_kwargs={"num_cpus": 2, "num_gpus": 1}, command=fake_judge_command())
    assert os.environ[AUTH_MODE_ENV] == "token"
    service = start(executor, slots=2)
    for action, verdict in (("check", "passed"), ("bench", "passed")):
        status, body, _ = call(service.url, "/v1/judge", request(action=action).to_json(), klass.tokens["alice"])
        assert status == 200, body
        assert JudgeReport.from_dict(body["report"]).verdict == verdict and body["gpu"].endswith("gpu 0")
    status, body, _ = call(service.url, "/v1/judge", request("gemm_crash").to_json(), klass.tokens["bob"])
    assert status == 200 and body["report"]["verdict"] == "crashed"
    assert call(service.url, "/v1/judge", request().to_json(), klass.tokens["bob"])[0] == 200
