"""gemmlab.connect: check_gemm and bench_gemm through a pool service (a local fake with the tests' fake judge).

The function under test is a notebook-style launcher around a real compiled kernel; the fake
judge reads the kernel's behaviour from its name (``*_wrong``: wrong in the last column of tiles).
"""
from __future__ import annotations

from typing import Iterator

import pytest

import gemmlab
from gemmlab.timing.bench import BenchIntegrityError
from gemmlab.results import BenchResult, CheckResult
from gemmlab.judge import JudgeReport
from gemmlab.remote import (
    PoolAuthError, PoolBusyError, PoolKernelError, PoolRequestError, PoolUnavailableError, connection,
)

from .fake_pool import GPU, FakePool
from .launchers import nn_launcher, tn_kernel, tn_launcher

pytestmark = pytest.mark.usefixtures("fresh_connection")

SHAPES = [(128, 128, 64), (129, 257, 64), (16, 16, 16)]


@pytest.fixture
def pool() -> Iterator[FakePool]:
    with FakePool() as fake:
        yield fake


def test_a_check_runs_on_the_pool_and_returns_a_check_result_naming_its_gpu(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    result = gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=SHAPES + [(16, 16, 16)])
    assert isinstance(result, CheckResult) and result.passed
    assert [r.shape for r in result.rows] == SHAPES + [(16, 16, 16)]
    assert result.device == f"{GPU} (shared GPU pool)" and f"PASSED on {GPU}" in str(result)
    (request,) = pool.requests  # one kernel: one request, each distinct shape once
    assert list(request.shapes) == SHAPES and request.spec.launches[1].args == ("A", "B", "out", 129, 257, 64)


def test_a_wrong_kernel_fails_with_the_heatmap_of_its_tiles(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    result = gemmlab.check_gemm(tn_launcher(tn_kernel("gemm_tiny_wrong")), shapes=[(256, 384, 64)], tile=(128, 128))
    assert not result.passed and result.rows[0].bad_tiles == [(0, 2), (1, 2)]
    assert result.heatmap() is not None


def test_nn_checks_send_alpha_beta_and_tile_and_the_launch_uses_them(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    result = gemmlab.check_gemm(nn_launcher(), "nn", shapes=[(100, 70, 30)], alpha=-1.5, beta=2.0, tile=(64, 64))
    assert result.passed and result.tile == (64, 64)
    (request,) = pool.requests
    assert (request.alpha, request.beta, request.tile) == (-1.5, 2.0, (64, 64))
    assert request.spec.launches[0].args[-2:] == (-1.5, 2.0)


def test_a_shape_the_function_refuses_is_a_failed_row_as_on_a_local_gpu(pool: FakePool) -> None:
    inner = tn_launcher(tn_kernel())

    def whole_tiles_only(A, B, D):
        if A.shape[0] % 16:
            raise gemmlab.LaunchError("handles only whole 16-row tiles")
        inner(A, B, D)

    gemmlab.connect(pool.url, "good")
    result = gemmlab.check_gemm(whole_tiles_only, shapes=[(16, 16, 16), (3, 5, 7)])
    assert [r.passed for r in result.rows] == [True, False] and "whole 16-row tiles" in result.rows[1].message
    assert list(pool.requests[0].shapes) == [(16, 16, 16)]


def test_a_timing_runs_on_the_pool_and_keeps_the_label(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    result = gemmlab.bench_gemm(tn_launcher(tn_kernel()), shape=(1024, 1024, 512), label="mine")
    assert isinstance(result, BenchResult) and result.label == "mine" and result.shape == (1024, 1024, 512)
    assert f"on {GPU} (shared GPU pool)" in str(result)
    assert pool.requests[0].action == "bench" and pool.requests[0].spec.launches[0].shape == (1024, 1024, 512)


def test_a_wrong_kernel_fails_the_timings_verification(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    with pytest.raises(BenchIntegrityError, match="shared GPU pool"):
        gemmlab.bench_gemm(tn_launcher(tn_kernel("gemm_tiny_wrong")), shape=(256, 256, 256))


def test_timing_knobs_the_pool_does_not_use_are_refused(pool: FakePool) -> None:
    gemmlab.connect(pool.url, "good")
    with pytest.raises(PoolRequestError, match="rounds="):
        gemmlab.bench_gemm(tn_launcher(tn_kernel()), shape=(256, 256, 256), rounds=3)
    with pytest.raises(PoolRequestError, match="own seed"):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)], seed=1)


@pytest.mark.parametrize("name, error, message", [
    ("gemm_tiny_oob", PoolKernelError, "needs no restart"),
    ("gemm_tiny_hang", gemmlab.KernelTimeoutError, "did not finish"),
])
def test_faults_on_the_pool_are_errors_that_say_where(pool: FakePool, name: str, error: type, message: str) -> None:
    gemmlab.connect(pool.url, "good")
    with pytest.raises(error, match=message) as caught:
        gemmlab.check_gemm(tn_launcher(tn_kernel(name)), shapes=[(16, 16, 16)])
    assert "shared GPU pool" in str(caught.value)
    assert not isinstance(caught.value, gemmlab.ContextLostError)  # this notebook's CUDA context is not lost


@pytest.mark.parametrize("token, error, message", [
    ("expired", PoolAuthError, "refused your token .*token expired on 2024-01-31.*instructor"),
    ("nobody", PoolAuthError, "unknown token"),
    ("busy", PoolBusyError, "retry in 17 s.*2 jobs already running"),
    ("broken", PoolUnavailableError, "failed \\(HTTP 500\\)"),
    ("garbled", PoolUnavailableError, "not JSON"),
])
def test_service_errors_are_gemmlab_errors_that_say_what_to_do(pool: FakePool, token: str, error: type,
                                                               message: str) -> None:
    gemmlab.connect(pool.url, token, verify=False)
    with pytest.raises(error, match=message) as caught:
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    if token == "busy":
        assert caught.value.retry_after_s == 17


def test_connect_checks_the_token_at_once(pool: FakePool) -> None:
    with pytest.raises(PoolAuthError, match="expired"):
        gemmlab.connect(pool.url, "expired")
    assert connection.current() is None
    assert gemmlab.connect(pool.url, "good").account()["student"] == "ada"


def test_a_request_the_pool_refuses_is_a_clear_error(pool: FakePool) -> None:
    pool.judge_with = lambda request: JudgeReport("refused", request.action, error="too many shapes")
    gemmlab.connect(pool.url, "good")
    with pytest.raises(PoolRequestError, match="refused this call: too many shapes"):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])


