"""Notebook-style GEMM functions around tiny raw CUDA kernels (they compile for sm_90a without a GPU in < 1 s)."""
from __future__ import annotations

import math
from typing import Any, Callable

import gemmlab
from gemmlab.notebook import nbhelpers as nbh

#: D = A·Bᵀ, one thread per element, 16 × 16 blocks ("tn", as tests/kernels/planted_naive.cu).
TN_SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void NAME(const half* A, const half* B, half* D, int M, int N, int K)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)n * K + k]);
  D[(size_t)m * N + n] = __float2half(acc);
}
"""

#: C = alpha·A·B + beta·C with pitches, as notebook 08's rungs take their arguments ("nn").
NN_SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void ladder_tiny(const half* A, const half* B, half* C, int M, int N, int K,
                                       int lda, int ldb, int ldc, float alpha, float beta)
{
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * lda + k]) * __half2float(B[(size_t)k * ldb + col]);
  float v = alpha * acc;
  if (beta != 0.0f) v += beta * __half2float(C[(size_t)row * ldc + col]);
  C[(size_t)row * ldc + col] = __float2half(v);
}
"""


def tn_kernel(name: str = "gemm_tiny", arch: str = "sm_90a", options: tuple[str, ...] = ()) -> Any:
    return gemmlab.compile(TN_SOURCE.replace("NAME", name), name, arch=arch, options=options)


def tn_launcher(kernel: Any) -> Callable[..., None]:
    """fn(A, B, D) as a notebook writes it."""
    def gemm(A: Any, B: Any, D: Any) -> None:
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=(math.ceil(N / 16), math.ceil(M / 16)), block=(16, 16))
    return gemm


def nn_launcher(arch: str = "sm_90a") -> Callable[..., None]:
    """fn(A, B, C, alpha, beta) as notebooks 05 and 08 write it: operands checked, alignment read, then one launch."""
    kernel = gemmlab.compile(NN_SOURCE, "ladder_tiny", arch=arch, options=("-DTILE=32",))

    def gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
        M, N, K = nbh.gemm_operands(A, B, C)
        if A.data_ptr() % 16 or B.data_ptr() % 16:
            raise gemmlab.LaunchError("A and B must start at 16-byte aligned addresses")
        kernel(A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0), float(alpha), float(beta),
               grid=(math.ceil(N / 32), math.ceil(M / 8)), block=(32, 8))
    return gemm
