"""A small, correct CuTe DSL GEMM: D = A·Bᵀ for any M, N, K ("tn" convention).

A is M×K, B is N×K (both K-contiguous), D is M×N. Each CTA owns a TILE×TILE block of D,
one thread per output element, accumulating in fp32 over K and guarding every access
with the problem bounds, so partial edge tiles and odd K are handled. The inputs may be
fp16 or bf16 and D fp16, bf16 or fp32: the element types come from the tensors.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

TILE = 16


@cute.kernel
def gemm_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * TILE + ty
    n = bx * TILE + tx
    M, K = mA.shape
    N = mB.shape[0]
    if m < M and n < N:
        acc = cutlass.Float32(0.0)
        for k in range(K):
            acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)
        mD[m, n] = acc.to(mD.element_type)


@cute.jit
def gemm(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    M, N = mD.shape
    gemm_kernel(mA, mB, mD).launch(
        grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1], stream=stream
    )