def test_an_unreachable_or_slow_pool_is_a_clear_error(pool: FakePool) -> None:
    url = pool.url
    pool.__exit__()
    gemmlab.connect(url, "good", verify=False)
    with pytest.raises(PoolUnavailableError, match="cannot reach the pool"):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    with FakePool() as slow:
        gemmlab.connect(slow.url, "slow", timeout_s=1, verify=False)
        with pytest.raises(PoolUnavailableError, match="did not answer within 1 s"):
            gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
        # the slow pool answers after 3 s: an error (not its answer) proves the client stopped waiting at 1 s


@pytest.mark.parametrize("url, token, message", [
    ("gpu.example.edu", "t", "starts with https://"),
    ("https://gpu.example.edu", "two words", "spaces"),
    ("https://gpu.example.edu", "", "no pool token"),
])
def test_a_bad_url_or_token_is_refused_before_anything_is_sent(url: str, token: str, message: str) -> None:
    with pytest.raises(gemmlab.GemmlabError, match=message):
        gemmlab.connect(url, token, verify=False)


def test_the_environment_connects_and_disconnect_turns_it_off(pool: FakePool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(connection.URL_ENV, pool.url)
    with pytest.raises(PoolAuthError, match=connection.TOKEN_ENV):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    monkeypatch.setenv(connection.TOKEN_ENV, "good")
    assert gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)]).passed
    gemmlab.disconnect()
    with pytest.raises(gemmlab.NoGPUError):  # as today without a GPU
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    with pytest.raises(gemmlab.NoGPUError):
        gemmlab.bench_gemm(tn_launcher(tn_kernel()), shape=(16, 16, 16))


def test_in_a_hub_server_the_hub_token_is_the_pool_token(pool: FakePool, monkeypatch: pytest.MonkeyPatch) -> None:
    """classroom/ sets GEMMLAB_POOL for every student; their server's JUPYTERHUB_API_TOKEN goes with it."""
    monkeypatch.setenv(connection.URL_ENV, pool.url)
    monkeypatch.setenv(connection.HUB_TOKEN_ENV, "good")
    assert gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)]).passed
    assert len(pool.requests) == 1   # the fake pool judges only the token "good"
    monkeypatch.setenv(connection.TOKEN_ENV, "mine")   # a pool token set by hand wins over the Hub's
    with pytest.raises(PoolAuthError):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])


