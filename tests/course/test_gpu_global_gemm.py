"""Notebook 05 on a GPU: the solution kernels (C++ and DSL, from the solutions notebook by cell
tag) on odd/unaligned shapes, padded rows and beta = 0; their speed against the target; and
gemmlab.isolate with a kernel that really faults (misaligned address) or hangs in the child."""
from __future__ import annotations

import random

import pytest

import solution_cells  # noqa: E402
from tests.support.nn_gemm_cases import check_padded_rows  # noqa: E402

pytestmark = pytest.mark.gpu
ASSIGNMENT = "05_global_gemm"
SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (129, 257, 65), (255, 1, 300), (1, 255, 513), (1000, 1001, 999),
          (1, 4096, 7), (129, 3, 515), (128, 128, 32), (256, 384, 64), (1000, 1002, 1004), (1000, 1004, 1000),
          (64, 1000, 1024), (1024, 1024, 1024)]
#: What the lead's brief asks of the solutions; the notebook's graded bar is 0.2.
TARGET_RATIO = 0.25


@pytest.fixture(scope="module", params=["cpp", "dsl"])
def gemm(request):
    ns = solution_cells.load_namespace(
        ASSIGNMENT, ["kernel:gemm05_vec", "kernel:gemm05_launch", f"kernel:gemm05_{request.param}"])
    return request.param, ns[f"gemm05_{request.param}"]


def test_correct_on_odd_and_unaligned_shapes(gemm):
    import gemmlab

    name, fn = gemm
    rnd = random.Random()
    shapes = SHAPES + [(rnd.randint(1, 1500), rnd.randint(1, 1500), rnd.randint(1, 1500)) for _ in range(6)]
    import torch

    for dtype in (torch.float16, torch.bfloat16):
        for beta in (0.5, 0.0, -1.0):
            result = gemmlab.check_gemm(fn, convention="nn", shapes=shapes, dtype=dtype,
                                        alpha=rnd.choice([1.0, -0.75]), beta=beta)
            assert result.passed, f"{name}, {dtype}, beta={beta}:\n{result}"


def test_beta_zero_does_not_read_c(gemm):
    import torch

    name, fn = gemm
    A = torch.randn(1000, 999, device="cuda").half()
    B = torch.randn(999, 1001, device="cuda").half()
    C = torch.full((1000, 1001), float("nan"), device="cuda").half()
    fn(A, B, C, 1.0, 0.0)
    torch.cuda.synchronize()
    assert torch.isfinite(C).all(), f"{name}: beta = 0 read C"


def test_without_step_5_4_the_dsl_kernel_is_right_for_one_k_tile_only():
    """Step 5.3's test runs the kernel before its K loop is written: the given kernel then multiplies the one
    (partial) k-tile, right for every K <= 32 and wrong beyond."""
    import gemmlab

    source = solution_cells.cell_source(ASSIGNMENT, "kernel:gemm05_dsl")
    head, loop = source.split("def k_loop(cta):", 1)
    stub = head + "def k_loop(cta):\n    raise NotImplementedError()\n"
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:gemm05_vec", "kernel:gemm05_launch", "kernel:gemm05_dsl"],
                                       sources={"kernel:gemm05_dsl": stub})
    fn = ns["gemm05_dsl"]
    one_tile = gemmlab.check_gemm(fn, "nn", shapes=[(300, 200, 32), (129, 257, 7), (1000, 1001, 17)], beta=0.5)
    assert one_tile.passed, str(one_tile)
    assert not gemmlab.check_gemm(fn, "nn", shapes=[(256, 256, 64)], beta=0.5).passed


@pytest.mark.parametrize("pad", [1, 3, 8])
def test_padded_rows(gemm, pad):
    name, fn = gemm
    check_padded_rows(fn, name, pad)


@pytest.mark.timing
def test_speed_against_cublas(gemm):
    import gemmlab

    name, fn = gemm
    bar = gemmlab.performance_bar(fn, TARGET_RATIO, convention="nn", beta=0.0, label=f"gemm05_{name}")
    print(bar)
    bar.raise_if_failed()


NAIVE = r'''
#include <cuda_fp16.h>
__global__ void naive_vec8(const half* A, const half* B, half* C, int M, int N, int K)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k += 8) {
        uint4 bits = *reinterpret_cast<const uint4*>(A + (size_t)m * K + k);
        const half* a = reinterpret_cast<const half*>(&bits);
        for (int i = 0; i < 8 && k + i < K; ++i)
            acc += __half2float(a[i]) * __half2float(B[(size_t)(k + i) * N + n]);
    }
    C[(size_t)m * N + n] = __float2half(acc);
}
'''
JOB = '''
import torch, gemmlab
src, (M, N, K) = args
kernel = gemmlab.compile(src, "naive_vec8")
A = torch.randn(M, K, device="cuda").half()
B = torch.randn(K, N, device="cuda").half()
C = torch.empty(M, N, device="cuda").half()
kernel(A, B, C, M, N, K, grid=((N + 127) // 128, M), block=128)
torch.cuda.synchronize()
result = float((C.float() - A.float() @ B.float()).abs().max())
'''


def test_isolated_fault_is_named_and_this_process_survives():
    import torch

    import gemmlab
    from gemmlab.runtime import faults
    from gemmlab.isolate import IsolatedJobError

    x = torch.arange(8.0, device="cuda")          # this process has a live context before...
    assert gemmlab.run_isolated(JOB, NAIVE, (256, 256, 256)) < 0.1
    with pytest.raises(IsolatedJobError) as info:
        gemmlab.run_isolated(JOB, NAIVE, (1000, 1001, 999), timeout_s=120)
    assert info.value.cuda_error == "misaligned address", str(info.value)
    assert faults.lost_reason() is None
    assert (x * 2).sum().item() == 56.0             # ...and after the child's fault


def test_isolated_hang_is_killed():
    import gemmlab

    hang = '''
import torch, gemmlab
src = r"""
__global__ void spin(int* flag) { while (atomicAdd(flag, 0) == 0) { } }
"""
kernel = gemmlab.compile(src, "spin")
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
kernel(flag, grid=1, block=1)
torch.cuda.synchronize()                     # never returns: the parent must kill us
'''
    with pytest.raises(gemmlab.KernelTimeoutError, match="killed"):
        gemmlab.run_isolated(hang, timeout_s=20)
