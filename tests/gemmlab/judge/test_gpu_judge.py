"""The kernel judge on a GPU, through ``client.judge``: a fresh process per request, as the grader runs it.

No test here plants a "late-work" launcher (one that returns before its kernel finishes, or
leaves work on another stream): in the judge the launcher is :class:`~gemmlab.judge.launcher.
TrustedLauncher`, built from the spec by the judge, so a request has no way to express one. The
late-work and library-GEMM checks of ``check_gemm``/``bench_gemm`` still run inside the judge.
"""
from __future__ import annotations

import pytest

from gemmlab.results import BenchResult, CheckResult
from gemmlab.judge import JudgeLimits, JudgeRequest, KernelSpec
from gemmlab.judge.client import judge

from .cases import BLOCK, GRID, naive_spec, planted_spec

pytestmark = pytest.mark.gpu

SHAPES = [(128, 128, 64), (129, 257, 64), (16, 16, 16), (1000, 1001, 999)]

#: A GEMM-shaped kernel that stores through a wild pointer (as tests/kernels/planted_illegal.cu does).
WILD = """#include <cuda_fp16.h>
extern "C" __global__ void gemm_wild(const half* A, const half* B, half* D, int M, int N, int K)
{
  reinterpret_cast<half*>(1ULL << 48)[threadIdx.x] = A[0];  // BUG: no allocation lives there
}
"""

#: A GEMM-shaped kernel that never finishes in time (as tests/kernels/planted_hang.cu, giving up after 20 s).
HANG = """#include <cuda_fp16.h>
extern "C" __global__ void gemm_hang(const half* A, const half* B, half* D, int M, int N, int K)
{
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < 20000000000ull);
}
"""


def spec_of(source: str, name: str) -> KernelSpec:
    return KernelSpec(source, name, "tn", GRID, BLOCK, constants={"T": 16})


@pytest.mark.timing
def test_a_correct_kernel_is_checked_and_timed() -> None:
    check = judge(JudgeRequest(naive_spec(), shapes=SHAPES), timeout_s=300)
    assert check.verdict == "passed", check.error or check.check
    result = CheckResult.from_dict(check.check)
    assert result.passed and [r.shape for r in result.rows] == SHAPES and check.device
    bench = judge(JudgeRequest(naive_spec(), "bench", shape=(1024, 1024, 1024)), timeout_s=300)
    assert bench.verdict == "passed", bench.error
    timed = BenchResult.from_dict(bench.bench)
    assert timed.ms > 0 and 0 < timed.ratio < 2 and timed.cublas_ms > 0


def test_a_wrong_kernel_fails_with_its_heatmap_data() -> None:
    report = judge(JudgeRequest(planted_spec("planted_edge.cu", "gemm_edge"), shapes=[(129, 257, 64)]), timeout_s=300)
    assert report.verdict == "failed"
    row = CheckResult.from_dict(report.check).rows[0]
    assert not row.passed and row.tile_fraction is not None and row.bad_tiles
    assert "edge" in row.message


def test_a_guard_zone_write_fails_the_check() -> None:
    report = judge(JudgeRequest(planted_spec("planted_oob.cu", "gemm_oob"), shapes=[(129, 257, 64)]), timeout_s=300)
    assert report.verdict == "failed" and "outside the output" in report.check["rows"][0]["message"]


def test_an_illegal_address_reports_a_lost_context() -> None:
    report = judge(JudgeRequest(spec_of(WILD, "gemm_wild"), shapes=[(128, 128, 64)]), timeout_s=300)
    assert report.verdict == "context_lost", report
    assert report.error_type == "ContextLostError" and "illegal" in report.error


def test_a_hanging_kernel_reports_a_timeout() -> None:
    request = JudgeRequest(spec_of(HANG, "gemm_hang"), shapes=[(128, 128, 64)], limits=JudgeLimits(120, 2))
    report = judge(request, timeout_s=300)
    assert report.verdict == "timeout", report
    assert report.error_type == "KernelTimeoutError"


def test_a_compile_error_is_reported_with_the_diagnostics() -> None:
    broken = naive_spec(source=naive_spec().source.replace("acc +=", "acc +== "))
    report = judge(JudgeRequest(broken), timeout_s=300)
    assert (report.verdict, report.error_type) == ("error", "CompileError")
