"""gemmlab.dsl on a real GPU: DSL GEMMs through check_gemm and bench_gemm, planted bugs caught.

Run on the GPU machine with ``pytest -m gpu tests/test_gpu_dsl.py -s`` (``-s`` shows the
benchmark lines). Every test skips cleanly without a GPU (tests/conftest.py).
"""
from __future__ import annotations

import time

import pytest
import torch

import gemmlab
import gemmlab.dsl as dsl
from gemmlab.dsl import core
from gemmlab.errors import LaunchError
from tests.dsl_kernels import planted_gemm, simple_gemm, streamless_gemm
from tests.support.dsl_cache import refuse_dsl_compiles

pytestmark = pytest.mark.gpu



def test_simple_gemm_matches_torch_at_odd_sizes() -> None:
    M, N, K = 1000, 1001, 999
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(N, K, device="cuda", dtype=torch.float16)
    D = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    gemm = dsl.gemm_fn(simple_gemm.gemm)
    gemm(A, B, D)
    torch.cuda.synchronize()
    ref = A.float() @ B.float().T
    rel = ((D.float() - ref).norm() / ref.norm()).item()
    assert rel < 2e-3, rel
    assert gemm.compiled_arch == gemmlab.current_arch()
    assert gemm.resources.registers > 0


def test_simple_gemm_passes_check_gemm_with_one_compile_per_signature() -> None:
    gemm = dsl.gemm_fn(simple_gemm.gemm)
    compiles = []
    original = core.get_variant

    def counting(*args, **kwargs):
        variant, cached = original(*args, **kwargs)
        if not cached:
            compiles.append(args[3])  # the signature of a compile
        return variant, cached

    core.get_variant = counting
    try:
        dsl.clear_cache()
        result = gemmlab.check_gemm(gemm)
    finally:
        core.get_variant = original
    print(result)
    result.raise_if_failed()
    shapes = len(result.rows)
    # One compile per distinct (alignment) signature, never one per shape.
    assert 1 <= len(compiles) <= 5 < shapes, (len(compiles), shapes)
    assert len(set(compiles)) == len(compiles)


@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)])
def test_simple_gemm_other_dtypes(dtype: torch.dtype, out_dtype: torch.dtype) -> None:
    result = gemmlab.check_gemm(dsl.gemm_fn(simple_gemm.gemm), dtype=dtype, out_dtype=out_dtype, shapes="odd")
    print(result)
    result.raise_if_failed()


def test_simple_gemm_bench_prints_ratio_to_cublas() -> None:
    gemm = dsl.gemm_fn(simple_gemm.gemm)
    r = gemmlab.bench_gemm(gemm, shape=(2048, 2048, 2048), label="DSL simple SIMT GEMM")
    print(f"\nDSL simple GEMM 2048^3: {r.tflops:.1f} TFLOPS, cuBLAS {r.cublas_tflops:.1f}, ratio {r.ratio:.3f}")
    assert r.tflops > 0 and 0 < r.ratio < 1.5


def test_planted_out_of_bounds_store_is_caught() -> None:
    result = gemmlab.check_gemm(dsl.gemm_fn(planted_gemm.gemm_oob))
    print(result)
    assert not result.passed
    assert any(not row.guard_ok for row in result.rows)
    assert any("guard zone after D" in row.message for row in result.rows)


def test_planted_unwritten_column_is_caught() -> None:
    result = gemmlab.check_gemm(dsl.gemm_fn(planted_gemm.gemm_unwritten))
    print(result)
    assert not result.passed
    assert all(not row.passed for row in result.rows)  # every shape has a last column
    assert any(row.n_unwritten > 0 and "never written" in row.message for row in result.rows)


def test_planted_edge_only_bug_is_caught_only_on_edge_tiles() -> None:
    result = gemmlab.check_gemm(dsl.gemm_fn(planted_gemm.gemm_edge))
    print(result)
    assert not result.passed
    for row in result.rows:
        M, N, K = row.shape
        if K % 8 == 0:
            assert row.passed, row  # nothing dropped when K is a multiple of 8
    failing = [row for row in result.rows if not row.passed]
    assert failing and all(row.n_unwritten == 0 for row in failing)
    # The wrong elements sit in the last row/column of 16x16 CTA tiles only.
    M, N, K = failing[0].shape
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(N, K, device="cuda", dtype=torch.float16)
    D = torch.empty(M, N, device="cuda", dtype=torch.float16)
    dsl.gemm_fn(planted_gemm.gemm_edge)(A, B, D)
    torch.cuda.synchronize()
    ref = (A.float() @ B.float().T).half()
    bad = (D.float() - ref.float()).abs() > 1e-2 * (1 + ref.float().abs())
    rows, cols = bad.nonzero(as_tuple=True)
    last_m, last_n = (M - 1) // 16 * 16, (N - 1) // 16 * 16
    assert bad.any() and bool(((rows >= last_m) | (cols >= last_n)).all())


