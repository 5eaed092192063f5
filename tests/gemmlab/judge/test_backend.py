"""The judge's one flow (compile, bind, check or time, report) on the fake backend, in this process."""
from __future__ import annotations

import json

import pytest

from gemmlab.results import SUITES, BenchResult, CheckResult
from gemmlab.judge import JudgeRequest
from gemmlab.judge.__main__ import answer
from gemmlab.judge.backend import GpuBackend, judge
from tests.support.fake_judge import FakeBackend
from gemmlab.running import faults

from .cases import naive_spec


def test_a_correct_kernel_passes_with_the_checks_own_result() -> None:
    report = judge(JudgeRequest(naive_spec(), shapes=[(129, 257, 64), (16, 16, 16)]), FakeBackend())
    assert report.verdict == "passed" and report.action == "check" and report.device == FakeBackend.DEVICE
    result = CheckResult.from_dict(report.check)
    assert result.passed and [r.shape for r in result.rows] == [(129, 257, 64), (16, 16, 16)]


def test_a_suite_name_checks_the_suites_shapes() -> None:
    report = judge(JudgeRequest(naive_spec(), shapes="odd"), FakeBackend())
    assert [tuple(r["shape"]) for r in report.check["rows"]] == SUITES["odd"]


def test_a_wrong_kernel_fails_with_its_heatmap_data() -> None:
    report = judge(JudgeRequest(naive_spec("gemm_wrong"), shapes=[(256, 384, 64)]), FakeBackend())
    assert report.verdict == "failed"
    row = CheckResult.from_dict(report.check).rows[0]
    assert row.bad_tiles == [(0, 2), (1, 2)] and "last column" in row.message


def test_bench_reports_the_timing_and_a_wrong_kernel_fails_its_verification() -> None:
    report = judge(JudgeRequest(naive_spec(), "bench", shape=(512, 512, 512)), FakeBackend())
    assert report.verdict == "passed"
    assert BenchResult.from_dict(report.bench).ratio == 0.5
    wrong = judge(JudgeRequest(naive_spec("gemm_wrong"), "bench"), FakeBackend())
    assert (wrong.verdict, wrong.error_type, wrong.bench) == ("failed", "BenchIntegrityError", None)


@pytest.mark.parametrize("name, verdict, error_type", [
    ("gemm_hang", "timeout", "KernelTimeoutError"),
    ("gemm_oob", "context_lost", "ContextLostError"),
])
def test_faults_are_reported_as_such(name: str, verdict: str, error_type: str) -> None:
    report = judge(JudgeRequest(naive_spec(name)), FakeBackend())
    assert (report.verdict, report.error_type, report.check) == (verdict, error_type, None)
    assert faults.lost_reason() is None  # the fake leaves this test process's GPU state alone


def test_a_kernel_the_judge_cannot_bind_is_refused_naming_the_parameter() -> None:
    spec = naive_spec(source=naive_spec().source.replace("int K", "int depth").replace("k < K", "k < depth"))
    report = judge(JudgeRequest(spec), FakeBackend())
    assert report.verdict == "refused" and "'depth'" in report.error and "lda" in report.error


def test_a_missing_kernel_is_a_compile_error() -> None:
    report = judge(JudgeRequest(naive_spec(name="gemm_other", source=naive_spec().source)), FakeBackend())
    assert (report.verdict, report.error_type) == ("error", "CompileError")
    assert "gemm_naive" in report.error  # the kernels that are there


def test_a_launch_expression_that_fails_for_a_size_is_an_error_for_that_request() -> None:
    spec = naive_spec(grid=("cdiv(N, T)", "M // (K - 64)"))
    report = judge(JudgeRequest(spec, shapes=[(128, 128, 64)]), FakeBackend())
    assert report.verdict == "refused" and "divides by zero" in report.error


def test_the_gpu_backend_without_a_gpu_says_it_needs_one(no_gpu: None) -> None:
    report = judge(JudgeRequest(naive_spec()), GpuBackend())
    assert (report.verdict, report.error_type) == ("error", "NoGPUError")


def test_answer_refuses_what_does_not_parse_and_judges_the_rest() -> None:
    refused = answer(b'{"spec": 1}', FakeBackend())
    assert refused.verdict == "refused" and "kernel spec" in refused.error
    assert answer(JudgeRequest(naive_spec()).to_json().encode(), FakeBackend()).verdict == "passed"


def test_an_unexpected_failure_in_the_judge_is_still_a_report(capsys: pytest.CaptureFixture) -> None:
    class Broken(FakeBackend):
        def check(self, request):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("bug in the judge")

    report = answer(JudgeRequest(naive_spec()).to_json().encode(), Broken())
    assert report.verdict == "error" and "ZeroDivisionError: bug in the judge" in report.error
    assert "Traceback" in capsys.readouterr().err
    json.loads(report.to_json())
