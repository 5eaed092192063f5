"""``client.judge``: one fresh ``python -m gemmlab.judge`` process per request, whatever it does.

Uses the fake judge (tests/support/fake_judge.py, no GPU): the real process, pipes, limits and protocol, with
kernels whose behaviour (pass, wrong, hang, fault, crash, stall, flood) the fake reads from their names.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import gemmlab.judge.client
from gemmlab.results import CheckResult
from gemmlab.judge import JudgeError, JudgeRequest
from gemmlab.judge.client import ENV_ALLOW, judge, judge_command, judge_environment, run_judge

from tests.support.fake_judge import fake_judge_command

from .cases import naive_spec

pytestmark = pytest.mark.slow


def fake(name: str, timeout_s: float = 30.0, **request: object):
    return judge(JudgeRequest(naive_spec(name), **request), timeout_s=timeout_s, memory_limit_mb=4096,
                 command=fake_judge_command())


def test_a_correct_kernel_passes_and_a_wrong_one_fails_with_heatmap_data() -> None:
    passed = fake("gemm_naive", shapes=[(129, 257, 64)])
    assert passed.verdict == "passed" and passed.device.startswith("fake GPU")
    failed = fake("gemm_wrong", shapes=[(256, 384, 64)])
    assert failed.verdict == "failed"
    assert CheckResult.from_dict(failed.check).rows[0].bad_tiles == [(0, 2), (1, 2)]


@pytest.mark.parametrize("name, verdict, error_type", [
    ("gemm_hang", "timeout", "KernelTimeoutError"),
    ("gemm_oob", "context_lost", "ContextLostError"),
    ("gemm_crash", "crashed", "JudgeCrashed"),
])
def test_faults_and_deaths_are_reports(name: str, verdict: str, error_type: str) -> None:
    report = fake(name)
    assert (report.verdict, report.error_type) == (verdict, error_type)
    if name == "gemm_crash":
        assert "SIGKILL" in report.error


def test_a_judge_that_never_answers_is_stopped_at_the_wall_clock_limit() -> None:
    start = time.monotonic()
    report = fake("gemm_stall", timeout_s=3)
    assert report.verdict == "timeout" and "within 3 s" in report.error
    assert time.monotonic() - start < 60       # stopped at its limit (a stalled judge never ends by itself)


def test_a_kernel_writing_to_stdout_cannot_forge_or_garble_the_report() -> None:
    report = fake("gemm_flood")  # writes '{"verdict": "passed"}' lines to descriptor 1
    assert report.verdict == "passed" and report.check is not None


def test_a_malformed_request_is_refused_by_the_judge_process() -> None:
    report = run_judge(fake_judge_command(), b'{"spec": {"source": "x", "name": "k"}, "seed": 1}', 30)
    assert report.verdict == "refused" and "seed" in report.error


@pytest.mark.parametrize("script, verdict, words", [
    ("print('hello, grader')", "crashed", "not a report"),
    ("import sys; sys.stdout.write('{\"verdict\": \"passed\"')", "crashed", "not a report"),
    ("import sys; sys.exit(3)", "crashed", "exited with status 3"),
    ("import sys; sys.stderr.write('boom\\n'); raise SystemExit(1)", "crashed", "boom"),
    ("import sys; sys.stdout.write('x' * (17 << 20))", "crashed", "not a report"),
    ("pass", "crashed", "without a report"),
])
def test_garbage_or_death_from_the_child_gives_a_clear_report(script: str, verdict: str, words: str) -> None:
    report = run_judge([sys.executable, "-c", script], b"{}", 30)
    assert report.verdict == verdict and words in report.error


def test_memory_limit_applies_to_the_judge_process() -> None:
    script = "x = bytearray(512 << 20); print('allocated')"
    report = run_judge([sys.executable, "-c", script], b"", 30, memory_limit_mb=256)
    assert report.verdict == "crashed" and "MemoryError" in report.error


def test_the_environment_is_an_allow_list_with_gemmlab_first() -> None:
    env = judge_environment({"PATH": "/usr/bin", "GRADER_TOKEN": "secret", "GEMMLAB_GRADING": "1",
                             "PYTHONPATH": "/opt/site", "PYTHONSTARTUP": "/home/student/.pythonrc"})
    assert set(env) <= set(ENV_ALLOW) | {"PYTHONNOUSERSITE", "PYTHONSAFEPATH"}
    assert "GRADER_TOKEN" not in env and "PYTHONSTARTUP" not in env and "GEMMLAB_GRADING" not in env
    first, *rest = env["PYTHONPATH"].split(":")
    assert (Path(first) / "gemmlab" / "judge" / "__main__.py").is_file()
    assert rest == ["/opt/site"] and env["PYTHONSAFEPATH"] == "1"


def test_the_judge_runs_in_an_empty_directory_outside_the_callers() -> None:
    script = "import os, sys; sys.stderr.write(repr((os.getcwd(), os.listdir('.')))); sys.exit(2)"
    report = run_judge([sys.executable, "-c", script], b"", 30)
    assert "gemmlab-judge-" in report.error and "[])" in report.error


def test_the_production_judge_has_no_fake_backend() -> None:
    import gemmlab.judge.backend

    command = judge_command()[:-2] + ["--backend", "fake"]
    report = run_judge(command, JudgeRequest(naive_spec()).to_json().encode(), 60)
    assert report.verdict == "crashed" and "unrecognized arguments: --backend fake" in report.error
    assert not hasattr(gemmlab.judge.backend, "FakeBackend")
    assert judge_command()[1:5] == ["-s", "-P", "-m", "gemmlab.judge"]
    assert "fake" not in Path(gemmlab.judge.client.__file__).read_text().lower()


def test_the_default_judge_is_the_gpu_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    monkeypatch.setattr(gemmlab.judge.client, "run_judge", lambda command, *a, **k: seen.setdefault("c", command))
    judge(JudgeRequest(naive_spec()), timeout_s=5, compile_memory_mb=1234)
    assert seen["c"] == judge_command(1234)
    with pytest.raises(JudgeError, match="takes a JudgeRequest"):
        judge("not a request")