def test_call_validation_on_gpu() -> None:
    gemm = dsl.gemm_fn(simple_gemm.gemm)
    A = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(LaunchError, match="CPU tensor"):
        gemm(A.cpu(), A, A)
    with pytest.raises(LaunchError, match="not contiguous"):
        gemm(A[:, ::2], A[:, :32], torch.empty(64, 64, device="cuda", dtype=torch.float16))
    with pytest.raises(LaunchError, match="takes 3 argument"):
        gemm(A, A)
    strict = dsl.gemm_fn(simple_gemm.gemm, dtypes={"mA": torch.float16, "mB": torch.float16})
    with pytest.raises(LaunchError, match=r"use mB.half\(\)"):
        strict(A, A.float(), A)


def test_launch_over_the_shared_memory_limit_raises_and_leaves_output_alone() -> None:
    # The DSL's host code only prints a complaint and skips such a launch; gemmlab must raise instead.
    import solution_cells

    ns = solution_cells.load_namespace("06_pipelining", ["kernel:gemm06_dsl"])
    ns["configure_dsl"](STAGES=5, BM=128, BN=256, BK=64)          # 5 x 48 KB ring: over 227 KB
    A = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    B = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    D = torch.full((256, 256), 7.0, device="cuda", dtype=torch.float16)
    with pytest.raises(LaunchError, match="did not run.*shared memory"):
        ns["gemm06_dsl"](A, B, D)
    torch.cuda.synchronize()
    assert bool((D == 7.0).all())
    ns["configure_dsl"](STAGES=3)
    ns["gemm06_dsl"](A, B, D)                                          # the fitting config runs
    torch.cuda.synchronize()
    assert torch.allclose(D.float(), A.float() @ B.float().T, rtol=2e-2, atol=2e-1)


def test_rerun_is_cached_and_sass_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    A = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    B = torch.randn(192, 128, device="cuda", dtype=torch.float16)
    D = torch.empty(256, 192, device="cuda", dtype=torch.float16)
    dsl.compile(simple_gemm.gemm, A, B, D)
    refuse_dsl_compiles(monkeypatch)
    k = dsl.compile(simple_gemm.gemm, A, B, D)
    assert k.cached
    start = time.perf_counter()
    for _ in range(10):
        k(A, B, D)
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - start) / 10
    print(f"\nDslKernel call overhead incl. kernel (256x192x128): {per_call * 1e6:.0f} us")
    from gemmlab.compiling.sass import disassembler

    if disassembler() is not None:
        assert "FFMA" in k.sass() or "HFMA" in k.sass() or "FMUL" in k.sass()


# ----------------------------------------------------------------- the tensor-core DSL GEMM


def test_tensorop_gemm_passes_check_gemm() -> None:
    from tests.dsl_kernels import tensorop_gemm

    result = gemmlab.check_gemm(dsl.gemm_fn(tensorop_gemm.gemm))
    print(result)
    result.raise_if_failed()


@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)])
def test_tensorop_gemm_other_dtypes(dtype: torch.dtype, out_dtype: torch.dtype) -> None:
    from tests.dsl_kernels import tensorop_gemm

    result = gemmlab.check_gemm(dsl.gemm_fn(tensorop_gemm.gemm), dtype=dtype, out_dtype=out_dtype)
    print(result)
    result.raise_if_failed()


@pytest.mark.timing
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 8192, 8192)])
def test_tensorop_gemm_bench_ratio_to_cublas(shape: tuple[int, int, int]) -> None:
    from tests.dsl_kernels import tensorop_gemm

    gemm = dsl.gemm_fn(tensorop_gemm.gemm)
    r = gemmlab.bench_gemm(gemm, shape=shape, label="DSL tensorop GEMM")
    print(f"\nDSL tensorop GEMM {shape}: {r.tflops:.1f} TFLOPS, cuBLAS {r.cublas_tflops:.1f}, "
          f"ratio {r.ratio:.3f}; {gemm.summary()}")
    assert r.ratio > 0.15  # tensor cores in use: a SIMT kernel stays far below this


def test_a_jit_function_without_a_stream_checks_and_times_right() -> None:
    """It launches on CUDA's default stream; check_gemm watches a stream of its own, so without the
    join the output looked late ("work still ran on another stream") at 1000×1001×999."""
    gemm = dsl.gemm_fn(streamless_gemm.gemm)
    result = gemmlab.check_gemm(gemm, shapes=[(1000, 1001, 999), (128, 128, 128)])
    result.raise_if_failed()
    r = gemmlab.bench_gemm(gemm, shape=(1024, 1024, 1024), rep=5, verify=True, label="DSL GEMM without a stream")
    assert r.ms > 0 and r.ratio > 0