def test_without_a_connection_nothing_is_sent(pool: FakePool) -> None:
    with pytest.raises(gemmlab.NoGPUError):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    assert gemmlab.check_gemm(lambda A, B, D: D.copy_(A @ B.T), shapes=[(16, 16, 16)], device="cpu").passed
    assert pool.requests == []


def test_a_local_gpu_is_used_even_when_connected(pool: FakePool, monkeypatch: pytest.MonkeyPatch) -> None:
    gemmlab.connect(pool.url, "good")
    monkeypatch.setattr(connection, "has_gpu", lambda: True)
    assert connection.pool_for_work() is None and connection.current() is not None


def test_the_grader_never_sends_work_to_a_pool(pool: FakePool, monkeypatch: pytest.MonkeyPatch) -> None:
    gemmlab.connect(pool.url, "good")
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    with pytest.raises(gemmlab.NoGPUError):
        gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
    assert pool.requests == []


@pytest.mark.parametrize("nested", [True, False])
def test_both_reply_layouts_give_the_report_and_the_pools_fields(nested: bool) -> None:
    with FakePool(nested=nested) as fake:
        pool = gemmlab.connect(fake.url, "good")
        result = gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(16, 16, 16)])
        reply = pool.judge(fake.requests[0])
    assert result.passed and (reply.gpu, reply.wait_s, reply.run_s) == ("host-1 gpu 0", 0.25, 1.5)


def test_a_notebook_test_whose_gpu_work_is_checks_and_timings_runs_on_the_pool(
        pool: FakePool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A notebook test marked ``pool=True`` (its GPU work is all check_gemm and bench_gemm: 04's tile tests, 05's and
    08's nn checks with padded rows and beta = 0, 09's correctness) runs on the pool once connected; without a
    connection, or for a test that launches kernels itself, its points are counted as not checked."""
    from gemmlab.notebook import nbhelpers as nbh

    nbh.start_fresh_tally()
    assert not nbh.gpu_graded(2, "rung 1's correctness test", pool=True)          # not connected
    assert nbh.unchecked_points() == {"rung 1's correctness test": 2}
    gemmlab.connect(pool.url, "good")
    assert nbh.gpu_graded(2, "rung 1's correctness test", pool=True) and nbh.unchecked_points() == {}
    assert "runs on the class's GPU pool" in capsys.readouterr().out
    assert not nbh.gpu_graded(1, "the copy kernel's test") and nbh.unchecked_points() == {"the copy kernel's test": 1}
    assert nbh.gpu_or_compile_only("your capstone_gemm", pool=True) and not nbh.gpu_or_compile_only("a copy")

    nbh.check_padded(nn_launcher(), "rung 1", 100, 70, 30, 3)
    nbh.check_beta_zero(nn_launcher(), "rung 1", 100, 70, 30)
    padded, zero = pool.requests[-2:]
    assert padded.pad == 3 and padded.spec.launches[0].args[6:9] == (33, 73, 73)       # lda = K + 3, ldb = ldc = N + 3
    assert (zero.beta, zero.pad, zero.spec.launches[0].args[6:9]) == (0.0, None, (30, 70, 70))
    bar = gemmlab.performance_bar(tn_launcher(tn_kernel()), 0.1, shape=(1024, 1024, 512))
    assert pool.requests[-1].action == "bench" and bar.bench.device == f"{GPU} (shared GPU pool)"


def test_a_launcher_that_refuses_a_shape_is_told_apart_on_the_pool(pool: FakePool) -> None:
    """08's partial-tile check on the pool: the refusal happens while the launch is recorded, nothing is sent."""
    from gemmlab.notebook import nbhelpers as nbh

    gemmlab.connect(pool.url, "good")
    launch = nn_launcher()

    def whole_tiles(A, B, C, alpha, beta):
        if A.shape[0] % 32:
            raise gemmlab.LaunchError("whole 32-row tiles only")
        launch(A, B, C, alpha, beta)

    nbh.require_refused(whole_tiles, "rung 3", (100, 72, 40), "partial tiles")
    assert pool.requests == []
    with pytest.raises(nbh.CheckFailed, match="accepted 100 x 72 x 40"):
        nbh.require_refused(launch, "rung 3", (100, 72, 40), "partial tiles")
    assert len(pool.requests) == 1
