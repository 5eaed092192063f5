"""Recorded launches judged by the real GPU judge: directly (a fresh judge process, no network), and end to
end through an HTTP pool service to a notebook that sees no GPU (gemmlab's GEMMLAB_HIDE_GPU)."""
from __future__ import annotations

from typing import Iterator

import pytest
import torch

import gemmlab
from gemmlab.running import gpu as gpu_module
from gemmlab.results import BenchResult, CheckResult
from gemmlab.judge import JudgeLimits, JudgeReport, JudgeRequest
from gemmlab.judge.client import judge, judge_command, judge_environment, run_judge
from gemmlab.remote import connection
from gemmlab.remote.recording import record
from gemmlab.remote.requests import bench_request, check_requests

from .fake_pool import FakePool
from .launchers import TN_SOURCE, nn_launcher, tn_launcher

pytestmark = pytest.mark.gpu

SHAPES = [(128, 128, 64), (129, 257, 64), (16, 16, 16), (1000, 1001, 999)]
F16 = torch.float16
#: Skips the last partial 16-column strip of D: wrong (unwritten) wherever N % 16 != 0.
EDGE_BUG = TN_SOURCE.replace("if (m >= M || n >= N) return;", "if (m >= M || n >= N / 16 * 16) return;")


def _kernel(source: str, name: str) -> gemmlab.Kernel:
    return gemmlab.compile(source.replace("NAME", name), name, arch=gemmlab.current_arch())


def _check(fn) -> JudgeReport:
    recordings = [record(fn, s, "tn", F16, F16) for s in SHAPES]
    (request,) = check_requests(recordings, "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    return judge(JudgeRequest.from_json(request.to_json()), timeout_s=300)


def test_a_recorded_correct_launcher_passes_and_is_timed_on_the_real_judge() -> None:
    fn = tn_launcher(_kernel(TN_SOURCE, "gemm_rec"))
    report = _check(fn)
    assert report.verdict == "passed", report.error or report.check
    assert [r.shape for r in CheckResult.from_dict(report.check).rows] == SHAPES
    timed = judge(bench_request(record(fn, (1024, 1024, 1024), "tn", F16, F16), "tn", "float16", "float16", 1.0,
                                0.0, JudgeLimits()), timeout_s=300)
    assert timed.verdict == "passed", timed.error
    assert BenchResult.from_dict(timed.bench).ms > 0


def test_a_recorded_wrong_launcher_fails_where_its_kernel_is_wrong() -> None:
    report = _check(tn_launcher(_kernel(EDGE_BUG, "gemm_rec_edge")))
    assert report.verdict == "failed"
    rows = CheckResult.from_dict(report.check).rows
    assert [r.passed for r in rows] == [True, False, True, False]
    assert "never written" in rows[1].message and rows[1].bad_tiles


@pytest.fixture
def pool_on_this_gpu() -> Iterator[FakePool]:
    def on_gpu(request: JudgeRequest) -> JudgeReport:
        env = judge_environment()
        env.pop(gpu_module.HIDE_ENV, None)  # the judge uses the GPU the notebook below is hidden from
        return run_judge(judge_command(), request.to_json().encode(), 300, env=env)

    with FakePool(on_gpu) as pool:
        yield pool


def test_a_notebook_without_a_gpu_checks_and_times_through_the_pool(pool_on_this_gpu: FakePool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    arch = gemmlab.current_arch()
    right, wrong = _kernel(TN_SOURCE, "gemm_e2e"), _kernel(EDGE_BUG, "gemm_e2e_edge")
    nn = nn_launcher(arch)
    monkeypatch.setenv(gpu_module.HIDE_ENV, "1")
    gpu_module.refresh()
    connection.forget()
    try:
        gemmlab.connect(pool_on_this_gpu.url, "good")
        assert gemmlab.check_gemm(tn_launcher(right), shapes=SHAPES).passed
        assert not gemmlab.check_gemm(tn_launcher(wrong), shapes=SHAPES).passed
        assert gemmlab.check_gemm(nn, "nn", shapes=[(100, 70, 30), (257, 129, 64)], alpha=-1.5, beta=2.0).passed
        timed = gemmlab.bench_gemm(tn_launcher(right), shape=(1024, 1024, 1024), label="naive")
        assert "shared GPU pool" in timed.device and timed.label == "naive" and timed.tflops > 0
    finally:
        gemmlab.disconnect()
        monkeypatch.delenv(gpu_module.HIDE_ENV)
        gpu_module.refresh()


def test_a_notebook_without_a_gpu_checks_and_times_cute_dsl_kernels_through_the_pool(
        pool_on_this_gpu: FakePool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Notebook 05's DSL solution (option B, "nn", cp.async + ldmatrix + mma) and a naive DSL kernel: compiled on
    the client for the pool's GPU, recorded there (the DSL's exported host code on an emulated runtime) and
    replayed by the pool's judge."""
    import solution_cells
    from tests.dsl_kernels import simple_gemm

    ns = solution_cells.load_namespace("05_global_gemm", ["kernel:gemm05_vec", "kernel:gemm05_launch",
                                                          "kernel:gemm05_dsl"])
    naive = gemmlab.dsl.gemm_fn(simple_gemm.gemm, arch="sm_90a")
    monkeypatch.setenv(gpu_module.HIDE_ENV, "1")
    gpu_module.refresh()
    connection.forget()
    try:
        assert not gemmlab.has_gpu()
        gemmlab.connect(pool_on_this_gpu.url, "good")
        assert gemmlab.check_gemm(naive, shapes=SHAPES).passed
        for dtype in (torch.float16, torch.bfloat16):
            result = gemmlab.check_gemm(ns["gemm05_dsl"], "nn", dtype=dtype, shapes="odd")
            assert result.passed and "shared GPU pool" in result.device, result
        timed = gemmlab.bench_gemm(ns["gemm05_dsl"], shape=(4096, 4096, 4096), convention="nn", label="05 DSL")
        assert "shared GPU pool" in timed.device and 0.1 < timed.ratio < 1.5, timed
        print(f"05's DSL solution through the pool: {timed.ratio:.3f}x cuBLAS on {timed.device}")
    finally:
        gemmlab.disconnect()
        monkeypatch.delenv(gpu_module.HIDE_ENV)
        gpu_module.refresh()
