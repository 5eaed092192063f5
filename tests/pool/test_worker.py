"""One judgement on one GPU: only that GPU visible, its timing lock set, the sandbox around the judge where it works."""
from __future__ import annotations

from typing import Any

import pytest

from gemmlab.judge import JudgeReport
from gemmlab.judge.client import judge_command
from gemmlab.timing.timing_lock import ENV_PATH, lock_file_for
from pool import worker

from .helpers import request


def _captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_run_judge(command: list[str], payload: bytes, timeout_s: float, env: Any = None,
                       memory_limit_mb: Any = None) -> JudgeReport:
        seen.update(command=command, payload=payload, env=env, timeout_s=timeout_s)
        return JudgeReport("passed")

    monkeypatch.setattr(worker, "run_judge", fake_run_judge)
    return seen


def test_without_the_sandbox_the_judge_sees_its_gpu_its_timing_lock_and_no_secrets(monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "cluster-secret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    seen = _captured(monkeypatch)
    worker.judge_on_gpu(request(), "2", 30, sandbox=False)
    env = seen["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env[ENV_PATH] == lock_file_for("2")
    assert "RAY_AUTH_TOKEN" not in env
    assert seen["command"] == judge_command()          # the GPU judge unless a caller names another program


def test_another_judge_program_is_run_as_given_and_the_gpu_judge_gets_no_address_space_limit(monkeypatch) -> None:
    seen = _captured(monkeypatch)
    worker.judge_on_gpu(request(), "0", 30, sandbox=False, memory_limit_mb=512, command=["judge", "--x"])
    assert seen["command"] == ["judge", "--x"]
    with pytest.raises(ValueError, match="without an address-space limit"):
        worker.judge_on_gpu(request(), "0", 30, sandbox=False, memory_limit_mb=512)


@pytest.mark.skipif(bool(worker.sandbox_problem()), reason="bubblewrap cannot build the sandbox here")
def test_in_the_sandbox_the_judge_has_no_network_one_gpu_and_its_timing_lock(monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "cluster-secret")
    seen = _captured(monkeypatch)
    worker.judge_on_gpu(request(), "1", 30, sandbox=True)
    command = seen["command"]
    assert command[0].endswith("bwrap") and "--unshare-net" in command and "--clearenv" in command
    settings = {command[i + 1]: command[i + 2] for i, arg in enumerate(command) if arg == "--setenv"}
    assert settings["CUDA_VISIBLE_DEVICES"] == "1" and settings[ENV_PATH] == lock_file_for("1")
    assert "RAY_AUTH_TOKEN" not in settings and "cluster-secret" not in " ".join(command)
    judge = judge_command()
    assert command[-len(judge):] == judge and "--" in command[:-len(judge)]
